package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/images"
	"klab/internal/paths"
	"klab/internal/testenv"
	"klab/lab"
)

// checkResult is the part of `klab-agent fuse check --json` the tests
// read.
type checkResult struct {
	Name     string          `json:"name"`
	Pass     bool            `json:"pass"`
	Problems []string        `json:"problems"`
	Notes    []string        `json:"notes"`
	Details  json.RawMessage `json:"details"`
}

// checkRun is one `klab-agent fuse check ... --json` step in a guest:
// how the step ended, what it printed, and the results decoded from it.
type checkRun struct {
	done    proto.Done
	out     string
	results []checkResult
}

// guestChecks boots debian:7.3 once and runs `klab-agent fuse check ARGS
// --json` for each ARGS in it, one exec step after the other, each bounded
// by its timeout (scaled by the accelerator's factor, as every step is).
func guestChecks(t *testing.T, checks []guestCheck) []checkRun {
	t.Helper()
	ctx := testContext(t, 15*time.Minute)
	var steps []proto.Step
	for i, c := range checks {
		argv := append(append([]string{"klab-agent", "fuse", "check"}, c.args...), "--json")
		steps = append(steps, proto.Step{ID: i + 1, Kind: proto.StepExec, Argv: argv, TimeoutMs: c.timeout.Milliseconds()})
	}
	var outs stepOutputs
	o := &lab.Options{CacheDir: paths.CacheDir(), RunsDir: t.TempDir(), Progress: &logWriter{t: t, prefix: "klab| "}}
	res, err := o.Boot(ctx, lab.BootRequest{
		Kernel:    "debian:7.3",
		Console:   &logWriter{t: t, prefix: "console| "},
		Steps:     steps,
		OnMessage: outs.message,
		Command:   []string{"go", "test", "-run", t.Name()},
	})
	for _, l := range outs.agentLogs() {
		t.Logf("agent| %s", l)
	}
	if res != nil && res.Manifest != nil {
		t.Logf("qemu: %s", strings.Join(res.Manifest.QEMU.Argv, " "))
	}
	// A failing check is its step's exit status: the next steps still
	// run. An error (a kernel splat, a dead guest) still leaves what
	// finished to look at.
	if res == nil {
		t.Fatalf("Boot: %v", err)
	}
	if err != nil {
		t.Errorf("Boot: %v", err)
	}
	runs := make([]checkRun, len(checks))
	for _, s := range res.Steps {
		i := s.Done.Step - 1
		if i < 0 || i >= len(runs) {
			t.Fatalf("a done event for step %d of %d", s.Done.Step, len(runs))
		}
		runs[i].done, runs[i].out = s.Done, outs.step(s.Done.Step)
		t.Logf("step %d (%s): exit %d in %v %s", s.Done.Step, strings.Join(checks[i].args, " "), s.Done.ExitCode,
			time.Duration(s.Done.DurationNs).Round(time.Millisecond), s.Done.Error)
		if err := json.Unmarshal([]byte(runs[i].out), &runs[i].results); err != nil {
			t.Errorf("step %d (%s): exit %d; output is not JSON (%v):\n%s", s.Done.Step, strings.Join(checks[i].args, " "), s.Done.ExitCode, err, runs[i].out)
		}
	}
	if len(res.Steps) != len(checks) {
		t.Fatalf("%d steps finished, want %d", len(res.Steps), len(checks))
	}
	return runs
}

// stepOutputs collects what the steps of a lab.Boot print, by step ID,
// and the agent's log lines; its message method is the request's
// OnMessage.
type stepOutputs struct {
	mu   sync.Mutex
	out  map[int]*strings.Builder // guarded by mu
	logs []string                 // guarded by mu
}

func (s *stepOutputs) message(m *proto.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Kind {
	case proto.KindOutput:
		if s.out == nil {
			s.out = map[int]*strings.Builder{}
		}
		b := s.out[m.Output.Step]
		if b == nil {
			b = &strings.Builder{}
			s.out[m.Output.Step] = b
		}
		b.Write(m.Output.Data)
	case proto.KindLog:
		s.logs = append(s.logs, m.Log.Msg)
	}
}

// step returns what step id printed so far.
func (s *stepOutputs) step(id int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.out[id]; b != nil {
		return b.String()
	}
	return ""
}

// agentLogs returns the agent's log lines so far.
func (s *stepOutputs) agentLogs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.logs)
}

// guestCheck is one check for guestChecks: klab-agent fuse check's
// arguments, and the step's timeout.
type guestCheck struct {
	args    []string
	timeout time.Duration
}

// passed fails t for each result of r that did not pass, and when the
// step failed although every check passed.
func (r checkRun) passed(t *testing.T) {
	t.Helper()
	for _, c := range r.results {
		t.Logf("%s pass=%v notes=%v", c.Name, c.Pass, c.Notes)
		if !c.Pass {
			t.Errorf("%s: %v\n%s", c.Name, c.Problems, c.Details)
		}
	}
	if (r.done.ExitCode != 0 || r.done.Error != "") && !t.Failed() {
		t.Errorf("exit %d (%s) although every check passed", r.done.ExitCode, r.done.Error)
	}
}

// TestFUSEChecksInGuest boots debian:7.3 once and runs klab-agent's FUSE
// checks in it:
//   - timeout: request timeouts set through the INIT reply and through
//     both sysctls: the stuck call fails with ECONNABORTED within (15 s,
//     30 s + slack], later calls get ENOTCONN and the server ENODEV;
//   - timeout-uring: the same over FUSE-over-io_uring, set through INIT;
//   - interrupt: the kernel's answers to interrupt replies: EINTR
//     delivered, EAGAIN requeues, ENOSYS stops further interrupts, ignore
//     lets the request finish;
//   - kill: a server killed with requests in flight exits, the clients
//     then return, the dead mount can be unmounted, and a new mount works.
//
// The timeout checks measure how long the stuck call took, so the test
// runs alone.
func TestFUSEChecksInGuest(t *testing.T) {
	testenv.E2E(t)
	runs := guestChecks(t, []guestCheck{
		{[]string{"timeout", "--timeout", "1"}, 3 * time.Minute},
		{[]string{"timeout", "--transport", "uring", "--via", "init"}, 3 * time.Minute},
		{[]string{"interrupt", "--policy", "all", "--hold", "1s"}, 2 * time.Minute},
		{[]string{"kill"}, 2 * time.Minute},
	})
	t.Run("timeout", func(t *testing.T) {
		rs := runs[0].results
		runs[0].passed(t)
		if len(rs) != 3 {
			t.Errorf("%d results, want init, default and max", len(rs))
		}
		checkStuckElapsed(t, rs)
	})
	t.Run("timeout-uring", func(t *testing.T) {
		rs := runs[1].results
		runs[1].passed(t)
		if len(rs) != 1 || !strings.HasSuffix(rs[0].Name, "@uring") {
			t.Errorf("%d results (%v), want one timeout check over io_uring", len(rs), rs)
		}
		checkStuckElapsed(t, rs)
	})
	t.Run("interrupt", func(t *testing.T) {
		runs[2].passed(t)
		if rs := runs[2].results; len(rs) != 4 {
			t.Errorf("%d results, want cancel, eagain:2, ignore and enosys", len(rs))
		}
	})
	t.Run("kill", func(t *testing.T) {
		rs := runs[3].results
		if len(rs) != 1 {
			t.Fatalf("exit %d; %d results, want one:\n%s", runs[3].done.ExitCode, len(rs), runs[3].out)
		}
		checkKillRecovered(t, rs[0])
	})
}

// checkStuckElapsed checks the timeout checks' stuck calls: ECONNABORTED,
// then ENOTCONN for later calls and ENODEV for the server, after 15 to
// 30 s.
func checkStuckElapsed(t *testing.T, rs []checkResult) {
	t.Helper()
	for _, c := range rs {
		var d struct {
			StuckErr     string `json:"stuck_err"`
			StuckElapsed int64  `json:"stuck_elapsed_ns"`
			LaterErr     string `json:"later_err"`
			ServerErr    string `json:"server_err"`
		}
		if err := json.Unmarshal(c.Details, &d); err != nil {
			t.Fatal(err)
		}
		// The kernel looks for expired requests every 15 s and uses at
		// least 15 s as the timeout: the stuck call ends 15 to 30 s after
		// it started, in guest time (the 100 ms below covers the two
		// clocks); 5 s more covers a TCG guest late to run the check.
		el := time.Duration(d.StuckElapsed)
		if d.StuckErr != "ECONNABORTED" || d.LaterErr != "ENOTCONN" || d.ServerErr != "ENODEV" || el < 15*time.Second-100*time.Millisecond || el > 35*time.Second {
			t.Errorf("%s: %+v (elapsed %v)", c.Name, d, el)
		}
	}
}

// checkKillRecovered demands what the kill check is for: the killed
// server exited, every client returned within the check's bound after
// that, without klab aborting the connection, the dead mount answers
// ENOTCONN, unmounts, and a new mount works. A failure carries the check's
// problems and measurements.
func checkKillRecovered(t *testing.T, c checkResult) {
	t.Helper()
	t.Logf("%s pass=%v notes=%v problems=%v", c.Name, c.Pass, c.Notes, c.Problems)
	var d struct {
		ClientErrs   map[string]int `json:"client_errs"`
		ExitedNs     int64          `json:"exited_ns"`
		Aborted      bool           `json:"aborted"`
		ServerStacks string         `json:"server_stacks"`
		ServerOutput string         `json:"server_output"`
		AfterErr     string         `json:"after_err"`
		Unmount      string         `json:"unmount_err"`
		Remount      string         `json:"remount"`
	}
	if err := json.Unmarshal(c.Details, &d); err != nil {
		t.Fatalf("details: %v\n%s", err, c.Details)
	}
	returned := 0
	for _, n := range d.ClientErrs {
		returned += n
	}
	if returned != 6 || d.AfterErr != "ENOTCONN" || d.Unmount != "ok" || d.Remount != "ok" {
		t.Errorf("%s: the guest did not recover from the killed server: %s", c.Name, c.Details)
	}
	if !c.Pass || d.Aborted || d.ExitedNs < 0 {
		t.Errorf("%s: %q (server exited after %v, connection aborted by klab %v)\nthe server's threads when it had not exited:\n%s\nthe server's output:\n%s\ndetails: %s",
			c.Name, c.Problems, time.Duration(d.ExitedNs), d.Aborted, d.ServerStacks, d.ServerOutput, c.Details)
	}
}

// TestFUSEStepsInGuest runs fuse steps through lab.Boot: klab's
// passthrough with a command against it, libfuse's passthrough_ll (built
// on the host and carried in the initramfs), and a stuck server whose
// command blocks for good, which the agent must cut short by aborting the
// connection.
func TestFUSEStepsInGuest(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	testenv.RequiresCommand(t, "gcc")
	ctx := testContext(t, 15*time.Minute)
	cache := paths.CacheDir()
	var tools []string
	if bin, err := images.BuildPassthroughLL(ctx, cache, nil); err != nil {
		// CI must have it; elsewhere the other steps still run.
		if testenv.InCI() {
			testenv.Missingf(t, "cannot build libfuse's passthrough_ll: %v", err)
		}
		t.Logf("no libfuse passthrough_ll step: %v", err)
	} else {
		tools = append(tools, bin)
	}
	check := "set -e; cd %[1]s; echo hello > f; test \"$(cat f)\" = hello; mkdir d; mv f d/g; ln -s d/g s; cat s; rm s d/g; rm -r d; grep ' %[1]s ' /proc/mounts"
	steps := []proto.Step{
		{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
			Mountpoint: "/tmp/klab-mnt", Backing: "/tmp/klab-back", Threads: 2, MountOptions: []string{"default_permissions"},
			Then: &proto.Step{Kind: proto.StepExec, Argv: []string{"sh", "-c", fmt.Sprintf(check, "/tmp/klab-mnt")}, TimeoutMs: 60000},
		}},
	}
	if len(tools) > 0 {
		steps = append(steps, proto.Step{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
			Server: proto.FUSELibfusePassthroughLL, Mountpoint: "/tmp/lf-mnt", Backing: "/tmp/lf-back", Threads: 4,
			Then: &proto.Step{Kind: proto.StepExec, Argv: []string{"sh", "-c", fmt.Sprintf(check, "/tmp/lf-mnt")}, TimeoutMs: 60000},
		}})
	}
	steps = append(steps, proto.Step{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
		Server: proto.FUSEStuck, Mountpoint: "/tmp/stuck-mnt", Backing: "/tmp/stuck-back", Stuck: []string{"lookup:stuck=never"},
		Then: &proto.Step{Kind: proto.StepExec, Argv: []string{"cat", "/tmp/stuck-mnt/stuck"}, TimeoutMs: 1000},
	}})
	var mu sync.Mutex
	var out strings.Builder
	o := &lab.Options{CacheDir: cache, RunsDir: t.TempDir(), Progress: &logWriter{t: t, prefix: "klab| "}}
	res, err := o.Boot(ctx, lab.BootRequest{
		Kernel:    "debian:7.3",
		Console:   &logWriter{t: t, prefix: "console| "},
		Steps:     steps,
		HostTools: tools,
		OnMessage: func(m *proto.Message) {
			mu.Lock()
			defer mu.Unlock()
			switch m.Kind {
			case proto.KindOutput:
				out.Write(m.Output.Data)
			case proto.KindLog:
				t.Logf("agent| %s", m.Log.Msg)
			}
		},
		Command: []string{"go", "test", "-run", t.Name()},
	})
	if res != nil && res.Manifest != nil {
		t.Logf("qemu: %s", strings.Join(res.Manifest.QEMU.Argv, " "))
	}
	// The stuck step fails, which ends the run with a StepError: the
	// agent came back from it (a hung agent would be a kernel hang).
	if res != nil {
		for i, s := range res.Steps {
			t.Logf("step %d: %+v", i+1, s.Done)
		}
	}
	var se *lab.StepError
	if res == nil || !errors.As(err, &se) {
		t.Fatalf("Boot: %v (result %v), want the stuck step's StepError", err, res != nil)
	}
	if len(res.Steps) != len(steps) {
		t.Fatalf("%d steps finished, want %d", len(res.Steps), len(steps))
	}
	for i, s := range res.Steps[:len(steps)-1] {
		if s.Done.ExitCode != 0 || s.Done.Error != "" {
			t.Errorf("step %d (%s server): %+v", i+1, s.Step.FUSE.Server, s.Done)
		}
	}
	last := res.Steps[len(steps)-1].Done
	if last.ExitCode == 0 || !strings.Contains(last.Error, "aborted FUSE connection") {
		t.Errorf("stuck step: %+v, want a failure that aborted the connection", last)
	}
	// The agent cut the stuck command short by aborting the connection
	// once its 1 s timeout and the agent's grace had passed (guest/agent
	// fuseGrace), not in some other way.
	if !strings.Contains(last.Error, "still running after") {
		t.Errorf("stuck step: %+v, want it ended by the agent's watch over the command's timeout", last)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Count(out.String(), "hello\n"); got != len(steps)-1 {
		t.Errorf("%d successful checks in the output, want %d:\n%s", got, len(steps)-1, out.String())
	}
	if len(tools) > 0 && !strings.Contains(out.String(), "fuse.passthrough_ll") {
		t.Errorf("no passthrough_ll mount seen:\n%s", out.String())
	}
}

// TestFUSEPerfInGuest compares klab's passthrough with libfuse's
// passthrough_ll inside one debian:7.3 guest (KLAB_FUSE_PERF=1): the
// seed's job a) (4 jobs of 1 KiB sequential writes) and creates with 1 and
// 4 jobs, each server with 1 and 4 threads, rounds alternating, over tmpfs.
// The workload is klab's Go engine, which runs in the agent, like klab's
// server; passthrough_ll is a separate process. Under TCG the absolute
// numbers mean little; the ratios are what to read.
func TestFUSEPerfInGuest(t *testing.T) {
	testenv.OptIn(t, "KLAB_FUSE_PERF", "performance comparison (takes minutes)")
	testenv.E2E(t)
	ctx := testContext(t, 40*time.Minute)
	cache := paths.CacheDir()
	bin, err := images.BuildPassthroughLL(ctx, cache, nil)
	if err != nil {
		testenv.Missingf(t, "cannot build libfuse's passthrough_ll: %v", err)
	}
	type variant struct {
		name    string
		server  string
		threads int
	}
	variants := []variant{
		{"klab-t1", proto.FUSEPassthrough, 1}, {"libfuse-t1", proto.FUSELibfusePassthroughLL, 1},
		{"klab-t4", proto.FUSEPassthrough, 4}, {"libfuse-t4", proto.FUSELibfusePassthroughLL, 4},
	}
	type job struct {
		name string
		wl   proto.WorkloadStep
	}
	jobs := []job{
		{"seqwrite 4x1KiB", proto.WorkloadStep{Pattern: proto.PatternSeqWrite, Jobs: 4, BlockSize: 1024, FileSize: 32 << 20, RuntimeMs: 4000, TimeBased: true}},
		{"creates 1 job", proto.WorkloadStep{Pattern: proto.PatternCreate, Jobs: 1, Files: 3000, RuntimeMs: 4000}},
		{"creates 4 jobs", proto.WorkloadStep{Pattern: proto.PatternCreate, Jobs: 4, Files: 1000, RuntimeMs: 4000}},
	}
	const rounds = 3
	type key struct{ job, variant string }
	var steps []proto.Step
	var keys []key
	n := 0
	for r := 0; r < rounds; r++ {
		for _, j := range jobs {
			for _, v := range variants {
				n++
				wl := j.wl
				wl.Dir = "/tmp/perf/mnt"
				steps = append(steps, proto.Step{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
					Server: v.server, Mountpoint: "/tmp/perf/mnt", Backing: fmt.Sprintf("/tmp/perf/b%d", n), Threads: v.threads,
					Then: &proto.Step{Kind: proto.StepWorkload, Workload: &wl, TimeoutMs: 120000},
				}}, proto.Step{Kind: proto.StepExec, Argv: []string{"rm", "-r", fmt.Sprintf("/tmp/perf/b%d", n)}})
				keys = append(keys, key{j.name, v.name})
			}
		}
	}
	o := &lab.Options{CacheDir: cache, RunsDir: t.TempDir(), Progress: &logWriter{t: t, prefix: "klab| "}}
	res, err := o.Boot(ctx, lab.BootRequest{Kernel: "debian:7.3", Steps: steps, HostTools: []string{bin}, MemMB: 2048,
		Command: []string{"go", "test", "-run", t.Name()}})
	if err != nil || res == nil {
		t.Fatalf("Boot: %v (result %v)", err, res != nil)
	}
	if len(res.Steps) != len(steps) {
		t.Fatalf("%d steps finished, want %d", len(res.Steps), len(steps))
	}
	vals := map[key][]float64{}
	for i, k := range keys {
		m := res.Steps[2*i].Done.Metrics
		if m == nil {
			t.Fatalf("step %d (%v): no metrics: %+v", 2*i+1, k, res.Steps[2*i].Done)
		}
		v := m.OpsPerSec
		if k.job == "seqwrite 4x1KiB" {
			v = m.BytesPerSec / (1 << 20)
		}
		vals[k] = append(vals[k], v)
	}
	med := func(xs []float64) float64 {
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-16s %10s %10s %10s %10s %6s %6s", "job", "klab-t1", "libfuse-t1", "klab-t4", "libfuse-t4", "t1", "t4")
	for _, j := range jobs {
		m := func(v string) float64 { return med(vals[key{j.name, v}]) }
		fmt.Fprintf(&b, "\n%-16s %10.1f %10.1f %10.1f %10.1f %6.2f %6.2f", j.name, m("klab-t1"), m("libfuse-t1"), m("klab-t4"), m("libfuse-t4"),
			m("klab-t1")/m("libfuse-t1"), m("klab-t4")/m("libfuse-t4"))
	}
	t.Logf("in the guest under %s, medians of %d rounds (MiB/s, creates/s; ratios klab/libfuse):%s", res.Manifest.Accel, rounds, b.String())
}
