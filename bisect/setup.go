package bisect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"klab/experiments"
	"klab/images"
	"klab/images/build"
	"klab/internal/specfile"
	"klab/results/splat"
	"klab/results/stats"
)

// Options are a new bisection's inputs, as klab bisect's flags give
// them.
type Options struct {
	// Tree is the git tree; Good and Bad revisions of it.
	Tree, Good, Bad string
	// Config are config fragments (lab, debug, or files); Patches are
	// applied on top of every commit.
	Config  []string
	Patches []string
	// Spec is an experiment file or the name of one of klab's.
	Spec string
	// Sets override the spec's parameters (name -> values).
	Sets map[string]string
	// The criterion: at most one of them; none means any splat the
	// good commit did not print.
	Splat, SplatFamily, Check, Test, Row string
	// Rounds is a step's rounds (0: the spec's); MaxRounds the most an
	// ambiguous metric step gets (0: twice Rounds).
	Rounds, MaxRounds int
	// FstestsSrc is the fstests source of a suite experiment.
	FstestsSrc string
	// Command is klab's argv.
	Command []string
}

// MinMetricRounds is the fewest rounds a metric step takes: 3 samples
// against an endpoint's 6 is the smallest count at which the
// Mann-Whitney U test can reach stats.Alpha.
const MinMetricRounds = 3

// Prepare checks o before anything is built (the tree, the revisions,
// the spec and the criterion's name in it, the config and the patches)
// and returns the bisection's manifest and the spec with its overrides.
// Every problem comes back at once, as a *specfile.BadInputError.
func Prepare(ctx context.Context, o Options) (*Manifest, *experiments.File, error) {
	bad := func(err error) error { return &specfile.BadInputError{Err: err} }
	var errs []error
	given := 0
	for _, v := range []string{o.Splat, o.SplatFamily, o.Check, o.Test, o.Row} {
		if v != "" {
			given++
		}
	}
	if given > 1 {
		errs = append(errs, errors.New("--splat, --splat-family, --check, --test and --row each name what makes a commit bad: give one of them"))
	}
	e, terr := CheckTree(ctx, o.Tree, o.Good, o.Bad)
	if terr != nil {
		errs = append(errs, terr)
	}
	f, err := experiments.Find(o.Spec)
	if err != nil {
		return nil, nil, bad(errors.Join(append(errs, err)...))
	}
	run := f
	if len(o.Sets) > 0 {
		if run, err = f.WithSets(o.Sets); err != nil {
			return nil, nil, bad(errors.Join(append(errs, err)...))
		}
	}
	m := &Manifest{Good: o.Good, Bad: o.Bad, Config: o.Config, Patches: o.Patches, Experiment: f.Spec.Name, SpecFile: f.Path,
		SpecSHA256: f.SHA256, Sets: o.Sets, FstestsSrc: o.FstestsSrc, Command: o.Command}
	if len(m.Config) == 0 {
		m.Config = []string{"lab"}
	}
	if e != nil {
		m.Tree, m.GoodCommit, m.BadCommit, m.Commits = e.Tree, e.Good, e.Bad, e.Commits
	}
	suite := run.Spec.Suite != nil
	c, cerr := criterion(run, o, suite)
	errs = append(errs, cerr...)
	m.Criterion = c
	m.Rounds, m.MaxRounds = o.Rounds, o.MaxRounds
	errs = append(errs, rounds(run, m, o, suite)...)
	if c.Kind == KindMetric {
		errs = append(errs, metricRow(run, m, o.Row)...)
	}
	for _, name := range m.Config {
		if strings.ContainsRune(name, '/') || !slices.Contains(images.ConfigFragmentNames(), name) {
			if fi, err := os.Stat(name); err != nil || fi.IsDir() {
				errs = append(errs, fmt.Errorf("--config %s: neither %s nor a fragment file", name, strings.Join(images.ConfigFragmentNames(), " nor ")))
			}
		}
	}
	if len(o.Patches) > 0 {
		if _, err := build.LoadPatches(o.Patches); err != nil {
			errs = append(errs, fmt.Errorf("--patch: %w", err))
		}
	}
	for i, p := range m.Patches {
		if abs, err := filepath.Abs(p); err == nil {
			m.Patches[i] = abs
		}
	}
	for i, c := range m.Config {
		if strings.ContainsRune(c, '/') || !slices.Contains(images.ConfigFragmentNames(), c) {
			if abs, err := filepath.Abs(c); err == nil {
				m.Config[i] = abs
			}
		}
	}
	if !suite && o.FstestsSrc != "" {
		errs = append(errs, fmt.Errorf("--fstests-src: %s runs workloads, not a test suite", f.Path))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, bad(err)
	}
	return m, run, nil
}

// criterion is what the flags chase in f.
func criterion(f *experiments.File, o Options, suite bool) (Criterion, []error) {
	var errs []error
	s := f.Spec
	switch {
	case o.SplatFamily != "":
		t, err := splat.ParseType(o.SplatFamily)
		if err != nil {
			errs = append(errs, fmt.Errorf("--splat-family: %w", err))
		}
		return Criterion{Kind: KindSplat, SplatType: string(t)}, errs
	case o.Check != "":
		if suite {
			return Criterion{}, []error{fmt.Errorf("--check %s: %s runs a test suite, which has no checks; chase one of its tests with --test", o.Check, f.Path)}
		}
		var names []string
		for _, c := range s.Checks {
			names = append(names, c.Name)
		}
		if !slices.Contains(names, o.Check) {
			want := "it has none"
			if len(names) > 0 {
				want = "want " + strings.Join(names, ", ")
			}
			errs = append(errs, fmt.Errorf("--check %s: %s has no such check; %s", o.Check, f.Path, want))
		}
		return Criterion{Kind: KindCheck, Check: o.Check}, errs
	case o.Test != "":
		if !suite || s.Suite.Fstests == nil {
			return Criterion{}, []error{fmt.Errorf("--test %s: %s runs workloads, not a test suite; --test needs a suite experiment (fstests)", o.Test, f.Path)}
		}
		fs := s.Suite.Fstests
		if len(fs.Groups) == 0 && len(fs.Tests) > 0 && !slices.ContainsFunc(fs.Tests, func(g string) bool {
			ok, _ := path.Match(g, o.Test)
			return ok
		}) {
			errs = append(errs, fmt.Errorf("--test %s: %s does not run it; it runs %s", o.Test, f.Path, strings.Join(fs.Tests, ", ")))
		}
		if slices.Contains(fs.Exclude, o.Test) {
			errs = append(errs, fmt.Errorf("--test %s: %s excludes it", o.Test, f.Path))
		}
		return Criterion{Kind: KindTest, Test: o.Test}, errs
	case o.Row != "":
		if suite {
			return Criterion{}, []error{fmt.Errorf("--row %s: %s runs a test suite, which has no rows", o.Row, f.Path)}
		}
		return Criterion{Kind: KindMetric}, nil
	}
	return Criterion{Kind: KindSplat, Splat: o.Splat}, nil
}

// rounds fills in and checks m's rounds.
func rounds(f *experiments.File, m *Manifest, o Options, suite bool) []error {
	var errs []error
	if suite {
		if o.Rounds != 0 || o.MaxRounds != 0 {
			errs = append(errs, fmt.Errorf("--rounds, --max-rounds: %s runs a test suite once per step", f.Path))
		}
		m.Rounds, m.MaxRounds = 1, 0
		return errs
	}
	if o.Rounds < 0 || o.Rounds > 1000 {
		errs = append(errs, fmt.Errorf("--rounds %d is out of range, want 1..1000", o.Rounds))
	}
	if m.Rounds == 0 {
		m.Rounds = f.Spec.Rounds
		if m.Rounds == 0 {
			m.Rounds = 3
		}
	}
	if m.Criterion.Kind != KindMetric {
		if o.MaxRounds != 0 {
			errs = append(errs, errors.New("--max-rounds bounds the rounds of a metric step (--row)"))
		}
		m.MaxRounds = 0
		return errs
	}
	if m.Rounds < MinMetricRounds {
		if o.Rounds != 0 {
			errs = append(errs, fmt.Errorf("--rounds %d: a metric step needs at least %d rounds (%d samples against an endpoint's %d can reach p<%.2f with the Mann-Whitney U test; fewer cannot)",
				o.Rounds, MinMetricRounds, MinMetricRounds, 2*MinMetricRounds, stats.Alpha))
		}
		m.Rounds = MinMetricRounds
	}
	if m.MaxRounds == 0 {
		m.MaxRounds = 2 * m.Rounds
	}
	if m.MaxRounds < m.Rounds || m.MaxRounds > 1000 {
		errs = append(errs, fmt.Errorf("--max-rounds %d is out of range, want %d..1000 (at least --rounds)", m.MaxRounds, m.Rounds))
	}
	return errs
}

// metricRow resolves --row: a row's number (from 1) or its name, as the
// report names rows, among the rows a step's run has (every row on one
// kernel, a parameter the spec compares among the row's parameters).
func metricRow(f *experiments.File, m *Manifest, row string) []error {
	p, err := experiments.MakePlan(f, experiments.PlanOptions{Kernels: []string{"build:bisect"}, Compare: "kernel", Single: true, Rounds: m.Rounds})
	if err != nil {
		return []error{err}
	}
	rows := experiments.ReportRows(f, p)
	pick := -1
	if n, err := strconv.Atoi(row); err == nil && n >= 1 && n <= len(rows) {
		pick = n - 1
	}
	for i, r := range rows {
		if pick < 0 && strings.Join(strings.Fields(r.Name), " ") == strings.Join(strings.Fields(row), " ") {
			pick = i
		}
	}
	if pick < 0 {
		var list []string
		for i, r := range rows {
			list = append(list, fmt.Sprintf("%d %q", i+1, r.Name))
		}
		return []error{fmt.Errorf("--row %s: no such row in %s; its rows (give the number or the name): %s", row, f.Path, strings.Join(list, ", "))}
	}
	r := rows[pick]
	m.Criterion = Criterion{Kind: KindMetric, Row: r.Name, Metric: r.Metric, Unit: r.Unit, Direction: r.Direction}
	return nil
}

// Rows are the rows a bisection's steps measure for f with its --set
// overrides: what --row takes, by number (from 1) or name.
func Rows(f *experiments.File) ([]experiments.ReportRow, error) {
	p, err := experiments.MakePlan(f, experiments.PlanOptions{Kernels: []string{"build:bisect"}, Compare: "kernel", Single: true})
	if err != nil {
		return nil, err
	}
	return experiments.ReportRows(f, p), nil
}
