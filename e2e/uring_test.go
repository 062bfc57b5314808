package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/posixtest"

	"klab/guest/proto"
	"klab/internal/paths"
	"klab/internal/testenv"
	"klab/lab"
	"klab/results"
)

// ringTests are the guest/fuse tests run in the guest over io_uring: the
// POSIX conformance pass, data integrity, namespace operations, large
// directories and the stress run (10 s with -short), each over every ring
// variant (zero-copy queues included), and the zero-copy reads.
const ringTests = "^(TestPOSIX|TestDataIntegrity|TestNamespaceOps|TestReaddirMany|TestStress|TestURingZeroCopyReads)$/^uring"

// TestFUSEURingInGuest boots debian:7.3 once and exercises the
// FUSE-over-io_uring transport in it:
//
//  1. a fuse step with transport uring: the agent turns the fuse module's
//     enable_uring on itself, requests travel over the ring;
//  2. guest/fuse's own tests, compiled on the host and carried in the
//     initramfs, over the ring: conformance, integrity, stress;
//  3. the interrupt check over the ring (replies to INTERRUPT fail with
//     ENOENT there: EAGAIN does not requeue, ENOSYS does not stick);
//  4. a server killed with requests in flight, then unmounted;
//  5. mmap reads through klab's server over /dev/fuse and over the ring,
//     with the workload in a child process of the agent.
//
// The request timeout over the ring, whose check measures how long the
// stuck call took, is TestFUSEChecksInGuest's: this test runs beside
// others.
func TestFUSEURingInGuest(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	testenv.RequiresCommand(t, "go")
	ctx := testContext(t, 20*time.Minute)

	// The test binary is static, so it needs nothing else in the guest.
	bin := filepath.Join(t.TempDir(), "klab-fuse.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./guest/fuse")
	build.Dir = ".."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./guest/fuse: %v\n%s", err, out)
	}

	check := "set -e; cd /tmp/ring-mnt; echo hello > f; test \"$(cat f)\" = hello; mkdir d; mv f d/g; cat d/g; rm -r d"
	exec := func(timeout time.Duration, argv ...string) proto.Step {
		return proto.Step{Kind: proto.StepExec, Argv: argv, TimeoutMs: timeout.Milliseconds()}
	}
	// guest/fuse's tests run with CI=true in the guest: a requirement
	// they lack there (io_uring, root, /dev/fuse) fails them instead of
	// skipping each case quietly.
	ringTestsStep := exec(10*time.Minute, "/usr/bin/klab-fuse.test", "-test.run", ringTests, "-test.short", "-test.v")
	ringTestsStep.Env = []string{"CI=true"}
	steps := []proto.Step{
		{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
			Transport: proto.FUSETransportURing, QueueDepth: 4,
			Mountpoint: "/tmp/ring-mnt", Backing: "/tmp/ring-back",
			Then: &proto.Step{Kind: proto.StepExec, Argv: []string{"sh", "-c", check}, TimeoutMs: 60000},
		}},
		ringTestsStep,
		exec(2*time.Minute, "klab-agent", "fuse", "check", "interrupt", "--transport", "uring", "--policy", "all", "--hold", "1s", "--json"),
		exec(2*time.Minute, "klab-agent", "fuse", "check", "kill", "--transport", "uring", "--json"),
	}
	// mmap reads through klab's server over each transport: the client
	// faults on the mapping while the agent serves the mount. (The
	// workload runs in a child process of the agent: in the agent's own
	// runtime, a garbage collection waiting for a faulting thread would
	// deadlock with the server.)
	for _, tr := range []string{proto.FUSETransportDev, proto.FUSETransportURing} {
		steps = append(steps, proto.Step{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
			Transport: tr, Mountpoint: "/tmp/mmap-" + tr, Backing: "/tmp/mmap-back-" + tr, Threads: 2,
			Then: &proto.Step{Kind: proto.StepWorkload, TimeoutMs: 60000, Workload: &proto.WorkloadStep{
				Pattern: proto.PatternMmapSeqRead, Dir: "/tmp/mmap-" + tr, Jobs: 2, BlockSize: 4096,
				FileSize: 32 << 20, RuntimeMs: 2000, TimeBased: true, SampleMs: 500,
			}},
		}})
	}
	for i := range steps {
		steps[i].ID = i + 1
	}
	var outs stepOutputs
	o := &lab.Options{CacheDir: paths.CacheDir(), RunsDir: t.TempDir(), Progress: &logWriter{t: t, prefix: "klab| "}}
	res, err := o.Boot(ctx, lab.BootRequest{
		Kernel:    "debian:7.3",
		MemMB:     1536,
		Console:   &logWriter{t: t, prefix: "console| "},
		Steps:     steps,
		HostTools: []string{bin},
		OnMessage: outs.message,
		Command:   []string{"go", "test", "-run", t.Name()},
	})
	if err != nil || res == nil {
		t.Fatalf("Boot: %v (result %v)", err, res != nil)
	}
	for _, s := range res.Steps {
		t.Logf("step %d: exit %d in %v %s", s.Done.Step, s.Done.ExitCode, time.Duration(s.Done.DurationNs).Round(time.Millisecond), s.Done.Error)
	}
	if len(res.Steps) != len(steps) {
		t.Fatalf("%d steps finished, want %d", len(res.Steps), len(steps))
	}

	// 1: the agent enabled io_uring and the step's requests used it.
	var stats struct {
		Transport    string `json:"transport"`
		URingEnabled bool   `json:"uring_enabled"`
		Ring         *struct {
			Queues   int    `json:"queues"`
			Requests uint64 `json:"requests"`
		} `json:"ring"`
	}
	for _, l := range outs.agentLogs() {
		if _, js, ok := strings.Cut(l, "/tmp/ring-mnt stopped: "); ok {
			if err := json.Unmarshal([]byte(js), &stats); err != nil {
				t.Errorf("fuse step stats %q: %v", js, err)
			}
		}
	}
	if d := res.Steps[0].Done; d.ExitCode != 0 || d.Error != "" {
		t.Errorf("fuse step over uring: %+v\n%s", d, outs.step(1))
	}
	if stats.Transport != "uring" || !stats.URingEnabled || stats.Ring == nil || stats.Ring.Requests == 0 {
		t.Errorf("fuse step: transport %q, enable_uring set by the agent %v, ring %+v; want uring, true and requests over the ring", stats.Transport, stats.URingEnabled, stats.Ring)
	} else {
		t.Logf("fuse step: %d requests over %d io_uring queues; the agent set enable_uring", stats.Ring.Requests, stats.Ring.Queues)
	}

	// 2: guest/fuse's tests over the ring.
	tests := outs.step(2)
	if d := res.Steps[1].Done; d.ExitCode != 0 {
		t.Errorf("guest/fuse tests over io_uring in the guest: exit %d %s\n%s", d.ExitCode, d.Error, tail(tests, 60))
	}
	passed := strings.Count(tests, "--- PASS: ")
	for _, want := range []string{"--- PASS: TestPOSIX/uring ", "--- PASS: TestDataIntegrity/uring ", "--- PASS: TestStress/uring ",
		// debian:7.3 has zero-copy queues (FUSE 7.46).
		"--- PASS: TestPOSIX/uring-zerocopy ", "--- PASS: TestDataIntegrity/uring-zerocopy ", "--- PASS: TestURingZeroCopyReads "} {
		if !strings.Contains(tests, want) {
			t.Errorf("guest/fuse tests: no %q in the output:\n%s", strings.TrimSpace(want), tail(tests, 60))
		}
	}
	// Cases skip one by one (the POSIX pass has a subtest per case), so
	// every skipped one is looked at: only those on the list may skip,
	// and the POSIX cases over each ring variant must have run.
	skipped := skippedTests(tests)
	for name, why := range skipped {
		if expected := allowedRingSkips[lastElem(name)]; expected == "" || !strings.HasPrefix(name, "TestPOSIX/") {
			t.Errorf("guest/fuse test %s skipped over io_uring in the guest: %s", name, why)
		} else {
			t.Logf("%s skipped (%s): %s", name, expected, why)
		}
	}
	for _, v := range []string{"uring", "uring-depth1-thread1", "uring-writeback", "uring-kernelpassthrough"} {
		ran := strings.Count(tests, "--- PASS: TestPOSIX/"+v+"/")
		if want := len(posixtest.All) - len(allowedRingSkips); ran < want {
			t.Errorf("TestPOSIX/%s: %d cases passed in the guest, want at least %d of %d", v, ran, want, len(posixtest.All))
		}
	}
	t.Logf("guest/fuse tests over io_uring in the guest: %d passed, %d skipped in %v", passed, len(skipped), time.Duration(res.Steps[1].Done.DurationNs).Round(time.Second))

	// 3-4: the checks.
	for i, n := range map[int]int{3: 4, 4: 1} {
		var rs []checkResult
		if err := json.Unmarshal([]byte(outs.step(i)), &rs); err != nil {
			t.Errorf("step %d: output is not JSON (%v):\n%s", i, err, outs.step(i))
			continue
		}
		if len(rs) != n {
			t.Errorf("step %d: %d results, want %d", i, len(rs), n)
		}
		for _, c := range rs {
			if !strings.HasSuffix(c.Name, "@uring") {
				t.Errorf("%s: not a check over io_uring", c.Name)
			}
			if strings.HasPrefix(c.Name, "kill") {
				checkKillRecovered(t, c)
				continue
			}
			t.Logf("%s pass=%v notes=%v", c.Name, c.Pass, c.Notes)
			if !c.Pass {
				t.Errorf("%s: %v\n%s", c.Name, c.Problems, c.Details)
			}
		}
	}

	// 5: mmap reads.
	for _, s := range res.Steps[4:] {
		d := s.Done
		if d.ExitCode != 0 || d.Error != "" || d.Metrics == nil || d.Metrics.Ops == 0 {
			t.Errorf("mmap reads over %s: %+v", s.Step.FUSE.Transport, d)
			continue
		}
		t.Logf("mmap reads over %s: %.0f MB/s", s.Step.FUSE.Transport, d.Metrics.BytesPerSec/1e6)
	}
}

// allowedRingSkips are the guest/fuse POSIX cases that skip over
// io_uring in the guest, as they do on the host, with why.
var allowedRingSkips = map[string]string{
	"FcntlFlockLocksFile": "klab's passthrough leaves POSIX locks to the kernel, like passthrough_ll (guest/fuse posixSkips)",
	"XAttr":               "the ring variants serve no xattrs (guest/fuse Config.Xattr), so go-fuse's posixtest sees ENOTSUP and skips",
	"XAttrLarge":          "the ring variants serve no xattrs (guest/fuse Config.Xattr), so go-fuse's posixtest sees ENOTSUP and skips",
	"Tmpfile":             "klab's passthrough does not create O_TMPFILE files, so go-fuse's posixtest sees EOPNOTSUPP and skips",
}

// skippedTests returns the tests that `go test -v` output reports as
// skipped, each with the first line it logged (the reason, for a test
// that only skips).
func skippedTests(out string) map[string]string {
	lines := strings.Split(out, "\n")
	logged := map[string]string{}
	for i, l := range lines {
		name, ok := strings.CutPrefix(l, "=== RUN   ")
		if !ok || i+1 >= len(lines) {
			continue
		}
		if next := strings.TrimSpace(lines[i+1]); !strings.HasPrefix(next, "===") && !strings.HasPrefix(next, "---") {
			logged[name] = next
		}
	}
	skipped := map[string]string{}
	for _, l := range lines {
		_, rest, ok := strings.Cut(l, "--- SKIP: ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, " ")
		skipped[name] = logged[name]
	}
	return skipped
}

func lastElem(name string) string { return name[strings.LastIndex(name, "/")+1:] }

// TestFUSEURingUnsupported asks for FUSE-over-io_uring on debian:6.1,
// which has none: the answer is a clear "unsupported by this kernel"
// error and a non-zero exit, quickly, never a hang.
func TestFUSEURingUnsupported(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	// A step timeout of 30 s (2 min under TCG's factor of 4) makes a hang
	// end as a timeout the test can tell apart, not as the test's own.
	r := run(t, runs, "boot", "--kernel", "debian:6.1", "--timeout", "30", "--",
		"klab-agent", "fuse", "check", "interrupt", "--transport", "uring", "--policy", "cancel")
	t.Logf("exit %d after %v: %s", r.code, r.wall.Round(time.Millisecond), lastLine(r.stderr))
	if r.code == 0 || !strings.Contains(r.stderr, "unsupported by this kernel: ") {
		t.Fatalf("exit %d, want non-zero and \"unsupported by this kernel\" in stderr:\n%s", r.code, r.stderr)
	}
	// Never a hang: the command failed by itself, neither timed out nor
	// left the guest to the hang watchdog.
	if r.code == lab.ExitTimeout || r.code == lab.ExitKernel || r.code == lab.ExitInfra {
		t.Errorf("exit %d, want the check's own failure (not %d, %d or %d)", r.code, lab.ExitTimeout, lab.ExitKernel, lab.ExitInfra)
	}
	dir := onlyRun(t, runs)
	m, err := results.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Outcome.Status != results.StatusOK || m.Outcome.ExitCode != r.code {
		t.Errorf("outcome %+v, want ok (the guest ran the command) with the command's exit %d", m.Outcome, r.code)
	}
	dones := doneEvents(t, dir)
	if len(dones) == 0 {
		t.Fatal("events.jsonl has no done event")
	}
	d := dones[len(dones)-1]
	// Quickly: the check gives up at its first look at the fuse module
	// (6.1 has no enable_uring parameter), before it mounts anything, so
	// the step is the start of one Go program in the guest. It must end
	// within klab's own silence grace before it suspects a hang: 5 s
	// times the accelerator's factor (20 s under TCG), in guest time.
	grace := time.Duration(5 * float64(time.Second) * m.TimeoutFactor)
	el := time.Duration(d.DurationNs)
	t.Logf("the check's step took %v in the guest under %s (bound %v)", el.Round(time.Millisecond), m.Accel, grace)
	if d.TimedOut || el <= 0 || el >= grace {
		t.Errorf("the check's step: %+v (%v), want it to fail by itself within %v", d, el, grace)
	}
}

// doneEvents returns the Done of every step in the run's events.jsonl, in
// order.
func doneEvents(t *testing.T, runDir string) []proto.Done {
	t.Helper()
	f, err := os.Open(filepath.Join(runDir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var dones []proto.Done
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line results.Event
		var e lab.Event
		if json.Unmarshal(sc.Bytes(), &line) == nil && json.Unmarshal(line.Event, &e) == nil && e.Kind == "done" && e.Done != nil {
			dones = append(dones, *e.Done)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return dones
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func lastLine(s string) string { return tail(s, 1) }
