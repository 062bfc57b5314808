package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"klab/guest/proto"
	"klab/internal/specfile"
	"klab/lab"
	"klab/results"
	"klab/results/stats"
)

// runSpec compares the transports on one kernel: two workloads, each
// with an untimed prepare step before it (so that a workload's Run call
// has two steps whose results can come back in another order), a cell
// sysctl and one check.
const runSpec = `
name: runtest
description: the runner against a fake guest
rounds: 4
compare: transport
params:
  transport: [dev, uring]
sysctls:
  vm.dirty_ratio: "20"
server:
  kind: passthrough
  transport: ${transport}
  backing: /tmp/backing
  mountpoint: /mnt/fuse
workloads:
  - name: create
    pattern: create
    dir: /mnt/fuse/c
    jobs: 1
    files: 10
    prepare: rm -rf /tmp/backing/c
  - name: randread
    pattern: randread
    dir: /mnt/fuse/r
    jobs: 1
    bs: 4k
    size: 1M
    prepare: rm -rf /tmp/backing/r
checks:
  - name: ok
    run: "true"
`

// value is what the fake measures: B (uring) clearly above A (dev), the
// round in the units, randread 10 above create.
func value(workload, side string, round int) float64 {
	v := 100.0
	if side == SideB {
		v = 200
	}
	if workload == "randread" {
		v += 10
	}
	return v + float64(round)
}

// fakeOpener boots fake guests and records everything they are given.
type fakeOpener struct {
	t *testing.T
	// reverse returns each Run call's results in reverse order.
	reverse bool
	// agentIDs numbers Done.Step with the guest's own counter (setup
	// steps included), as vm.Agent did at 214db81, not with the step's
	// ID: the runner must match a result through the step it answers.
	agentIDs bool
	// step, when set, may change a step's result or fail the kernel.
	step func(g *fakeGuest, st proto.Step, d *proto.Done) error
	// output, when set, is what a step prints, sent to the request's
	// OnMessage before the step's result (numbered as its Done).
	output func(g *fakeGuest, st proto.Step) string
	// closed, when set, is called when a guest closes.
	closed func(g *fakeGuest)
	// open, when set, may fail a boot: the guest is then returned
	// already closed, as lab's Session returns a kernel failure.
	open func(g *fakeGuest) error
	// nilGuest returns no guest with open's error, as lab does for a
	// failure before the boot.
	nilGuest bool
	// kernels are the kernels it resolves; nil means kernelK.
	kernels map[string]*results.Kernel

	mu       sync.Mutex
	runsDir  string // the last request's RunsDir
	accel    string // and its Accel
	guests   []*fakeGuest
	requests []lab.BootRequest
}

func (o *fakeOpener) ResolveKernel(_ context.Context, ref string) (*results.Kernel, error) {
	kernels := o.kernels
	if kernels == nil {
		kernels = kernelK
	}
	if k, ok := kernels[ref]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("no kernel %q", ref)
}

func (o *fakeOpener) Open(ctx context.Context, req lab.BootRequest) (lab.Guest, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.runsDir, o.accel = req.RunsDir, req.Accel
	if o.runsDir == "" {
		o.t.Errorf("Open without a runs directory")
	}
	g := &fakeGuest{o: o, index: len(o.guests), req: req}
	g.dir = filepath.Join(o.runsDir, fmt.Sprintf("g-%d", g.index+1))
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return nil, err
	}
	o.guests = append(o.guests, g)
	o.requests = append(o.requests, req)
	if o.open != nil {
		if err := o.open(g); err != nil {
			if o.nilGuest {
				return nil, err
			}
			g.err = err
			_, _ = g.Close()
			return g, err
		}
	}
	return g, nil
}

type fakeGuest struct {
	o     *fakeOpener
	index int
	req   lab.BootRequest
	dir   string
	// calls are the steps of each Run call; steps all of them.
	calls [][]proto.Step
	steps []proto.Step
	// agentID numbers the steps as the agent does.
	agentID int
	// err is the sticky kernel failure; callsAfter counts the Runs after
	// it.
	err        error
	callsAfter int
	closes     int
	outcome    results.Outcome
}

// innerWorkload is the workload step in st, and the FUSE transport
// around it.
func innerWorkload(st proto.Step) (*proto.WorkloadStep, string) {
	switch {
	case st.Kind == proto.StepWorkload:
		return st.Workload, ""
	case st.Kind == proto.StepFUSE && st.FUSE.Then != nil && st.FUSE.Then.Kind == proto.StepWorkload:
		return st.FUSE.Then.Workload, st.FUSE.Transport
	}
	return nil, ""
}

func (g *fakeGuest) Run(ctx context.Context, steps []proto.Step) ([]lab.StepResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.calls = append(g.calls, slices.Clone(steps))
	if g.err != nil {
		g.callsAfter++
		return nil, g.err
	}
	var out []lab.StepResult
	var err error
	for _, st := range steps {
		g.steps = append(g.steps, st)
		g.agentID++
		d := proto.Done{Step: st.ID, DurationNs: int64(time.Millisecond)}
		if g.o.agentIDs {
			d.Step = g.agentID
		}
		if w, transport := innerWorkload(st); w != nil {
			side := map[string]string{"dev": SideA, "uring": SideB}[transport]
			// One guest per round: guest i runs round i+1.
			d.Metrics = &proto.Metrics{Name: w.Name, Pattern: string(w.Pattern), Jobs: w.Jobs, OpsPerSec: value(w.Name, side, g.index+1)}
		}
		if out := ""; g.o.output != nil && g.req.OnMessage != nil {
			if out = g.o.output(g, st); out != "" {
				g.req.OnMessage(&proto.Message{Kind: proto.KindOutput, Output: &proto.Output{Step: d.Step, Stream: proto.Stdout, Data: []byte(out)}})
			}
		}
		if g.o.step != nil {
			if kerr := g.o.step(g, st, &d); kerr != nil {
				g.err = kerr
				err = kerr
				break
			}
		}
		out = append(out, lab.StepResult{Step: st, Done: d})
		// As lab's Session: a failed step (not an exec) ends the call.
		if st.Kind != proto.StepExec && st.Kind != proto.StepSysctl && (d.Error != "" || d.ExitCode != 0) {
			err = &lab.StepError{Msg: fmt.Sprintf("%s step failed (exit %d): %s", st.Kind, d.ExitCode, d.Error)}
			break
		}
	}
	if g.o.reverse {
		slices.Reverse(out)
	}
	return out, err
}

func (g *fakeGuest) Close() (*lab.BootResult, error) {
	g.closes++
	if g.closes == 1 && g.o.closed != nil {
		g.o.closed(g)
	}
	res := &lab.BootResult{RunDir: g.dir, ExitCode: 0, BootToAgent: 120 * time.Millisecond, Wall: 2 * time.Second}
	if g.outcome.Status != "" {
		res.Manifest = &results.Manifest{Outcome: g.outcome}
	}
	return res, nil
}

func loadRunSpec(t *testing.T, spec string) *File {
	t.Helper()
	f, err := Load("runtest.yaml", yml(spec))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var kernelK = map[string]*results.Kernel{"k": {Name: "k", ID: "k-1", Version: "7.3.0", Config: ""}}

func runOptions(t *testing.T, o *fakeOpener, kernels ...string) RunOptions {
	if len(kernels) == 0 {
		kernels = []string{"k"}
	}
	return RunOptions{
		PlanOptions: PlanOptions{Kernels: kernels},
		RunsDir:     t.TempDir(),
		Opener:      o,
	}
}

func readSamples(t *testing.T, dir string) *Samples {
	t.Helper()
	var s Samples
	data, err := os.ReadFile(filepath.Join(dir, SamplesFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func readManifest(t *testing.T, dir string) *Manifest {
	t.Helper()
	var m Manifest
	data, err := os.ReadFile(filepath.Join(dir, ManifestFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// sampleKey names a sample by what it measured.
func sampleKey(s Sample) string { return fmt.Sprintf("%s/%s/%d", s.Workload, s.Side, s.Round) }

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name              string
		reverse, agentIDs bool
	}{
		// Results in reverse order, Done.Step the guest's own number:
		// matching must go by each result's step, not by position (this
		// catches taking the last result) nor by Done.Step.
		{"reversed, agent numbering", true, true},
		// In order, Done.Step the step's own ID (catches taking the
		// first result).
		{"in order, step IDs", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := loadRunSpec(t, runSpec)
			fake := &fakeOpener{t: t, reverse: tc.reverse, agentIDs: tc.agentIDs}
			o := runOptions(t, fake)
			var progress strings.Builder
			o.Progress = &progress
			o.Command = []string{"klab", "run", "runtest"}
			res, err := Run(context.Background(), f, o)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if filepath.Dir(res.Dir) != o.RunsDir {
				t.Errorf("run dir %s is not in %s", res.Dir, o.RunsDir)
			}
			for _, name := range []string{SpecFileName, PlanFileName, ManifestFileName, SamplesFileName} {
				if _, err := os.Stat(filepath.Join(res.Dir, name)); err != nil {
					t.Errorf("the run directory lacks %s: %v", name, err)
				}
			}
			if data, _ := os.ReadFile(filepath.Join(res.Dir, SpecFileName)); string(data) != string(f.Data) {
				t.Errorf("spec.yaml is not the file as loaded")
			}

			// The guests: one per round, each told where to save.
			if len(fake.guests) != 4 {
				t.Fatalf("%d guests, want 4", len(fake.guests))
			}
			if fake.runsDir != filepath.Join(res.Dir, GuestsDirName) || fake.accel != "auto" {
				t.Errorf("runs directory %s, accel %s, want %s, auto", fake.runsDir, fake.accel, filepath.Join(res.Dir, GuestsDirName))
			}
			for gi, g := range fake.guests {
				if g.closes != 1 {
					t.Errorf("guest %d closed %d times", gi, g.closes)
				}
				if g.req.Kernel != "k" || g.req.CPUs != 2 || g.req.MemMB != 1024 {
					t.Errorf("guest %d: kernel %q, %d CPUs, %d MB", gi, g.req.Kernel, g.req.CPUs, g.req.MemMB)
				}
				// Every step run was in the boot request's Prepare (what
				// goes into the initramfs), and the IDs are distinct.
				ids := map[int]bool{}
				for _, st := range g.steps {
					if ids[st.ID] || st.ID == 0 {
						t.Errorf("guest %d: step ID %d is zero or used twice", gi, st.ID)
					}
					ids[st.ID] = true
					if !slices.ContainsFunc(g.req.Prepare, func(p proto.Step) bool { return p.ID == st.ID && p.Kind == st.Kind }) {
						t.Errorf("guest %d: step %d (%s) was not in the request's Prepare", gi, st.ID, st.Kind)
					}
				}
				// Per unit: a sysctl, prepare + workload twice, the check.
				if len(g.steps) != 2*(1+2+2+1) {
					t.Errorf("guest %d ran %d steps, want 12", gi, len(g.steps))
				}
				var fuse []string
				for _, st := range g.steps {
					if w, transport := innerWorkload(st); w != nil {
						fuse = append(fuse, w.Name+"@"+transport)
					}
				}
				want := []string{"create@dev", "randread@dev", "create@uring", "randread@uring"}
				if gi%2 == 1 {
					want = []string{"create@uring", "randread@uring", "create@dev", "randread@dev"}
				}
				if !slices.Equal(fuse, want) {
					t.Errorf("guest %d ran %v, want %v (ABBA)", gi, fuse, want)
				}
			}

			// samples.json: every workload, side and round, with its value.
			s := readSamples(t, res.Dir)
			if len(s.Samples) != 16 {
				t.Fatalf("%d samples, want 2 workloads x 2 sides x 4 rounds", len(s.Samples))
			}
			seen := map[string]bool{}
			for _, smp := range s.Samples {
				k := sampleKey(smp)
				if seen[k] {
					t.Errorf("sample %s twice", k)
				}
				seen[k] = true
				if smp.Error != "" || smp.Value != value(smp.Workload, smp.Side, smp.Round) || smp.Metric != "ops_per_sec" {
					t.Errorf("sample %s: value %g, error %q, metric %s; want %g", k, smp.Value, smp.Error, smp.Metric, value(smp.Workload, smp.Side, smp.Round))
				}
				if smp.Guest != smp.Round-1 || smp.Row != 0 {
					t.Errorf("sample %s: guest %d, row %d", k, smp.Guest, smp.Row)
				}
				if smp.Metrics == nil || smp.Metrics.Name != smp.Workload {
					t.Errorf("sample %s: metrics %+v, want the workload's own", k, smp.Metrics)
				}
			}
			if len(s.Checks) != 8 {
				t.Errorf("%d check results, want 1 check x 2 sides x 4 rounds", len(s.Checks))
			}
			for _, c := range s.Checks {
				if !c.Passed || c.Check != "ok" || c.ExitCode != 0 || c.Message != "" {
					t.Errorf("check %+v, want passed", c)
				}
			}

			m := readManifest(t, res.Dir)
			if m.Status != StatusComplete || m.Experiment != "runtest" || m.Axis != "transport" || m.Rounds != 4 || m.SpecSHA256 != f.SHA256 {
				t.Errorf("manifest: status %q, experiment %q, axis %q, rounds %d", m.Status, m.Experiment, m.Axis, m.Rounds)
			}
			if len(m.Kernels) != 1 || m.Kernels[0].Ref != "k" || m.Kernels[0].Kernel.ID != "k-1" || m.Kernels[0].Skipped != "" {
				t.Errorf("manifest kernels = %+v", m.Kernels)
			}
			if len(m.Guests) != 4 {
				t.Fatalf("manifest: %d guests", len(m.Guests))
			}
			for gi, g := range m.Guests {
				if want := filepath.Join(GuestsDirName, fmt.Sprintf("g-%d", gi+1)); g.Dir != want || g.WallMs != 2000 || g.BootToAgentMs != 120 {
					t.Errorf("manifest guest %d = %+v, want dir %s", gi, g, want)
				}
			}
			if !strings.Contains(progress.String(), "randread transport=uring round 4: 214 ops/s") {
				t.Errorf("progress lacks the last randread:\n%s", progress.String())
			}

			// The saved run's report.
			saved, err := Open(res.Dir)
			if err != nil {
				t.Fatal(err)
			}
			r := saved.Report()
			if len(r.Rows) != 2 {
				t.Fatalf("%d report rows, want 2", len(r.Rows))
			}
			for i, want := range []string{"create", "randread"} {
				row := r.Rows[i]
				if row.Name != want || row.Change.Verdict != stats.Better || !(row.Change.P < 0.05) || row.A.N != 4 || row.B.N != 4 {
					t.Errorf("row %d: %s, verdict %q, p %g, n %d/%d; want %s, better, p < 0.05, 4/4", i, row.Name, row.Change.Verdict, row.Change.P, row.A.N, row.B.N, want)
				}
			}
			if len(r.Failures) != 0 {
				t.Errorf("failures: %q", r.Failures)
			}
			if len(r.Checks) != 8 {
				t.Errorf("%d checks in the report", len(r.Checks))
			}
			if r.A.Value != "dev" || r.B.Value != "uring" || r.Axis != "transport" {
				t.Errorf("report sides %+v %+v", r.A, r.B)
			}
			if err := saved.WriteReports(r); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{ReportFileName, "report.txt", "report.md", "report.xml", "report.html"} {
				fi, err := os.Stat(filepath.Join(res.Dir, name))
				if err != nil || fi.Size() == 0 {
					t.Errorf("%s: %v", name, err)
				}
			}
			var back struct {
				Rows []struct{ Name string } `json:"rows"`
			}
			data, _ := os.ReadFile(filepath.Join(res.Dir, ReportFileName))
			if err := json.Unmarshal(data, &back); err != nil || len(back.Rows) != 2 {
				t.Errorf("report.json: %v, %d rows", err, len(back.Rows))
			}
		})
	}
}

func TestRunWorkloadFails(t *testing.T) {
	f := loadRunSpec(t, runSpec)
	fake := &fakeOpener{t: t, reverse: true}
	fake.step = func(g *fakeGuest, st proto.Step, d *proto.Done) error {
		if w, transport := innerWorkload(st); w != nil && w.Name == "create" && transport == "uring" && g.index == 1 {
			d.ExitCode, d.Error, d.Metrics = 1, "boom", nil
		}
		return nil
	}
	res, err := Run(context.Background(), f, runOptions(t, fake))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	s := readSamples(t, res.Dir)
	if len(s.Samples) != 16 {
		t.Fatalf("%d samples, want 16", len(s.Samples))
	}
	failed := 0
	for _, smp := range s.Samples {
		if sampleKey(smp) == "create/b/2" {
			failed++
			if smp.Error != "exit 1: boom" || smp.Value != 0 {
				t.Errorf("the failed sample: error %q, value %g", smp.Error, smp.Value)
			}
			continue
		}
		if smp.Error != "" || smp.Value != value(smp.Workload, smp.Side, smp.Round) {
			t.Errorf("sample %s: error %q, value %g", sampleKey(smp), smp.Error, smp.Value)
		}
	}
	if failed != 1 {
		t.Errorf("%d samples of create/b/2, want 1", failed)
	}
	// The guest went on after the failed step: the rest of its units ran.
	if len(fake.guests) != 4 || len(fake.guests[1].steps) != 12 {
		t.Errorf("guests %d; guest 2 ran %d steps, want all 12", len(fake.guests), len(fake.guests[1].steps))
	}
	for _, c := range s.Checks {
		if !c.Passed {
			t.Errorf("check %+v failed", c)
		}
	}
	if m := readManifest(t, res.Dir); m.Status != StatusComplete {
		t.Errorf("status %q", m.Status)
	}
	saved, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	r := saved.Report()
	if want := "create: 1 sample(s) failed: transport=uring round 2: exit 1: boom"; !slices.Contains(r.Failures, want) {
		t.Errorf("failures %q, want %q among them", r.Failures, want)
	}
	if len(r.Rows) != 2 || r.Rows[0].B.N != 3 || r.Rows[0].A.N != 4 {
		t.Errorf("rows %+v", r.Rows)
	}
}

func TestRunKernelFailure(t *testing.T) {
	f := loadRunSpec(t, runSpec)
	fake := &fakeOpener{t: t, reverse: true, agentIDs: true}
	fake.step = func(g *fakeGuest, st proto.Step, d *proto.Done) error {
		// Guest 2 panics in its first unit's second workload.
		if w, _ := innerWorkload(st); w != nil && w.Name == "randread" && g.index == 1 {
			g.outcome = results.Outcome{Status: results.StatusKernelPanic, Message: "BUG: x"}
			return &lab.KernelError{Status: "kernel-panic", Msg: "BUG: x", Console: []string{"[ 1.0] BUG: x", "[ 1.1] Call Trace:"}}
		}
		return nil
	}
	res, err := Run(context.Background(), f, runOptions(t, fake))
	if err != nil {
		t.Fatalf("Run: %v (a kernel failure ends its guest, not the run)", err)
	}
	if len(fake.guests) != 4 {
		t.Fatalf("%d guests, want 4: the later guests still run", len(fake.guests))
	}
	if g := fake.guests[1]; g.callsAfter != 0 || g.closes != 1 {
		t.Errorf("the failed guest: %d Run calls after the kernel failure, %d closes", g.callsAfter, g.closes)
	}
	s := readSamples(t, res.Dir)
	if len(s.Samples) != 16 {
		t.Fatalf("%d samples, want 16 (the failed guest's recorded as failures)", len(s.Samples))
	}
	bad := map[string]bool{}
	for _, smp := range s.Samples {
		if smp.Round == 2 && !(smp.Workload == "create" && smp.Side == SideB) {
			// Round 2 runs B first: its create measured, then the panic.
			bad[sampleKey(smp)] = true
			if smp.Error != "BUG: x" || smp.Guest != 1 {
				t.Errorf("sample %s: error %q, guest %d, want the kernel's message", sampleKey(smp), smp.Error, smp.Guest)
			}
			continue
		}
		if smp.Error != "" || smp.Value != value(smp.Workload, smp.Side, smp.Round) {
			t.Errorf("sample %s: error %q, value %g", sampleKey(smp), smp.Error, smp.Value)
		}
	}
	if len(bad) != 3 {
		t.Errorf("failed samples %v, want randread/b/2, create/a/2 and randread/a/2", bad)
	}
	failedChecks := 0
	for _, c := range s.Checks {
		if c.Round == 2 {
			failedChecks++
			if c.Passed || c.Message != "BUG: x" {
				t.Errorf("check in round 2: %+v, want failed with the kernel's message", c)
			}
		} else if !c.Passed {
			t.Errorf("check %+v failed", c)
		}
	}
	if failedChecks != 2 || len(s.Checks) != 8 {
		t.Errorf("%d checks, %d in round 2, want 8 and 2", len(s.Checks), failedChecks)
	}
	m := readManifest(t, res.Dir)
	if m.Status != StatusComplete || len(m.Guests) != 4 || m.Guests[1].Outcome.Status != results.StatusKernelPanic {
		t.Errorf("manifest: status %q, %d guests, guest 2 outcome %+v", m.Status, len(m.Guests), m.Guests[1].Outcome)
	}
	saved, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	r := saved.Report()
	for _, want := range []string{
		"randread: 2 sample(s) failed: transport=uring round 2: BUG: x",
		"create: 1 sample(s) failed: transport=dev round 2: BUG: x",
		"check ok failed on transport=uring on k round 2: BUG: x",
		"guest guests/g-2: kernel-panic: BUG: x",
	} {
		if !slices.Contains(r.Failures, want) {
			t.Errorf("failures %q lack %q", r.Failures, want)
		}
	}
}

const requiresSpec = `
name: needs
rounds: 4
requires:
  features: [fuse-io-uring]
workloads:
  - name: create
    pattern: create
    dir: /tmp/c
    jobs: 1
    files: 10
`

func writeConfig(t *testing.T, lines string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(p, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func emptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("%s holds %v, want nothing", dir, ents)
	}
}

func TestRunRequires(t *testing.T) {
	f := loadRunSpec(t, requiresSpec)
	without := writeConfig(t, "CONFIG_FUSE_FS=y\n# CONFIG_FUSE_IO_URING is not set\n")
	with := writeConfig(t, "CONFIG_FUSE_FS=y\nCONFIG_FUSE_IO_URING=y\n")
	kernels := map[string]*results.Kernel{
		"old":  {Name: "old", ID: "k-old", Version: "6.12.0", Config: without},
		"new":  {Name: "new", ID: "k-new", Version: "7.3.0", Config: with},
		"old2": {Name: "old2", ID: "k-old2", Version: "6.13.0", Config: without},
	}

	t.Run("no kernel meets them", func(t *testing.T) {
		fake := &fakeOpener{t: t, kernels: kernels}
		o := runOptions(t, fake)
		o.Kernels, o.Compare = []string{"old", "old2"}, "kernel"
		res, err := Run(context.Background(), f, o)
		var bad *specfile.BadInputError
		if !errors.As(err, &bad) || res != nil {
			t.Fatalf("Run: %v (%T), want a *specfile.BadInputError", err, err)
		}
		if want := "runtest.yaml: no kernel meets its requires: old (6.12.0): needs fuse-io-uring; old2 (6.13.0): needs fuse-io-uring"; err.Error() != want {
			t.Errorf("Run: %v, want %s", err, want)
		}
		emptyDir(t, o.RunsDir)
		if len(fake.guests) != 0 {
			t.Errorf("%d guests booted", len(fake.guests))
		}
	})

	t.Run("the only kernel lacks them", func(t *testing.T) {
		pf := loadRunSpec(t, strings.Replace(runSpec, "name: runtest\n", "name: runtest\nrequires:\n  features: [fuse-io-uring]\n", 1))
		fake := &fakeOpener{t: t, kernels: map[string]*results.Kernel{"k": {Name: "k", ID: "k-1", Version: "7.3.0", Config: without}}}
		o := runOptions(t, fake)
		_, err := Run(context.Background(), pf, o)
		var bad *specfile.BadInputError
		if !errors.As(err, &bad) {
			t.Fatalf("Run: %v (%T), want a *specfile.BadInputError", err, err)
		}
		if want := "runtest.yaml: no kernel meets its requires: k (7.3.0): needs fuse-io-uring"; err.Error() != want {
			t.Errorf("Run: %v, want %s", err, want)
		}
		emptyDir(t, o.RunsDir)
	})

	t.Run("one of two kernels lacks them", func(t *testing.T) {
		fake := &fakeOpener{t: t, kernels: kernels}
		o := runOptions(t, fake)
		o.Kernels = []string{"new", "old"}
		res, err := Run(context.Background(), f, o)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(fake.guests) != 4 {
			t.Errorf("%d guests, want the 4 of kernel A", len(fake.guests))
		}
		for _, g := range fake.guests {
			if g.req.Kernel != "new" {
				t.Errorf("a guest booted %s", g.req.Kernel)
			}
		}
		s := readSamples(t, res.Dir)
		if len(s.Samples) != 4 {
			t.Errorf("%d samples, want 4 (A's)", len(s.Samples))
		}
		for _, smp := range s.Samples {
			if smp.Side != SideA || smp.Error != "" {
				t.Errorf("sample %+v", smp)
			}
		}
		m := readManifest(t, res.Dir)
		if m.Status != StatusComplete || m.Kernels[0].Skipped != "" || m.Kernels[1].Skipped != "needs fuse-io-uring" {
			t.Errorf("manifest: status %q, kernels %+v", m.Status, m.Kernels)
		}
		saved, err := Open(res.Dir)
		if err != nil {
			t.Fatal(err)
		}
		r := saved.Report()
		if len(r.Skipped) != 1 || r.Skipped[0].Cell != "every cell on old" || r.Skipped[0].Reason != "needs fuse-io-uring" {
			t.Errorf("skipped %+v, want every cell on old: needs fuse-io-uring", r.Skipped)
		}
		if len(r.Rows) != 1 || r.Rows[0].A.N != 4 || r.Rows[0].B.N != 0 {
			t.Errorf("rows %+v", r.Rows)
		}
	})
}

func TestRunInterrupted(t *testing.T) {
	f := loadRunSpec(t, runSpec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fake := &fakeOpener{t: t, reverse: true}
	fake.closed = func(g *fakeGuest) {
		if g.index == 0 {
			cancel()
		}
	}
	res, err := Run(ctx, f, runOptions(t, fake))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if res == nil {
		t.Fatal("no result: what finished must be kept")
	}
	if len(fake.guests) != 1 {
		t.Errorf("%d guests booted, want 1", len(fake.guests))
	}
	m := readManifest(t, res.Dir)
	if m.Status != StatusInterrupted || m.Message != "interrupted: what finished is kept" || m.End.IsZero() || len(m.Guests) != 1 {
		t.Errorf("manifest: status %q, message %q, end %v, %d guests", m.Status, m.Message, m.End, len(m.Guests))
	}
	s := readSamples(t, res.Dir)
	if len(s.Samples) != 4 || len(s.Checks) != 2 {
		t.Fatalf("%d samples and %d checks, want round 1's 4 and 2", len(s.Samples), len(s.Checks))
	}
	for _, smp := range s.Samples {
		if smp.Round != 1 || smp.Error != "" || smp.Value != value(smp.Workload, smp.Side, 1) {
			t.Errorf("sample %s: error %q, value %g", sampleKey(smp), smp.Error, smp.Value)
		}
	}
	saved, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	r := saved.Report()
	if !slices.Contains(r.Warnings, "the run did not complete: interrupted: what finished is kept") {
		t.Errorf("warnings %q", r.Warnings)
	}
	if len(r.Rows) != 2 || r.Rows[0].A.N != 1 || r.Rows[0].B.N != 1 || r.Rows[0].Change.Verdict == stats.Better {
		t.Errorf("rows %+v: one sample a side is no verdict", r.Rows)
	}
}

func TestRunBadInput(t *testing.T) {
	f := loadRunSpec(t, runSpec)
	for _, tc := range []struct {
		name string
		edit func(*RunOptions)
		want string
	}{
		{"unknown kernel", func(o *RunOptions) { o.Kernels = []string{"nope"} }, `kernel nope: no kernel "nope"`},
		{"two kernels on a param axis", func(o *RunOptions) { o.Kernels = []string{"k", "nope"} },
			"comparing transport runs on one kernel, got 2; to compare kernels, compare kernel"},
		{"a bad --set", func(o *RunOptions) { o.Sets = map[string]string{"colour": "red"} },
			"set colour: runtest.yaml has no such parameter, want one of: transport"},
		{"both kernels unknown", func(o *RunOptions) { o.Kernels, o.Compare = []string{"x", "y"}, "kernel" },
			"kernel x: no kernel \"x\"\nkernel y: no kernel \"y\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeOpener{t: t}
			o := runOptions(t, fake)
			tc.edit(&o)
			res, err := Run(context.Background(), f, o)
			var bad *specfile.BadInputError
			if !errors.As(err, &bad) || res != nil {
				t.Fatalf("Run: %v (%T), want a *specfile.BadInputError", err, err)
			}
			if err.Error() != tc.want {
				t.Errorf("Run: %q, want %q", err, tc.want)
			}
			emptyDir(t, o.RunsDir)
			if len(fake.guests) != 0 {
				t.Errorf("%d guests booted", len(fake.guests))
			}
		})
	}
}

// TestGuestText: what the guest sends is stored and printed without
// control characters, and bounded.
func TestGuestText(t *testing.T) {
	if got := guestText("exit\x1b[31m red\x07\tx\u0085"); got != "exit[31m red x" {
		t.Errorf("guestText = %q", got)
	}
	long := guestText(strings.Repeat("é", maxGuestText))
	if len(long) > maxGuestText+len(" [cut]") || !strings.HasSuffix(long, " [cut]") || !utf8.ValidString(long) {
		t.Errorf("a long message: %d bytes, valid %v", len(long), utf8.ValidString(long))
	}
}

// TestOpenDamagedRun: a run directory whose files were damaged or edited
// gives an error naming the file, never a panic, in the next process's
// reading of it.
func TestOpenDamagedRun(t *testing.T) {
	f := loadRunSpec(t, runSpec)
	res, err := Run(context.Background(), f, runOptions(t, &fakeOpener{t: t}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := Open(res.Dir); err != nil {
		t.Fatalf("Open of a good run: %v", err)
	}
	for _, c := range []struct {
		file, from, to, want string
	}{
		{SamplesFileName, `"side": "b"`, `"side": "c"`, "side \"c\""},
		{SamplesFileName, `"row": 0`, `"row": 7`, "row 7"},
		{PlanFileName, `"axis": "transport"`, `"axis": "kernel"`, "the kernel axis with 1 kernels"},
		{ManifestFileName, `"kernel": 0`, `"kernel": 5`, "kernel 5 of 1"},
		{ManifestFileName, `"schema": 1`, `"schema": 9`, "schema 9"},
		{SamplesFileName, `{`, `[`, SamplesFileName},
	} {
		path := filepath.Join(res.Dir, c.file)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(orig), c.from) {
			t.Fatalf("%s lacks %q", c.file, c.from)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(orig), c.from, c.to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = Open(res.Dir)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.file) {
			t.Errorf("%s with %s: %v, want an error naming %q", c.file, c.to, err, c.want)
		}
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChecksPerRow: a check that refers to a row parameter runs in every
// row; one that does not runs in the first row only.
func TestChecksPerRow(t *testing.T) {
	spec := strings.Replace(runSpec, "  transport: [dev, uring]\n", "  transport: [dev, uring]\n  jobs: [1, 2]\n", 1)
	spec = strings.Replace(spec, "    jobs: 1\n    files: 10\n", "    jobs: ${jobs}\n    files: 10\n", 1)
	spec = strings.Replace(spec, "checks:\n  - name: ok\n    run: \"true\"\n",
		"checks:\n  - name: ok\n    run: \"true\"\n  - name: per-jobs\n    run: \"test ${jobs} -gt 0\"\n  - name: once\n    run: \"true\"\n    once: true\n", 1)
	f := loadRunSpec(t, spec)
	res, err := Run(context.Background(), f, runOptions(t, &fakeOpener{t: t}))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	counts := map[string]map[int]int{}
	for _, c := range readSamples(t, res.Dir).Checks {
		if counts[c.Check] == nil {
			counts[c.Check] = map[int]int{}
		}
		counts[c.Check][c.Row]++
		if !c.Passed {
			t.Errorf("check %s row %d failed: %s", c.Check, c.Row, c.Message)
		}
	}
	// 4 rounds, 2 sides.
	want := map[string]map[int]int{"ok": {0: 8}, "per-jobs": {0: 8, 1: 8}, "once": {0: 2}}
	if !reflect.DeepEqual(counts, want) {
		t.Errorf("checks per row: %v, want %v", counts, want)
	}
}

// sketchSpec is README's spec sketch without its requires: a server over
// io_uring in half the matrix.
const sketchSpec = `
name: my-exp
description: creates on klab's passthrough server, dev against uring
rounds: 2
compare: transport
params:
  transport: [dev, uring]
  jobs: [1, 2]
server: {kind: passthrough, transport: "${transport}", backing: /tmp/b, mountpoint: /mnt/fuse}
setup: {dirs: [/tmp/b]}
workloads:
  - {name: create, pattern: create, dir: /mnt/fuse/c, jobs: "${jobs}", files: 1000, runtime_s: 3, prepare: rm -rf /tmp/b/c}
checks:
  - {name: fuse-device, run: "test -c /dev/fuse"}
`

// TestImpliedRequires: a server over io_uring in any point of the matrix
// requires fuse-io-uring without the spec saying so, and what --set
// leaves out no longer does; a kernel without it is skipped with the
// reason, as for a written requires, instead of failing every uring cell.
func TestImpliedRequires(t *testing.T) {
	f := loadRunSpec(t, sketchSpec)
	want := map[string]string{"fuse-io-uring": "server.transport: uring"}
	if got := f.Spec.Requires.Implied; !reflect.DeepEqual(got, want) || len(f.Spec.Requires.Features) != 0 {
		t.Errorf("implied %v, features %v; want %v and none written", got, f.Spec.Requires.Features, want)
	}
	written := loadRunSpec(t, strings.Replace(sketchSpec, "rounds: 2\n", "rounds: 2\nrequires: {features: [fuse-io-uring]}\n", 1))
	if len(written.Spec.Requires.Implied) != 0 {
		t.Errorf("a written requires: implied %v", written.Spec.Requires.Implied)
	}
	dev, err := f.WithSets(map[string]string{"transport": "dev"})
	if err != nil || len(dev.Spec.Requires.Implied) != 0 || !reflect.DeepEqual(f.Spec.Requires.Implied, want) {
		t.Errorf("--set transport=dev: %v, implied %v (the file's %v)", err, dev.Spec.Requires.Implied, f.Spec.Requires.Implied)
	}
	jobs, err := f.WithSets(map[string]string{"jobs": "4"})
	if err != nil || !reflect.DeepEqual(jobs.Spec.Requires.Implied, want) {
		t.Errorf("--set jobs=4: %v, implied %v", err, jobs.Spec.Requires.Implied)
	}
	plain := loadRunSpec(t, strings.Replace(strings.Replace(sketchSpec, "transport: [dev, uring]", "transport: [dev]", 1), "compare: transport\n", "", 1))
	if len(plain.Spec.Requires.Implied) != 0 {
		t.Errorf("no uring: implied %v", plain.Spec.Requires.Implied)
	}

	without := writeConfig(t, "CONFIG_FUSE_FS=y\n# CONFIG_FUSE_IO_URING is not set\n")
	with := writeConfig(t, "CONFIG_FUSE_FS=y\nCONFIG_FUSE_IO_URING=y\n")
	kernels := map[string]*results.Kernel{
		"old": {Name: "old", ID: "k-old", Version: "6.1.0", Config: without},
		"new": {Name: "new", ID: "k-new", Version: "7.3.0", Config: with},
	}
	fake := &fakeOpener{t: t, kernels: kernels}
	o := runOptions(t, fake, "old")
	_, err = Run(context.Background(), f, o)
	var bad *specfile.BadInputError
	if !errors.As(err, &bad) || err.Error() != "runtest.yaml: no kernel meets its requires: old (6.1.0): needs fuse-io-uring (for server.transport: uring)" {
		t.Errorf("the sketch on a kernel without io_uring: %v", err)
	}
	if len(fake.guests) != 0 {
		t.Errorf("%d guests booted", len(fake.guests))
	}

	withKernel := loadRunSpec(t, strings.Replace(sketchSpec, "compare: transport\n", "", 1))
	fake = &fakeOpener{t: t, kernels: kernels}
	o = runOptions(t, fake, "new", "old")
	res, err := Run(context.Background(), withKernel, o)
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	if m.Kernels[0].Skipped != "" || m.Kernels[1].Skipped != "needs fuse-io-uring (for server.transport: uring)" {
		t.Errorf("manifest kernels %+v", m.Kernels)
	}
	for _, g := range fake.guests {
		if g.req.Kernel != "new" {
			t.Errorf("a guest booted %s", g.req.Kernel)
		}
	}
}

// TestSameFailureOnce: rows whose samples all failed alike (a kernel whose
// io_uring the config did not show, failing every uring mount) give the
// error once, naming every row.
func TestSameFailureOnce(t *testing.T) {
	f := loadRunSpec(t, sketchSpec)
	const boom = "fuse step: start passthrough server on /mnt/fuse: fuse: transport uring: unsupported by this kernel"
	fake := &fakeOpener{t: t, step: func(g *fakeGuest, st proto.Step, d *proto.Done) error {
		if st.Kind == proto.StepFUSE && st.FUSE.Transport == "uring" {
			d.ExitCode, d.Error, d.Metrics = -1, boom, nil
		}
		return nil
	}}
	res, err := Run(context.Background(), f, runOptions(t, fake))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	r := saved.Report()
	want := "create jobs=1, create jobs=2: 4 sample(s) failed: transport=uring round 1: exit -1: " + boom
	if !slices.Contains(r.Failures, want) || strings.Count(strings.Join(r.Failures, "\n"), boom) != 1 {
		t.Errorf("failures %q, want once %q", r.Failures, want)
	}
}
