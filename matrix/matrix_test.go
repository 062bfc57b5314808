package matrix

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rhysd/actionlint"
	"go.yaml.in/yaml/v3"

	"klab/guest/proto"
	"klab/internal/fileio"
	"klab/internal/specfile"
	"klab/lab"
	"klab/results"
	"klab/results/xreport"
)

// Two experiments: one compares kernels (a cell runs it on its kernel
// alone), one compares a parameter (a cell runs its A/B on its kernel).
const kernelSpec = `
name: kx
rounds: 4
workloads:
  - name: create
    pattern: create
    dir: /tmp/c
    jobs: 1
    files: 10
checks:
  - name: ok
    run: "true"
`

const paramSpec = `
name: px
rounds: 3
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
`

const matrixYAML = `
name: t
baseline: debian:6.12
kernels:
  - debian:6.12
  - debian:7.3
  - build: {name: fix, source: debian:7.3, patches: [fix.patch]}
experiments:
  - kx.yaml
  - {name: px.yaml, rounds: 2}
`

// testFile writes the specs and the matrix into a directory and loads it.
func testFile(t *testing.T, matrix string) *File {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"kx.yaml": kernelSpec, "px.yaml": paramSpec, "fst.yaml": suiteSpec, "rx.yaml": refSpec, "kxe.yaml": kernelRefSpec, "fix.patch": "--- a\n+++ b\n", "m.yaml": matrix} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.TrimPrefix(data, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := LoadFile(filepath.Join(dir, "m.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// fakeOpener boots fake guests that measure a value per kernel: 6.12
// 100, 7.3 130, the fix 90, plus the round, uring 50 above dev.
type fakeOpener struct {
	mu *sync.Mutex
	// opened counts boots; block, when set, holds every Run until
	// closed.
	opened *int
	block  chan struct{}
	// openErr, when set, gives the error of boot n (from 1).
	openErr func(n int) error
}

func (o fakeOpener) ResolveKernel(ctx context.Context, ref string) (*results.Kernel, error) {
	return resolve(ctx, ref)
}

func (o fakeOpener) Open(ctx context.Context, req lab.BootRequest) (lab.Guest, error) {
	o.mu.Lock()
	*o.opened++
	n := *o.opened
	o.mu.Unlock()
	if o.openErr != nil {
		if err := o.openErr(n); err != nil {
			return nil, err
		}
	}
	g := &fakeGuest{o: o, req: req, dir: filepath.Join(req.RunsDir, fmt.Sprintf("g-%d", n))}
	return g, os.MkdirAll(g.dir, 0o755)
}

type fakeGuest struct {
	o     fakeOpener
	req   lab.BootRequest
	dir   string
	round int
}

func (g *fakeGuest) Run(ctx context.Context, steps []proto.Step) ([]lab.StepResult, error) {
	if g.o.block != nil {
		select {
		case <-g.o.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var out []lab.StepResult
	for _, st := range steps {
		d := proto.Done{Step: st.ID, DurationNs: 1e6}
		w, transport := st.Workload, ""
		if st.Kind == proto.StepFUSE {
			w, transport = st.FUSE.Then.Workload, st.FUSE.Transport
		}
		if w != nil {
			g.round++
			v := map[string]float64{"debian:6.12": 100, "debian:7.3": 130, "build:fix": 90}[g.req.Kernel]
			if transport == "uring" {
				v += 50
			}
			d.Metrics = &proto.Metrics{Name: w.Name, Pattern: string(w.Pattern), Jobs: w.Jobs, OpsPerSec: v + float64(g.round%3)}
		}
		out = append(out, lab.StepResult{Step: st, Done: d})
	}
	return out, nil
}

func (g *fakeGuest) Close() (*lab.BootResult, error) {
	return &lab.BootResult{RunDir: g.dir, BootToAgent: time.Millisecond, Wall: time.Second}, nil
}

func resolve(_ context.Context, ref string) (*results.Kernel, error) {
	v := map[string]string{"debian:6.12": "6.12.1", "debian:7.3": "7.3.4", "build:fix": "7.3.4"}[ref]
	if v == "" {
		return nil, fmt.Errorf("no kernel %q", ref)
	}
	return &results.Kernel{Name: ref, ID: "id-" + ref, Version: v}, nil
}

func options(out string, jobs int, shard Shard) (Options, *int) {
	opened := new(int)
	return Options{Out: out, Jobs: jobs, Shard: shard, Opener: fakeOpener{mu: &sync.Mutex{}, opened: opened},
		Build: func(context.Context, *Recipe) error { return nil }}, opened
}

func TestLoad(t *testing.T) {
	f := testFile(t, matrixYAML)
	if f.Name != "t" || f.Baseline != "debian:6.12" || len(f.Kernels) != 3 || len(f.Experiments) != 2 {
		t.Fatalf("file %+v", f)
	}
	if b := f.Kernels[2].Build; b == nil || f.Kernels[2].Ref != "build:fix" || b.Source != "debian:7.3" ||
		!slices.Equal(b.Config, []string{"lab"}) || len(b.Patches) != 1 || !filepath.IsAbs(b.Patches[0]) {
		t.Errorf("recipe %+v", f.Kernels[2])
	}
	if e := f.Experiments[1]; e.Label != "px" || e.Rounds != 2 {
		t.Errorf("experiment %+v", e)
	}
}

func TestLoadProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown field", "name: t\ncolour: red\nkernels: [debian:7.3]\nexperiments: [kx.yaml]\n",
			[]string{`m.yaml:2:1: matrix: unknown field "colour", want one of name, description, baseline, kernels, experiments`}},
		{"misspelt field", "name: t\ndescripton: d\nkernels: [debian:7.3]\nexperiments: [kx.yaml]\n",
			[]string{`m.yaml:2:1: matrix: unknown field "descripton" (did you mean "description"?), want one of name, description, baseline, kernels, experiments`}},
		{"bad kernel and experiment", "name: t\nkernels:\n  - debian:7.3\n  - linux\n  - debian:7.3\nexperiments:\n  - nope\n  - {name: px.yaml, set: {transport: sctp}}\n",
			[]string{
				`m.yaml:4:5: kernels[1]: "linux" is not a kernel, want debian:SERIES (debian:7.3), build:NAME or a path to a bzImage`,
				`m.yaml:5:5: kernels[2]: debian:7.3 is listed twice`,
				`m.yaml:7:5: experiments[0]: no experiment "nope"`,
				`m.yaml:8:5: experiments[1].set:`,
			}},
		{"baseline and recipe", "name: t\nbaseline: debian:6.1\nkernels:\n  - build: {name: x, patches: [missing.patch]}\nexperiments: [kx.yaml]\n",
			[]string{
				`m.yaml:2:11: baseline: "debian:6.1" is not one of the kernels, want one of build:x`,
				`m.yaml:4:12: kernels[0].build: source: missing`,
				`m.yaml:4:31: kernels[0].build.patches: stat`,
			}},
		{"missing lists", "name: t\n", []string{"m.yaml:1:1: kernels: missing", "m.yaml:1:1: experiments: missing"}},
		{"suite experiment with rounds", "name: t\nkernels: [debian:7.3]\nexperiments: [{name: fstests-klab-uring, rounds: 2}]\n",
			[]string{"m.yaml:3:15: experiments[0].rounds: experiments/fstests-klab-uring.yaml runs a test suite (fstests), once per cell"}},
		{"suite experiment with set", "name: t\nkernels: [debian:7.3]\nexperiments: [{name: fstests-klab-uring, set: {x: \"1\"}}]\n",
			[]string{"m.yaml:3:15: experiments[0].set: experiments/fstests-klab-uring.yaml runs a test suite (fstests) and has no parameters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "kx.yaml"), []byte(kernelSpec), 0o644)
			os.WriteFile(filepath.Join(dir, "px.yaml"), []byte(paramSpec), 0o644)
			_, err := Load("m.yaml", dir, []byte(tc.yaml))
			var me *specfile.Error
			if !errors.As(err, &me) {
				t.Fatalf("error %v, want a *specfile.Error", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("problem %d:\n%s\nwant a line starting\n%s", i, lines[i], w)
				}
			}
		})
	}
}

func TestCellsAndShards(t *testing.T) {
	f := testFile(t, matrixYAML)
	cells := f.Cells()
	if len(cells) != 6 {
		t.Fatalf("%d cells, want 2 experiments x 3 kernels", len(cells))
	}
	if !slices.IsSortedFunc(cells, func(a, b Cell) int { return strings.Compare(a.ID, b.ID) }) {
		t.Errorf("cells not sorted: %v", cells)
	}
	if cells[0].ID != "kx@build_fix" || cells[0].Name() != "kx on build:fix" {
		t.Errorf("first cell %+v", cells[0])
	}
	// Loading again (another machine) gives the same cells.
	if again := testFile(t, matrixYAML).Cells(); !reflect.DeepEqual(again, cells) {
		t.Errorf("cells differ between loads")
	}
	for _, n := range []int{1, 2, 4, 6, 7} {
		seen := map[string]int{}
		for i := 1; i <= n; i++ {
			for _, c := range (Shard{i, n}).Of(cells) {
				seen[c.ID]++
			}
		}
		for _, c := range cells {
			if seen[c.ID] != 1 {
				t.Errorf("%d shards: cell %s in %d shards", n, c.ID, seen[c.ID])
			}
		}
	}
	for _, bad := range []string{"0/2", "3/2", "1", "a/b", "1/0", "-1/2"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q): no error", bad)
		}
	}
	if s, err := ParseShard("2/3"); err != nil || s != (Shard{2, 3}) {
		t.Errorf("ParseShard(2/3) = %v, %v", s, err)
	}
}

// rowsOf is a report's rows as comparable strings.
func rowsOf(x *xreport.Matrix) []string {
	var out []string
	for _, r := range x.Rows {
		line := r.Experiment + "|" + r.Name
		for _, c := range r.Cells {
			line += fmt.Sprintf("|%s %v", c.Kernel, c.Summary.Values)
			if c.Change != nil {
				line += fmt.Sprintf(" %+.1f%%", c.Change.Pct)
			}
		}
		out = append(out, line)
	}
	return out
}

func TestRunShardsMergeResume(t *testing.T) {
	f := testFile(t, matrixYAML)
	ctx := context.Background()
	root := t.TempDir()

	// The whole matrix in one go, two cells at a time.
	o, opened := options(filepath.Join(root, "all"), 2, Shard{1, 1})
	all, err := Run(ctx, f, o)
	if err != nil {
		t.Fatal(err)
	}
	// kx: 4 rounds x 3 kernels; px: 2 rounds, one guest per round, x 3.
	if *opened != 18 {
		t.Errorf("%d guests, want 18", *opened)
	}
	x := all.Report()
	if x.Cells != 6 || x.Complete != 6 || len(x.Failures) != 0 {
		t.Fatalf("report: %d/%d cells, failures %v, skipped %v", x.Complete, x.Cells, x.Failures, x.Skipped)
	}
	want := rowsOf(x)
	// kx: one row; px: a row per transport.
	if len(want) != 3 || !strings.HasPrefix(want[0], "kx|create|debian:6.12 [") || !strings.Contains(want[1], "px|create [transport=dev]") {
		t.Errorf("rows:\n%s", strings.Join(want, "\n"))
	}
	if c := x.Rows[0].Cells[1]; c.Change == nil || !c.Change.Significant || c.Change.Pct < 25 || c.Run == "" {
		t.Errorf("7.3 against the baseline: %+v", c)
	}

	// Two shards, merged, give the same report.
	var dirs []string
	for i := 1; i <= 2; i++ {
		o, _ := options(filepath.Join(root, fmt.Sprintf("shard%d", i)), 1, Shard{i, 2})
		tr, err := Run(ctx, f, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(tr.Manifest.Cells) != 3 || tr.Manifest.Shard != fmt.Sprintf("%d/2", i) {
			t.Errorf("shard %d: %d cells, shard %q", i, len(tr.Manifest.Cells), tr.Manifest.Shard)
		}
		dirs = append(dirs, tr.Dir)
	}
	merged, err := Merge(dirs, filepath.Join(root, "merged"))
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(merged.Report()); !slices.Equal(got, want) {
		t.Errorf("merged rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A tree reopened from disk (another klab process) reports the same.
	reopened, err := Open(merged.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(reopened.Report()); !slices.Equal(got, want) {
		t.Errorf("reopened rows differ")
	}
	if _, err := Merge([]string{dirs[0], dirs[0]}, filepath.Join(root, "dup")); err == nil || !strings.Contains(err.Error(), "finished in both") {
		t.Errorf("merging a shard twice: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "dup", ManifestFile)); err == nil {
		t.Errorf("a failed merge left a manifest")
	}

	// Interrupted: two cells finish, one is cut off by Ctrl-C, one was
	// killed (its directory without cell.json); resume runs exactly the
	// missing ones.
	o, _ = options(filepath.Join(root, "cut"), 1, Shard{1, 1})
	cut, err := Run(ctx, f, o)
	if err != nil {
		t.Fatal(err)
	}
	cells := cut.Manifest.Cells
	os.Remove(filepath.Join(cut.Dir, CellsDir, cells[1].ID, CellFile))
	fileio.WriteJSON(filepath.Join(cut.Dir, CellsDir, cells[2].ID, CellFile), &CellResult{Cell: cells[2], Status: StatusIncomplete})
	os.RemoveAll(filepath.Join(cut.Dir, CellsDir, cells[3].ID))
	reopen, err := Open(cut.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, c := range reopen.Missing() {
		missing = append(missing, c.ID)
	}
	if !slices.Equal(missing, []string{cells[1].ID, cells[2].ID, cells[3].ID}) {
		t.Errorf("missing %v", missing)
	}
	o, opened = options(cut.Dir, 1, Shard{1, 1})
	o.Resume = true
	resumed, err := Run(ctx, f, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(resumed.Missing()) != 0 {
		t.Errorf("after resume, missing %v", resumed.Missing())
	}
	for _, c := range cells {
		runs, _ := filepath.Glob(filepath.Join(cut.Dir, CellsDir, c.ID, "*-exp-*"))
		if len(runs) != 1 {
			t.Errorf("cell %s has %d runs, want 1", c.ID, len(runs))
		}
	}
	// The resumed cells are a kx and two px cells or so: fewer guests
	// than the whole matrix.
	if *opened == 0 || *opened >= 18 {
		t.Errorf("resume booted %d guests", *opened)
	}
	if got := rowsOf(resumed.Report()); len(got) != len(want) {
		t.Errorf("resumed rows:\n%s", strings.Join(got, "\n"))
	}

	// Resuming with another matrix file is bad input.
	other := testFile(t, strings.Replace(matrixYAML, "rounds: 2", "rounds: 1", 1))
	o.Out = cut.Dir
	if _, err := Run(ctx, other, o); !errors.As(err, new(*specfile.BadInputError)) {
		t.Errorf("resume with another file: %v", err)
	}
	// A new run into a used directory is bad input.
	o.Resume = false
	if _, err := Run(ctx, f, o); !errors.As(err, new(*specfile.BadInputError)) {
		t.Errorf("run into a used directory: %v", err)
	}
}

// TestRunInterrupted: Ctrl-C while cells run marks them incomplete and
// keeps the tree resumable.
func TestRunInterrupted(t *testing.T) {
	f := testFile(t, matrixYAML)
	ctx, cancel := context.WithCancel(context.Background())
	o, _ := options(filepath.Join(t.TempDir(), "x"), 2, Shard{1, 1})
	fo := o.Opener.(fakeOpener)
	fo.block = make(chan struct{})
	o.Opener = fo
	time.AfterFunc(100*time.Millisecond, cancel)
	tr, err := Run(ctx, f, o)
	if !errors.Is(err, context.Canceled) || tr == nil {
		t.Fatalf("Run: %v", err)
	}
	reopen, err := Open(tr.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(reopen.Missing()); n != 6 {
		t.Errorf("%d cells missing after Ctrl-C, want all 6", n)
	}
	for _, r := range reopen.Results {
		if r.Status != StatusIncomplete {
			t.Errorf("cell %s: %s", r.ID, r.Status)
		}
	}
}

func TestEmit(t *testing.T) {
	for _, engine := range Engines {
		var b bytes.Buffer
		if err := Emit(&b, EmitOptions{Engine: engine, Shards: 3, File: "ci/smoke.yaml"}); err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(b.Bytes(), &doc); err != nil {
			t.Fatalf("%s: not YAML: %v\n%s", engine, err, b.String())
		}
		out := b.String()
		for _, w := range []string{"matrix run ci/smoke.yaml", "results merge", "--out merged", "results pack merged --results-only", "It is --results-only: this job has"} {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no %q", engine, w)
			}
		}
		switch engine {
		case "github":
			jobs := doc["jobs"].(map[string]any)
			shards := jobs["cells"].(map[string]any)["strategy"].(map[string]any)["matrix"].(map[string]any)["shard"].([]any)
			if len(shards) != 3 || jobs["report"].(map[string]any)["needs"] != "cells" {
				t.Errorf("github: shards %v", shards)
			}
			if !strings.Contains(out, "--shard ${{ matrix.shard }}/3") || !strings.Contains(out, "matrix cache-key ci/smoke.yaml") {
				t.Errorf("github: no shard or cache key")
			}
			// The merge job keeps the bundle as an artifact, after the
			// merge whatever its status.
			steps := jobs["report"].(map[string]any)["steps"].([]any)
			last := steps[len(steps)-1].(map[string]any)
			pack := steps[len(steps)-2].(map[string]any)
			if last["uses"] != "actions/upload-artifact@v4" || last["with"].(map[string]any)["path"] != "merged.klab.tar.zst" || last["if"] != "always()" || pack["if"] != "always()" {
				t.Errorf("github: the report job's last steps %v, %v", pack, last)
			}
			// The JUnit report is an artifact of its own, whatever the
			// merge's status.
			if !slices.ContainsFunc(steps, func(s any) bool {
				st := s.(map[string]any)
				w, _ := st["with"].(map[string]any)
				return st["uses"] == "actions/upload-artifact@v4" && st["if"] == "always()" && w["path"] == "merged/report.xml"
			}) {
				t.Errorf("github: no JUnit artifact among the report job's steps")
			}
		case "gitlab":
			cells := doc["klab-cells"].(map[string]any)
			key := cells["cache"].(map[string]any)["key"].(map[string]any)
			// GitLab's rules: at most two files, a prefix without "/".
			files := key["files"].([]any)
			// One cache per shard.
			if cells["parallel"] != 3 || len(files) == 0 || len(files) > 2 || strings.Contains(key["prefix"].(string), "/") || !strings.HasSuffix(key["prefix"].(string), "-$CI_NODE_INDEX") {
				t.Errorf("gitlab: parallel %v, cache key %v", cells["parallel"], key)
			}
			report := doc["klab-report"].(map[string]any)
			artifacts := report["artifacts"].(map[string]any)
			paths := artifacts["paths"].([]any)
			script := report["script"].([]any)
			if !slices.Contains(paths, any("merged.klab.tar.zst")) || script[len(script)-1] != `exit "${merge_status:-0}"` {
				t.Errorf("gitlab: report artifacts %v, script %v", paths, script)
			}
			// The JUnit report the merge writes (xreport.WriteAll).
			if junit, _ := artifacts["reports"].(map[string]any); junit["junit"] != "merged/report.xml" || artifacts["when"] != "always" {
				t.Errorf("gitlab: report artifacts %v: want merged/report.xml as the JUnit report, kept always", artifacts)
			}
		}
	}
	for _, o := range []EmitOptions{{Engine: "jenkins", Shards: 2, File: "m.yaml"}, {Engine: "github", Shards: 0, File: "m.yaml"}, {Engine: "github", Shards: 2, File: "m.yaml; rm -rf /"}} {
		if err := Emit(io.Discard, o); err == nil {
			t.Errorf("Emit(%+v): no error", o)
		}
	}
}

func TestCacheKey(t *testing.T) {
	f := testFile(t, matrixYAML)
	k1, err := f.CacheKey()
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := testFile(t, matrixYAML).CacheKey(); again != k1 {
		t.Errorf("the same inputs give %s and %s", k1, again)
	}
	// Another patch content, same names: another key.
	if err := os.WriteFile(f.Kernels[2].Build.Patches[0], []byte("--- a\n+++ c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if k2, _ := f.CacheKey(); k2 == k1 || !strings.HasPrefix(k2, "klab-t-") {
		t.Errorf("keys %s, %s", k1, k2)
	}
}

// TestShippedMatrices: the README's matrix and matrices/*.yaml load.
func TestShippedMatrices(t *testing.T) {
	files, _ := filepath.Glob("../matrices/*.yaml")
	if len(files) == 0 {
		t.Fatal("no matrices/*.yaml")
	}
	for _, p := range files {
		if _, err := LoadFile(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, block := range strings.Split(string(data), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.Contains(block, "kernels:") {
			continue
		}
		found = true
		if _, err := Load("README.md", "..", []byte(block)); err != nil {
			t.Errorf("README.md's matrix: %v", err)
		}
	}
	if !found {
		t.Error("README.md has no matrix example")
	}
}

// TestEmitActionlint lints the GitHub workflow with actionlint, shell
// scripts and expressions included.
func TestEmitActionlint(t *testing.T) {
	var b bytes.Buffer
	if err := Emit(&b, EmitOptions{Engine: "github", Shards: 4, File: "ci/smoke.yaml"}); err != nil {
		t.Fatal(err)
	}
	l, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.Lint(".github/workflows/klab.yml", b.Bytes(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("actionlint: %s", e.Error())
	}
	// The linter does catch a mistake of the kind an edit could make.
	broken := strings.Replace(b.String(), "${{ matrix.shard }}/4", "${{ matrix.shards }}/4", 1)
	if errs, err := l.Lint("broken.yml", []byte(broken), nil); err != nil || len(errs) == 0 {
		t.Errorf("actionlint found nothing wrong with an unknown matrix property: %v", err)
	}
}

// TestEmittedExamples: the example CI configurations the README points
// to are what klab matrix emit prints today.
func TestEmittedExamples(t *testing.T) {
	for engine, file := range map[string]string{"github": "github-workflow.yml", "gitlab": "gitlab-ci.yml"} {
		var b bytes.Buffer
		if err := Emit(&b, EmitOptions{Engine: engine, Shards: 2, File: "matrices/smoke.yaml"}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("..", "matrices", "ci", file))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != b.String() {
			t.Errorf("matrices/ci/%s is not what klab matrix emit prints: bin/klab matrix emit matrices/smoke.yaml --engine %s --shards 2 > matrices/ci/%s", file, engine, file)
		}
	}
}

// TestVMShapeTCG: under single-threaded TCG a VM keeps one host CPU busy
// whatever its vCPUs, so twice the cells fit 2 CPUs.
func TestVMShapeTCG(t *testing.T) {
	f := testFile(t, matrixYAML)
	if cpus, mem := vmShape(f, &Options{}); cpus != 2 || mem != 1024 {
		t.Errorf("KVM shape: %d CPUs, %d MiB", cpus, mem)
	}
	if cpus, _ := vmShape(f, &Options{TCG: true}); cpus != 1 {
		t.Errorf("TCG: %d host CPUs per VM, want 1", cpus)
	}
	if cpus, mem := vmShape(f, &Options{CPUs: 4, MemMB: 4096}); cpus != 4 || mem != 4096 {
		t.Errorf("overrides: %d CPUs, %d MiB", cpus, mem)
	}
}
