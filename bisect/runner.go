package bisect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"klab/experiments"
	"klab/experiments/fstests"
	"klab/images/build"
	"klab/internal/specfile"
	"klab/lab"
	"klab/results"
)

// ExperimentRunner is the Runner of a real bisection: it builds each
// commit with images/build (the same work tree moved from commit to
// commit) and runs the experiment on the kernel, measured on that kernel
// alone.
type ExperimentRunner struct {
	// Tree is the user's git tree; Config and Patches are the config
	// fragments and the patches applied on top of every commit.
	Tree    string
	Config  []string
	Patches []string
	// CacheDir is klab's cache directory.
	CacheDir string
	// File is the experiment, Sets its --set overrides.
	File *experiments.File
	Sets map[string]string
	// RunsDir is where the experiment runs go.
	RunsDir string
	// Opener boots the guests of experiments of workloads.
	Opener lab.Opener
	// Fstests makes the environment of a suite experiment; it is called
	// once, at the first step.
	Fstests func(ctx context.Context) (fstests.Env, error)
	// Log receives the builds' and the runs' progress; nil discards it.
	Log io.Writer
	// Command is klab's argv, for the runs' manifests.
	Command []string
	// Build builds a kernel; nil means build.Build.
	Build func(ctx context.Context, o build.Options) (*build.Result, error)

	env *fstests.Env
}

// BuildName is the name of the build of commit with config and patches:
// "bisect-<commit>-<hash of config and patches>".
func BuildName(commit string, config, patches []string) string {
	h := sha256.Sum256([]byte(strings.Join(config, "\x00") + "\x01" + strings.Join(patches, "\x00")))
	return fmt.Sprintf("bisect-%.12s-%s", commit, hex.EncodeToString(h[:3]))
}

// Run builds commit and runs the experiment on it; see Runner.
func (r *ExperimentRunner) Run(ctx context.Context, commit string, rounds int) (*StepOutcome, error) {
	out := &StepOutcome{}
	ref, err := r.build(ctx, commit, out)
	if err != nil || out.BuildError != "" {
		return out, err
	}
	if r.File.Spec.Suite != nil {
		return out, r.runSuite(ctx, ref, out)
	}
	return out, r.runExperiment(ctx, ref, rounds, out)
}

// build builds commit and returns the kernel's reference; a commit that
// does not build (make fails, a patch does not apply, the config does
// not fit it) is recorded in out, not returned.
func (r *ExperimentRunner) build(ctx context.Context, commit string, out *StepOutcome) (string, error) {
	bf := r.Build
	if bf == nil {
		bf = build.Build
	}
	name := BuildName(commit, r.Config, r.Patches)
	start := time.Now()
	res, err := bf(ctx, build.Options{
		Source: r.Tree, Rev: commit, Config: r.Config, Patches: r.Patches, Name: name,
		CacheDir: r.CacheDir, Progress: r.Log,
	})
	out.Build.TookSec = time.Since(start).Seconds()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		var be *build.BuildError
		var pe *build.PatchError
		var de *build.DroppedError
		if errors.As(err, &be) || errors.As(err, &pe) || errors.As(err, &de) {
			out.BuildError = err.Error()
			if be != nil {
				out.Build.Log = be.Log
			}
			return "", nil
		}
		return "", fmt.Errorf("build %.12s: %w", commit, err)
	}
	out.Build.Mode = BuildCold
	switch {
	case res.Hit:
		out.Build.Mode = BuildCached
	case hasPhase(res.Phases, "checkout"):
		out.Build.Mode = BuildIncremental
	}
	for _, p := range res.Phases {
		out.Build.Phases = append(out.Build.Phases, Phase{Name: p.Name, TookSec: p.Took.Seconds()})
	}
	if k := res.Kernel; k != nil {
		out.Build.Kernel = k.ID
		if k.Build != nil {
			out.Build.Log = k.Build.Log
		}
	}
	out.Build.Ref = "build:" + name
	return out.Build.Ref, nil
}

func hasPhase(ps []build.Phase, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// runExperiment runs an experiment of workloads on ref, every row on
// that one kernel (a parameter the spec compares becomes a row
// parameter), and records what it found in out.
func (r *ExperimentRunner) runExperiment(ctx context.Context, ref string, rounds int, out *StepOutcome) error {
	res, err := experiments.Run(ctx, r.File, experiments.RunOptions{
		PlanOptions: experiments.PlanOptions{Kernels: []string{ref}, Compare: "kernel", Rounds: rounds, Single: true},
		Sets:        r.Sets, RunsDir: r.RunsDir, Opener: r.Opener, Progress: r.Log, Command: r.Command,
	})
	if res == nil {
		var bi *specfile.BadInputError
		if errors.As(err, &bi) && ctx.Err() == nil {
			// The kernel does not fit the spec (its requires): a
			// result about the commit.
			out.GuestError = "the experiment did not run: " + err.Error()
			return nil
		}
		return err
	}
	out.Runs = append(out.Runs, res.Dir)
	out.Rounds = res.Plan.Rounds
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var notes []string
	if err != nil {
		notes = append(notes, "the run failed: "+err.Error())
	}
	saved, oerr := experiments.Open(res.Dir)
	if oerr != nil {
		return fmt.Errorf("read the step's run: %w", oerr)
	}
	rep := saved.Report()
	_ = saved.WriteReports(rep)
	for _, g := range saved.Manifest.Guests {
		notes = append(notes, guestProblem(g.Dir, g.Outcome)...)
		for _, s := range g.Splats {
			out.Splats = append(out.Splats, Splat{Type: string(s.Type), Title: s.Title, Text: s.Text, Run: res.Dir})
		}
	}
	for _, c := range saved.Samples.Checks {
		out.Checks = append(out.Checks, CheckResult{Name: c.Check, Round: c.Round, Passed: c.Passed, Message: c.Message, Output: c.Output})
	}
	out.Samples = map[string][]float64{}
	for _, row := range rep.Rows {
		if len(row.A.Values) > 0 {
			out.Samples[row.Name] = row.A.Values
		}
	}
	out.GuestError = strings.Join(notes, "\n")
	return nil
}

// guestProblem says what went wrong with a guest that did not run its
// steps through: it did not boot, hung, panicked, or klab failed. A
// failed step (a check that failed) is a result, not a problem.
func guestProblem(dir string, o results.Outcome) []string {
	switch o.Status {
	case "", results.StatusOK, results.StatusStepFailed:
		return nil
	}
	msg := fmt.Sprintf("guest %s: %s", dir, o.Status)
	if o.Message != "" {
		msg += ": " + o.Message
	}
	return []string{msg}
}

// runSuite runs a suite experiment on ref alone and records its tests in
// out.
func (r *ExperimentRunner) runSuite(ctx context.Context, ref string, out *StepOutcome) error {
	if r.env == nil {
		if r.Fstests == nil {
			return errors.New("no fstests environment for a suite experiment")
		}
		env, err := r.Fstests(ctx)
		if err != nil {
			return err
		}
		r.env = &env
	}
	res, err := experiments.RunSuite(ctx, r.File, experiments.SuiteOptions{
		Kernels: []string{ref}, Env: *r.env, RunsDir: r.RunsDir, Progress: r.Log, Command: r.Command,
	})
	if res == nil {
		var bi *specfile.BadInputError
		if errors.As(err, &bi) && ctx.Err() == nil {
			out.GuestError = "the suite did not run: " + err.Error()
			return nil
		}
		return err
	}
	out.Runs, out.Rounds = append(out.Runs, res.Dir), 1
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var notes []string
	if err != nil {
		notes = append(notes, "the suite failed: "+err.Error())
	}
	for _, g := range res.Manifest.Guests {
		notes = append(notes, guestProblem(g.Dir, g.Outcome)...)
	}
	saved, oerr := experiments.Open(res.Dir)
	if oerr == nil {
		runs, rerr := saved.SuiteRuns()
		if rerr != nil {
			notes = append(notes, "no test results: "+rerr.Error())
		}
		for _, run := range runs {
			for _, s := range run.Splats {
				out.Splats = append(out.Splats, Splat{Type: s.Type, Title: s.Title, Run: res.Dir})
			}
			for _, t := range run.Tests {
				detail := t.Diff
				if detail == "" {
					detail = t.LogTail
				}
				out.Tests = append(out.Tests, TestResult{Name: t.Name, Status: t.Status, Reason: t.Reason, Detail: detail})
				for _, s := range t.Splats {
					out.Splats = append(out.Splats, Splat{Type: s.Type, Title: s.Title, Text: "during " + t.Name, Run: res.Dir})
				}
			}
		}
	} else {
		notes = append(notes, "the suite's run cannot be read: "+oerr.Error())
	}
	out.GuestError = strings.Join(notes, "\n")
	return nil
}
