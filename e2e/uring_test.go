package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/internal/paths"
	"klab/internal/testenv"
	"klab/lab"
)

// ringTests are the guest/fuse tests run in the guest over io_uring: the
// POSIX conformance pass, data integrity, namespace operations, large
// directories and the stress run (10 s with -short).
const ringTests = "^(TestPOSIX|TestDataIntegrity|TestNamespaceOps|TestReaddirMany|TestStress)$/^uring"

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
//  5. the request timeout over the ring, set through INIT;
//  6. mmap reads through klab's server over /dev/fuse and over the ring,
//     with the workload in a child process of the agent.
func TestFUSEURingInGuest(t *testing.T) {
	testenv.E2E(t)
	testenv.RequiresCommand(t, "go")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

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
	steps := []proto.Step{
		{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
			Transport: proto.FUSETransportURing, QueueDepth: 4,
			Mountpoint: "/tmp/ring-mnt", Backing: "/tmp/ring-back",
			Then: &proto.Step{Kind: proto.StepExec, Argv: []string{"sh", "-c", check}, TimeoutMs: 60000},
		}},
		exec(10*time.Minute, "/usr/bin/klab-fuse.test", "-test.run", ringTests, "-test.short", "-test.v"),
		exec(2*time.Minute, "klab-agent", "fuse", "check", "interrupt", "--transport", "uring", "--policy", "all", "--hold", "1s", "--json"),
		exec(2*time.Minute, "klab-agent", "fuse", "check", "kill", "--transport", "uring", "--json"),
		exec(3*time.Minute, "klab-agent", "fuse", "check", "timeout", "--transport", "uring", "--via", "init", "--json"),
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
	var mu sync.Mutex
	out := map[int]*strings.Builder{}
	var logs []string
	o := &lab.Options{CacheDir: paths.CacheDir(), RunsDir: t.TempDir(), Progress: &logWriter{t: t, prefix: "klab| "}}
	res, err := o.Boot(ctx, lab.BootRequest{
		Kernel:    "debian:7.3",
		MemMB:     1536,
		Console:   &logWriter{t: t, prefix: "console| "},
		Steps:     steps,
		HostTools: []string{bin},
		OnMessage: func(m *proto.Message) {
			mu.Lock()
			defer mu.Unlock()
			switch m.Kind {
			case proto.KindOutput:
				if out[m.Output.Step] == nil {
					out[m.Output.Step] = &strings.Builder{}
				}
				out[m.Output.Step].Write(m.Output.Data)
			case proto.KindLog:
				logs = append(logs, m.Log.Msg)
			}
		},
		Command: []string{"go", "test", "-run", t.Name()},
	})
	if err != nil {
		t.Fatalf("Boot: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
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
	for _, l := range logs {
		if _, js, ok := strings.Cut(l, "/tmp/ring-mnt stopped: "); ok {
			if err := json.Unmarshal([]byte(js), &stats); err != nil {
				t.Errorf("fuse step stats %q: %v", js, err)
			}
		}
	}
	if d := res.Steps[0].Done; d.ExitCode != 0 || d.Error != "" {
		t.Errorf("fuse step over uring: %+v\n%s", d, out[1])
	}
	if stats.Transport != "uring" || !stats.URingEnabled || stats.Ring == nil || stats.Ring.Requests == 0 {
		t.Errorf("fuse step: transport %q, enable_uring set by the agent %v, ring %+v; want uring, true and requests over the ring", stats.Transport, stats.URingEnabled, stats.Ring)
	} else {
		t.Logf("fuse step: %d requests over %d io_uring queues; the agent set enable_uring", stats.Ring.Requests, stats.Ring.Queues)
	}

	// 2: guest/fuse's tests over the ring.
	tests := out[2].String()
	if d := res.Steps[1].Done; d.ExitCode != 0 {
		t.Errorf("guest/fuse tests over io_uring in the guest: exit %d %s\n%s", d.ExitCode, d.Error, tail(tests, 60))
	}
	passed := strings.Count(tests, "--- PASS: ")
	for _, want := range []string{"--- PASS: TestPOSIX/uring ", "--- PASS: TestDataIntegrity/uring ", "--- PASS: TestStress/uring "} {
		if !strings.Contains(tests, want) {
			t.Errorf("guest/fuse tests: no %q in the output:\n%s", strings.TrimSpace(want), tail(tests, 60))
		}
	}
	if strings.Contains(tests, "--- SKIP: TestPOSIX/uring ") {
		t.Errorf("the POSIX pass over io_uring was skipped in the guest:\n%s", tail(tests, 40))
	}
	t.Logf("guest/fuse tests over io_uring in the guest: %d passed in %v", passed, time.Duration(res.Steps[1].Done.DurationNs).Round(time.Second))

	// 3-5: the checks.
	for _, s := range res.Steps[5:] {
		d := s.Done
		if d.ExitCode != 0 || d.Error != "" || d.Metrics == nil || d.Metrics.Ops == 0 {
			t.Errorf("mmap reads over %s: %+v", s.Step.FUSE.Transport, d)
			continue
		}
		t.Logf("mmap reads over %s: %.0f MB/s", s.Step.FUSE.Transport, d.Metrics.BytesPerSec/1e6)
	}

	for i, n := range map[int]int{3: 4, 4: 1, 5: 1} {
		var rs []checkResult
		if err := json.Unmarshal([]byte(out[i].String()), &rs); err != nil {
			t.Errorf("step %d: output is not JSON (%v):\n%s", i, err, out[i])
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
}

// TestFUSEURingUnsupported asks for FUSE-over-io_uring on debian:6.1,
// which has none: the answer is a clear "unsupported by this kernel"
// error and a non-zero exit, quickly, never a hang.
func TestFUSEURingUnsupported(t *testing.T) {
	testenv.E2E(t)
	start := time.Now()
	r := run(t, t.TempDir(), "boot", "--kernel", "debian:6.1", "--",
		"klab-agent", "fuse", "check", "interrupt", "--transport", "uring", "--policy", "cancel")
	if r.code == 0 || !strings.Contains(r.stderr, "unsupported by this kernel: ") {
		t.Fatalf("exit %d, want non-zero and \"unsupported by this kernel\" in stderr:\n%s", r.code, r.stderr)
	}
	t.Logf("exit %d after %v: %s", r.code, time.Since(start).Round(time.Millisecond), lastLine(r.stderr))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func lastLine(s string) string { return tail(s, 1) }
