// Package e2e holds klab's end-to-end tests: they build the klab binary,
// fetch real Debian kernels, and boot them in real QEMU (under TCG on hosts
// without working KVM). Kernels are cached in the user cache directory, so
// only the first run downloads them.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"klab/internal/procfs"
	"klab/internal/testenv"
	"klab/results"
)

var (
	buildOnce sync.Once
	klabBin   string
	buildErr  error
)

// makeInTree is held by the tests that run make targets which write into
// the source tree (bin/klab, the guest parts in images/embedded), so that
// two of them running in parallel do not build over each other.
var makeInTree sync.Mutex

// klab builds the klab binary once per test binary.
func klab(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "klab-e2e-bin-")
		if err != nil {
			buildErr = err
			return
		}
		klabBin = filepath.Join(dir, "klab")
		out, err := exec.Command("go", "build", "-o", klabBin, "../cmd/klab").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return klabBin
}

// guestSlots bounds the guests that tests running in parallel boot at
// once: KLAB_E2E_GUESTS (2 when unset; 1 runs one test after another).
// Two TCG guests on a 2-core host ran 2.04 times as fast as one after the
// other, since a guest leaves its CPU idle between bursts.
var guestSlots = make(chan struct{}, guestLimit())

func guestLimit() int {
	if n, err := strconv.Atoi(os.Getenv("KLAB_E2E_GUESTS")); err == nil && n > 0 {
		return n
	}
	return 2
}

// parallelGuest lets t run beside the other tests that call it, once the
// tests that run alone have finished (go test runs those first), and
// holds a guest slot until t ends. A test that calls it boots at most one
// guest at a time and checks no timing that a second guest on the same
// CPUs could move: timing checks (panic latency, timeouts, the boot
// timeout) stay serial. A test whose subtests call it calls t.Parallel
// alone: holding a slot while its subtests wait for one could leave none
// for them. So does a test that builds a kernel before it boots: it takes
// its slot (holdGuestSlot) after the build.
func parallelGuest(t *testing.T) {
	t.Helper()
	t.Parallel()
	holdGuestSlot(t)
}

// holdGuestSlot waits for a guest slot and holds it until t ends: for a
// test that called t.Parallel and boots only after other work (a kernel
// build), or a subtest that runs before its parallel siblings.
func holdGuestSlot(t *testing.T) {
	t.Helper()
	guestSlots <- struct{}{}
	t.Cleanup(func() { <-guestSlots })
}

// result is one klab invocation.
type result struct {
	stdout, stderr string
	code           int
	wall           time.Duration
}

// run runs klab with args, logging the command line and its stderr.
func run(t *testing.T, runsDir string, args ...string) result {
	t.Helper()
	return runTimeout(t, runsDir, 10*time.Minute, args...)
}

// deadlineMargin is what a test keeps between its subprocesses' (and
// guests') deadline and the test binary's own (go test -timeout): time to
// kill what runs (klab's QEMU and build processes die with it through
// their parent-death signal), report and clean up. A test that runs out of
// time then fails by itself, instead of the test binary's timeout panic
// hiding every other test's result.
const deadlineMargin = time.Minute

// budget returns want, cut to what is left before the test binary's
// deadline less deadlineMargin. With no time left it fails t.
func budget(t *testing.T, want time.Duration) time.Duration {
	t.Helper()
	deadline, ok := t.Deadline()
	if !ok {
		return want
	}
	left := time.Until(deadline) - deadlineMargin
	if left <= 0 {
		t.Fatalf("no time left for this test: the test binary's deadline is %s", deadline.Format(time.TimeOnly))
	}
	if left < want {
		t.Logf("timeout %v cut to %v by the test binary's deadline (%s)", want, left.Round(time.Second), deadline.Format(time.TimeOnly))
		return left
	}
	return want
}

// testContext returns a context that ends after budget(t, want), and
// with the test.
func testContext(t *testing.T, want time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), budget(t, want))
	t.Cleanup(cancel)
	return ctx
}

// runTimeout is run with a given timeout, cut to what the test binary's
// deadline leaves (see budget). A klab killed at its timeout fails t.
func runTimeout(t *testing.T, runsDir string, timeout time.Duration, args ...string) result {
	t.Helper()
	return runKlab(t, runsDir, timeout, 0, args...)
}

// runKlab is runTimeout with klab (and what it runs, such as make) at
// the CPU priority nice (0 for the test's own).
func runKlab(t *testing.T, runsDir string, timeout time.Duration, nice int, args ...string) result {
	t.Helper()
	args = append([]string{"--runs-dir", runsDir}, args...)
	t.Logf("klab %s", strings.Join(args, " "))
	timeout = budget(t, timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, klab(t), args...)
	if nice != 0 {
		cmd = exec.CommandContext(ctx, "nice", append([]string{"-n", strconv.Itoa(nice), klab(t)}, args...)...)
	}
	cmd.Dir = ".."
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), wall: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("klab: %v", err)
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		t.Logf("stderr| %s", l)
	}
	if ctx.Err() != nil {
		t.Fatalf("klab %s: killed at its %v timeout", strings.Join(args, " "), timeout.Round(time.Second))
	}
	return r
}

// onlyRun returns the single run directory under runsDir.
func onlyRun(t *testing.T, runsDir string) string {
	t.Helper()
	all, err := os.ReadDir(runsDir)
	if err != nil {
		t.Fatal(err)
	}
	// Runs are directories; klab's state beside them (fstests' per-test
	// times) is in files.
	var ents []os.DirEntry
	for _, e := range all {
		if e.IsDir() {
			ents = append(ents, e)
		}
	}
	if len(ents) != 1 {
		t.Fatalf("%d runs in %s, want 1", len(ents), runsDir)
	}
	return filepath.Join(runsDir, ents[0].Name())
}

// kernelVersion is what klab kernels show --json says of ref (a kernel
// reference, after flags such as --flavour).
func kernelVersion(t *testing.T, ref ...string) string {
	t.Helper()
	r := run(t, t.TempDir(), append([]string{"kernels", "show", "--json"}, ref...)...)
	if r.code != 0 {
		t.Fatalf("kernels show %s: exit %d", ref, r.code)
	}
	var k struct {
		Version string `json:"version"`
		Image   string `json:"image"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &k); err != nil {
		t.Fatalf("kernels show --json: %v\n%s", err, r.stdout)
	}
	if k.Version == "" || k.Image == "" {
		t.Fatalf("kernels show --json: no version or image: %s", r.stdout)
	}
	return k.Version
}

// TestBootDebian fetches debian:7.3 and debian:6.1 (and debian:7.3 in
// Debian's generic amd64 flavour), boots each, and checks what uname -r
// prints in the guest, and what the run saved.
func TestBootDebian(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	for _, c := range []struct {
		name, ref, flavour string
	}{
		{"debian:7.3", "debian:7.3", ""},
		{"debian:6.1", "debian:6.1", ""},
		{"debian:7.3-flavour-amd64", "debian:7.3", "amd64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parallelGuest(t)
			ref := []string{c.ref}
			if c.flavour != "" {
				ref = []string{"--flavour", c.flavour, c.ref}
			}
			fetch := run(t, t.TempDir(), append([]string{"kernels", "fetch"}, ref...)...)
			if fetch.code != 0 {
				t.Fatalf("kernels fetch %s: exit %d", ref, fetch.code)
			}
			want := kernelVersion(t, ref...)
			if c.flavour != "" && !strings.HasSuffix(want, "-"+c.flavour) {
				t.Errorf("--flavour %s resolved to %s", c.flavour, want)
			}
			runs := t.TempDir()
			r := run(t, runs, append(append([]string{"boot", "--kernel", c.ref}, ref[:len(ref)-1]...), "--console", "--", "uname", "-r")...)
			if r.code != 0 {
				t.Fatalf("boot: exit %d", r.code)
			}
			if got := strings.TrimSpace(r.stdout); got != want {
				t.Fatalf("guest uname -r = %q, want %q", got, want)
			}
			dir := onlyRun(t, runs)
			m, err := results.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if m.Outcome.Status != results.StatusOK || m.Kernel.Version != want || m.Accel == "" || len(m.QEMU.Argv) == 0 || m.Initramfs.SHA256 == "" || m.Times.BootToAgentMs <= 0 {
				t.Errorf("manifest incomplete: %+v", m)
			}
			t.Logf("boot-to-agent %d ms under %s; qemu: %s", m.Times.BootToAgentMs, m.Accel, strings.Join(m.QEMU.Argv, " "))
			console, err := os.ReadFile(filepath.Join(dir, "console.log"))
			if err != nil || !bytes.Contains(console, []byte("Linux version "+want)) {
				t.Errorf("console.log lacks the kernel banner (%v)", err)
			}
			events, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
			if err != nil || !bytes.Contains(events, []byte(`"kind":"hello"`)) || !bytes.Contains(events, []byte(`"kind":"done"`)) {
				t.Errorf("events.jsonl lacks hello or done (%v)", err)
			}
		})
	}
}

// TestSpareModulesOnDemand: on debian:6.1, where fuse and brd are
// modules, the agent loads neither at boot; opening /dev/fuse loads fuse
// (the kernel runs the agent as its modprobe), and modprobe in the guest
// loads brd with parameters.
func TestSpareModulesOnDemand(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	r := run(t, runs, "boot", "--kernel", "debian:6.1", "--", "sh", "-c",
		"test -e /sys/module/fuse && echo fuse-at-boot; test -e /sys/module/brd && echo brd-at-boot; "+
			"dd if=/dev/fuse of=/dev/null count=0 2>/dev/null; test -e /sys/module/fuse && echo fuse; "+
			"modprobe brd rd_nr=1 rd_size=1024 && test -b /dev/ram0 && test ! -e /dev/ram1 && echo brd; "+
			"modprobe nosuchmodule; echo $?")
	if r.code != 0 {
		t.Fatalf("boot: exit %d\n%s", r.code, r.stderr)
	}
	if r.stdout != "fuse\nbrd\n1\n" {
		t.Errorf("guest said %q, want fuse loaded on open, brd by modprobe with its parameters, and an unknown module refused", r.stdout)
	}
	if !strings.Contains(r.stderr, "modprobe: nosuchmodule: no such module in this guest (its spare modules: fuse, brd)") {
		t.Errorf("modprobe of an unknown module did not say which it has:\n%s", r.stderr)
	}
	events, err := os.ReadFile(filepath.Join(onlyRun(t, runs), "events.jsonl"))
	if err != nil || !bytes.Contains(events, []byte(`{"name":"virtio_console"}`)) || bytes.Contains(events, []byte(`{"name":"fuse"`)) {
		t.Errorf("hello should list virtio_console and not fuse among the modules loaded at boot (%v)", err)
	}
}

// TestAgentOverTTYS1: on a kernel without a virtio console the agent
// talks over the second serial port, and the run works the same. Debian's
// kernels build the virtio console in, so its initcall is blacklisted on
// the command line to make such a kernel.
func TestAgentOverTTYS1(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	for _, c := range []struct {
		name, channel string
		args          []string
	}{
		{"virtio", "virtio-serial", nil},
		{"no-virtio-console", "ttyS1", []string{"--append", "initcall_blacklist=virtio_console_init"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			parallelGuest(t)
			args := append([]string{"boot", "--kernel", "debian:7.3"}, c.args...)
			args = append(args, "--", "sh", "-c", "if [ -d /sys/class/virtio-ports ]; then echo ports; else echo none; fi; exit 3")
			r := run(t, t.TempDir(), args...)
			if r.code != 3 {
				t.Errorf("exit %d, want the command's 3", r.code)
			}
			want := map[string]string{"virtio-serial": "ports\n", "ttyS1": "none\n"}[c.channel]
			if r.stdout != want {
				t.Errorf("guest said %q, want %q", r.stdout, want)
			}
			if !strings.Contains(r.stderr, " on "+c.channel+" (guest ") {
				t.Errorf("the agent did not come up on %s", c.channel)
			}
		})
	}
}

// TestExitStatusAndStreams checks that the guest command's status and both
// output streams come back.
func TestExitStatusAndStreams(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	r := run(t, t.TempDir(), "boot", "--kernel", "debian:7.3", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
	if r.code != 7 {
		t.Errorf("exit %d, want 7", r.code)
	}
	if r.stdout != "out\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "err\n") {
		t.Errorf("stderr lacks the guest's stderr")
	}
}

// TestPanicReported crashes the guest and checks that klab reports a
// kernel panic with the console excerpt, within seconds. It measures that
// time, so it runs alone.
func TestPanicReported(t *testing.T) {
	testenv.E2E(t)
	runs := t.TempDir()
	r := run(t, runs, "boot", "--kernel", "debian:7.3", "--", "sh", "-c", "echo c > /proc/sysrq-trigger")
	if r.code != 126 {
		t.Fatalf("exit %d, want 126 (kernel failure)", r.code)
	}
	if !strings.Contains(r.stderr, "sysrq triggered crash") || !strings.Contains(r.stderr, "Call Trace") {
		t.Errorf("stderr lacks the panic excerpt")
	}
	m, err := results.ReadManifest(onlyRun(t, runs))
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome.Status != results.StatusKernelPanic || m.Outcome.Class != results.ClassKernel {
		t.Errorf("outcome %+v, want kernel-panic", m.Outcome)
	}
	// From the agent's hello to the verdict must take seconds, not a
	// timeout: less than klab's silence grace before it suspects a hang
	// (5 s times the accelerator's factor, 20 s under TCG), since the
	// console reports the panic while the guest still prints it.
	after := m.Times.End.Sub(m.Times.Start) - time.Duration(m.Times.BootToAgentMs)*time.Millisecond
	grace := time.Duration(5 * float64(time.Second) * m.TimeoutFactor)
	t.Logf("panic reported %.1fs after the agent was ready (run wall %.1fs; grace %v)", after.Seconds(), r.wall.Seconds(), grace)
	if after > grace {
		t.Errorf("panic took %v to report", after)
	}
}

// TestBootTimeoutShowsConsole boots a kernel whose init never starts the
// agent and checks that klab says what the console showed last. The boot
// timeout must leave the guest time to reach init, so it runs alone.
func TestBootTimeoutShowsConsole(t *testing.T) {
	testenv.E2E(t)
	runs := t.TempDir()
	// The boot timeout must leave a loaded machine time to reach init:
	// 8 s, 32 s under TCG (a loaded 2-core host took 20 s to the agent).
	r := run(t, runs, "boot", "--kernel", "debian:7.3", "--boot-timeout", "8", "--append", "rdinit=/bbin/sleep 1000", "--", "true")
	if r.code != 126 {
		t.Fatalf("exit %d, want 126", r.code)
	}
	if !strings.Contains(r.stderr, "did not reach the klab agent") || !strings.Contains(r.stderr, "Run /bbin/sleep as init process") {
		t.Errorf("stderr lacks the timeout and the last console lines")
	}
	m, err := results.ReadManifest(onlyRun(t, runs))
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome.Status != results.StatusBootTimeout {
		t.Errorf("outcome %+v, want boot-timeout", m.Outcome)
	}
}

// TestKillLeavesNoQEMU kills klab with SIGKILL mid-boot and checks that its
// QEMU dies too.
func TestKillLeavesNoQEMU(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	// Make sure kernel and initramfs are cached so the boot starts at once.
	if r := run(t, t.TempDir(), "initramfs", "--kernel", "debian:7.3"); r.code != 0 {
		t.Fatalf("klab initramfs --kernel debian:7.3 (fetching the kernel, building its initramfs): exit %d", r.code)
	}
	cmd := exec.Command(klab(t), "--runs-dir", t.TempDir(), "boot", "--kernel", "debian:7.3", "--", "sleep", "60")
	cmd.Dir = ".."
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var qemu int
	deadline := time.Now().Add(60 * time.Second)
	for qemu == 0 && time.Now().Before(deadline) {
		qemu = procfs.ChildNamed(cmd.Process.Pid, "qemu-system-x86")
		time.Sleep(50 * time.Millisecond)
	}
	if qemu == 0 {
		t.Fatal("qemu never started")
	}
	time.Sleep(500 * time.Millisecond) // mid-boot
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for procfs.Alive(qemu) {
		if time.Now().After(deadline) {
			syscall.Kill(qemu, syscall.SIGKILL)
			t.Fatalf("qemu %d survived kill -9 of klab", qemu)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLocalBzImage boots a kernel given as a file path.
func TestLocalBzImage(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	r := run(t, t.TempDir(), "kernels", "show", "--json", "debian:7.3")
	var k struct{ Image, Version string }
	if err := json.Unmarshal([]byte(r.stdout), &k); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "bzImage")
	b, err := os.ReadFile(k.Image)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(img, b, 0o644)
	r = run(t, t.TempDir(), "boot", "--kernel", img, "--", "cat", "/proc/version")
	if r.code != 0 || !strings.Contains(r.stdout, k.Version) {
		t.Fatalf("exit %d, stdout %q, want %s", r.code, r.stdout, k.Version)
	}
}

// TestBadInput checks the messages and exit status for input klab refuses.
func TestBadInput(t *testing.T) {
	runs := t.TempDir()
	notKernel := filepath.Join(t.TempDir(), "notakernel")
	os.WriteFile(notKernel, []byte("#!/bin/sh\necho hi\n"), 0o755)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown ref", []string{"boot", "--kernel", "fedora:40", "--", "true"}, `want debian:<series>`},
		{"not a bzImage", []string{"boot", "--kernel", notKernel, "--", "true"}, "not a bzImage"},
		{"missing file", []string{"boot", "--kernel", "./no/such/bzImage", "--", "true"}, "no/such/bzImage"},
		{"no kernel", []string{"boot", "--", "true"}, "--kernel is required"},
		{"bad sysctl", []string{"boot", "--kernel", "debian:7.3", "--sysctl", "novalue", "--", "true"}, "want KEY=VALUE"},
		{"bad accel", []string{"boot", "--kernel", "debian:7.3", "--accel", "hvf", "--", "true"}, "want auto, kvm or tcg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, runs, tc.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2 (bad input, refused before booting)", r.code)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.want)
			}
		})
	}
	if ents, _ := os.ReadDir(runs); len(ents) != 0 {
		t.Errorf("bad input left %d run directories behind", len(ents))
	}
}

// TestQEMUMissing runs klab with a PATH that has Go but no QEMU.
func TestQEMUMissing(t *testing.T) {
	testenv.E2E(t)
	testenv.RequiresCommand(t, "go")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	// Warm the caches with a normal PATH first.
	run(t, t.TempDir(), "kernels", "fetch", "debian:7.3")
	pathDir := t.TempDir()
	os.Symlink(goBin, filepath.Join(pathDir, "go"))
	cmd := exec.CommandContext(testContext(t, 10*time.Minute), klab(t), "--runs-dir", t.TempDir(), "boot", "--kernel", "debian:7.3", "--accel", "tcg", "--", "true")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "PATH="+pathDir)
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 125 || !strings.Contains(string(out), "qemu-system-x86_64 not found") || !strings.Contains(string(out), "apt-get install qemu-system-x86") {
		t.Fatalf("exit %d, output:\n%s", cmd.ProcessState.ExitCode(), out)
	}
}

// TestHangDiagnostics stops the agent in the middle of a step, so that the
// console and the agent both go silent, and checks that klab classes the
// run as a kernel hang and saves task dumps taken through QMP. The agent
// runs under u-root's init here (rdinit=/bbin/init): as the guest's init
// it could not be stopped by a signal at all.
func TestHangDiagnostics(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	r := run(t, runs, "boot", "--kernel", "debian:7.3", "--timeout", "1", "--append", "rdinit=/bbin/init", "--", "sh", "-c", "kill -19 $PPID; sleep 1000")
	if r.code != 126 {
		t.Fatalf("exit %d, want 126", r.code)
	}
	if !strings.Contains(r.stderr, "kernel hang") || !strings.Contains(r.stderr, "sysrq: Show Blocked State") {
		t.Errorf("stderr lacks the hang verdict and the blocked tasks")
	}
	dir := onlyRun(t, runs)
	m, err := results.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome.Status != results.StatusKernelHang {
		t.Errorf("outcome %+v, want kernel-hang", m.Outcome)
	}
	diag, err := os.ReadFile(filepath.Join(dir, "diagnostics.log"))
	if err != nil {
		t.Fatal(err)
	}
	// The stopped agent shows up in the task dump in state T.
	if !bytes.Contains(diag, []byte("sysrq: Show State")) || !bytes.Contains(diag, []byte("uinit")) {
		t.Errorf("diagnostics.log (%d bytes) lacks the task dump", len(diag))
	}
}
