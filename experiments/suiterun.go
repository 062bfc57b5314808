package experiments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"klab/experiments/fstests"
	imgfstests "klab/images/fstests"
	"klab/images/userspace"
	"klab/internal/fileio"
	"klab/internal/option"
	"klab/internal/specfile"
	"klab/lab"
	"klab/results"
	"klab/results/splat"
	"klab/results/suite"
)

// SuiteFstests names the fstests suite in manifests.
const SuiteFstests = "fstests"

// SuiteRecord is what a suite experiment ran, in its manifest: the
// suite, its configuration, and the userspace and fstests build its
// guests ran, with their packages, versions, source and toolchain.
type SuiteRecord struct {
	// Name is the suite: SuiteFstests.
	Name string `json:"name"`
	// Config is the fstests configuration (ext4, fuse-klab-uring, ...).
	Config string `json:"config"`
	// Userspace describes the guests' userspace image.
	Userspace *userspace.Descriptor `json:"userspace,omitempty"`
	// Fstests describes the fstests build.
	Fstests *imgfstests.Descriptor `json:"fstests,omitempty"`
	// Regressed says that B has a regression against A; Failed that the
	// run fails (a regression, or with one kernel a test that failed,
	// hung or crashed).
	Regressed bool `json:"regressed"`
	Failed    bool `json:"failed"`
}

// SuiteOptions say how to run a suite experiment.
type SuiteOptions struct {
	// Kernels are one kernel reference, or two to compare (A first).
	Kernels []string
	// Env is what the suite runs on: the fstests tree, kernels, guests.
	Env fstests.Env
	// RunsDir is where the run directory is made.
	RunsDir string
	// Progress receives a line per guest and per test; nil means none.
	Progress io.Writer
	// Command is klab's argv, for the manifest.
	Command []string
}

// SuiteResult is a finished (or interrupted) suite run.
type SuiteResult struct {
	Dir      string
	Manifest *Manifest
	// Result is what the suite produced; nil when nothing ran.
	Result *fstests.Result
}

// RunSuite runs the suite experiment f and saves it as Run saves an
// experiment: spec.yaml and the manifest (experiment.json) in the run
// directory, with the suite's results and reports beside them (see
// fstests.Run). Bad input gives a *specfile.BadInputError before any
// guest boots and leaves no run directory.
func RunSuite(ctx context.Context, f *File, o SuiteOptions) (*SuiteResult, error) {
	s := f.Spec
	if s.Suite == nil || s.Suite.Fstests == nil {
		return nil, &specfile.BadInputError{Err: fmt.Errorf("%s has no suite: it runs workloads and checks", f.Path)}
	}
	if n := len(o.Kernels); n < 1 || n > 2 {
		return nil, &specfile.BadInputError{Err: option.Errorf("kernel", "given %d times: %s runs a suite on one kernel, or compares two (A, then B)", n, s.Name)}
	}
	req, err := fstestsRequest(s.Suite.Fstests)
	if err != nil {
		return nil, &specfile.BadInputError{Err: fmt.Errorf("%s: %w", f.Path, err)}
	}
	// Resolve every kernel and check requires before anything runs; the
	// suite resolves them again from these.
	resolved := map[string]*results.Kernel{}
	var errs []error
	for _, ref := range o.Kernels {
		k, err := o.Env.Resolve(ctx, ref)
		if err != nil {
			errs = append(errs, option.Errorf("kernel", "%s: %w", ref, err))
			continue
		}
		resolved[ref] = k
		if why := Unmet(&s.Requires, k); why != "" {
			errs = append(errs, fmt.Errorf("%s: kernel %s (%s) %s", f.Path, ref, k.Version, why))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &specfile.BadInputError{Err: err}
	}
	env := o.Env
	env.Resolve = func(ctx context.Context, ref string) (*results.Kernel, error) {
		if k, ok := resolved[ref]; ok {
			return k, nil
		}
		return o.Env.Resolve(ctx, ref)
	}

	run, err := results.Store{Root: o.RunsDir}.Create("exp-" + s.Name[:min(len(s.Name), 40)])
	if err != nil {
		return nil, err
	}
	man := &Manifest{
		Schema: ManifestSchema, RunID: run.ID, Experiment: s.Name, SpecFile: f.Path, SpecSHA256: f.SHA256,
		Command: o.Command, Axis: "kernel", Rounds: 1, Start: time.Now(), Status: StatusRunning, Guests: []GuestRecord{},
		Suite: &SuiteRecord{Name: SuiteFstests, Config: req.Config.Name, Userspace: env.Userspace, Fstests: env.Fstests},
	}
	man.Host, _ = results.HostInfo()
	for _, ref := range o.Kernels {
		man.Kernels = append(man.Kernels, ManifestKernel{Ref: ref, Kernel: lab.ManifestKernel(resolved[ref])})
	}
	save := func() error { return run.WriteJSON(ManifestFileName, man) }
	if err := errors.Join(fileio.WriteAtomic(filepath.Join(run.Dir, SpecFileName), f.Data, 0o644), save()); err != nil {
		return nil, err
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "klab: %s: %s on %s; saving to %s\n", s.Name, describeSuite(s.Suite.Fstests), strings.Join(o.Kernels, " against "), run.Dir)
	}
	req.Kernels, req.Dir, req.Progress = o.Kernels, run.Dir, o.Progress
	req.TimesFile = filepath.Join(o.RunsDir, fstests.TimesFileName(req.Config.Name))
	res, runErr := fstests.Run(ctx, env, req)
	var ie *fstests.InputError
	if errors.As(runErr, &ie) {
		// Nothing booted: bad input leaves no run directory.
		_ = os.RemoveAll(run.Dir)
		return nil, &specfile.BadInputError{Err: fmt.Errorf("%s: %w", f.Path, runErr)}
	}
	man.Guests = suiteGuests(run.Dir, len(o.Kernels))
	man.addGuestFacts(run.Dir)
	if res != nil {
		man.Suite.Regressed, man.Suite.Failed = res.Regressed(), res.Failed()
	}
	man.finish(ctx, runErr)
	if err := save(); err != nil && runErr == nil {
		runErr = err
	}
	return &SuiteResult{Dir: run.Dir, Manifest: man, Result: res}, runErr
}

// suiteGuests are the boots of a suite run in dir, by kernel: each side's
// boots are under boots/ (one kernel) or a/boots/ and b/boots/ (an A/B).
func suiteGuests(dir string, kernels int) []GuestRecord {
	out := []GuestRecord{}
	for i := range kernels {
		boots := "boots"
		if kernels == 2 {
			boots = filepath.Join(string(rune('a'+i)), "boots")
		}
		ents, err := os.ReadDir(filepath.Join(dir, boots))
		if err != nil {
			continue
		}
		for _, e := range ents {
			rel := filepath.Join(boots, e.Name())
			gm, err := results.ReadManifest(filepath.Join(dir, rel))
			if !e.IsDir() || err != nil {
				continue
			}
			out = append(out, GuestRecord{
				Dir: rel, Kernel: i, Outcome: gm.Outcome, BootToAgentMs: gm.Times.BootToAgentMs,
				WallMs: wallMs(gm.Times), Splats: []splat.Report{},
			})
		}
	}
	return out
}

// wallMs is a boot's wall time in milliseconds; 0 while it runs.
func wallMs(t results.Times) int64 {
	if t.End.IsZero() {
		return 0
	}
	return t.End.Sub(t.Start).Milliseconds()
}

// IsSuite says whether the run is a suite experiment's.
func (s *Saved) IsSuite() bool { return s.Manifest.Suite != nil }

// SuiteRuns reads a suite run's results: the run of its one kernel, or
// A's and B's.
func (s *Saved) SuiteRuns() ([]*suite.Run, error) {
	names := []string{"run.json"}
	if len(s.Manifest.Kernels) == 2 {
		names = []string{"a.json", "b.json"}
	}
	var runs []*suite.Run
	for _, n := range names {
		r, err := suite.Load(filepath.Join(s.Dir, n))
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// WriteSuiteReport writes a suite run's report in format (one of
// suite.Formats): the verdict of an A/B, or the run of one kernel.
func (s *Saved) WriteSuiteReport(w io.Writer, format string) error {
	runs, err := s.SuiteRuns()
	if err != nil {
		return err
	}
	if len(runs) == 2 {
		return suite.WriteVerdict(w, suite.Compare(runs[0], runs[1]), format)
	}
	return suite.WriteRun(w, runs[0], format)
}
