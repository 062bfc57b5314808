// Command klab-bench-fstests measures what klab fstests costs, side by
// side with the same work done without klab, alternating the two so that
// machine noise hits both alike:
//
//   - harness overhead: one test list through `klab fstests` and through
//     a bare qemu-system-x86_64 boot of the same kernel whose static init
//     (bareinit) mounts the same userspace and fstests disks and runs
//     ./check with the same local.config; per test (check's own times and
//     the intervals between check's kernel-log markers) and per whole run;
//   - sharding: `klab fstests --jobs 2` against `--jobs 1` on a longer
//     list, wall time;
//   - boot-to-agent with and without the userspace disk attached, and in
//     the fstests guests themselves (both disks, their memory).
//
// It is what `make bench-fstests` runs.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"klab/results"
	"klab/results/stats"
)

// options are the bench's flags.
type options struct {
	klab, kernel, src string
	tests             []string
	pairs             int
	shardConfig       string
	shardTests        []string
	shardPairs        int
	bootPairs         int
	sections          map[string]bool
}

func main() {
	var o options
	var tests, shardTests, sections string
	flag.StringVar(&o.klab, "klab", "bin/klab", "the klab binary")
	flag.StringVar(&o.kernel, "kernel", "debian:7.3", "kernel reference")
	flag.StringVar(&o.src, "fstests-src", os.Getenv("KLAB_FSTESTS_SRC"), "fstests source (default $KLAB_FSTESTS_SRC)")
	flag.StringVar(&tests, "tests", "generic/020,generic/184,generic/236", "ext4 tests for the harness overhead")
	flag.IntVar(&o.pairs, "pairs", 2, "klab/bare pairs for the harness overhead")
	flag.StringVar(&o.shardConfig, "shard-config", "ext4", "configuration of the sharding runs")
	flag.StringVar(&shardTests, "shard-tests", "generic/020,generic/023,generic/024,generic/035,generic/184,generic/228,generic/236,generic/245",
		"tests of the sharding runs (8 or more)")
	flag.IntVar(&o.shardPairs, "shard-pairs", 1, "--jobs 1/--jobs 2 pairs")
	flag.IntVar(&o.bootPairs, "boot-pairs", 3, "boot pairs without and with the userspace")
	flag.StringVar(&sections, "sections", "harness,shard,boot", "sections to run")
	flag.Parse()
	o.tests, o.shardTests = strings.Split(tests, ","), strings.Split(shardTests, ",")
	o.sections = map[string]bool{}
	for _, s := range strings.Split(sections, ",") {
		o.sections[s] = true
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "klab-bench-fstests:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.src == "" {
		return errors.New("no fstests source: set KLAB_FSTESTS_SRC or -fstests-src")
	}
	tmp, err := os.MkdirTemp("", "klab-bench-fstests-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	qv, _ := exec.Command("qemu-system-x86_64", "--version").Output()
	fmt.Printf("klab fstests bench, %s, %s, kernel %s\n", time.Now().UTC().Format(time.RFC3339), strings.SplitN(string(qv), "\n", 2)[0], o.kernel)
	// Built (or found) before any timing: the fstests tree and the
	// userspace are cached, as in a user's daily loop.
	if out, err := exec.CommandContext(ctx, o.klab, "fstests", "build", "--src", o.src).CombinedOutput(); err != nil {
		return fmt.Errorf("klab fstests build: %w\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, o.klab, "userspace", "build").CombinedOutput(); err != nil {
		return fmt.Errorf("klab userspace build: %w\n%s", err, out)
	}
	var guestBoots []float64
	if o.sections["harness"] {
		if guestBoots, err = harness(ctx, o, tmp); err != nil {
			return err
		}
	}
	if o.sections["shard"] {
		if err := shard(ctx, o, tmp); err != nil {
			return err
		}
	}
	if o.sections["boot"] {
		if err := boot(ctx, o, tmp, guestBoots); err != nil {
			return err
		}
	}
	return nil
}

// klabRun is one klab fstests run.
type klabRun struct {
	wall float64
	// guests are its guests' run directories.
	guests []string
	exit   int
}

// fstests runs klab fstests with args, its runs in a new directory under
// runs, and returns its wall time and guests. Exit status 1 (a test
// failed) is a result, not an error.
func fstests(ctx context.Context, o options, runs string, args ...string) (*klabRun, error) {
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(runs, "run-")
	if err != nil {
		return nil, err
	}
	// The runs share their per-test times (each configuration's times
	// file), as one user's runs in one runs directory do: --jobs balances
	// its shards by the runs before.
	shared, _ := filepath.Glob(filepath.Join(runs, ".fstests-times-*.json"))
	for _, f := range shared {
		_ = copyFile(f, filepath.Join(dir, filepath.Base(f)))
	}
	defer func() {
		kept, _ := filepath.Glob(filepath.Join(dir, ".fstests-times-*.json"))
		for _, f := range kept {
			_ = copyFile(f, filepath.Join(runs, filepath.Base(f)))
		}
	}()
	argv := append([]string{"--runs-dir", dir, "fstests", "--kernel", o.kernel, "--fstests-src", o.src}, args...)
	start := time.Now()
	out, err := exec.CommandContext(ctx, o.klab, argv...).CombinedOutput()
	r := &klabRun{wall: time.Since(start).Seconds()}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		r.exit = 1
	} else if err != nil {
		return nil, fmt.Errorf("klab fstests: %w\n%s", err, out)
	}
	r.guests, _ = filepath.Glob(filepath.Join(dir, "*", "boots", "*"))
	if len(r.guests) == 0 {
		return nil, fmt.Errorf("klab fstests made no guest run in %s:\n%s", dir, out)
	}
	return r, nil
}

// copyFile copies the regular file src to dst.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// testSeconds is the sum of the test times check printed in the guests of
// a run, and the largest sum of one guest.
func testSeconds(guests []string) (sum, largest float64) {
	for _, g := range guests {
		b, _ := os.ReadFile(filepath.Join(g, "stdout.log"))
		var one float64
		for _, t := range checkTimes(string(b)) {
			one += t.seconds
		}
		sum += one
		largest = max(largest, one)
	}
	return sum, largest
}

// testTime is one test's time as check printed it.
type testTime struct {
	name    string
	seconds float64
}

var (
	checkLineRe = regexp.MustCompile(`^([a-z0-9]+/[0-9]+)\s.*?([0-9]+)s\s*$`)
	markerRe    = regexp.MustCompile(`^\[\s*([0-9]+\.[0-9]+)\]\s+run fstests (\S+) at `)
)

// checkTimes are the tests that passed or failed with their times, from
// check's standard output, in order.
func checkTimes(out string) []testTime {
	var ts []testTime
	for _, l := range strings.Split(out, "\n") {
		if m := checkLineRe.FindStringSubmatch(strings.TrimSpace(l)); m != nil && !strings.Contains(l, "[not run]") {
			s, _ := strconv.ParseFloat(m[2], 64)
			ts = append(ts, testTime{m[1], s})
		}
	}
	return ts
}

// markerIntervals are the guest-clock seconds from each test's kernel-log
// marker to the next one's (the test and check's work around it); the
// last test has none.
func markerIntervals(console string) map[string]float64 {
	type mark struct {
		t    float64
		name string
	}
	var ms []mark
	sc := bufio.NewScanner(strings.NewReader(console))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := markerRe.FindStringSubmatch(sc.Text()); m != nil {
			t, _ := strconv.ParseFloat(m[1], 64)
			ms = append(ms, mark{t, m[2]})
		}
	}
	iv := map[string]float64{}
	for i := 0; i+1 < len(ms); i++ {
		iv[ms[i].name] = ms[i+1].t - ms[i].t
	}
	return iv
}

// harness runs the harness-overhead pairs and prints their table. It
// returns the boot-to-agent seconds of klab's guests.
func harness(ctx context.Context, o options, tmp string) ([]float64, error) {
	runs := filepath.Join(tmp, "harness")
	var bare *bareGuest
	type side struct {
		walls  []float64
		checks map[string][]float64
		marks  map[string][]float64
		total  []float64
	}
	k := side{checks: map[string][]float64{}, marks: map[string][]float64{}}
	b := side{checks: map[string][]float64{}, marks: map[string][]float64{}}
	var order []string
	var boots, ratioWall, ratioCheck []float64
	for i := 0; i < o.pairs; i++ {
		// klab first in the first pair: its guest tells the bare one
		// what to boot; then the order alternates.
		sides := []string{"klab", "bare"}
		if i%2 == 1 {
			sides = []string{"bare", "klab"}
		}
		var kw, bw, kc, bc float64
		for _, s := range sides {
			switch s {
			case "klab":
				r, err := fstests(ctx, o, runs, append([]string{"--config", "ext4"}, o.tests...)...)
				if err != nil {
					return nil, err
				}
				g := r.guests[0]
				out, _ := os.ReadFile(filepath.Join(g, "stdout.log"))
				con, _ := os.ReadFile(filepath.Join(g, results.ConsoleFile))
				m, err := results.ReadManifest(g)
				if err != nil {
					return nil, err
				}
				boots = append(boots, float64(m.Times.BootToAgentMs)/1000)
				ts := checkTimes(string(out))
				if order == nil {
					for _, t := range ts {
						order = append(order, t.name)
					}
				}
				kc = add(k.checks, ts)
				for n, v := range markerIntervals(string(con)) {
					k.marks[n] = append(k.marks[n], v)
				}
				kw = r.wall
				k.walls, k.total = append(k.walls, kw), append(k.total, kc)
				fmt.Fprintf(os.Stderr, "harness pair %d: klab %.1fs (tests' own %.0fs, exit %d)\n", i+1, kw, kc, r.exit)
				if bare == nil {
					if bare, err = newBareGuest(m, tmp, order); err != nil {
						return nil, err
					}
				}
			case "bare":
				if bare == nil {
					return nil, errors.New("no bare guest before klab's first run")
				}
				wall, out, con, err := bare.run(ctx)
				if err != nil {
					return nil, err
				}
				ts := checkTimes(out)
				bc = add(b.checks, ts)
				for n, v := range markerIntervals(con) {
					b.marks[n] = append(b.marks[n], v)
				}
				bw = wall
				b.walls, b.total = append(b.walls, bw), append(b.total, bc)
				fmt.Fprintf(os.Stderr, "harness pair %d: bare %.1fs (tests' own %.0fs)\n", i+1, bw, bc)
			}
		}
		ratioWall, ratioCheck = append(ratioWall, kw/bw), append(ratioCheck, kc/bc)
	}
	fmt.Printf("\nharness overhead: ext4 on brd, %s, %d pairs alternated\n", strings.Join(order, " "), o.pairs)
	fmt.Printf("(klab fstests | a bare qemu whose static init runs ./check; seconds per run, in run order)\n")
	fmt.Printf("  %-26s %-24s %-24s %-9s %s\n", "", "klab", "bare", "min/min", "pairwise median")
	row := func(name string, kv, bv []float64, pairwise float64) {
		fmt.Printf("  %-26s %-24s %-24s %-9s %s\n", name, walls(kv), walls(bv), fmt.Sprintf("%.3f×", minRatio(kv, bv)), fmt.Sprintf("%.3f×", pairwise))
	}
	for _, n := range order {
		row(n+", check's time", k.checks[n], b.checks[n], pairRatio(k.checks[n], b.checks[n]))
		if len(k.marks[n]) > 0 && len(b.marks[n]) > 0 {
			row(n+", to next marker", k.marks[n], b.marks[n], pairRatio(k.marks[n], b.marks[n]))
		}
	}
	row("tests' sum (check's times)", k.total, b.total, stats.Median(ratioCheck))
	row("whole run (wall)", k.walls, b.walls, stats.Median(ratioWall))
	return boots, nil
}

// add appends ts's times to m and returns their sum.
func add(m map[string][]float64, ts []testTime) float64 {
	sum := 0.0
	for _, t := range ts {
		m[t.name] = append(m[t.name], t.seconds)
		sum += t.seconds
	}
	return sum
}

// minRatio is min(a)/min(b): the runs least disturbed by the machine's
// other load.
func minRatio(a, b []float64) float64 {
	if len(a) == 0 || len(b) == 0 || slices.Min(b) == 0 {
		return 0
	}
	return slices.Min(a) / slices.Min(b)
}

// pairRatio is the median of a[i]/b[i].
func pairRatio(a, b []float64) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			rs = append(rs, a[i]/b[i])
		}
	}
	if len(rs) == 0 {
		return 0
	}
	return stats.Median(rs)
}

// shard runs --jobs 1 and --jobs 2 in alternation and prints their walls.
func shard(ctx context.Context, o options, tmp string) error {
	runs := filepath.Join(tmp, "shard")
	var one, two, rs []float64
	for i := 0; i < o.shardPairs; i++ {
		jobs := []int{1, 2}
		if i%2 == 1 {
			jobs = []int{2, 1}
		}
		var w1, w2 float64
		for _, j := range jobs {
			r, err := fstests(ctx, o, runs, append([]string{"--config", o.shardConfig, "--jobs", strconv.Itoa(j)}, o.shardTests...)...)
			if err != nil {
				return err
			}
			sum, largest := testSeconds(r.guests)
			fmt.Fprintf(os.Stderr, "shard pair %d: --jobs %d %.1fs in %d guest(s), exit %d; tests' own times %.0fs in all, %.0fs in the longest guest, the rest %.0fs\n",
				i+1, j, r.wall, len(r.guests), r.exit, sum, largest, r.wall-largest)
			if j == 1 {
				w1, one = r.wall, append(one, r.wall)
			} else {
				w2, two = r.wall, append(two, r.wall)
			}
		}
		rs = append(rs, w1/w2)
	}
	fmt.Printf("\nsharding: %s, %d tests, %d pairs alternated\n", o.shardConfig, len(o.shardTests), o.shardPairs)
	fmt.Printf("  --jobs 1 wall: %s\n", walls(one))
	fmt.Printf("  --jobs 2 wall: %s\n", walls(two))
	fmt.Printf("  speed-up --jobs 2 against --jobs 1 (pairwise median): %.2f×\n", stats.Median(rs))
	return nil
}

// walls lists seconds one by one.
func walls(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.FormatFloat(x, 'f', 1, 64))
	}
	return strings.Join(s, " ")
}

var readyRe = regexp.MustCompile(`agent \S+ ready after ([0-9.]+)s`)

// boot times boot-to-agent without and with --userspace, alternated, and
// prints them with the fstests guests' own.
func boot(ctx context.Context, o options, tmp string, guests []float64) error {
	runs := filepath.Join(tmp, "boot")
	var plain, us, rs []float64
	one := func(userspace bool) (float64, error) {
		argv := []string{"--runs-dir", runs, "boot", "--accel", "tcg", "--kernel", o.kernel}
		if userspace {
			argv = append(argv, "--userspace")
		}
		out, err := exec.CommandContext(ctx, o.klab, append(argv, "--", "true")...).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("klab boot: %w\n%s", err, out)
		}
		m := readyRe.FindSubmatch(out)
		if m == nil {
			return 0, fmt.Errorf("klab boot printed no ready line:\n%s", out)
		}
		return strconv.ParseFloat(string(m[1]), 64)
	}
	// A first boot of each, untimed: caches (initramfs with the
	// userspace's modules) are warm in the daily loop.
	for _, u := range []bool{false, true} {
		if _, err := one(u); err != nil {
			return err
		}
	}
	for i := 0; i < o.bootPairs; i++ {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		var p, u float64
		for _, withUS := range order {
			s, err := one(withUS)
			if err != nil {
				return err
			}
			if withUS {
				u, us = s, append(us, s)
			} else {
				p, plain = s, append(plain, s)
			}
		}
		rs = append(rs, u-p)
	}
	fmt.Printf("\nboot to agent ready (klab boot -- true, %d pairs alternated):\n", o.bootPairs)
	fmt.Printf("  without a userspace:          %s (median %.2fs)\n", walls(plain), stats.Median(plain))
	fmt.Printf("  with --userspace:             %s (median %.2fs)\n", walls(us), stats.Median(us))
	fmt.Printf("  added by the userspace disk (pairwise median): %+.2fs\n", stats.Median(rs))
	if len(guests) > 0 {
		fmt.Printf("  fstests guests (userspace + fstests disks, 2048 MiB, brd): %s (median %.2fs)\n", walls(guests), stats.Median(guests))
	}
	return nil
}

// bareGuest is the bare QEMU command line and initramfs that run the same
// tests as a klab guest, without klab.
type bareGuest struct {
	argv []string
}

// newBareGuest makes, from a klab fstests guest's manifest, the bare
// guest's initramfs (bareinit, the modules of klab's initramfs, the
// local.config, the test list and brd's parameters) and QEMU command line
// (the same machine, accelerator, CPU, memory, kernel and disks).
func newBareGuest(m *results.Manifest, tmp string, tests []string) (*bareGuest, error) {
	var keep []string
	var cmdline string
	a := m.QEMU.Argv
	for i := 1; i+1 < len(a); i++ {
		switch a[i] {
		case "-machine", "-accel", "-cpu", "-m", "-smp", "-kernel":
			keep = append(keep, a[i], a[i+1])
		case "-drive":
			if strings.Contains(a[i+1], "serial=") || strings.Contains(a[i+1], "readonly=on") {
				keep = append(keep, a[i], a[i+1])
			}
		case "-device":
			if strings.HasPrefix(a[i+1], "virtio-blk-pci,") {
				keep = append(keep, a[i], a[i+1])
			}
		case "-append":
			cmdline = a[i+1]
		default:
			continue
		}
		i++
	}
	var kept []string
	brd := ""
	for _, w := range strings.Fields(cmdline) {
		if strings.HasPrefix(w, "klab.") {
			continue
		}
		kept = append(kept, w)
		if v, ok := strings.CutPrefix(w, "brd."); ok {
			brd += v + " "
		}
	}
	initrd, err := bareInitramfs(m.Initramfs.Path, tmp, tests, strings.TrimSpace(brd))
	if err != nil {
		return nil, err
	}
	argv := append([]string{"qemu-system-x86_64"}, keep...)
	argv = append(argv, "-initrd", initrd, "-append", strings.Join(kept, " "),
		"-nographic", "-no-reboot", "-nodefaults", "-nic", "none", "-serial", "stdio", "-monitor", "none")
	return &bareGuest{argv: argv}, nil
}

// localConfig is what klab's agent writes for ext4 on two ram disks.
const localConfig = `export FSTYP=ext4
export TEST_DEV=/dev/ram0
export TEST_DIR=/mnt/test
export SCRATCH_DEV=/dev/ram1
export SCRATCH_MNT=/mnt/scratch
`

// run boots the bare guest and returns its wall time, check's output and
// the console.
func (g *bareGuest) run(ctx context.Context) (float64, string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Hour)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.argv[0], g.argv[1:]...)
	var con bytes.Buffer
	cmd.Stdout, cmd.Stderr = &con, &con
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start).Seconds()
	c := strings.ReplaceAll(con.String(), "\r\n", "\n")
	_, rest, ok := strings.Cut(c, "bareinit: check output begins\n")
	out, _, ok2 := strings.Cut(rest, "bareinit: check output ends")
	if err != nil || !ok || !ok2 {
		return 0, "", "", fmt.Errorf("bare guest (%v): no check output; console's end:\n%s", err, tail(c, 3000))
	}
	return wall, out, c, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
