package matrix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"klab/experiments/fstests"
	"klab/guest/proto"
	"klab/internal/fileio"
	"klab/internal/specfile"
	labfstests "klab/lab/fstests"
	"klab/results"
	"klab/results/xreport"
)

// suiteSpec is a suite experiment: fstests on ext4.
const suiteSpec = `
name: fst
suite:
  fstests:
    config: ext4
    tests: [generic/001, generic/002, generic/003]
    reruns: 2
`

// suiteMatrix has a suite experiment and an experiment of workloads over
// the three kernels of testFile's opener.
const suiteMatrix = `
name: s
baseline: debian:6.12
kernels:
  - debian:6.12
  - debian:7.3
  - build: {name: fix, source: debian:7.3, patches: [fix.patch]}
experiments:
  - fst.yaml
  - kx.yaml
`

// fakeSuite is an fstests environment whose guests pass every test,
// but on debian:7.3 generic/002 fails every time, and on build:fix
// generic/003 fails its first run only (flaky). It counts the Envs made
// and the guests booted per kernel.
type fakeSuite struct {
	t      *testing.T
	tree   string
	mu     sync.Mutex
	made   int
	guests map[string]int
}

func newFakeSuite(t *testing.T) *fakeSuite {
	tree := t.TempDir()
	d := filepath.Join(tree, "tests", "generic")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "group.list"), []byte("001 auto quick\n002 auto quick\n003 auto\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &fakeSuite{t: t, tree: tree, guests: map[string]int{}}
}

// env is an Options.Fstests.
func (s *fakeSuite) env(context.Context) (fstests.Env, error) {
	s.mu.Lock()
	s.made++
	s.mu.Unlock()
	return fstests.Env{
		Tree:    s.tree,
		Resolve: resolve,
		Guest: func(k *results.Kernel, _ proto.FstestsConfig, _ time.Duration, dir string) labfstests.Guest {
			return func(_ context.Context, tests []string, _ int) (*labfstests.Outcome, error) {
				s.mu.Lock()
				s.guests[k.Name]++
				n := s.guests[k.Name]
				run, err := results.Store{Root: dir}.Create("fstests")
				s.mu.Unlock()
				if err != nil {
					return nil, err
				}
				if err := run.WriteManifest(&results.Manifest{Kernel: *k}); err != nil {
					return nil, err
				}
				out := &labfstests.Outcome{RunDir: run.Dir}
				for _, name := range tests {
					r := proto.TestResult{Name: name, Status: proto.TestPass, Seconds: 1}
					if k.Name == "debian:7.3" && name == "generic/002" || k.Name == "build:fix" && name == "generic/003" && n == 1 {
						r.Status, r.Reason = proto.TestFail, "output mismatch"
					}
					out.Results = append(out.Results, r)
				}
				return out, nil
			}
		},
	}, nil
}

// suiteOptions are options with the fake suite's environment.
func suiteOptions(out string, shard Shard, s *fakeSuite) Options {
	o, _ := options(out, 2, shard)
	o.Fstests = s.env
	return o
}

// suitesOf is a report's suite cells as comparable strings.
func suitesOf(x *xreport.Matrix) []string {
	var out []string
	for _, c := range x.Suites {
		line := fmt.Sprintf("%s@%s failed=%v", c.Experiment, c.Kernel, c.Failed)
		for _, sd := range c.Sides {
			line += fmt.Sprintf(" %s%s:%d/%d/%d/%d/%d", sd.Label, sd.Kernel, sd.Pass, sd.Fail, sd.NotRun, sd.Hang, sd.Crash)
		}
		for _, l := range []struct {
			what  string
			tests []xreport.SuiteTest
		}{{"regression", c.Regressions}, {"flaky", c.Flaky}, {"failing", c.Failing}} {
			for _, t := range l.tests {
				line += fmt.Sprintf(" %s:%s(%d/%d,%d/%d)", l.what, t.Name, t.BFails, t.BRuns, t.AFails, t.ARuns)
			}
		}
		out = append(out, line)
	}
	return out
}

func TestSuiteCells(t *testing.T) {
	f := testFile(t, suiteMatrix)
	ctx := context.Background()
	root := t.TempDir()
	s := newFakeSuite(t)
	tr, err := Run(ctx, f, suiteOptions(filepath.Join(root, "all"), Shard{1, 1}, s))
	if err != nil {
		t.Fatal(err)
	}
	if s.made != 1 {
		t.Errorf("the fstests environment was made %d times, want once", s.made)
	}
	// The baseline's cell runs it alone; the other two an A/B each, with
	// generic/002 (7.3) and generic/003 (fix) rerun twice on both sides:
	// the baseline boots once for its cell and three times as each A.
	if s.guests["debian:6.12"] != 7 || s.guests["debian:7.3"] != 3 || s.guests["build:fix"] != 3 {
		t.Errorf("guests per kernel %v", s.guests)
	}
	x := tr.Report()
	want := []string{
		"fst@debian:6.12 failed=false debian:6.12:3/0/0/0/0",
		"fst@debian:7.3 failed=true Adebian:6.12:3/0/0/0/0 Bdebian:7.3:2/1/0/0/0 regression:generic/002(3/3,0/3)",
		"fst@build:fix failed=false Adebian:6.12:3/0/0/0/0 Bbuild:fix:2/1/0/0/0 flaky:generic/003(1/3,0/3)",
	}
	if got := suitesOf(x); !slices.Equal(got, want) {
		t.Errorf("suite cells:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if x.Complete != 6 || len(x.Failures) != 1 || x.Failures[0].Cell != "fst on debian:7.3" ||
		!strings.Contains(x.Failures[0].Message, "fstests ext4 regressed against the baseline debian:6.12: generic/002 (B fails 3/3, A 0/3)") {
		t.Errorf("report: %d/%d complete, failures %+v", x.Complete, x.Cells, x.Failures)
	}
	if rows := rowsOf(x); len(rows) != 1 || !strings.HasPrefix(rows[0], "kx|create|") {
		t.Errorf("rows %v: the suite has no rows", rows)
	}
	if c := x.Suites[1]; c.Run == "" || !fileExists(filepath.Join(tr.Dir, c.Run, "junit.xml")) {
		t.Errorf("suite cell's run %q has no junit.xml", c.Run)
	}
	if k := x.Kernels[1]; k.Version != "7.3.4" {
		t.Errorf("kernel column %+v", k)
	}
	var b strings.Builder
	if err := xreport.Markdown(&b, x); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{
		"FAIL fst on `debian:7.3` (fstests ext4): A `debian:6.12`: 3 pass, 0 fail, 0 notrun, 0 hang, 0 crash; B",
		"regression generic/002 (B fails 3/3, A 0/3)",
		"fst on `build:fix` (fstests ext4): A `debian:6.12`: 3 pass",
		"flaky generic/003 (B fails 1/3, A 0/3)",
		"FAIL fst on `debian:7.3`: fstests ext4 regressed",
		"### Test suites",
	} {
		if !strings.Contains(b.String(), l) {
			t.Errorf("markdown report lacks %q:\n%s", l, b.String())
		}
	}
	b.Reset()
	if err := xreport.JUnit(&b, x); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), `name="fstests ext4"`); n != 3 {
		t.Errorf("JUnit: %d suite testcases, want one per cell:\n%s", n, b.String())
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestSuiteResumeAndShards: a tree with suite cells written by one
// process resumes in the next (only the missing cells run, the fstests
// environment is made only when one of them is a suite's), and shards
// merged give the same suite cells as the whole matrix.
func TestSuiteResumeAndShards(t *testing.T) {
	f := testFile(t, suiteMatrix)
	ctx := context.Background()
	root := t.TempDir()
	whole, err := Run(ctx, f, suiteOptions(filepath.Join(root, "all"), Shard{1, 1}, newFakeSuite(t)))
	if err != nil {
		t.Fatal(err)
	}
	want := suitesOf(whole.Report())

	// Killed (no cell.json) in a suite cell, interrupted in a kx cell.
	cells := whole.Manifest.Cells
	byID := map[string]Cell{}
	for _, c := range cells {
		byID[c.ID] = c
	}
	suiteCell, kxCell := byID["fst@debian_7.3"], byID["kx@build_fix"]
	os.Remove(filepath.Join(whole.Dir, CellsDir, suiteCell.ID, CellFile))
	fileio.WriteJSON(filepath.Join(whole.Dir, CellsDir, kxCell.ID, CellFile), &CellResult{Cell: kxCell, Status: StatusIncomplete})

	// The next process opens the tree from disk.
	reopened, err := Open(whole.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, c := range reopened.Missing() {
		missing = append(missing, c.ID)
	}
	if !slices.Equal(missing, []string{suiteCell.ID, kxCell.ID}) {
		t.Fatalf("missing %v", missing)
	}
	s := newFakeSuite(t)
	o := suiteOptions(whole.Dir, Shard{1, 1}, s)
	o.Resume = true
	resumed, err := Run(ctx, f, o)
	if err != nil {
		t.Fatal(err)
	}
	// Only the 7.3 suite cell ran: A/B with generic/002 rerun twice.
	if s.made != 1 || s.guests["debian:6.12"] != 3 || s.guests["debian:7.3"] != 3 || s.guests["build:fix"] != 0 {
		t.Errorf("resume: env made %d times, guests %v", s.made, s.guests)
	}
	if len(resumed.Missing()) != 0 {
		t.Errorf("after resume, missing %v", resumed.Missing())
	}
	for _, c := range cells {
		runs, _ := filepath.Glob(filepath.Join(whole.Dir, CellsDir, c.ID, "*-exp-*"))
		if len(runs) != 1 {
			t.Errorf("cell %s has %d runs, want 1", c.ID, len(runs))
		}
	}
	again, err := Open(whole.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := suitesOf(again.Report()); !slices.Equal(got, want) {
		t.Errorf("resumed suite cells:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Resuming a tree whose suite cells all finished makes no fstests
	// environment, nor needs a source.
	fileio.WriteJSON(filepath.Join(whole.Dir, CellsDir, kxCell.ID, CellFile), &CellResult{Cell: kxCell, Status: StatusIncomplete})
	o.Fstests = func(context.Context) (fstests.Env, error) {
		return fstests.Env{}, &fstests.SourceError{Err: errors.New("no fstests source")}
	}
	if _, err := Run(ctx, f, o); err != nil {
		t.Errorf("resuming a kx cell: %v", err)
	}

	// Shards: each makes its own environment when it has a suite cell;
	// merged, they give the whole matrix's suite cells.
	var dirs []string
	for i := 1; i <= 2; i++ {
		s := newFakeSuite(t)
		tr, err := Run(ctx, f, suiteOptions(filepath.Join(root, fmt.Sprintf("shard%d", i)), Shard{i, 2}, s))
		if err != nil {
			t.Fatal(err)
		}
		if s.made != 1 {
			t.Errorf("shard %d made the environment %d times", i, s.made)
		}
		dirs = append(dirs, tr.Dir)
	}
	// Shard 1/2 has fst@debian_7.3 but not the baseline's cell: the
	// baseline still runs there as its A.
	shard1, _ := Open(dirs[0])
	if _, ok := shard1.Results["fst@debian_7.3"]; !ok {
		t.Errorf("shard 1/2 cells %v", shard1.Manifest.Cells)
	}
	merged, err := Merge(dirs, filepath.Join(root, "merged"))
	if err != nil {
		t.Fatal(err)
	}
	if got := suitesOf(merged.Report()); !slices.Equal(got, want) {
		t.Errorf("merged suite cells:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A shard without suite cells never makes the environment.
	s = newFakeSuite(t)
	tr, err := Run(ctx, f, suiteOptions(filepath.Join(root, "shard6"), Shard{6, 6}, s))
	if err != nil || s.made != 0 || len(tr.Manifest.Cells) != 1 || tr.Manifest.Cells[0].Experiment != "kx" {
		t.Errorf("shard 6/6: %v, env made %d times, cells %v", err, s.made, tr.Manifest.Cells)
	}
}

// TestSuiteBadInput: a missing fstests source is bad input before any
// cell runs, only when a suite cell is to run; a baseline that cannot be
// had fails the suite cells that need it as their A.
func TestSuiteBadInput(t *testing.T) {
	f := testFile(t, suiteMatrix)
	ctx := context.Background()
	root := t.TempDir()
	o, _ := options(filepath.Join(root, "nosrc"), 1, Shard{1, 1})
	o.Fstests = func(context.Context) (fstests.Env, error) {
		return fstests.Env{}, &fstests.SourceError{Err: fmt.Errorf("no fstests source: name it with --fstests-src DIR|TARBALL (or $%s)", fstests.SrcEnv)}
	}
	_, err := Run(ctx, f, o)
	if !errors.As(err, new(*specfile.BadInputError)) || !strings.Contains(err.Error(), "--fstests-src") || !strings.Contains(err.Error(), fstests.SrcEnv) {
		t.Errorf("no source: %v", err)
	}
	if _, err := os.Stat(o.Out); err == nil {
		t.Errorf("bad input left %s", o.Out)
	}
	o.Fstests = nil
	if _, err := Run(ctx, f, o); !errors.As(err, new(*specfile.BadInputError)) {
		t.Errorf("no environment: %v", err)
	}
	// A matrix without suite cells needs none.
	plain := testFile(t, matrixYAML)
	o.Fstests = func(context.Context) (fstests.Env, error) {
		t.Error("a matrix without suite cells made the fstests environment")
		return fstests.Env{}, nil
	}
	if _, err := Run(ctx, plain, o); err != nil {
		t.Errorf("plain matrix: %v", err)
	}

	// The baseline's build fails: its cells and the suite's A/B cells
	// on the other kernels fail; kx on the other kernels runs.
	bf := testFile(t, strings.Replace(suiteMatrix, "baseline: debian:6.12", "baseline: build:fix", 1))
	s := newFakeSuite(t)
	o = suiteOptions(filepath.Join(root, "nobase"), Shard{1, 1}, s)
	o.Build = func(context.Context, *Recipe) error { return errors.New("compiler on fire") }
	tr, err := Run(ctx, bf, o)
	if err == nil {
		t.Fatal("no error")
	}
	var failed []string
	for _, c := range tr.Manifest.Cells {
		if r := tr.Results[c.ID]; r.Status == StatusError {
			failed = append(failed, c.ID)
		}
	}
	if want := []string{"fst@build_fix", "fst@debian_6.12", "fst@debian_7.3", "kx@build_fix"}; !slices.Equal(failed, want) {
		t.Errorf("failed cells %v, want %v", failed, want)
	}
	if len(s.guests) != 0 {
		t.Errorf("guests booted: %v", s.guests)
	}
}
