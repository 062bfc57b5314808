package bisect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"klab/experiments"
	"klab/guest/proto"
	"klab/images/build"
	"klab/lab"
	"klab/results"
	"klab/results/splat"
)

// runnerSpec compares the transports; a bisection measures both on one
// kernel, as rows.
const runnerSpec = `name: runnertest
description: the bisection runner against a fake guest
rounds: 2
compare: transport
params:
  transport: [dev, uring]
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
checks:
  - name: aborted
    run: "true"
`

// commit states of the fake: what the build and the guests do.
var runnerCommits = map[string]string{
	strings.Repeat("a", 40): "good",
	strings.Repeat("b", 40): "bad",
	strings.Repeat("c", 40): "broken",
	strings.Repeat("d", 40): "noboot",
	strings.Repeat("e", 40): "nogcc",
}

// stateOf is the state of the commit a build name or kernel ref names.
func stateOf(ref string) string {
	name := strings.TrimPrefix(ref, "build:")
	for c, s := range runnerCommits {
		if strings.HasPrefix(name, "bisect-"+c[:12]) {
			return s
		}
	}
	return ""
}

// runnerOpener boots fake guests: "bad" kernels print a WARNING, fail
// the check and are slower; "noboot" kernels never boot.
type runnerOpener struct {
	mu     sync.Mutex
	opened int
}

func (o *runnerOpener) ResolveKernel(_ context.Context, ref string) (*results.Kernel, error) {
	if stateOf(ref) == "" {
		return nil, fmt.Errorf("no kernel %q", ref)
	}
	return &results.Kernel{Name: ref, ID: "k-" + stateOf(ref), Version: "7.3.4", Source: "build"}, nil
}

func (o *runnerOpener) Open(ctx context.Context, req lab.BootRequest) (lab.Guest, error) {
	o.mu.Lock()
	o.opened++
	n := o.opened
	o.mu.Unlock()
	g := &runnerGuest{state: stateOf(req.Kernel), dir: filepath.Join(req.RunsDir, fmt.Sprintf("g-%d", n)), n: n}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return nil, err
	}
	if g.state == "noboot" {
		g.failed = true
		return g, &lab.KernelError{Status: string(results.StatusBootTimeout), Msg: "the agent did not say hello"}
	}
	return g, nil
}

type runnerGuest struct {
	state  string
	dir    string
	n      int
	failed bool
}

func (g *runnerGuest) Run(ctx context.Context, steps []proto.Step) ([]lab.StepResult, error) {
	var out []lab.StepResult
	for _, st := range steps {
		d := proto.Done{Step: st.ID, DurationNs: 1e6}
		if st.Kind == proto.StepFUSE && st.FUSE.Then != nil && st.FUSE.Then.Workload != nil {
			w := st.FUSE.Then.Workload
			v := 1000.0
			if g.state == "bad" {
				v = 600
			}
			if st.FUSE.Transport == "uring" {
				v += 100
			}
			d.Metrics = &proto.Metrics{Name: w.Name, Pattern: string(w.Pattern), Jobs: w.Jobs, OpsPerSec: v + float64(g.n)}
		}
		if st.Kind == proto.StepExec && len(st.Argv) == 3 && st.Argv[2] == "true" && g.state == "bad" {
			d.ExitCode = 1
		}
		out = append(out, lab.StepResult{Step: st, Done: d})
	}
	return out, nil
}

func (g *runnerGuest) Close() (*lab.BootResult, error) {
	res := &lab.BootResult{RunDir: g.dir, BootToAgent: time.Millisecond, Wall: time.Second}
	if g.failed {
		res.Manifest = &results.Manifest{Outcome: results.NewOutcome(results.StatusBootTimeout, "the agent did not say hello", 0)}
	}
	if g.state == "bad" {
		res.Splats = []splat.Report{{Type: splat.TypeWarning, Title: "WARNING in __fuse_simple_request", Text: "WARNING: CPU: 1 PID: 80 at fs/fuse/req.c:61 __fuse_simple_request+0x10/0x20", Frames: []string{}}}
	}
	return res, nil
}

// fakeBuild builds nothing: "broken" commits fail make, "nogcc" fails
// before (klab's own failure), the others build, incrementally after the
// first.
func fakeBuild(calls *[]build.Options) func(context.Context, build.Options) (*build.Result, error) {
	return func(ctx context.Context, o build.Options) (*build.Result, error) {
		*calls = append(*calls, o)
		switch stateOf(o.Name) {
		case "broken":
			return nil, &build.BuildError{Target: "bzImage", Log: "/cache/build.log", Errors: []build.CompileError{{File: "fs/fuse/req.c", Line: 3, Col: 1, Msg: "expected ';'"}},
				Err: errors.New("exit status 2")}
		case "nogcc":
			return nil, errors.New("gcc not found")
		}
		phases := []build.Phase{{Name: "checkout", Took: time.Second}, {Name: "make", Took: 40 * time.Second}}
		if len(*calls) == 1 {
			phases = phases[1:]
		}
		return &build.Result{Kernel: &results.Kernel{Name: "build:" + o.Name, ID: "k-" + stateOf(o.Name), Build: &results.KernelBuild{Log: "/cache/log"}}, Phases: phases}, nil
	}
}

// TestExperimentRunner: the real runner builds the commit with the
// bisection's config and patches and runs the experiment on it alone,
// every parameter a row; it reads back the splats, the checks and the
// rows' samples; a commit that does not build or boot is an outcome, a
// build that fails for klab's own reasons an error.
func TestExperimentRunner(t *testing.T) {
	f, err := experiments.Load("runnertest.yaml", []byte(runnerSpec))
	if err != nil {
		t.Fatal(err)
	}
	var calls []build.Options
	r := &ExperimentRunner{Tree: "/src/linux", Config: []string{"lab", "debug"}, Patches: []string{"/p/debug.patch"}, CacheDir: "/cache",
		File: f, RunsDir: t.TempDir(), Opener: &runnerOpener{}, Build: fakeBuild(&calls)}
	ctx := context.Background()

	good, err := r.Run(ctx, strings.Repeat("a", 40), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || calls[0].Source != "/src/linux" || calls[0].Rev != strings.Repeat("a", 40) ||
		strings.Join(calls[0].Config, ",") != "lab,debug" || calls[0].Patches[0] != "/p/debug.patch" || !strings.HasPrefix(calls[0].Name, "bisect-aaaaaaaaaaaa-") {
		t.Errorf("build options %+v", calls)
	}
	if good.Build.Mode != BuildCold || good.Build.Kernel != "k-good" || good.Build.Ref != "build:"+calls[0].Name || good.BuildError != "" {
		t.Errorf("good build %+v", good.Build)
	}
	if len(good.Runs) != 1 || good.Rounds != 2 || len(good.Splats) != 0 || good.GuestError != "" {
		t.Errorf("good outcome %+v", good)
	}
	if v := good.Samples["create transport=dev"]; len(v) != 2 || v[0] < 1000 || v[0] > 1010 {
		t.Errorf("samples %v", good.Samples)
	}
	if v := good.Samples["create transport=uring"]; len(v) != 2 || v[0] < 1100 {
		t.Errorf("samples %v", good.Samples)
	}
	passed := 0
	for _, c := range good.Checks {
		if c.Name == "aborted" && c.Passed {
			passed++
		}
	}
	if passed == 0 || passed != len(good.Checks) {
		t.Errorf("checks %+v", good.Checks)
	}

	bad, err := r.Run(ctx, strings.Repeat("b", 40), 2)
	if err != nil {
		t.Fatal(err)
	}
	if bad.Build.Mode != BuildIncremental || len(bad.Build.Phases) != 2 || bad.Build.Phases[0].Name != "checkout" {
		t.Errorf("second build %+v, want incremental (a checkout phase)", bad.Build)
	}
	if len(bad.Splats) == 0 || bad.Splats[0].Title != "WARNING in __fuse_simple_request" || !strings.Contains(bad.Splats[0].Text, "fs/fuse/req.c:61") {
		t.Errorf("splats %+v", bad.Splats)
	}
	if j := Judge(Criterion{Kind: KindCheck, Check: "aborted"}, Baseline{}, bad); j.Verdict != Bad {
		t.Errorf("the check on the bad commit: %+v", j)
	}
	if j := Judge(Criterion{Kind: KindSplat}, Baseline{}, bad); j.Verdict != Bad || j.Evidence.Splat.Run != bad.Runs[0] {
		t.Errorf("the splat on the bad commit: %+v", j)
	}
	if j := Judge(createRow, Baseline{Good: good.Samples[createRow.Row], Bad: bad.Samples[createRow.Row]}, good); j.Evidence == nil || j.Evidence.Metric.Step.N != 2 {
		t.Errorf("the metric: %+v", j)
	}

	broken, err := r.Run(ctx, strings.Repeat("c", 40), 2)
	if err != nil || broken.Build.Log != "/cache/build.log" || !strings.Contains(broken.BuildError, "fs/fuse/req.c:3:1: expected ';'") || len(broken.Runs) != 0 {
		t.Errorf("a commit that does not build: %+v, %v", broken, err)
	}
	if j := Judge(Criterion{Kind: KindSplat}, Baseline{}, broken); j.Verdict != Skip || !strings.HasPrefix(j.Reason, "does not build: make bzImage failed") {
		t.Errorf("its verdict: %+v", j)
	}

	noboot, err := r.Run(ctx, strings.Repeat("d", 40), 2)
	if err != nil || !strings.Contains(noboot.GuestError, "boot-timeout") || len(noboot.Runs) != 1 {
		t.Errorf("a commit that does not boot: %+v, %v", noboot, err)
	}
	if j := Judge(Criterion{Kind: KindSplat}, Baseline{}, noboot); j.Verdict != Skip || !strings.Contains(j.Reason, "guest failed") {
		t.Errorf("its verdict: %+v", j)
	}

	if _, err := r.Run(ctx, strings.Repeat("e", 40), 2); err == nil || !strings.Contains(err.Error(), "gcc not found") {
		t.Errorf("a build that fails for klab's reasons: %v, want an error", err)
	}
}
