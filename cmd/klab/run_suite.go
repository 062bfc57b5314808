package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"klab/experiments"
	experimentsfstests "klab/experiments/fstests"
	"klab/lab/hostguest"
)

// runSuite runs a suite experiment: klab run of a spec with a suite.
func runSuite(ctx context.Context, g *globalOptions, o *runOptions, f *experiments.File, stdout, stderr io.Writer) error {
	for _, fl := range []struct {
		name string
		set  bool
	}{
		{"--set", len(o.sets) > 0}, {"--rounds", o.rounds != 0 || o.auto}, {"--compare", o.compare != ""}, {"--order", o.order != ""},
		{"--seed", o.seed != 0}, {"--cpus", o.cpus != 0}, {"--memory", o.memMB != 0}, {"--accel", o.accel != ""},
		{"--icount", o.icount != ""}, {"--tcg-multithread", o.tcgMultithread},
	} {
		if fl.set {
			return badInput(fmt.Errorf("%s: %s runs a test suite in guests klab shapes itself; %s applies to experiments of workloads", fl.name, f.Path, fl.name))
		}
	}
	if slices.Contains(o.kernels, hostguest.Ref) {
		return badInput(fmt.Errorf("--kernel %s: %s runs a test suite, in guests only", hostguest.Ref, f.Path))
	}
	var progress io.Writer
	if !o.quiet {
		progress = stderr
	}
	env, err := suiteEnv(ctx, g, o.fstestsSrc, progress)
	if err != nil {
		return err
	}
	res, err := experiments.RunSuite(ctx, f, experiments.SuiteOptions{
		Kernels: o.kernels, Env: env, RunsDir: g.runsDir, Progress: progress, Command: os.Args,
	})
	return finishSuite(ctx, res, err, o.format, stdout, stderr)
}

// suiteEnv builds (or finds in the cache) fstests from src and the
// userspace, for a suite experiment. A missing or broken source is bad
// input naming both ways to give it.
func suiteEnv(ctx context.Context, g *globalOptions, src string, progress io.Writer) (experimentsfstests.Env, error) {
	lo := g.labOptions()
	env, err := experimentsfstests.NewEnv(ctx, experimentsfstests.HostOptions{Lab: &lo, Src: src, Progress: progress, Command: os.Args})
	var se *experimentsfstests.SourceError
	if errors.As(err, &se) {
		return env, badInput(fmt.Errorf("--fstests-src: %w", se.Err))
	}
	return env, err
}

// finishSuite prints a suite run's report in format and says where the
// run is; a regression (with one kernel, a failed test) is exit status 1.
func finishSuite(ctx context.Context, res *experiments.SuiteResult, err error, format string, stdout, stderr io.Writer) error {
	if res == nil {
		return err
	}
	if r := res.Result; r != nil && len(r.Runs) > 0 && (err == nil || r.Reported > 0) {
		saved, oerr := experiments.Open(res.Dir)
		if oerr == nil {
			oerr = saved.WriteSuiteReport(stdout, format)
		}
		if oerr != nil && err == nil {
			err = oerr
		}
	}
	fmt.Fprintf(stderr, "klab: run saved to %s (HTML report: %s)\n", res.Dir, filepath.Join(res.Dir, "report.html"))
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintf(stderr, "klab: interrupted; what finished is in %s\n", res.Dir)
		return &exitError{code: exitInterrupted}
	case err != nil:
		return fmt.Errorf("%w (what finished is in %s)", err, res.Dir)
	case res.Result.Regressed():
		return &exitError{code: 1, msg: "B has a regression"}
	case res.Result.Failed():
		return &exitError{code: 1}
	}
	return nil
}

// rerunSuite repeats the suite run old with exactly its kernels, then
// says what differed from it.
func rerunSuite(ctx context.Context, g *globalOptions, old *experiments.Saved, f *experiments.File, kernels []string, src string, quiet bool) error {
	if rec := old.Manifest.Suite.Fstests; src == "" && os.Getenv(experimentsfstests.SrcEnv) == "" && rec != nil {
		src = rec.Source.Path
	}
	var progress io.Writer
	if !quiet {
		progress = os.Stderr
	}
	env, err := suiteEnv(ctx, g, src, progress)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "klab: rerunning %s with kernels %v\n", old.Manifest.RunID, kernels)
	res, err := experiments.RunSuite(ctx, f, experiments.SuiteOptions{
		Kernels: kernels, Env: env, RunsDir: g.runsDir, Progress: progress, Command: os.Args,
	})
	ferr := finishSuite(ctx, res, err, "text", os.Stdout, os.Stderr)
	if res != nil && err == nil {
		fmt.Println()
		printDifferences(os.Stdout, old.Manifest, res.Manifest)
	}
	return cannotRepeat(ferr)
}
