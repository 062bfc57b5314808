// Command klab-soak boots one kernel many times in a row and checks that
// nothing is left behind and nothing grows (and, with -matrix, runs a
// long matrix with the same checks):
//
//   - through the klab binary (`klab boot --kernel K -- true`, one process
//     per boot, as a user or a CI loop runs it): every boot exits 0, no
//     QEMU outlives its klab, nothing is left in the private TMPDIR the
//     boots run with (VM directories, sockets), and klab's peak RSS does
//     not grow from the first boots to the last;
//   - in one process (lab.Boot called again and again, as klab run and
//     klab matrix boot guest after guest): open file descriptors,
//     goroutines and live heap after each boot stay where the first boots
//     left them.
//
// It prints the boot-to-agent and wall-time distributions of the boots,
// and exits 1 when a boot failed or something leaked. It is what `make
// soak` runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"klab/internal/paths"
	"klab/internal/procfs"
	"klab/lab"
	"klab/results"
	"klab/results/stats"
)

func main() {
	klab := flag.String("klab", "bin/klab", "the klab binary for the per-process boots")
	kernel := flag.String("kernel", "debian:7.3", "the kernel to boot")
	n := flag.Int("n", 100, "boots through the klab binary (0 skips them)")
	inProcess := flag.Int("in-process", 30, "boots through lab.Boot in this process (0 skips them)")
	cells := flag.Int("matrix", 0, "then a matrix of this many cells through klab matrix run (0 skips it)")
	jobs := flag.Int("jobs", 2, "the matrix's --jobs")
	other := flag.String("matrix-kernel", "debian:6.12", "the matrix's second kernel, beside -kernel")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `Usage: klab-soak [flags]

Boot a kernel many times in a row; fail when a boot fails, a QEMU, a
temporary file or a socket is left behind, or klab's memory, descriptors
or goroutines grow.

Examples:
  go run ./cmd/klab-soak                          # 100 + 30 boots of debian:7.3
  go run ./cmd/klab-soak -n 20 -in-process 0 -kernel debian:6.1
  go run ./cmd/klab-soak -n 0 -in-process 0 -matrix 40   # 40 cells, --jobs 2

Flags:
`)
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 || *n < 0 || *inProcess < 0 || *cells < 0 || *jobs < 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed, err := run(ctx, *klab, *kernel, *n, *inProcess, *cells, *jobs, *other)
	if err != nil {
		fmt.Fprintln(os.Stderr, "klab-soak:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

func run(ctx context.Context, klab, kernel string, n, inProcess, cells, jobs int, other string) (failed bool, err error) {
	dir, err := os.MkdirTemp("", "klab-soak-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	qv, _ := exec.Command("qemu-system-x86_64", "--version").Output()
	fmt.Printf("klab soak of %s, %s, %s\n", kernel, time.Now().UTC().Format(time.RFC3339), strings.SplitN(string(qv), "\n", 2)[0])
	if n > 0 {
		f, err := soakCLI(ctx, klab, kernel, n, dir)
		if err != nil {
			return true, err
		}
		failed = failed || f
	}
	if inProcess > 0 {
		f, err := soakInProcess(ctx, kernel, inProcess, dir)
		if err != nil {
			return true, err
		}
		failed = failed || f
	}
	if cells > 0 {
		f, err := soakMatrix(ctx, klab, []string{other, kernel}, cells, jobs, dir)
		if err != nil {
			return true, err
		}
		failed = failed || f
	}
	if failed {
		fmt.Println("result: FAIL")
	} else {
		fmt.Println("result: PASS")
	}
	return failed, nil
}

// boot is one measured boot.
type boot struct {
	ok          bool
	bootToAgent time.Duration
	wall        time.Duration
	maxRSSKiB   int64 // the klab process's peak RSS, VmHWM (per-process boots)
}

// soakCLI runs n `klab boot -- true` one after the other, each with its
// own empty TMPDIR under dir, and checks after each that it is still
// empty and that no QEMU names it.
func soakCLI(ctx context.Context, klab, kernel string, n int, dir string) (failed bool, err error) {
	runs := filepath.Join(dir, "cli-runs")
	tmp := filepath.Join(dir, "cli-tmp")
	for _, d := range []string{runs, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return false, err
		}
	}
	// One warm-up boot fills the caches (kernel, initramfs, accelerator
	// verdict), so that the n boots measure booting alone.
	if out, err := exec.CommandContext(ctx, klab, "--runs-dir", filepath.Join(dir, "warm-up"), "boot", "--kernel", kernel, "--", "true").CombinedOutput(); err != nil {
		return true, fmt.Errorf("warm-up boot: %v\n%s", err, tail(string(out), 10))
	}
	fmt.Printf("\n%d boots through %s (klab boot --kernel %s -- true), one process each:\n", n, klab, kernel)
	var boots []boot
	var problems []string
	for i := 1; i <= n; i++ {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		before, _ := os.ReadDir(runs)
		cmd := exec.CommandContext(ctx, klab, "--runs-dir", runs, "boot", "--kernel", kernel, "--", "true")
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Start(); err != nil {
			return true, err
		}
		// klab's own peak RSS, polled while it runs (a wait's rusage
		// would count its QEMU too).
		var hwm int64
		var werr error
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
	poll:
		for {
			if v := procfs.PeakRSS(cmd.Process.Pid); v > 0 {
				hwm = v
			}
			select {
			case werr = <-done:
				break poll
			case <-time.After(50 * time.Millisecond):
			}
		}
		b := boot{ok: werr == nil, wall: time.Since(start), maxRSSKiB: hwm}
		if m := newRun(runs, before); m != nil {
			b.bootToAgent = time.Duration(m.Times.BootToAgentMs) * time.Millisecond
		}
		if !b.ok {
			problems = append(problems, fmt.Sprintf("boot %d: %v: %s", i, werr, tail(out.String(), 3)))
		}
		// QEMU dies with klab through its parent-death signal; give it a
		// moment, then look for one that still names this TMPDIR.
		if pids := qemuUsing(tmp, 5*time.Second); len(pids) > 0 {
			problems = append(problems, fmt.Sprintf("boot %d: QEMU %v outlived klab", i, pids))
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if left := entries(tmp); len(left) > 0 {
			problems = append(problems, fmt.Sprintf("boot %d left %s in its TMPDIR", i, strings.Join(left, ", ")))
			for _, e := range left {
				_ = os.RemoveAll(filepath.Join(tmp, e))
			}
		}
		boots = append(boots, b)
		if i%10 == 0 || i == n {
			fmt.Printf("  %d/%d booted, %d problem(s)\n", i, n, len(problems))
		}
	}
	printBoots(boots)
	var rss []float64
	for _, b := range boots {
		rss = append(rss, float64(b.maxRSSKiB)/1024)
	}
	first, last := stats.Median(rss[:min(10, len(rss))]), stats.Median(rss[max(0, len(rss)-10):])
	fmt.Printf("  klab peak RSS: %.1f..%.1f MiB; median of the first 10 boots %.1f MiB, of the last 10 %.1f MiB\n",
		slices.Min(rss), slices.Max(rss), first, last)
	// A process that starts afresh each time has no business growing;
	// 10% is noise (page cache and allocator timing), not a leak.
	if last > first*1.10+1 {
		problems = append(problems, fmt.Sprintf("klab's peak RSS grew from %.1f to %.1f MiB", first, last))
	}
	return report(problems), nil
}

// soakInProcess boots n times through lab.Boot in this process and checks
// that descriptors, goroutines and the live heap come back to where the
// first boots left them.
func soakInProcess(ctx context.Context, kernel string, n int, dir string) (failed bool, err error) {
	tmp := filepath.Join(dir, "lab-tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return false, err
	}
	old := os.Getenv("TMPDIR")
	os.Setenv("TMPDIR", tmp)
	defer os.Setenv("TMPDIR", old)
	o := &lab.Options{CacheDir: paths.CacheDir(), RunsDir: filepath.Join(dir, "lab-runs"), Accel: "auto", Progress: io.Discard, Log: io.Discard}
	fmt.Printf("\n%d boots through lab.Boot in one process (kernel %s, command true):\n", n, kernel)
	type sample struct {
		fds, goroutines int
		heapMiB         float64
	}
	var boots []boot
	var samples []sample
	var problems []string
	for i := 1; i <= n; i++ {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		start := time.Now()
		res, err := o.Boot(ctx, lab.BootRequest{Kernel: kernel, Argv: []string{"true"}, Stdout: io.Discard, Stderr: io.Discard})
		b := boot{ok: err == nil && res != nil && res.ExitCode == 0, wall: time.Since(start)}
		if res != nil {
			b.bootToAgent = res.BootToAgent
		}
		if !b.ok {
			problems = append(problems, fmt.Sprintf("boot %d: %v", i, err))
		}
		if left := entries(tmp); len(left) > 0 {
			problems = append(problems, fmt.Sprintf("boot %d left %s in TMPDIR", i, strings.Join(left, ", ")))
		}
		boots = append(boots, b)
		// Goroutines that end with the boot may take a moment to go.
		time.Sleep(200 * time.Millisecond)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		samples = append(samples, sample{fds: len(entries("/proc/self/fd")), goroutines: runtime.NumGoroutine(), heapMiB: float64(ms.HeapAlloc) / (1 << 20)})
		if i%10 == 0 || i == n {
			fmt.Printf("  %d/%d booted, %d problem(s)\n", i, n, len(problems))
		}
	}
	printBoots(boots)
	// The first boots set up what a process keeps (caches, pools, the
	// accelerator verdict): compare with the state after the third.
	base := samples[min(2, len(samples)-1)]
	end := samples[len(samples)-1]
	var heap []float64
	for _, s := range samples {
		heap = append(heap, s.heapMiB)
	}
	fmt.Printf("  after boot %d: %d fds, %d goroutines, %.2f MiB live heap; after boot %d: %d fds, %d goroutines, %.2f MiB (max %.2f)\n",
		min(3, len(samples)), base.fds, base.goroutines, base.heapMiB, len(samples), end.fds, end.goroutines, end.heapMiB, slices.Max(heap))
	if end.fds > base.fds {
		problems = append(problems, fmt.Sprintf("open descriptors grew from %d to %d", base.fds, end.fds))
	}
	if end.goroutines > base.goroutines+2 {
		problems = append(problems, fmt.Sprintf("goroutines grew from %d to %d", base.goroutines, end.goroutines))
	}
	// A leak of one boot's buffers (console, events) is at least tens of
	// KiB a boot: over 30 boots it is well past 1 MiB.
	if end.heapMiB > base.heapMiB*1.25+1 {
		problems = append(problems, fmt.Sprintf("the live heap grew from %.2f to %.2f MiB", base.heapMiB, end.heapMiB))
	}
	return report(problems), nil
}

// newRun reads the manifest of the run directory under runs that is not
// in before.
func newRun(runs string, before []os.DirEntry) *results.Manifest {
	after, _ := os.ReadDir(runs)
	for _, e := range after {
		if !slices.ContainsFunc(before, func(b os.DirEntry) bool { return b.Name() == e.Name() }) {
			m, err := results.ReadManifest(filepath.Join(runs, e.Name()))
			if err == nil {
				return m
			}
		}
	}
	return nil
}

// qemuUsing returns the QEMU processes whose command line names dir,
// waiting up to grace for them to go.
func qemuUsing(dir string, grace time.Duration) []int {
	deadline := time.Now().Add(grace)
	for {
		var pids []int
		for _, e := range entries("/proc") {
			pid, err := strconv.Atoi(e)
			if err != nil {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e, "cmdline"))
			if err != nil || !strings.HasPrefix(filepath.Base(string(cmdline[:max(0, strings.IndexByte(string(cmdline), 0))])), "qemu-system") {
				continue
			}
			if strings.Contains(string(cmdline), dir+"/") {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// entries lists the names in dir (none when it cannot be read).
func entries(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func printBoots(boots []boot) {
	var ok int
	var agent, wall []float64
	for _, b := range boots {
		if b.ok {
			ok++
		}
		if b.bootToAgent > 0 {
			agent = append(agent, b.bootToAgent.Seconds())
		}
		wall = append(wall, b.wall.Seconds())
	}
	fmt.Printf("  %d of %d boots worked\n", ok, len(boots))
	for _, d := range []struct {
		name string
		v    []float64
	}{{"boot-to-agent", agent}, {"wall", wall}} {
		if len(d.v) == 0 {
			continue
		}
		s := slices.Sorted(slices.Values(d.v))
		fmt.Printf("  %-13s min %.2fs  p10 %.2fs  median %.2fs  p90 %.2fs  max %.2fs  (n=%d)\n", d.name,
			s[0], quantile(s, 0.10), quantile(s, 0.5), quantile(s, 0.90), s[len(s)-1], len(s))
	}
}

// report prints the problems and says whether there were any.
func report(problems []string) bool {
	for _, p := range problems {
		fmt.Println("  PROBLEM:", p)
	}
	if len(problems) == 0 {
		fmt.Println("  nothing left behind, nothing grew")
	}
	return len(problems) > 0
}

// quantile of sorted s, by linear interpolation.
func quantile(s []float64, q float64) float64 {
	if len(s) == 1 {
		return s[0]
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
