package bisect

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"klab/internal/testenv"
)

// history makes a git tree in a temporary directory with one commit per
// state: each commit writes its state into the file "state" (and its
// index into "n"), so that a fake runner can read what a commit is.
// It returns the tree and the commits, oldest first.
func history(t *testing.T, states []string) (string, []string) {
	t.Helper()
	testenv.RequiresCommand(t, "git")
	dir := filepath.Join(t.TempDir(), "linux")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "init", "-q", "-b", "main")
	var commits []string
	for i, s := range states {
		if err := os.WriteFile(filepath.Join(dir, "state"), []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "n"), []byte(strconv.Itoa(i)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitT(t, dir, "add", "state", "n")
		gitT(t, dir, "commit", "-q", "-m", fmt.Sprintf("commit %d: %s", i, s))
		commits = append(commits, gitT(t, dir, "rev-parse", "HEAD"))
	}
	return dir, commits
}

// gitT runs git in dir with a fixed identity and dates.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(dir), "GIT_AUTHOR_NAME=A U Thor", "GIT_AUTHOR_EMAIL=author@example.org",
		"GIT_COMMITTER_NAME=C O Mitter", "GIT_COMMITTER_EMAIL=committer@example.org",
		"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// fakeRunner judges nothing: it reads the state a commit of a history
// wrote and returns the outcome outcome(state, n, rounds, call) makes of
// it, recording every call.
type fakeRunner struct {
	tree    string
	outcome func(state string, n, rounds, call int) *StepOutcome
	mu      sync.Mutex
	calls   []fakeCall
}

type fakeCall struct {
	commit string
	rounds int
}

func (f *fakeRunner) Run(ctx context.Context, commit string, rounds int) (*StepOutcome, error) {
	f.mu.Lock()
	call := 0
	for _, c := range f.calls {
		if c.commit == commit {
			call++
		}
	}
	f.calls = append(f.calls, fakeCall{commit, rounds})
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	state, err := gitOut(ctx, f.tree, "show", commit+":state")
	if err != nil {
		return nil, err
	}
	ns, err := gitOut(ctx, f.tree, "show", commit+":n")
	if err != nil {
		return nil, err
	}
	n, _ := strconv.Atoi(ns)
	o := f.outcome(state, n, rounds, call)
	if o.Rounds == 0 {
		o.Rounds = rounds
	}
	if o.Build.Mode == "" && o.BuildError == "" {
		o.Build = Build{Mode: BuildIncremental, TookSec: 42}
	}
	return o, nil
}

// commitsCalled are the commits the runner was called for, in order,
// each once.
func (f *fakeRunner) commitsCalled() []string {
	var out []string
	for _, c := range f.calls {
		if !slices.Contains(out, c.commit) {
			out = append(out, c.commit)
		}
	}
	return out
}

// splatOutcome is a splat bisection's outcomes: "bad" prints the WARNING
// chased, "skip" does not build, "noboot" does not boot, and any state
// prints "WARNING in old_bug" when it holds "old".
func splatOutcome(state string, n, rounds, call int) *StepOutcome {
	o := &StepOutcome{}
	if strings.Contains(state, "old") {
		o.Splats = append(o.Splats, Splat{Type: "warning", Title: "WARNING in old_bug", Text: "WARNING: old"})
	}
	switch {
	case strings.HasPrefix(state, "bad"):
		o.Splats = append(o.Splats, Splat{Type: "warning", Title: "WARNING in fuse_open", Text: "------------[ cut here ]------------\nWARNING: CPU: 0 PID: 1 at fs/fuse/file.c:260 fuse_open+0x1/0x2\nCall Trace:\n fuse_open"})
	case strings.HasPrefix(state, "skip"):
		o.BuildError = "make bzImage failed; first errors:\n  fs/fuse/file.c:12:3: error: expected ';' before '}' token"
	case strings.HasPrefix(state, "noboot"):
		o.GuestError = "guest guests/x: boot-timeout: the agent did not say hello"
	}
	return o
}

// newBisection makes a bisection of tree's good..bad in a new run
// store.
func newBisection(t *testing.T, tree, good, bad string, c Criterion, rounds int) *Bisection {
	t.Helper()
	e, err := CheckTree(context.Background(), tree, good, bad)
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{Tree: e.Tree, Good: good, Bad: bad, GoodCommit: e.Good, BadCommit: e.Bad, Commits: e.Commits,
		Config: []string{"lab"}, Experiment: "fake", SpecFile: "fake.yaml", Criterion: c, Rounds: rounds, MaxRounds: 3 * rounds,
		Command: []string{"klab", "bisect"}}
	b, err := Create(filepath.Join(t.TempDir(), "runs"), m, []byte("name: fake\n"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gitBisectRun runs plain git bisect run over tree's good..bad with a
// script that reads "state" as splatOutcome does, and returns the
// commits it tested, in order, and the first bad commit it named.
func gitBisectRun(t *testing.T, tree, good, bad string) ([]string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	gitT(t, filepath.Dir(dir), "clone", "-q", tree, dir)
	script := filepath.Join(t.TempDir(), "judge.sh")
	logf := filepath.Join(t.TempDir(), "tested")
	if err := os.WriteFile(script, []byte(`#!/bin/sh
git rev-parse HEAD >> `+logf+`
case "$(cat state)" in
bad*) exit 1 ;;
skip*|noboot*) exit 125 ;;
esac
exit 0
`), 0o755); err != nil {
		t.Fatal(err)
	}
	if start := gitT(t, dir, "bisect", "start", bad, good); firstBadRe.MatchString(start) {
		// Done before any step (git bisect run would still run the
		// script once, on the bad commit).
		return nil, firstBadRe.FindStringSubmatch(start)[1]
	}
	// git bisect run fails when only skipped commits are left.
	cmd := exec.Command("git", "bisect", "run", script)
	cmd.Dir, cmd.Env = dir, gitEnv(dir)
	outb, _ := cmd.CombinedOutput()
	out := string(outb)
	data, err := os.ReadFile(logf)
	if err != nil {
		t.Fatal(err)
	}
	first := ""
	if m := firstBadRe.FindStringSubmatch(out); m != nil {
		first = m[1]
	}
	return strings.Fields(string(data)), first
}

// stepCommits are a bisection's git steps' commits, in order.
func stepCommits(b *Bisection) []string {
	var out []string
	for _, s := range b.Steps {
		if s.Role == RoleStep {
			out = append(out, s.Commit)
		}
	}
	return out
}

// TestStepOrderIsGitBisectRun: on the same history, a bisection tests
// the commits plain git bisect run tests, in its order, skips and all,
// and names the same first bad commit; the user's tree is not touched.
func TestStepOrderIsGitBisectRun(t *testing.T) {
	cases := map[string][]string{
		"linear":        {"good", "good", "good", "good", "good", "good", "good", "bad", "bad", "bad", "bad", "bad", "bad", "bad", "bad", "bad", "bad"},
		"early":         {"good", "bad", "bad", "bad", "bad", "bad", "bad", "bad", "bad"},
		"late":          {"good", "good", "good", "good", "good", "good", "good", "good", "bad"},
		"skips":         {"good", "good", "good", "skip", "skip", "good", "good", "bad", "skip", "bad", "bad", "bad", "bad", "bad"},
		"skip-at-edge":  {"good", "good", "good", "good", "good", "skip", "bad", "bad", "bad"},
		"only-skips":    {"good", "good", "skip", "skip", "skip", "bad"},
		"noboot-skips":  {"good", "good", "noboot", "good", "bad", "bad"},
		"long-history":  append(append(slices.Repeat([]string{"good"}, 41), slices.Repeat([]string{"bad"}, 23)...), "bad"),
		"one-commit":    {"good", "bad"},
		"skip-then-bad": {"good", "skip", "bad"},
	}
	for name, states := range cases {
		t.Run(name, func(t *testing.T) {
			tree, commits := history(t, states)
			good, bad := commits[0], commits[len(commits)-1]
			before := gitT(t, tree, "for-each-ref") + gitT(t, tree, "status", "--porcelain") + gitT(t, tree, "rev-parse", "HEAD")
			want, wantFirst := gitBisectRun(t, tree, good, bad)

			b := newBisection(t, tree, good, bad, Criterion{Kind: KindSplat, Splat: "fuse_open"}, 1)
			f := &fakeRunner{tree: tree, outcome: splatOutcome}
			var progress strings.Builder
			res, err := b.Run(context.Background(), f, &progress)
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, progress.String())
			}
			if got := stepCommits(b); !slices.Equal(got, want) {
				t.Errorf("tested %v, git bisect run tested %v", short(got), short(want))
			}
			if wantFirst != "" {
				if !res.Found || res.FirstBad.SHA != wantFirst {
					t.Errorf("result %+v, want the first bad commit %.12s", res, wantFirst)
				}
				if res.Evidence == nil || res.Evidence.Splat == nil || res.Evidence.Splat.Title != "WARNING in fuse_open" {
					t.Errorf("evidence %+v, want the WARNING", res.Evidence)
				}
				if res.FirstBad.Author != "A U Thor <author@example.org>" || !strings.HasPrefix(res.FirstBad.Date, "2026-01-02T03:04:05") {
					t.Errorf("first bad commit %+v: want its author and date", res.FirstBad)
				}
			} else if res.Found || len(res.Candidates) == 0 {
				t.Errorf("result %+v, want candidates (git found none)", res)
			}
			after := gitT(t, tree, "for-each-ref") + gitT(t, tree, "status", "--porcelain") + gitT(t, tree, "rev-parse", "HEAD")
			if after != before {
				t.Errorf("the user's tree changed:\n%s\nthen\n%s", before, after)
			}
			if _, err := os.Stat(filepath.Join(tree, ".git", "BISECT_LOG")); err == nil {
				t.Error("the user's tree has a bisection of its own now")
			}
			log, err := os.ReadFile(filepath.Join(b.Dir, LogFile))
			if err != nil || !strings.Contains(string(log), "git bisect start '--no-checkout'") {
				t.Errorf("bisect.log: %v\n%s", err, log)
			}
		})
	}
}

func short(cs []string) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c[:8])
	}
	return out
}

// TestSplatVerdicts: a title substring, a splat type, and any splat the
// good commit did not print each name the first commit that prints the
// WARNING, over a commit that does not build (skipped with the reason)
// and an old splat every commit prints.
func TestSplatVerdicts(t *testing.T) {
	states := []string{"good old", "good old", "good old", "skip old", "good old", "bad old", "bad old", "bad old", "bad old"}
	tree, commits := history(t, states)
	for _, c := range []Criterion{
		{Kind: KindSplat, Splat: "fuse_open"},
		{Kind: KindSplat},
	} {
		t.Run(c.String(), func(t *testing.T) {
			b := newBisection(t, tree, commits[0], commits[len(commits)-1], c, 1)
			res, err := b.Run(context.Background(), &fakeRunner{tree: tree, outcome: splatOutcome}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Found || res.FirstBad.SHA != commits[5] || res.FirstBad.Subject != "commit 5: bad old" {
				t.Fatalf("result %+v, want commit 5", res)
			}
			if e := res.Evidence; e == nil || e.Splat == nil || !strings.Contains(e.Splat.Text, "fs/fuse/file.c:260") {
				t.Errorf("evidence %+v, want the WARNING's report", e)
			}
			for _, s := range b.Steps {
				if s.Commit == commits[3] && (s.Verdict != Skip || !strings.Contains(s.Reason, "does not build: make bzImage failed")) {
					t.Errorf("the commit that does not build: %s (%s)", s.Verdict, s.Reason)
				}
			}
		})
	}
	// A splat type: the old WARNING is of that type too, so the good
	// commit is bad already, and the bisection refuses to go on.
	b := newBisection(t, tree, commits[0], commits[len(commits)-1], Criterion{Kind: KindSplat, SplatType: "warning"}, 1)
	res, err := b.Run(context.Background(), &fakeRunner{tree: tree, outcome: splatOutcome}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Found || !strings.Contains(res.Reason, "is bad already (WARNING in old_bug)") || len(b.Steps) != 1 {
		t.Errorf("a good commit that is bad: %+v, %d step(s)", res, len(b.Steps))
	}
	// Without the old splat, the type finds the commit.
	tree2, commits2 := history(t, []string{"good", "good", "bad", "bad"})
	b = newBisection(t, tree2, commits2[0], commits2[3], Criterion{Kind: KindSplat, SplatType: "warning"}, 1)
	if res, err := b.Run(context.Background(), &fakeRunner{tree: tree2, outcome: splatOutcome}, nil); err != nil || !res.Found || res.FirstBad.SHA != commits2[2] {
		t.Errorf("splat type: %+v, %v; want commit 2", res, err)
	}
}

// TestEndpointsChecked: a bad commit that is not bad, and a good commit
// that cannot be judged, end the bisection before any step.
func TestEndpointsChecked(t *testing.T) {
	tree, commits := history(t, []string{"noboot", "good", "good", "bad"})
	b := newBisection(t, tree, commits[1], commits[2], Criterion{Kind: KindSplat, Splat: "fuse_open"}, 1)
	res, err := b.Run(context.Background(), &fakeRunner{tree: tree, outcome: splatOutcome}, nil)
	if err != nil || res.Found || !strings.Contains(res.Reason, "is not bad (no kernel splat): there is nothing to bisect") {
		t.Errorf("a bad commit that is good: %+v, %v", res, err)
	}
	b = newBisection(t, tree, commits[0], commits[3], Criterion{Kind: KindSplat, Splat: "fuse_open"}, 1)
	res, err = b.Run(context.Background(), &fakeRunner{tree: tree, outcome: splatOutcome}, nil)
	if err != nil || res.Found || !strings.Contains(res.Reason, "cannot be judged: guest failed: guest guests/x: boot-timeout") || len(b.Steps) != 1 {
		t.Errorf("a good commit that does not boot: %+v, %v, %d step(s)", res, err, len(b.Steps))
	}
}

// TestCheckVerdict: a check that fails is bad; a check that did not run
// is a skip; the evidence keeps the failing check's output.
func TestCheckVerdict(t *testing.T) {
	tree, commits := history(t, []string{"good", "good", "norun", "good", "bad", "bad"})
	outcome := func(state string, n, rounds, call int) *StepOutcome {
		o := &StepOutcome{}
		for r := 1; r <= rounds; r++ {
			o.Checks = append(o.Checks, CheckResult{Name: "other", Round: r, Passed: true})
			switch state {
			case "good":
				o.Checks = append(o.Checks, CheckResult{Name: "stuck-server-aborted", Round: r, Passed: true})
			case "bad":
				o.Checks = append(o.Checks, CheckResult{Name: "stuck-server-aborted", Round: r, Passed: r == 1, Message: "exit status 1, want 0",
					Output: "waiting for ECONNABORTED\nthe request was never aborted\n"})
			}
		}
		return o
	}
	b := newBisection(t, tree, commits[0], commits[5], Criterion{Kind: KindCheck, Check: "stuck-server-aborted"}, 2)
	res, err := b.Run(context.Background(), &fakeRunner{tree: tree, outcome: outcome}, nil)
	if err != nil || !res.Found || res.FirstBad.SHA != commits[4] {
		t.Fatalf("%+v, %v; want commit 4", res, err)
	}
	if e := res.Evidence; e == nil || e.Check == nil || e.Check.Round != 2 || !strings.Contains(e.Check.Output, "never aborted") {
		t.Errorf("evidence %+v", res.Evidence)
	}
	for _, s := range b.Steps {
		if s.Commit == commits[2] && (s.Verdict != Skip || s.Reason != "check stuck-server-aborted did not run") {
			t.Errorf("the commit where the check did not run: %s (%s)", s.Verdict, s.Reason)
		}
	}
}

// TestTestVerdict: a suite's test that fails is bad, one that passes
// good, one that did not run a skip.
func TestTestVerdict(t *testing.T) {
	tree, commits := history(t, []string{"pass", "pass", "notrun", "pass", "fail", "crash"})
	outcome := func(state string, n, rounds, call int) *StepOutcome {
		o := &StepOutcome{Tests: []TestResult{{Name: "generic/001", Status: "pass"}}}
		t := TestResult{Name: "generic/013", Status: state}
		if state == "notrun" {
			t.Reason = "fsstress not found"
		}
		if state == "fail" {
			t.Detail = "--- 013.out\n+++ 013.out.bad\n+error"
		}
		o.Tests = append(o.Tests, t)
		return o
	}
	b := newBisection(t, tree, commits[0], commits[5], Criterion{Kind: KindTest, Test: "generic/013"}, 1)
	res, err := b.Run(context.Background(), &fakeRunner{tree: tree, outcome: outcome}, nil)
	if err != nil || !res.Found || res.FirstBad.SHA != commits[4] {
		t.Fatalf("%+v, %v; want commit 4", res, err)
	}
	if e := res.Evidence; e == nil || e.Test == nil || e.Test.Status != "fail" || !strings.Contains(e.Test.Detail, "+error") {
		t.Errorf("evidence %+v", res.Evidence)
	}
	for _, s := range b.Steps {
		if s.Commit == commits[2] && (s.Verdict != Skip || s.Reason != "test generic/013: notrun: fsstress not found") {
			t.Errorf("notrun: %s (%s)", s.Verdict, s.Reason)
		}
	}
}

// noisy returns n samples around mean, spread by 2%, the same for the
// same seed.
func noisy(mean float64, n, seed int) []float64 {
	out := make([]float64, n)
	for i := range out {
		x := math.Sin(float64(seed*31+i*7)+0.5) * 0.02
		out[i] = mean * (1 + x)
	}
	return out
}

// metricOutcome: "good" is about 1000 ops/s, "bad" about 600, "mid"
// about 800 (neither); "late" is bad, but its first run lost all guests
// but one (one sample: it cannot be told from either endpoint).
func metricOutcome(state string, n, rounds, call int) *StepOutcome {
	mean := map[string]float64{"good": 1000, "bad": 600, "mid": 800, "late": 600}[state]
	if state == "skip" {
		return &StepOutcome{BuildError: "make bzImage failed"}
	}
	vals := noisy(mean, rounds, n*10+call)
	o := &StepOutcome{Samples: map[string][]float64{"create transport=dev": vals, "other": {1, 2, 3}}}
	if state == "late" && call == 0 {
		o.Samples["create transport=dev"] = vals[:1]
		o.GuestError = "guest guests/2: boot-timeout\nguest guests/3: boot-timeout"
	}
	return o
}

var createRow = Criterion{Kind: KindMetric, Row: "create transport=dev", Metric: "ops_per_sec", Unit: "ops/s", Direction: 1}

// TestMetricVerdict: the endpoints are measured first with twice the
// rounds and must be told apart; a step like the bad commit is bad, one
// like the good commit good; a step between them gets more rounds up to
// the bound, then is skipped with the reason; one that becomes clear
// with more rounds is judged.
func TestMetricVerdict(t *testing.T) {
	states := []string{"good", "good", "skip", "good", "mid", "good", "late", "bad", "bad", "bad"}
	tree, commits := history(t, states)
	f := &fakeRunner{tree: tree, outcome: metricOutcome}
	b := newBisection(t, tree, commits[0], commits[9], createRow, 3)
	var progress strings.Builder
	res, err := b.Run(context.Background(), f, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if !res.Found || res.FirstBad.SHA != commits[6] {
		t.Fatalf("%+v; want commit 6\n%s", res, progress.String())
	}
	if f.calls[0].rounds != 6 || f.calls[1].rounds != 6 || f.calls[0].commit != commits[0] || f.calls[1].commit != commits[9] {
		t.Errorf("the endpoints ran %+v, want good then bad with 6 rounds each", f.calls[:2])
	}
	sep := res.Separation
	if sep == nil || !sep.Separable() || sep.Good.N != 6 || sep.Bad.N != 6 || sep.Change.Pct > -35 {
		t.Errorf("separation %+v", sep)
	}
	if !strings.Contains(progress.String(), "klab: endpoints: row \"create transport=dev\" (ops_per_sec): good: mean 1") {
		t.Errorf("progress lacks the endpoints' separation:\n%s", progress.String())
	}
	e := res.Evidence
	if e == nil || e.Metric == nil || e.Metric.Step.N != 4 || e.Metric.VsBad.Significant || !e.Metric.VsGood.Significant {
		t.Errorf("evidence %+v, want the late commit's 4 samples, like the bad commit", e)
	}
	mid := 0
	for _, s := range b.Steps {
		switch s.Commit {
		case commits[4]:
			mid++
			if s.Verdict != Skip || !strings.Contains(s.Reason, "ambiguous after 9 round(s): differs from both endpoints") || s.Rounds != 9 || len(s.Samples) != 9 {
				t.Errorf("the step between the endpoints: %s (%s), %d rounds, %d samples", s.Verdict, s.Reason, s.Rounds, len(s.Samples))
			}
		case commits[6]:
			if s.Verdict != Bad || s.Rounds != 6 || len(s.Samples) != 4 {
				t.Errorf("the step that became clear: %s (%s) in %d rounds", s.Verdict, s.Reason, s.Rounds)
			}
		case commits[2]:
			if s.Verdict != Skip || !strings.Contains(s.Reason, "does not build") {
				t.Errorf("the step that does not build: %s (%s)", s.Verdict, s.Reason)
			}
		}
	}
	if mid != 1 {
		t.Errorf("the commit between the endpoints was tested %d times, want once:\n%s", mid, progress.String())
	}
	var rounds []int
	for _, c := range f.calls {
		if c.commit == commits[4] {
			rounds = append(rounds, c.rounds)
		}
	}
	if !slices.Equal(rounds, []int{3, 3, 3}) {
		t.Errorf("the ambiguous step ran rounds %v, want 3, then 3 more twice (up to 9)", rounds)
	}
}

// TestMetricEndpointsNotSeparable: endpoints that cannot be told apart
// end the bisection before any step, with the separation.
func TestMetricEndpointsNotSeparable(t *testing.T) {
	tree, commits := history(t, []string{"good", "mid", "good"})
	b := newBisection(t, tree, commits[0], commits[2], createRow, 3)
	f := &fakeRunner{tree: tree, outcome: metricOutcome}
	res, err := b.Run(context.Background(), f, nil)
	if err != nil || res.Found || res.Separation == nil || res.Separation.Separable() || !strings.Contains(res.Reason, "cannot be told apart") {
		t.Fatalf("%+v, %v", res, err)
	}
	if len(f.calls) != 2 {
		t.Errorf("%d runs, want the two endpoints only", len(f.calls))
	}
}

// TestOpenRefusesDamage: a step log that names a run outside the
// bisection, or a verdict git does not know, is refused.
func TestOpenRefusesDamage(t *testing.T) {
	tree, commits := history(t, []string{"good", "bad"})
	b := newBisection(t, tree, commits[0], commits[1], Criterion{Kind: KindSplat}, 1)
	for _, s := range []Step{
		{Role: RoleStep, Commit: commits[0], Done: true, Verdict: "maybe"},
		{Role: RoleStep, Commit: commits[0], Done: true, Verdict: Good, Runs: []string{"../../etc"}},
		{Role: "other", Commit: "HEAD"},
	} {
		b.Steps = []Step{s}
		if err := b.saveSteps(); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(b.Dir); err == nil {
			t.Errorf("Open accepted step %+v", s)
		}
	}
}

// TestCheckTree: what is not a git tree, a revision that is not there,
// a good commit that is not an ancestor of the bad one, and the same
// commit twice are bad input.
func TestCheckTree(t *testing.T) {
	tree, commits := history(t, []string{"a", "b", "c"})
	gitT(t, tree, "checkout", "-q", "-b", "side", commits[0])
	if err := os.WriteFile(filepath.Join(tree, "side"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, tree, "add", "side")
	gitT(t, tree, "commit", "-q", "-m", "side")
	ctx := context.Background()
	for _, c := range []struct {
		tree, good, bad, want string
	}{
		{t.TempDir(), "HEAD~1", "HEAD", "not a git tree"},
		{filepath.Join(tree, "nope"), "a", "b", "not a directory"},
		{tree, "nosuch", "main", "--good nosuch: no such commit"},
		{tree, "main~2", "v9", "--bad v9: no such commit"},
		{tree, "--all", "main", `--good "--all": not a revision`},
		{tree, "side", "main", "is not an ancestor of --bad main"},
		{tree, "main", "main", "the same commit"},
		{tree, "main", "main~2", "is not an ancestor"},
	} {
		_, err := CheckTree(ctx, c.tree, c.good, c.bad)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckTree(%s, %s): %v, want %q", c.good, c.bad, err, c.want)
		}
	}
	e, err := CheckTree(ctx, filepath.Join(tree, "."), "main~2", "main")
	if err != nil || e.Good != commits[0] || e.Bad != commits[2] || e.Commits != 2 {
		t.Errorf("CheckTree: %+v, %v", e, err)
	}
}

// resumeEnv, when set, makes the test binary run the bisection in the
// directory it names with the splat runner, as a killed klab would:
// the runner blocks forever at the commit in resumeBlockEnv.
const (
	resumeEnv      = "KLAB_BISECT_TEST_RESUME"
	resumeTreeEnv  = "KLAB_BISECT_TEST_TREE"
	resumeBlockEnv = "KLAB_BISECT_TEST_BLOCK"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(resumeEnv); dir != "" {
		b, err := Open(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		block := os.Getenv(resumeBlockEnv)
		f := &fakeRunner{tree: os.Getenv(resumeTreeEnv), outcome: splatOutcome}
		_, err = b.Run(context.Background(), blockingRunner{f, block}, os.Stderr)
		fmt.Fprintln(os.Stderr, "bisection ended:", err)
		os.Exit(4)
	}
	os.Exit(m.Run())
}

// blockingRunner is a fakeRunner that never returns for one commit.
type blockingRunner struct {
	*fakeRunner
	block string
}

func (r blockingRunner) Run(ctx context.Context, commit string, rounds int) (*StepOutcome, error) {
	if commit == r.block {
		select {}
	}
	return r.fakeRunner.Run(ctx, commit, rounds)
}

// TestResumeAfterKill: a klab killed (SIGKILL) in the middle of a step
// leaves a bisection that another process resumes: the finished steps
// are kept and replayed into git, not tested again; the step in progress
// is tested again; the result and the step order are those of an
// uninterrupted bisection.
func TestResumeAfterKill(t *testing.T) {
	states := []string{"good", "good", "good", "skip", "good", "good", "bad", "bad", "bad", "bad", "bad", "bad", "bad"}
	tree, commits := history(t, states)
	want, wantFirst := gitBisectRun(t, tree, commits[0], commits[len(commits)-1])
	if len(want) < 3 {
		t.Fatalf("git tested %d commits; the test needs 3", len(want))
	}
	block := want[2]
	b := newBisection(t, tree, commits[0], commits[len(commits)-1], Criterion{Kind: KindSplat, Splat: "fuse_open"}, 1)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), resumeEnv+"="+b.Dir, resumeTreeEnv+"="+tree, resumeBlockEnv+"="+block)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the child to record the blocked step, then kill it.
	deadline := time.Now().Add(time.Minute)
	for {
		var st Steps
		data, _ := os.ReadFile(filepath.Join(b.Dir, StepsFile))
		if json.Unmarshal(data, &st) == nil && len(st.Steps) > 0 {
			last := st.Steps[len(st.Steps)-1]
			if last.Commit == block && !last.Done {
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the child never reached the blocked step:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	b2, err := Open(b.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b2.Steps); n != 5 || b2.Steps[4].Done {
		t.Fatalf("after the kill: %d steps recorded (the last done: %v), want the endpoints, 2 steps and the one in progress", n, b2.Steps[n-1].Done)
	}
	if b2.Manifest.Status != StatusRunning {
		t.Errorf("status %q after a kill, want running", b2.Manifest.Status)
	}
	f := &fakeRunner{tree: tree, outcome: splatOutcome}
	res, err := b2.Run(context.Background(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Found || res.FirstBad.SHA != wantFirst {
		t.Errorf("result %+v, want %.12s", res, wantFirst)
	}
	if got := stepCommits(b2); !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", short(got), short(want))
	}
	if called := f.commitsCalled(); len(called) == 0 || called[0] != block || slices.Contains(called, want[0]) || slices.Contains(called, commits[0]) {
		t.Errorf("the resumed run tested %v: want the step in progress (%.8s) first, and nothing finished again", short(called), block)
	}
	b3, err := Open(b.Dir)
	if err != nil || b3.Result == nil || b3.Manifest.Status != StatusComplete {
		t.Fatalf("reopened: %+v, %v", b3, err)
	}
	log, _ := os.ReadFile(filepath.Join(b.Dir, LogFile))
	if !strings.Contains(string(log), "# first bad commit: ["+wantFirst+"]") {
		t.Errorf("bisect.log:\n%s", log)
	}
}

// TestInterruptKeepsSteps: a cancelled context stops the bisection with
// the finished steps recorded and the status interrupted.
func TestInterruptKeepsSteps(t *testing.T) {
	tree, commits := history(t, []string{"good", "good", "good", "good", "bad", "bad", "bad", "bad"})
	b := newBisection(t, tree, commits[0], commits[7], Criterion{Kind: KindSplat, Splat: "fuse_open"}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	f := &fakeRunner{tree: tree, outcome: func(state string, i, rounds, call int) *StepOutcome {
		n++
		if n == 3 {
			cancel()
		}
		return splatOutcome(state, i, rounds, call)
	}}
	if _, err := b.Run(ctx, f, nil); err == nil {
		t.Fatal("an interrupted bisection returned no error")
	}
	b2, err := Open(b.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if b2.Manifest.Status != StatusInterrupted || len(b2.Steps) < 2 || b2.Result != nil {
		t.Errorf("status %q, %d steps, result %+v", b2.Manifest.Status, len(b2.Steps), b2.Result)
	}
	res, err := b2.Run(context.Background(), &fakeRunner{tree: tree, outcome: splatOutcome}, nil)
	if err != nil || !res.Found || res.FirstBad.SHA != commits[4] {
		t.Errorf("resumed: %+v, %v", res, err)
	}
}
