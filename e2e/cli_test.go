package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"klab/images"
	"klab/images/kerneldir"
	"klab/internal/paths"
	"klab/internal/procfs"
	"klab/internal/testenv"
	"klab/lab"
	"klab/results"
	"klab/vm"
)

// This file checks the promises of README.md that concern the klab command
// line itself: exit statuses, the splat policy flags, the panic report's
// latency, the shell, the cache and runs directories, the initramfs cache,
// doctor, kernels list/rm/gc, splats parse and fuse serve on the host.

// cliOpts says how cliRun runs klab.
type cliOpts struct {
	// env is added to the environment.
	env []string
	// stdin is klab's standard input; nil means none.
	stdin io.Reader
	// timeout bounds the run (10 minutes when 0), cut by budget.
	timeout time.Duration
}

// cliRun runs klab with exactly args (no --runs-dir is added, unlike run),
// in the repository's root, and fails t when it had to be killed.
func cliRun(t *testing.T, o cliOpts, args ...string) result {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 10 * time.Minute
	}
	t.Logf("%sklab %s", strings.Join(append(slices.Clone(o.env), ""), " "), strings.Join(args, " "))
	ctx := testContext(t, o.timeout)
	cmd := exec.CommandContext(ctx, klab(t), args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), o.env...)
	cmd.Stdin = o.stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), wall: time.Since(start)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("klab: %v", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		t.Logf("stderr| %s", l)
	}
	if ctx.Err() != nil {
		t.Fatalf("klab %s: killed at its timeout", strings.Join(args, " "))
	}
	return r
}

// cliEvent is one line of a run's events.jsonl: when klab appended it, and
// the event.
type cliEvent struct {
	T time.Time
	lab.Event
}

// cliEvents reads a run's events.jsonl.
func cliEvents(t *testing.T, runDir string) []cliEvent {
	t.Helper()
	f, err := os.Open(filepath.Join(runDir, results.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, results.MaxEventLine)
	var evs []cliEvent
	for sc.Scan() {
		var line results.Event
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("events.jsonl: %v: %s", err, sc.Bytes())
		}
		ev := cliEvent{T: line.T}
		if err := json.Unmarshal(line.Event, &ev.Event); err != nil {
			t.Fatalf("events.jsonl: %v: %s", err, line.Event)
		}
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// cliFind returns the first event of kind, or fails t.
func cliFind(t *testing.T, evs []cliEvent, kind string) cliEvent {
	t.Helper()
	for _, e := range evs {
		if e.Kind == kind {
			return e
		}
	}
	t.Fatalf("events.jsonl has no %q event", kind)
	return cliEvent{}
}

// cliManifest reads the single run under runsDir.
func cliManifest(t *testing.T, runsDir string) (string, *results.Manifest) {
	t.Helper()
	dir := onlyRun(t, runsDir)
	m, err := results.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// cliFactor is the timeout factor of the run's accelerator (vm.Accel.Factor:
// 1 under KVM, 4 under TCG), checked against the one the manifest records.
func cliFactor(t *testing.T, m *results.Manifest) float64 {
	t.Helper()
	f := vm.Accel(m.Accel).Factor()
	if m.TimeoutFactor != f {
		t.Errorf("manifest timeout_factor %v, but %s's factor is %v", m.TimeoutFactor, m.Accel, f)
	}
	return f
}

// cliTail returns the last n lines of s.
func cliTail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func cliScaled(d time.Duration, factor float64) time.Duration {
	return time.Duration(float64(d) * factor)
}

// TestCLIExitStatus checks klab's own exit statuses through the binary: 124
// for a command killed at its (scaled) --timeout, 127 for a command that
// cannot start, and the command's own status for `false`. The timeout's
// bounds are timings, so that boot runs alone; the other two run beside
// other tests.
func TestCLIExitStatus(t *testing.T) {
	testenv.E2E(t)
	t.Run("timeout", func(t *testing.T) {
		runs := t.TempDir()
		r := run(t, runs, "boot", "--kernel", "debian:7.3", "--timeout", "1", "--", "sleep", "60")
		if r.code != lab.ExitTimeout {
			t.Fatalf("exit %d, want %d", r.code, lab.ExitTimeout)
		}
		dir, m := cliManifest(t, runs)
		factor := cliFactor(t, m)
		limit := cliScaled(time.Second, factor)
		// klab's hang watchdog (lab/session.go) gives a step 5 s × factor
		// past its timeout before it looks for a hung guest: the agent's
		// kill must come within that grace. It is also far below the 60 s
		// the command would take.
		grace := cliScaled(5*time.Second, factor)
		evs := cliEvents(t, dir)
		hello, done := cliFind(t, evs, "hello"), cliFind(t, evs, "done")
		if !done.Done.TimedOut {
			t.Errorf("done event %+v: not timed out", *done.Done)
		}
		ran := time.Duration(done.Done.DurationNs)
		t.Logf("factor %v: the command ran %v in the guest (limit %v); hello to done %v on the host", factor, ran, limit, done.T.Sub(hello.T))
		// The agent kills the command at the scaled timeout, not at the
		// unscaled 1 s.
		if ran < limit {
			t.Errorf("the command was killed after %v, before its scaled timeout %v", ran, limit)
		}
		if ran > limit+grace {
			t.Errorf("the command was killed after %v, past its timeout %v and the hang grace %v", ran, limit, grace)
		}
		if d := done.T.Sub(hello.T); d > limit+grace {
			t.Errorf("the step ended %v after the agent's hello, past %v + %v", d, limit, grace)
		}
		// After the step, klab's Close waits at most 5 s for the agent's
		// shutdown, 10 s for QEMU to exit and 2 s for the console: fixed
		// bounds, whatever the load.
		if d := m.Times.End.Sub(done.T); d > 17*time.Second+time.Second {
			t.Errorf("the run ended %v after the step did", d)
		}
		if want := fmt.Sprintf("timed out after %s", limit); !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
		if m.Outcome.ExitCode != lab.ExitTimeout {
			t.Errorf("manifest outcome %+v, want exit code %d", m.Outcome, lab.ExitTimeout)
		}
	})
	t.Run("not-found", func(t *testing.T) {
		parallelGuest(t)
		runs := t.TempDir()
		r := run(t, runs, "boot", "--kernel", "debian:7.3", "--", "/no/such/program")
		if r.code != lab.ExitNotRun {
			t.Fatalf("exit %d, want %d", r.code, lab.ExitNotRun)
		}
		if !strings.Contains(r.stderr, "/no/such/program") {
			t.Errorf("stderr does not name the program")
		}
		_, m := cliManifest(t, runs)
		if m.Outcome.Status != results.StatusOK || m.Outcome.ExitCode != lab.ExitNotRun {
			t.Errorf("manifest outcome %+v, want ok with exit code %d (the kernel worked)", m.Outcome, lab.ExitNotRun)
		}
	})
	t.Run("false", func(t *testing.T) {
		parallelGuest(t)
		runs := t.TempDir()
		r := run(t, runs, "boot", "--kernel", "debian:7.3", "--", "false")
		if r.code != 1 {
			t.Fatalf("exit %d, want 1 (false's own status)", r.code)
		}
		dir, m := cliManifest(t, runs)
		done := cliFind(t, cliEvents(t, dir), "done")
		if done.Done.ExitCode != 1 || done.Done.Error != "" {
			t.Errorf("done event %+v: want the command's own exit 1, no error", *done.Done)
		}
		if m.Outcome.Status != results.StatusOK {
			t.Errorf("manifest outcome %+v, want ok", m.Outcome)
		}
	})
}

// cliWarning returns the console lines of a WARNING report in function fn,
// as 7.3 kernels print one.
func cliWarning(fn string) []string {
	return []string{
		"------------[ cut here ]------------",
		"WARNING: fs/fuse/dev.c:2105 at " + fn + "+0x5/0xc, CPU#0: sh/1",
		"Modules linked in: fuse",
		"CPU: 0 UID: 0 PID: 1 Comm: sh Not tainted 7.3.4+deb13-cloud-amd64 #1 PREEMPT(lazy)  Debian 7.3.4-1~bpo13+1",
		"Hardware name: QEMU Standard PC (i440FX + PIIX, 1996), BIOS 1.16.2-debian-1.16.2-1 04/01/2014",
		"RIP: 0010:" + fn + "+0x5/0xc",
		"RSP: 0018:ff8fc0c94044ba70 EFLAGS: 00000246",
		"Call Trace:",
		" <TASK>",
		" fuse_dev_do_write+0x3c/0xff0",
		" fuse_dev_write+0x57/0x310",
		" vfs_write+0x60/0x250",
		" ksys_write+0xd6/0x130",
		" do_syscall_64+0xc2/0x520",
		" entry_SYSCALL_64_after_hwframe+0x76/0x7e",
		" </TASK>",
		"---[ end trace 0000000000000000 ]---",
	}
}

// TestCLISplatPolicy checks how kernel WARNINGs decide `klab boot`'s exit
// status: by default they fail the run (126) even though the command
// worked; --allow-warning excuses the ones it names (substring or
// /regexp/, repeatable) and only those; --no-splat-fail reports them
// without failing. Each run saves them in splats.json and events.jsonl.
// The first boot also sets a sysctl with --sysctl and reads it back, and
// every boot after the first must reuse the cached initramfs.
//
// Debian's kernels have no lkdtm and no user-space path that WARNs on
// purpose, so the guest writes two WARNING reports into the kernel log
// through /dev/kmsg: the kernel prints them on its console like any
// printk (with its own timestamps), and the console is what klab scans.
// The command itself exits 3, a status klab passes through when the splats
// do not fail the run. The first boot (default) runs before the others,
// which run side by side.
func TestCLISplatPolicy(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	const warnA, warnB = "klab_e2e_warn_a", "klab_e2e_warn_b"
	titleA, titleB := "WARNING in "+warnA, "WARNING in "+warnB
	var script strings.Builder
	// One open of /dev/kmsg per record: its rate limit is per open file
	// (10 records), so nothing is dropped.
	script.WriteString("cat /proc/sys/fs/fuse/default_request_timeout; k() { echo -n \"<4>$1\" > /dev/kmsg; }; ")
	for _, l := range append(cliWarning(warnA), cliWarning(warnB)...) {
		fmt.Fprintf(&script, "k '%s'; ", l)
	}
	script.WriteString("exit 3")
	// The first boot's initramfs, which every later boot must reuse.
	var (
		mu    sync.Mutex
		first *results.Initramfs
	)
	boot := func(t *testing.T, flags ...string) (result, string, *results.Manifest) {
		t.Helper()
		runs := t.TempDir()
		args := append([]string{"boot", "--kernel", "debian:7.3"}, flags...)
		r := run(t, runs, append(args, "--", "sh", "-c", script.String())...)
		dir, m := cliManifest(t, runs)
		mu.Lock()
		if first == nil {
			first = &m.Initramfs
		} else {
			if m.Initramfs != *first {
				t.Errorf("initramfs %+v, want the first boot's %+v again", m.Initramfs, *first)
			}
			if strings.Contains(r.stderr, "building ") {
				t.Errorf("a boot after the first built part of the initramfs again")
			}
		}
		mu.Unlock()
		// Both reports are saved, whatever the policy.
		var saved []struct{ Title, Type string }
		b, err := os.ReadFile(filepath.Join(dir, "splats.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &saved); err != nil {
			t.Fatalf("splats.json: %v", err)
		}
		var got []string
		for _, s := range saved {
			got = append(got, s.Type+": "+s.Title)
		}
		if want := []string{"warning: " + titleA, "warning: " + titleB}; !slices.Equal(got, want) {
			t.Errorf("splats.json has %q, want %q", got, want)
		}
		got = nil
		for _, e := range cliEvents(t, dir) {
			if e.Kind == "splat" {
				got = append(got, e.Splat.Title)
			}
		}
		if want := []string{titleA, titleB}; !slices.Equal(got, want) {
			t.Errorf("events.jsonl has splats %q, want %q", got, want)
		}
		if m.Outcome.ExitCode != 3 {
			t.Errorf("manifest outcome %+v, want the command's exit code 3", m.Outcome)
		}
		return r, dir, m
	}
	t.Run("default", func(t *testing.T) {
		holdGuestSlot(t)
		r, _, m := boot(t, "--sysctl", "fs.fuse.default_request_timeout=30")
		if got := strings.SplitN(r.stdout, "\n", 2)[0]; got != "30" {
			t.Errorf("the guest read %q back from fs.fuse.default_request_timeout, want 30", got)
		}
		if r.code != lab.ExitKernel {
			t.Errorf("exit %d, want %d: a WARNING fails the run", r.code, lab.ExitKernel)
		}
		want := fmt.Sprintf("the kernel reported 2 failing splat(s): %s; %s", titleA, titleB)
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
		if m.Outcome.Status != results.StatusKernelError || m.Outcome.Class != results.ClassKernel {
			t.Errorf("manifest outcome %+v, want kernel-error", m.Outcome)
		}
	})
	t.Run("allow-one", func(t *testing.T) {
		parallelGuest(t)
		r, _, m := boot(t, "--allow-warning", warnA)
		if r.code != lab.ExitKernel {
			t.Errorf("exit %d, want %d: the WARNING not allowed still fails the run", r.code, lab.ExitKernel)
		}
		if want := "the kernel reported 1 failing splat(s): " + titleB + "\n"; !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
		if m.Outcome.Status != results.StatusKernelError {
			t.Errorf("manifest outcome %+v, want kernel-error", m.Outcome)
		}
	})
	t.Run("allow-both", func(t *testing.T) {
		parallelGuest(t)
		r, _, m := boot(t, "--allow-warning", warnA, "--allow-warning", "/^WARNING in klab_e2e_warn_[b-z]$/")
		if r.code != 3 {
			t.Errorf("exit %d, want the command's 3: every WARNING is allowed", r.code)
		}
		if !strings.Contains(r.stderr, "2 splat(s)") || !strings.Contains(r.stderr, "splat: "+titleA) || !strings.Contains(r.stderr, "splat: "+titleB) {
			t.Errorf("the summary does not report the allowed splats")
		}
		if m.Outcome.Status != results.StatusOK {
			t.Errorf("manifest outcome %+v, want ok", m.Outcome)
		}
	})
	t.Run("no-splat-fail", func(t *testing.T) {
		parallelGuest(t)
		r, _, m := boot(t, "--no-splat-fail")
		if r.code != 3 {
			t.Errorf("exit %d, want the command's 3", r.code)
		}
		if !strings.Contains(r.stderr, "2 splat(s)") || !strings.Contains(r.stderr, "splat: "+titleA) || !strings.Contains(r.stderr, "splat: "+titleB) {
			t.Errorf("the summary does not report the splats")
		}
		if m.Outcome.Status != results.StatusOK {
			t.Errorf("manifest outcome %+v, want ok", m.Outcome)
		}
	})
}

// cliStamped records when each line written to it arrived.
type cliStamped struct {
	mu    sync.Mutex
	buf   []byte
	lines []cliLine
	all   bytes.Buffer
}

type cliLine struct {
	at   time.Time
	text string
}

func (w *cliStamped) Write(p []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.lines = append(w.lines, cliLine{at: now, text: string(w.buf[:i])})
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// first returns the first line containing s.
func (w *cliStamped) first(s string) (cliLine, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.lines {
		if strings.Contains(l.text, s) {
			return l, true
		}
	}
	return cliLine{}, false
}

func (w *cliStamped) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// TestCLIPanicLatency checks README's "a kernel that panics is reported
// within a second of the panic": from the moment klab saw the panic line
// on the console (the splat event's time in events.jsonl) to klab's report
// on stderr and to its exit.
//
// The bound is one second times the accelerator's timeout factor (4 s
// under TCG). What happens after the panic line is mostly guest work at
// the accelerator's speed: the kernel prints the rest of the report, then
// panic=-1 resets the machine and QEMU (-no-reboot) exits; then klab saves
// a few small files. That takes well under a second even under TCG on a
// loaded 2-core host. A klab that missed the panic and waited for its
// fallbacks instead (5 s for QEMU to exit, then 2 s for the console, in
// lab/session.go) would exceed the bound even under KVM. It measures that
// time, so it runs alone.
func TestCLIPanicLatency(t *testing.T) {
	testenv.E2E(t)
	runs := t.TempDir()
	ctx := testContext(t, 10*time.Minute)
	cmd := exec.CommandContext(ctx, klab(t), "--runs-dir", runs, "boot", "--kernel", "debian:7.3", "--console", "--", "sh", "-c", "echo c > /proc/sysrq-trigger")
	cmd.Dir = ".."
	var stdout bytes.Buffer
	stderr := &cliStamped{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	err := cmd.Run()
	exited := time.Now()
	if ctx.Err() != nil {
		t.Fatalf("klab killed at its timeout:\n%s", cliTail(stderr.String(), 30))
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != lab.ExitKernel {
		t.Fatalf("klab: %v, want exit %d\n%s", err, lab.ExitKernel, cliTail(stderr.String(), 40))
	}
	dir, m := cliManifest(t, runs)
	if m.Outcome.Status != results.StatusKernelPanic {
		t.Errorf("manifest outcome %+v, want kernel-panic", m.Outcome)
	}
	var panicAt time.Time
	for _, e := range cliEvents(t, dir) {
		if e.Kind == "splat" && e.Splat.Type == "panic" {
			panicAt = e.T
			t.Logf("panic seen by klab at %s: %s", e.T.Format(time.StampMicro), e.Splat.Title)
			break
		}
	}
	if panicAt.IsZero() {
		t.Fatal("events.jsonl has no panic splat")
	}
	report, ok := stderr.first("klab: kernel panic")
	if !ok {
		t.Fatalf("stderr has no kernel panic report:\n%s", cliTail(stderr.String(), 40))
	}
	if !strings.Contains(stderr.String(), "| Kernel panic - not syncing: sysrq triggered crash") || !strings.Contains(stderr.String(), "|  sysrq_handle_crash") {
		t.Errorf("the report lacks the console excerpt of the panic")
	}
	// --console streams the guest console to stderr, from the kernel's
	// banner on.
	if _, ok := stderr.first("Linux version " + m.Kernel.Version); !ok {
		t.Errorf("--console did not print the guest console on stderr")
	}
	bound := cliScaled(time.Second, cliFactor(t, m))
	if line, ok := stderr.first("Kernel panic - not syncing"); ok {
		t.Logf("the panic line reached the test %v after klab saw it", line.at.Sub(panicAt))
	}
	t.Logf("from the panic line: report after %v, run saved after %v, klab exited after %v (bound %v)",
		report.at.Sub(panicAt), m.Times.End.Sub(panicAt), exited.Sub(panicAt), bound)
	if d := report.at.Sub(panicAt); d > bound {
		t.Errorf("the panic was reported %v after klab saw it, want at most %v", d, bound)
	}
	if d := exited.Sub(panicAt); d > bound {
		t.Errorf("klab exited %v after the panic, want at most %v", d, bound)
	}
}

// cliPTY opens a pseudo-terminal pair: the test holds the master, klab
// gets the slave as its terminal.
func cliPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		testenv.Missingf(t, "no pseudo-terminals (/dev/ptmx): %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// cliTerminal is klab running on a pseudo-terminal.
type cliTerminal struct {
	t      *testing.T
	cmd    *exec.Cmd
	master *os.File
	stderr *cliStamped
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan error
}

// startTerminal starts klab with args on a new pseudo-terminal (its
// standard input and output); its standard error stays separate.
func startTerminal(t *testing.T, args ...string) *cliTerminal {
	t.Helper()
	master, slave := cliPTY(t)
	ctx := testContext(t, 10*time.Minute)
	c := &cliTerminal{t: t, master: master, stderr: &cliStamped{}, exited: make(chan error, 1)}
	c.cmd = exec.CommandContext(ctx, klab(t), args...)
	c.cmd.Dir = ".."
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = slave, slave, c.stderr
	t.Logf("klab %s (on a terminal)", strings.Join(args, " "))
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			c.mu.Lock()
			c.out.Write(b[:n])
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { c.exited <- c.cmd.Wait() }()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		master.Close()
	})
	return c
}

func (c *cliTerminal) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// poll waits until the terminal shows s after offset from, and returns
// the offset just past it; false when it did not within the time given,
// or klab exited first.
func (c *cliTerminal) poll(s string, from int, within time.Duration) (int, bool) {
	deadline := time.Now().Add(budget(c.t, within))
	for {
		if i := strings.Index(c.output()[from:], s); i >= 0 {
			return from + i + len(s), true
		}
		select {
		case err := <-c.exited:
			c.exited <- err
			return from, strings.Contains(c.output()[from:], s)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return from, false
		}
	}
}

// waitFor is poll that fails the test when s does not show.
func (c *cliTerminal) waitFor(s string, from int, within time.Duration) int {
	c.t.Helper()
	at, ok := c.poll(s, from, within)
	if !ok {
		c.t.Fatalf("the terminal did not show %q within %v:\n%s\nstderr:\n%s", s, within, cliTail(c.output(), 20), c.stderr)
	}
	return at
}

func (c *cliTerminal) typeText(s string) {
	c.t.Helper()
	if _, err := c.master.WriteString(s); err != nil {
		c.t.Fatal(err)
	}
}

// wait waits for klab to exit and returns its status.
func (c *cliTerminal) wait(within time.Duration) int {
	c.t.Helper()
	select {
	case err := <-c.exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			c.t.Fatal(err)
		}
		return 0
	case <-time.After(budget(c.t, within)):
		c.t.Fatalf("klab did not exit within %v:\n%s\nstderr:\n%s", within, cliTail(c.output(), 20), c.stderr)
		return -1
	}
}

// cliShellLines is how many command lines TestCLIShell types in one
// session.
const cliShellLines = 30

// cliShellFrozen says what the terminal showed after a line's Enter when
// the line's output never came.
func cliShellFrozen(after string) string {
	// The line editor clears its line when Enter ends it, and restores the
	// terminal (shows the cursor, ESC[?25h) once it has stopped; the
	// command runs only after that.
	if strings.HasSuffix(after, "\x1b[2K") && !strings.Contains(after, "\x1b[?25h") {
		return fmt.Sprintf("the guest's shell froze after Enter: its line editor cleared the line but never stopped "+
			"(no cursor restore, ESC[?25h, within a minute), so the command never ran. gosh's line editor is bubbletea's; "+
			"its standard renderer deadlocks in stop() when its ticker's flush waits for the mutex stop() holds while "+
			"signalling the ticker to end. The terminal after Enter: %q", after)
	}
	return fmt.Sprintf("no output within a minute; the terminal after Enter: %q", after)
}

// TestCLIShell drives `klab shell` on a pseudo-terminal, as a user's
// terminal would: every line of a short session (cliShellLines commands)
// typed at gosh's prompt runs in the guest, `exit` powers the guest off
// and ends klab with the console saved in the run directory, and Ctrl-A x
// kills QEMU, which is saved as a killed session. Piped input runs as a
// script, and klab exits with the shell's status.
//
// The keys are typed only once the prompt shows: what reaches the serial
// port before the guest's shell reads it is lost, as on a real console.
// A shell that freezes after some line fails the test with what the
// terminal showed.
func TestCLIShell(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	t.Run("exit", func(t *testing.T) {
		parallelGuest(t)
		runs := t.TempDir()
		c := startTerminal(t, "--runs-dir", runs, "shell", "--kernel", "debian:7.3")
		// Booting takes seconds under KVM and tens of seconds under a
		// loaded TCG; these waits only guard against a hang.
		at := c.waitFor("klab shell: exit the shell to power off the VM", 0, 5*time.Minute)
		at = c.waitFor("> ", at, time.Minute)
		// A short session, one line at a time: each line runs once the
		// guest's shell has drawn its prompt. The terminal echoes what is
		// typed; only the shell turns $((i*7)) into the number.
		for i := 1; i <= cliShellLines; i++ {
			c.typeText(fmt.Sprintf("echo line-$((%d*7))\r", i))
			enter := len(c.output())
			var ok bool
			if at, ok = c.poll(fmt.Sprintf("line-%d\r", i*7), at, time.Minute); !ok {
				t.Fatalf("line %d of %d: %s", i, cliShellLines, cliShellFrozen(c.output()[enter:]))
			}
			at = c.waitFor("> ", at, time.Minute)
		}
		c.typeText("exit\r")
		start := time.Now()
		if code := c.wait(2 * time.Minute); code != 0 {
			t.Errorf("klab shell exited %d, want 0", code)
		}
		t.Logf("klab ended %v after exit was typed", time.Since(start).Round(time.Millisecond))
		dir, m := cliManifest(t, runs)
		if !strings.Contains(c.stderr.String(), "run saved to "+dir) {
			t.Errorf("stderr does not say where the run was saved")
		}
		console, err := os.ReadFile(filepath.Join(dir, results.ConsoleFile))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(console, []byte(fmt.Sprintf("line-%d\r", cliShellLines*7))) {
			t.Errorf("console.log lacks the shell's output")
		}
		// The agent powers off with a restart, which ends QEMU under
		// -no-reboot.
		if !bytes.Contains(console, []byte("reboot: Restarting system")) {
			t.Errorf("console.log does not show the guest powering off:\n%s", cliTail(string(console), 10))
		}
		if m.Outcome.Status != results.StatusOK || m.Outcome.ExitCode != 0 {
			t.Errorf("manifest outcome %+v, want ok, exit 0", m.Outcome)
		}
	})
	// Without a terminal there is no console to type at: the guest's sh
	// runs klab's standard input as a script, and klab exits with its
	// status.
	t.Run("piped", func(t *testing.T) {
		parallelGuest(t)
		runs := t.TempDir()
		r := cliRun(t, cliOpts{timeout: 3 * time.Minute, stdin: strings.NewReader("echo hello; exit 3\n")},
			"--runs-dir", runs, "shell", "--kernel", "debian:7.3")
		if r.code != 3 || r.stdout != "hello\n" {
			t.Errorf("echo 'echo hello; exit 3' | klab shell: exit %d, stdout %q; want 3 and hello alone", r.code, r.stdout)
		}
		dir, m := cliManifest(t, runs)
		if !strings.Contains(r.stderr, "exit 3,") || !strings.Contains(r.stderr, "run saved to "+dir) {
			t.Errorf("stderr does not give the shell's status and the run:\n%s", cliTail(r.stderr, 5))
		}
		if m.Outcome.Status != results.StatusOK || m.Outcome.ExitCode != 3 {
			t.Errorf("manifest outcome %+v, want ok, exit 3", m.Outcome)
		}
	})
	// With --userspace the shell is Debian's bash in the userspace disk,
	// on the console and with piped input: tools u-root lacks (stat,
	// which, head -20) work, and the shell's status is klab's.
	t.Run("userspace", func(t *testing.T) {
		parallelGuest(t)
		runs := t.TempDir()
		c := startTerminal(t, "--runs-dir", runs, "shell", "--kernel", "debian:7.3", "--userspace")
		at := c.waitFor("klab shell: exit the shell to power off the VM", 0, 10*time.Minute)
		at = c.waitFor("# ", at, time.Minute)
		c.typeText("echo tools-$(which stat | wc -l)-$(head -20 /etc/os-release | wc -l); exit 4\r")
		if code := c.wait(2 * time.Minute); code != 4 {
			t.Errorf("klab shell --userspace exited %d after exit 4:\n%s", code, cliTail(c.output(), 10))
		}
		if _, ok := c.poll("tools-1-", at, time.Second); !ok {
			t.Errorf("stat or head -20 did not run in the userspace's bash:\n%s", cliTail(c.output(), 10))
		}
		if _, m := cliManifest(t, runs); m.Outcome.ExitCode != 4 {
			t.Errorf("manifest outcome %+v, want exit 4", m.Outcome)
		}
		runs = t.TempDir()
		r := cliRun(t, cliOpts{timeout: 3 * time.Minute, stdin: strings.NewReader("echo $BASH_VERSION | cut -c1; stat -c %F /; exit 3\n")},
			"--runs-dir", runs, "shell", "--kernel", "debian:7.3", "--userspace")
		if r.code != 3 || !regexp.MustCompile(`^[0-9]\ndirectory\n$`).MatchString(r.stdout) {
			t.Errorf("piped to klab shell --userspace: exit %d, stdout %q; want 3 and bash's output", r.code, r.stdout)
		}
	})
	t.Run("ctrl-a-x", func(t *testing.T) {
		parallelGuest(t)
		runs := t.TempDir()
		c := startTerminal(t, "--runs-dir", runs, "shell", "--kernel", "debian:7.3")
		at := c.waitFor("klab shell: exit the shell to power off the VM", 0, 5*time.Minute)
		c.waitFor("> ", at, time.Minute)
		c.typeText("\x01x")
		if code := c.wait(time.Minute); code != lab.ExitInterrupted {
			t.Errorf("klab shell exited %d, want %d (killed before the shell exited)", code, lab.ExitInterrupted)
		}
		if !strings.Contains(c.output(), "QEMU: Terminated") {
			t.Errorf("QEMU did not say it was terminated:\n%s", cliTail(c.output(), 10))
		}
		dir, m := cliManifest(t, runs)
		if !strings.Contains(c.stderr.String(), "run saved to "+dir) {
			t.Errorf("stderr does not say where the run was saved")
		}
		if m.Outcome.Status == results.StatusOK || !strings.Contains(m.Outcome.Message, "killed") {
			t.Errorf("manifest outcome %+v, want a killed session, not ok", m.Outcome)
		}
		if console, err := os.ReadFile(filepath.Join(dir, results.ConsoleFile)); err != nil || bytes.Contains(console, []byte("reboot: Restarting system")) {
			t.Errorf("console.log (%v): the guest was not killed but powered off", err)
		}
	})
}

// cliCopyDir copies the directory tree src to dst.
func cliCopyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// cliTree lists the files under dir with their sizes, inodes and
// content hashes.
func cliTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		// Size, inode and content: a file written again (even with the
		// same bytes, through a rename) counts as changed; one only
		// marked as used (its times set, for klab cache gc) does not.
		var ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		m[p] = fmt.Sprintf("%d ino %d sha256 %x", fi.Size(), ino, sha256.Sum256(b))
		return nil
	})
	return m
}

// cliCopyGuestParts copies the guest parts that klab's own cache holds for
// this source tree (building them there first if need be) into cache, at
// the same places.
func cliCopyGuestParts(t *testing.T, cache string) {
	t.Helper()
	src, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	shared := paths.CacheDir()
	p, err := images.GuestPartsFor(testContext(t, 10*time.Minute), images.InitramfsOptions{CacheDir: shared, SourceDir: src, Log: &logWriter{t: t, prefix: "parts| "}})
	if err != nil {
		t.Fatalf("guest parts: %v", err)
	}
	for _, f := range []string{p.BasePath, p.AgentPath} {
		rel, err := filepath.Rel(shared, f)
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("guest part %s is not under %s (%v)", f, shared, err)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(cache, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// cliKernelJSON is what `kernels show --json` and `kernels list --json`
// print for a kernel.
type cliKernelJSON struct {
	Name, ID, Version, Source, Package, Image string
}

// TestCLICacheAndDoctor works in a cache directory of its own, holding a
// copy of the cached debian:7.3 and of the guest parts (the u-root base and
// the agent: TestInstalledAnywhere builds those in an empty cache), and
// checks:
//   - a second `kernels fetch` is a cache hit that uses no network (the
//     mirror named by KLAB_DEBIAN_MIRROR is unreachable, and a kernel not in
//     the cache fails on it);
//   - `kernels list` (through KLAB_CACHE_DIR) shows the kernel;
//   - `klab initramfs` builds the initramfs into --cache-dir from the parts
//     there, and a second call is a cache hit that says so;
//   - `klab doctor` prints the checks it promises, exits by them, and
//     proves KVM with a probe boot, saying so first and caching the
//     verdict in the cache directory, which a second doctor shows without
//     a boot (when /dev/kvm is there);
//   - a boot with KLAB_CACHE_DIR and KLAB_RUNS_DIR lands in that runs
//     directory, boots the cached kernel with the cached initramfs (nothing
//     in the cache changes) and uses the cached accelerator verdict.
func TestCLICacheAndDoctor(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	if r := run(t, t.TempDir(), "kernels", "fetch", "debian:7.3"); r.code != 0 {
		t.Fatalf("kernels fetch debian:7.3: exit %d", r.code)
	}
	r := run(t, t.TempDir(), "kernels", "show", "--json", "debian:7.3")
	var shared cliKernelJSON
	if err := json.Unmarshal([]byte(r.stdout), &shared); err != nil || r.code != 0 {
		t.Fatalf("kernels show: exit %d, %v", r.code, err)
	}
	// The shared cache's list shows the fetched kernel.
	r = run(t, t.TempDir(), "kernels", "list")
	if !regexp.MustCompile(`(?m)^\S+\s+` + regexp.QuoteMeta(shared.Version) + `\s+` + shared.ID + `\s+`).MatchString(r.stdout) {
		t.Errorf("kernels list lacks debian:7.3 (%s %s):\n%s", shared.Version, shared.ID, r.stdout)
	}

	cache := t.TempDir()
	kdir := filepath.Dir(shared.Image)
	cliCopyDir(t, kdir, filepath.Join(cache, "kernels", "debian", filepath.Base(kdir)))
	aliases, err := os.ReadFile(filepath.Join(filepath.Dir(kdir), "aliases.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(cache, "kernels", "debian", "aliases.json"), aliases, 0o644)
	cliCopyGuestParts(t, cache)
	env := []string{"KLAB_CACHE_DIR=" + cache}
	dead := "http://127.0.0.1:9/debian"

	t.Run("fetch-hit", func(t *testing.T) {
		r := cliRun(t, cliOpts{env: append(env, "KLAB_DEBIAN_MIRROR="+dead), timeout: time.Minute}, "kernels", "fetch", "debian:7.3")
		if r.code != 0 {
			t.Fatalf("a second fetch: exit %d", r.code)
		}
		if !strings.Contains(r.stdout, filepath.Join(cache, "kernels", "debian")) || !strings.Contains(r.stdout, shared.ID) {
			t.Errorf("fetch did not answer from the cache directory: %s", r.stdout)
		}
		// The same mirror does fail a fetch that needs it.
		r = cliRun(t, cliOpts{env: append(env, "KLAB_DEBIAN_MIRROR="+dead), timeout: 2 * time.Minute}, "kernels", "fetch", "debian:6.1")
		if r.code == 0 || !strings.Contains(r.stderr, dead) {
			t.Errorf("fetching an uncached kernel through %s: exit %d, want a failure naming the mirror", dead, r.code)
		}
	})

	t.Run("list", func(t *testing.T) {
		r := cliRun(t, cliOpts{env: env}, "kernels", "list", "--json")
		var ks []cliKernelJSON
		if err := json.Unmarshal([]byte(r.stdout), &ks); err != nil || r.code != 0 {
			t.Fatalf("kernels list --json: exit %d, %v", r.code, err)
		}
		if len(ks) != 1 || ks[0].ID != shared.ID || ks[0].Version != shared.Version || ks[0].Source != "debian" || !strings.HasPrefix(ks[0].Image, cache+"/") {
			t.Errorf("kernels list --json in %s: %+v, want only %s %s from that cache", cache, ks, shared.Version, shared.ID)
		}
		r = cliRun(t, cliOpts{env: env}, "kernels", "list")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[1], shared.Version) || !strings.Contains(lines[1], shared.Package) {
			t.Errorf("kernels list:\n%s", r.stdout)
		}
	})

	var ir struct {
		Path, SHA256 string
		Cached       bool
	}
	t.Run("initramfs", func(t *testing.T) {
		r := cliRun(t, cliOpts{}, "--cache-dir", cache, "initramfs", "--kernel", "debian:7.3")
		if r.code != 0 {
			t.Fatalf("exit %d", r.code)
		}
		path := strings.TrimSpace(r.stdout)
		if filepath.Dir(path) != filepath.Join(cache, "initramfs") {
			t.Errorf("initramfs %q is not in --cache-dir %s", path, cache)
		}
		if _, err := os.Stat(path); err != nil {
			t.Error(err)
		}
		if !strings.Contains(r.stderr, "cached false") {
			t.Errorf("the first call does not say it built the initramfs")
		}
		if strings.Contains(r.stderr, "building ") {
			t.Errorf("the first call built guest parts that the cache directory holds")
		}
		first := r.wall
		r = cliRun(t, cliOpts{}, "--cache-dir", cache, "initramfs", "--kernel", "debian:7.3")
		if r.code != 0 || strings.TrimSpace(r.stdout) != path {
			t.Fatalf("second call: exit %d, path %q, want %q", r.code, r.stdout, path)
		}
		if !strings.Contains(r.stderr, "cached true") || strings.Contains(r.stderr, "building") {
			t.Errorf("the second call is not a cache hit")
		}
		t.Logf("initramfs: built in %v, found in %v", first.Round(time.Millisecond), r.wall.Round(time.Millisecond))
		r = cliRun(t, cliOpts{}, "--cache-dir", cache, "initramfs", "--kernel", "debian:7.3", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &ir); err != nil || !ir.Cached || ir.Path != path || len(ir.SHA256) != 64 {
			t.Errorf("initramfs --json: %v: %s", err, r.stdout)
		}
	})

	t.Run("doctor", func(t *testing.T) {
		verdict := filepath.Join(cache, "accel-verdict.json")
		started := time.Now()
		r := cliRun(t, cliOpts{env: env, timeout: 5 * time.Minute}, "doctor")
		var names []string
		failed := 0
		details := map[string]string{}
		// Each line is "ok  ", "warn" or "FAIL", the check's name padded
		// to 24 characters, and what was found.
		for _, l := range strings.Split(strings.TrimRight(r.stdout, "\n"), "\n") {
			if len(l) < 30 || (l[:4] != "ok  " && l[:4] != "warn" && l[:4] != "FAIL") {
				t.Errorf("doctor line %q: want ok|warn|FAIL, a name and a detail", l)
				continue
			}
			name := strings.TrimSpace(l[5:29])
			names = append(names, name)
			details[name] = l[30:]
			if l[:4] == "FAIL" {
				failed++
			}
		}
		want := []string{"qemu", "kvm", "guest parts", "debian bookworm", "debian trixie", "debian trixie-backports", "debian sid", "cache", "runs"}
		if !slices.Equal(names, want) {
			t.Errorf("doctor checks %q, want %q", names, want)
		}
		if failed == 0 && (r.code != 0 || !strings.Contains(r.stderr, "all checks passed")) {
			t.Errorf("no check failed, but exit %d", r.code)
		}
		if failed > 0 && (r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("%d check(s) failed", failed))) {
			t.Errorf("%d check(s) failed, but exit %d", failed, r.code)
		}
		if !strings.Contains(details["qemu"], "QEMU emulator version") {
			t.Errorf("the qemu check lacks the version: %q", details["qemu"])
		}
		if !regexp.MustCompile(`^` + regexp.QuoteMeta(cache) + `: [0-9.]+ GiB free`).MatchString(details["cache"]) {
			t.Errorf("the cache check does not give KLAB_CACHE_DIR's free space: %q", details["cache"])
		}
		if _, err := os.Stat("/dev/kvm"); err == nil {
			// doctor proves KVM afresh with a probe boot of the cached
			// kernel, and caches the verdict where KLAB_CACHE_DIR says.
			if !strings.Contains(details["kvm"], "probe boot of debian:"+shared.Version) {
				t.Errorf("the kvm check did not probe the cached kernel: %q", details["kvm"])
			}
			var v vm.Verdict
			b, err := os.ReadFile(verdict)
			if err == nil {
				err = json.Unmarshal(b, &v)
			}
			if err != nil || (v.Accel != vm.KVM && v.Accel != vm.TCG) || v.When.Before(started) {
				t.Errorf("no fresh accelerator verdict in the cache directory (%v): %s", err, b)
			} else if !strings.HasSuffix(details["kvm"], "→ "+string(v.Accel)) {
				t.Errorf("the kvm check %q does not end with the cached verdict %s", details["kvm"], v.Accel)
			} else {
				// A second doctor shows the cached verdict and boots
				// nothing.
				again := cliRun(t, cliOpts{env: env, timeout: 2 * time.Minute}, "doctor")
				if strings.Contains(again.stderr, "probing KVM") || !strings.Contains(again.stdout, "cached verdict from ") {
					t.Errorf("a second doctor did not use the cached verdict:\n%s%s", again.stdout, again.stderr)
				}
			}
			// Before the probe boot, doctor says what it does.
			if said := "kvm: no accelerator verdict cached; probing KVM with a test boot of debian:" + shared.Version; !strings.Contains(r.stderr, said) {
				t.Errorf("doctor did not say %q before its probe boot:\n%s", said, r.stderr)
			}
		} else if !strings.Contains(details["kvm"], "/dev/kvm absent") {
			t.Errorf("no /dev/kvm, but the kvm check says %q", details["kvm"])
		}
		r = cliRun(t, cliOpts{env: env}, "doctor", "--json", "--probe=false")
		var checks []lab.Check
		if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
			t.Fatalf("doctor --json: %v", err)
		}
		var jnames []string
		for _, c := range checks {
			jnames = append(jnames, c.Name)
		}
		if !slices.Equal(jnames, want) {
			t.Errorf("doctor --json checks %q, want %q", jnames, want)
		}
	})

	t.Run("boot", func(t *testing.T) {
		if ir.Path == "" {
			t.Fatal("no initramfs: the initramfs subtest failed or did not run")
		}
		runs := filepath.Join(t.TempDir(), "runs")
		before := cliTree(t, cache)
		var verdict vm.Verdict
		haveVerdict := false
		if b, err := os.ReadFile(filepath.Join(cache, "accel-verdict.json")); err == nil && json.Unmarshal(b, &verdict) == nil {
			haveVerdict = true
		}
		r := cliRun(t, cliOpts{env: append(env, "KLAB_RUNS_DIR="+runs)}, "boot", "--kernel", "debian:7.3", "--", "uname", "-r")
		if r.code != 0 || strings.TrimSpace(r.stdout) != shared.Version {
			t.Fatalf("exit %d, stdout %q, want %s", r.code, r.stdout, shared.Version)
		}
		dir, m := cliManifest(t, runs)
		if !strings.Contains(r.stderr, "run saved to "+dir) {
			t.Errorf("stderr does not name the run directory %s", dir)
		}
		for _, f := range []string{results.ManifestFile, results.ConsoleFile, results.EventsFile, "splats.json"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("the run lacks %s: %v", f, err)
			}
		}
		if !strings.HasPrefix(m.Kernel.Image, cache+"/") {
			t.Errorf("booted %s, not the kernel in KLAB_CACHE_DIR", m.Kernel.Image)
		}
		if m.Initramfs.Path != ir.Path || m.Initramfs.SHA256 != ir.SHA256 {
			t.Errorf("booted initramfs %+v, want the cached %s", m.Initramfs, ir.Path)
		}
		// A cache hit writes nothing: every file is as it was, and no new
		// one appeared (the accelerator verdict included).
		after := cliTree(t, cache)
		for p, v := range after {
			if before[p] != v {
				t.Errorf("the boot changed the cache: %s (%q, was %q)", p, v, before[p])
			}
		}
		if haveVerdict {
			if m.Accel != results.Accel(verdict.Accel) || !strings.HasPrefix(m.AccelReason, verdict.Reason) || !strings.Contains(m.AccelReason, "cached verdict") || strings.Contains(r.stderr, "probing KVM") {
				t.Errorf("the boot did not use the cached verdict %+v: accel %s (%s)", verdict, m.Accel, m.AccelReason)
			}
		}
	})
}

// cliFakeBuild writes a built kernel into cache's build store, laid out as
// images/build keeps them: results/<key>/ with kernel.json and a vmlinuz
// of size bytes, names/<name> and inputs/<input> linking to it.
func cliFakeBuild(t *testing.T, cache, key string, size int, names, inputs []string) string {
	t.Helper()
	b := filepath.Join(cache, "kernels", "build")
	dir := filepath.Join(b, "results", key)
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "vmlinuz"), bytes.Repeat([]byte{1}, size), 0o644)
	// Its id is its image's hash, as klab checks when it loads it.
	id, err := kerneldir.ID(filepath.Join(dir, "vmlinuz"), "")
	if err != nil {
		t.Fatal(err)
	}
	k := map[string]any{
		"name": "build:" + key, "id": id, "version": "7.3.4", "source": "build",
		"build": map[string]any{"tree": "e2e-fake", "base_config": "tinyconfig", "key": key},
	}
	kj, _ := json.Marshal(k)
	os.WriteFile(filepath.Join(dir, "kernel.json"), kj, 0o644)
	for _, group := range []struct {
		sub   string
		links []string
	}{{"names", names}, {"inputs", inputs}} {
		os.MkdirAll(filepath.Join(b, group.sub), 0o755)
		for _, n := range group.links {
			if err := os.Symlink(filepath.Join("..", "results", key), filepath.Join(b, group.sub, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

func cliExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// TestCLIKernelsRmGC checks `kernels rm` and `kernels gc` in a cache
// directory of their own, filled as klab's build store lays kernels out
// (no kernel is built: the images are placeholders), next to a Debian
// kernel and an initramfs image, which neither command may touch:
//   - rm refuses Debian kernels and unknown names;
//   - rm of one of two names of a kernel keeps its files, rm of the last
//     removes them;
//   - gc --dry-run removes nothing;
//   - gc removes work trees and sources first, then kernels no name refers
//     to, then named kernels, until the cache fits --max-size.
func TestCLIKernelsRmGC(t *testing.T) {
	cache := t.TempDir()
	opts := cliOpts{timeout: time.Minute}
	// A Debian kernel: kernel.json and an image are what the cache needs
	// to list it.
	deb := filepath.Join(cache, "kernels", "debian", "linux-image-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1")
	os.MkdirAll(deb, 0o755)
	os.WriteFile(filepath.Join(deb, "vmlinuz"), bytes.Repeat([]byte{2}, 1<<20), 0o644)
	debID, err := kerneldir.ID(filepath.Join(deb, "vmlinuz"), "")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(deb, "kernel.json"), []byte(`{"name":"debian:7.3.4+deb13-cloud-amd64","id":"`+debID+`","version":"7.3.4+deb13-cloud-amd64","source":"debian","package":"linux-image-7.3.4+deb13-cloud-amd64","package_version":"7.3.4-1~bpo13+1"}`), 0o644)
	cpio := filepath.Join(cache, "initramfs", "klab-e2e.cpio")
	os.MkdirAll(filepath.Dir(cpio), 0o755)
	os.WriteFile(cpio, bytes.Repeat([]byte{3}, 1<<20), 0o644)
	keep := cliTree(t, filepath.Join(cache, "kernels", "debian"))
	for p, v := range cliTree(t, filepath.Dir(cpio)) {
		keep[p] = v
	}

	const keyA, keyB, keyC = "e2e00000000000000a0a", "e2e00000000000000b0b", "e2e00000000000000c0c"
	dirA := cliFakeBuild(t, cache, keyA, 1<<20, []string{"a1", "a2"}, []string{"in-a"})
	dirB := cliFakeBuild(t, cache, keyB, 1<<20, []string{"b"}, []string{"in-b"})
	dirC := cliFakeBuild(t, cache, keyC, 1<<20, nil, []string{"in-c"})
	work := filepath.Join(cache, "kernels", "build", "work", "e2e-slot")
	os.MkdirAll(filepath.Join(work, "src"), 0o755)
	os.WriteFile(filepath.Join(work, "src", "Makefile"), bytes.Repeat([]byte{4}, 2<<20), 0o644)
	src := filepath.Join(cache, "sources", "debian", "linux-source-7.3")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "linux-source-7.3.tar.xz"), bytes.Repeat([]byte{5}, 2<<20), 0o644)
	build := filepath.Join(cache, "kernels", "build")

	listNames := func() []string {
		t.Helper()
		r := cliRun(t, opts, "--cache-dir", cache, "kernels", "list", "--json")
		var ks []cliKernelJSON
		if err := json.Unmarshal([]byte(r.stdout), &ks); err != nil || r.code != 0 {
			t.Fatalf("kernels list --json: exit %d, %v", r.code, err)
		}
		var names []string
		for _, k := range ks {
			names = append(names, k.Name)
		}
		return names
	}
	checkKept := func() {
		t.Helper()
		now := cliTree(t, filepath.Join(cache, "kernels", "debian"))
		for p, v := range cliTree(t, filepath.Dir(cpio)) {
			now[p] = v
		}
		for p, v := range keep {
			if now[p] != v {
				t.Errorf("%s changed or went (%q, was %q)", p, now[p], v)
			}
		}
	}
	deb73 := "debian:7.3.4+deb13-cloud-amd64"
	if got, want := listNames(), []string{deb73, "build:a1", "build:a2", "build:b"}; !slices.Equal(got, want) {
		t.Errorf("kernels list: %q, want %q", got, want)
	}

	r := cliRun(t, opts, "--cache-dir", cache, "kernels", "rm", "debian:7.3")
	if r.code != 2 || !strings.Contains(r.stderr, "removes kernels built from source") {
		t.Errorf("kernels rm debian:7.3: exit %d, want 2 and a refusal", r.code)
	}
	r = cliRun(t, opts, "--cache-dir", cache, "kernels", "rm", "build:nosuch")
	if r.code == 0 || !strings.Contains(r.stderr, "no built kernel by that name") {
		t.Errorf("kernels rm build:nosuch: exit %d, want a failure", r.code)
	}
	r = cliRun(t, opts, "--cache-dir", cache, "kernels", "rm", "build:a1")
	if r.code != 0 || cliExists(filepath.Join(build, "names", "a1")) || !cliExists(dirA) || !cliExists(filepath.Join(build, "names", "a2")) {
		t.Errorf("kernels rm build:a1 (exit %d): want the name gone and the kernel kept for build:a2", r.code)
	}
	r = cliRun(t, opts, "--cache-dir", cache, "kernels", "rm", "build:a2")
	if r.code != 0 || cliExists(dirA) || cliExists(filepath.Join(build, "inputs", "in-a")) || !strings.Contains(r.stderr, "removed "+dirA) {
		t.Errorf("kernels rm build:a2 (exit %d): want the kernel's files and links gone", r.code)
	}
	if got, want := listNames(), []string{deb73, "build:b"}; !slices.Equal(got, want) {
		t.Errorf("kernels list after rm: %q, want %q", got, want)
	}
	checkKept()

	// 2 MiB of work tree, 2 MiB of source, two 1 MiB kernels: a 1.5 MiB
	// limit takes the work tree, the source and the unnamed kernel, and
	// keeps the named one.
	// gcLine is the index of gc's line that says verb of kind at path p
	// (relative to the cache), -1 when there is none.
	gcLine := func(out, verb, kind, p string) int {
		rel, _ := filepath.Rel(cache, p)
		re := regexp.MustCompile(`^` + verb + ` +` + kind + ` +[0-9.]+ [KMG]?i?B +` + regexp.QuoteMeta(rel) + `( |$)`)
		for i, l := range strings.Split(out, "\n") {
			if re.MatchString(l) {
				return i
			}
		}
		return -1
	}
	r = cliRun(t, opts, "--cache-dir", cache, "kernels", "gc", "--max-size", "1536K", "--dry-run")
	for _, e := range []struct{ kind, p string }{{"work-tree", work}, {"kernel-source", src}, {"built-kernel", dirC}} {
		if gcLine(r.stdout, "would remove", e.kind, e.p) < 0 {
			t.Errorf("gc --dry-run does not say it would remove %s %s:\n%s", e.kind, e.p, r.stdout)
		}
		if !cliExists(e.p) {
			t.Errorf("gc --dry-run removed %s", e.p)
		}
	}
	if r.code != 0 || gcLine(r.stdout, "would remove", "built-kernel", dirB) >= 0 || !strings.Contains(r.stdout, "\nwould remove 3 entries, ") {
		t.Errorf("gc --dry-run: exit %d, or it would remove the named kernel, or no total:\n%s", r.code, r.stdout)
	}
	r = cliRun(t, opts, "--cache-dir", cache, "kernels", "gc", "--max-size", "1536K")
	if r.code != 0 || !strings.Contains(r.stdout, "the kernel builds in the cache at "+cache) {
		t.Errorf("gc: exit %d, stdout %q", r.code, r.stdout)
	}
	for _, p := range []string{work, src, dirC, filepath.Join(build, "inputs", "in-c")} {
		if cliExists(p) {
			t.Errorf("gc kept %s", p)
		}
	}
	for _, p := range []string{dirB, filepath.Join(build, "names", "b"), filepath.Join(build, "inputs", "in-b")} {
		if !cliExists(p) {
			t.Errorf("gc removed %s, though the cache fitted without", p)
		}
	}
	i, j, k := gcLine(r.stdout, "removed", "work-tree", work), gcLine(r.stdout, "removed", "kernel-source", src), gcLine(r.stdout, "removed", "built-kernel", dirC)
	if i < 0 || j < 0 || k < 0 || k < i || k < j {
		t.Errorf("gc did not remove the work tree and the source before the unnamed kernel:\n%s", r.stdout)
	}
	checkKept()

	r = cliRun(t, opts, "--cache-dir", cache, "kernels", "gc", "--max-size", "0")
	if r.code != 0 || cliExists(dirB) || cliExists(filepath.Join(build, "names", "b")) || gcLine(r.stdout, "removed", "built-kernel", dirB) < 0 || !strings.Contains(r.stdout, "(build:b)") {
		t.Errorf("gc --max-size 0 (exit %d): want the named kernel and its name gone:\n%s", r.code, r.stdout)
	}
	if got, want := listNames(), []string{deb73}; !slices.Equal(got, want) {
		t.Errorf("kernels list after gc: %q, want %q", got, want)
	}
	checkKept()
}

// cliGolden is one report a splat corpus file promises.
type cliGolden struct {
	Title, Type      string
	Line             int
	Fatal, Corrupted bool
}

// cliCorpus reads a results/splat/testdata file: its header's reports and
// the raw log after the blank line.
func cliCorpus(t *testing.T, name string) ([]cliGolden, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "results", "splat", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	head, raw, ok := bytes.Cut(b, []byte("\n\n"))
	if !ok {
		t.Fatalf("%s: no blank line after the header", name)
	}
	var gs []cliGolden
	for _, l := range strings.Split(string(head), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		switch k {
		case "TITLE":
			gs = append(gs, cliGolden{Title: v})
		case "TYPE":
			gs[len(gs)-1].Type = v
		case "LINE":
			gs[len(gs)-1].Line, _ = strconv.Atoi(v)
		case "FATAL":
			gs[len(gs)-1].Fatal = v == "Y"
		case "CORRUPTED":
			gs[len(gs)-1].Corrupted = v == "Y"
		}
	}
	return gs, raw
}

// TestCLISplatsParse runs `klab splats parse` on console logs of the splat
// corpus (real captures from Debian's 7.3 kernel, and noise) and checks
// that it finds what each file's header promises: one title per line, file
// names as prefixes with several files, standard input as "-", and with
// --json the title, type, line, fatal and corrupted fields, the report's
// text and its frames.
func TestCLISplatsParse(t *testing.T) {
	dir := t.TempDir()
	files := []string{"real-7.3-warn.log", "real-7.3-panic-on-warn.log", "real-7.3-null.log", "noise.log"}
	golden := map[string][]cliGolden{}
	raws := map[string][]byte{}
	var paths []string
	for _, f := range files {
		g, raw := cliCorpus(t, f)
		golden[f], raws[f] = g, raw
		p := filepath.Join(dir, f)
		os.WriteFile(p, raw, 0o644)
		paths = append(paths, p)
	}
	if len(golden["real-7.3-warn.log"]) == 0 || len(golden["noise.log"]) != 0 {
		t.Fatalf("the corpus changed: %v", golden)
	}
	opts := cliOpts{timeout: time.Minute}

	// One file: titles only.
	for _, f := range files {
		r := cliRun(t, opts, "splats", "parse", filepath.Join(dir, f))
		var want []string
		for _, g := range golden[f] {
			want = append(want, g.Title)
		}
		got := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if r.stdout == "" {
			got = nil
		}
		if r.code != 0 || !slices.Equal(got, want) {
			t.Errorf("splats parse %s: exit %d, titles %q, want %q", f, r.code, got, want)
		}
	}

	// Several files: each title after its file's name.
	r := cliRun(t, opts, append([]string{"splats", "parse"}, paths...)...)
	var want []string
	for i, f := range files {
		for _, g := range golden[f] {
			want = append(want, paths[i]+": "+g.Title)
		}
	}
	if got := strings.Split(strings.TrimSpace(r.stdout), "\n"); r.code != 0 || !slices.Equal(got, want) {
		t.Errorf("splats parse with %d files: exit %d,\n%q\nwant\n%q", len(files), r.code, got, want)
	}

	// --json from standard input.
	for _, f := range files {
		r := cliRun(t, cliOpts{timeout: time.Minute, stdin: bytes.NewReader(raws[f])}, "splats", "parse", "--json", "-")
		var got []struct {
			File, Title, Type, Report string
			Line                      int
			Fatal, Corrupted          bool
			Frames                    []string
		}
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
			t.Errorf("splats parse --json - < %s: exit %d, %v:\n%s", f, r.code, err, r.stdout)
			continue
		}
		if got == nil || len(got) != len(golden[f]) {
			t.Errorf("splats parse --json - < %s: %d reports, want %d (an empty array when none)", f, len(got), len(golden[f]))
			continue
		}
		lines := strings.Split(string(raws[f]), "\n")
		for i, g := range golden[f] {
			s := got[i]
			if s.File != "-" || s.Title != g.Title || s.Type != g.Type || s.Line != g.Line || s.Fatal != g.Fatal || s.Corrupted != g.Corrupted {
				t.Errorf("%s report %d: %+v, want %+v", f, i, s, g)
			}
			// The report's text holds its header line, without the
			// printk timestamp.
			header := lines[g.Line-1]
			if _, msg, ok := strings.Cut(header, "] "); ok {
				header = msg
			}
			if !strings.Contains(s.Report, strings.TrimRight(header, "\r")) || len(s.Frames) == 0 {
				t.Errorf("%s report %d: the text lacks its header line %q, or no frames (%q)", f, i, header, s.Frames)
			}
		}
	}
}

// cliMounted returns the file system type mounted at dir, or "".
func cliMounted(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	fstype := ""
	for _, l := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		f := strings.Fields(pre)
		if !ok || len(f) < 5 || procfs.UnescapeMountinfo(f[4]) != dir {
			continue
		}
		fstype = strings.Fields(post)[0] // the last mount on dir is the visible one
	}
	return fstype
}

// cliIO runs f in a goroutine and fails t when it takes longer than d: a
// FUSE server that stopped answering would otherwise block the test in
// the kernel.
func cliIO(t *testing.T, what string, d time.Duration, f func() error) {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		t.Fatalf("%s: no answer within %v", what, d)
	}
}

// cliServe starts `klab fuse serve` and waits until its mount is there.
func cliServe(t *testing.T, args ...string) (*exec.Cmd, *cliStamped, *bytes.Buffer, chan error) {
	t.Helper()
	mnt := args[len(args)-1]
	cmd := exec.Command(klab(t), append([]string{"fuse", "serve"}, args...)...)
	cmd.Dir = ".."
	stderr, stdout := &cliStamped{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	t.Logf("klab fuse serve %s", strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if cliMounted(t, mnt) != "" {
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	// Mounting takes milliseconds; the minute only guards against a hang.
	deadline := time.Now().Add(time.Minute)
	for cliMounted(t, mnt) == "" || !strings.Contains(stderr.String(), " mounted on "+mnt) {
		select {
		case err := <-done:
			t.Fatalf("fuse serve exited (%v) before mounting:\n%s", err, stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing mounted on %s, or not said so, after a minute:\n%s", mnt, stderr)
		}
	}
	return cmd, stderr, stdout, done
}

// TestCLIFuseServe runs `klab fuse serve` on the host: the passthrough
// server mirrors its backing directory both ways, and SIGINT (Ctrl-C)
// unmounts it and ends the server with status 0, also when a file on the
// mount is still open (the connection is then aborted and the mount
// detached).
func TestCLIFuseServe(t *testing.T) {
	testenv.RequiresFUSE(t)
	backing, mnt := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(backing, "before.txt"), []byte("from the backing directory\n"), 0o644)
	// Each step (a few file operations through a local FUSE server, or
	// the server's unmount) takes milliseconds even on a loaded host; the
	// bound only keeps a stuck server from blocking the test for good.
	const ioBound = 30 * time.Second

	t.Run("ctrl-c", func(t *testing.T) {
		cmd, stderr, stdout, done := cliServe(t, "--threads", "4", "--stats", "--backing", backing, mnt)
		if fs := cliMounted(t, mnt); fs != "fuse.klab-passthrough" {
			t.Errorf("mounted %q on %s, want fuse.klab-passthrough", fs, mnt)
		}
		if !strings.Contains(stderr.String(), "passthrough server over dev with 4 thread(s) mounted on "+mnt) {
			t.Errorf("stderr does not say what it mounted:\n%s", stderr)
		}
		cliIO(t, "I/O through the mount", ioBound, func() error {
			b, err := os.ReadFile(filepath.Join(mnt, "before.txt"))
			if err != nil || string(b) != "from the backing directory\n" {
				return fmt.Errorf("read %q: %v", b, err)
			}
			if err := os.WriteFile(filepath.Join(mnt, "through.txt"), []byte("through the mount\n"), 0o644); err != nil {
				return err
			}
			if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
				return err
			}
			ents, err := os.ReadDir(mnt)
			if err != nil {
				return err
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{"before.txt", "d", "through.txt"}) {
				return fmt.Errorf("the mount lists %q", names)
			}
			return nil
		})
		if b, err := os.ReadFile(filepath.Join(backing, "through.txt")); err != nil || string(b) != "through the mount\n" {
			t.Errorf("the write did not reach the backing directory: %q, %v", b, err)
		}
		if fi, err := os.Stat(filepath.Join(backing, "d")); err != nil || !fi.IsDir() {
			t.Errorf("mkdir did not reach the backing directory: %v", err)
		}
		cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("fuse serve after SIGINT: %v\n%s", err, stderr)
			}
		case <-time.After(ioBound):
			t.Fatalf("fuse serve still runs %v after SIGINT", ioBound)
		}
		if fs := cliMounted(t, mnt); fs != "" {
			t.Errorf("%s is still mounted (%s) after SIGINT", mnt, fs)
		}
		if !strings.Contains(stderr.String(), "fuse: unmounted "+mnt) {
			t.Errorf("stderr does not say it unmounted:\n%s", stderr)
		}
		var stats struct{ Server, Transport string }
		if err := json.Unmarshal(stdout.Bytes(), &stats); err != nil || stats.Server != "passthrough" || stats.Transport != "dev" {
			t.Errorf("--stats printed %q (%v)", stdout, err)
		}
		if ents, _ := os.ReadDir(mnt); len(ents) != 0 {
			t.Errorf("the mount point shows %d entries after the unmount", len(ents))
		}
	})

	t.Run("ctrl-c-busy", func(t *testing.T) {
		cmd, stderr, _, done := cliServe(t, "--backing", backing, mnt)
		var held *os.File
		cliIO(t, "open through the mount", ioBound, func() error {
			var err error
			held, err = os.Open(filepath.Join(mnt, "before.txt"))
			return err
		})
		defer held.Close()
		cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("fuse serve after SIGINT with a busy mount: %v\n%s", err, stderr)
			}
		case <-time.After(ioBound):
			t.Fatalf("fuse serve still runs %v after SIGINT with a busy mount", ioBound)
		}
		if fs := cliMounted(t, mnt); fs != "" {
			t.Errorf("%s is still mounted (%s): the busy mount was not detached", mnt, fs)
		}
		cliIO(t, "read from the detached mount", ioBound, func() error {
			if _, err := held.Read(make([]byte, 8)); err == nil {
				return errors.New("a read through the aborted connection worked")
			}
			return nil
		})
	})

	// The README's stuck server: a lookup of stuck* is never answered, so
	// the client blocks until Ctrl-C aborts the connection, and then fails
	// instead of hanging; other names pass through.
	t.Run("stuck", func(t *testing.T) {
		cmd, stderr, _, done := cliServe(t, "--server", "stuck", "--rule", "lookup:stuck*=never", "--backing", backing, mnt)
		cliIO(t, "a lookup the rule does not hold", ioBound, func() error {
			_, err := os.Stat(filepath.Join(mnt, "before.txt"))
			return err
		})
		stat := make(chan error, 1)
		go func() {
			_, err := os.Stat(filepath.Join(mnt, "stuck-here"))
			stat <- err
		}()
		select {
		case err := <-stat:
			t.Fatalf("a lookup on the stuck server returned (%v): it should block", err)
		case <-time.After(time.Second):
		}
		cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("fuse serve --server stuck after SIGINT: %v\n%s", err, stderr)
			}
		case <-time.After(ioBound):
			t.Fatalf("fuse serve --server stuck still runs %v after SIGINT", ioBound)
		}
		select {
		case err := <-stat:
			if err == nil {
				t.Error("the blocked lookup succeeded after the abort")
			}
			t.Logf("the blocked lookup returned: %v", err)
		case <-time.After(ioBound):
			t.Fatalf("the blocked lookup still hangs %v after the server was stopped", ioBound)
		}
		if fs := cliMounted(t, mnt); fs != "" {
			t.Errorf("%s is still mounted (%s) after SIGINT", mnt, fs)
		}
	})
}

// TestCLIHelpExamples checks README's "every command has --help with
// examples": it walks the command tree from `klab --help` (leaving out
// cobra's own help and completion commands) and lists every command whose
// --help has no Examples section.
func TestCLIHelpExamples(t *testing.T) {
	var missing, seen []string
	var walk func(path []string)
	walk = func(path []string) {
		r := cliRun(t, cliOpts{timeout: time.Minute}, append(slices.Clone(path), "--help")...)
		name := strings.Join(append([]string{"klab"}, path...), " ")
		seen = append(seen, name)
		if r.code != 0 {
			t.Errorf("%s --help: exit %d", name, r.code)
		}
		_, subs, group := strings.Cut(r.stdout, "\nAvailable Commands:\n")
		if !regexp.MustCompile(`(?m)^Examples:\n  \S`).MatchString(r.stdout) {
			if group {
				missing = append(missing, name+" (a group)")
			} else {
				missing = append(missing, name)
			}
		}
		if !group {
			return
		}
		subs, _, _ = strings.Cut(subs, "\n\n")
		for _, l := range strings.Split(subs, "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || f[0] == "help" || f[0] == "completion" {
				continue
			}
			walk(append(slices.Clone(path), f[0]))
		}
	}
	walk(nil)
	t.Logf("%d commands: %s", len(seen), strings.Join(seen, ", "))
	for _, want := range []string{"klab boot", "klab kernels gc", "klab fuse serve", "klab splats parse", "klab matrix emit"} {
		if !slices.Contains(seen, want) {
			t.Errorf("the walk did not reach %s", want)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d commands have no examples in --help: %s", len(missing), len(seen), strings.Join(missing, ", "))
	}
}
