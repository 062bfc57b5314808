package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"klab/bisect"
	"klab/experiments"
	experimentsfstests "klab/experiments/fstests"
	"klab/results/bisectreport"
)

type bisectOptions struct {
	tree, good, bad                      string
	config, patches, sets                []string
	splat, splatFamily, check, test, row string
	rounds, maxRounds                    int
	fstestsSrc                           string
	resume                               string
	format                               string
	quiet                                bool
}

// bisectRunner makes the Runner of bisection b, whose spec is f (without
// its --set overrides), logging the builds' and runs' progress to log.
type bisectRunner func(ctx context.Context, g *globalOptions, b *bisect.Bisection, f *experiments.File, log io.Writer) (bisect.Runner, error)

func newBisectCommand(g *globalOptions, runner bisectRunner) *cobra.Command {
	if runner == nil {
		runner = experimentRunner
	}
	o := &bisectOptions{}
	cmd := &cobra.Command{
		Use:   "bisect --tree DIR --good REV --bad REV [--splat S | --splat-family T | --check NAME | --test NAME | --row ROW] EXPERIMENT | --resume RUN",
		Short: "Find the commit of a kernel tree that changed an experiment's verdict",
		Long: `Bisect the commits of a git kernel tree between a good and a bad commit: at
each step klab builds the commit (the lab config by default; --config,
--patch applied on top) and runs the experiment on it (a file, or the name of
one of klab's), then tells git whether the commit is good, bad or to skip.
The steps are git's own (git bisect), run in a clone of the tree that
borrows its objects, without a checkout: your tree, its refs and its own
bisection are never touched. The work tree klab builds in moves from commit
to commit, so a step rebuilds only what changed.

What makes a commit bad (one of):
  --splat TEXT          a kernel splat whose title contains TEXT
                        ("WARNING in fuse_open", "KASAN"; titles are as
                        klab splats parse and the reports print them)
  --splat-family TYPE   a kernel splat of a type: warning, bug, kasan,
                        lockdep, hung-task, ... (the "type" klab splats
                        parse --json prints)
  --check NAME          the spec's check NAME fails
  --test NAME           the suite's test NAME fails (a suite experiment,
                        fstests: generic/013)
  --row ROW             the row of the spec's report ROW has the bad
                        commit's value: ROW is the row's number (from 1)
                        or its name as the report prints it, every
                        parameter included ("create transport=dev"); a
                        wrong one lists the rows
  none of them          a kernel splat the good commit did not print

The experiment runs on the one kernel of each step: a parameter the spec
compares (compare: transport) becomes a parameter of the rows. Every step
runs --rounds rounds (the spec's by default). The good and bad commits are
tested first: the good one must be good and the bad one bad. For --row they
run twice the rounds, and klab prints their separation (means, medians with
95% CIs, the change and its Mann-Whitney p-value) and stops when they cannot
be told apart. A step's samples are then held against both: the step is
good when it cannot be told from the good commit but differs from the bad
one, bad the other way round; otherwise klab adds rounds up to --max-rounds
(twice --rounds by default) and skips the commit when it stays ambiguous.
A commit that does not build, or whose guests do not boot, is skipped, with
the reason in the log.

The bisection is a run directory (klab runs list shows it, of kind bisect):
bisect.json (its inputs), steps.json (every commit tested: its build and how
long it took, its experiment runs under runs/, the verdict and why),
bisect.log (git bisect log), and at the end result.json and report.* (the
first bad commit with its author, date and evidence). klab report RUN prints
it again, in any format. Ctrl-C stops it; klab bisect --resume RUN continues
where it stopped (a step that was running is tested again).

Exit status: 0 when the first bad commit was found; 1 when the bisection
ended without one (only skipped commits left, the endpoints not good and bad
or not told apart); 2 for bad input (nothing is built); 125 when klab failed;
130 when interrupted.`,
		Example: `  klab bisect --tree ~/linux --good v7.3 --bad HEAD --splat "WARNING in fuse_open" fuse-transport --set transport=dev --rounds 1
  klab bisect --tree ~/linux --good v7.2 --bad v7.3 --config lab,debug --splat-family kasan fuse-uring
  klab bisect --tree ~/linux --good v7.3 --bad HEAD --check stuck-server-aborted fuse-timeout --set server=passthrough
  klab bisect --tree ~/linux --good v7.3 --bad HEAD --row "create transport=dev" --rounds 4 fuse-transport
  klab bisect --tree ~/linux --good v7.3 --bad HEAD --test generic/184 fstests-klab-uring --fstests-src ~/src/xfstests-dev
  klab bisect --resume last
  klab report last --format md`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.resume != "" {
				var set []string
				cmd.Flags().Visit(func(fl *pflag.Flag) {
					if fl.Name != "resume" && fl.Name != "format" && fl.Name != "quiet" && !isGlobalFlag(cmd, fl.Name) {
						set = append(set, "--"+fl.Name)
					}
				})
				if len(args) > 0 {
					set = append(set, args[0])
				}
				if len(set) > 0 {
					return badInput(fmt.Errorf("--resume continues a bisection as it was started: give neither an experiment nor other flags (%s)", strings.Join(set, " ")))
				}
				return resumeBisect(cmd.Context(), g, o, runner, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if len(args) != 1 {
				return badInput(errors.New("give the experiment to run at each step (a file, or one of klab experiments list), or --resume RUN"))
			}
			return runBisect(cmd.Context(), g, o, args[0], runner, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tree, "tree", "", "the git kernel tree to bisect (read only: klab works in a clone of it)")
	f.StringVar(&o.good, "good", "", "a commit that does not show it (a revision of --tree: v7.3, HEAD~8, a hash)")
	f.StringVar(&o.bad, "bad", "", "a commit that shows it, a descendant of --good")
	f.StringSliceVar(&o.config, "config", nil, "config fragments, comma-separated or repeated: lab, debug or files (default lab)")
	f.StringArrayVar(&o.patches, "patch", nil, "a patch (file, mbox or directory) applied on top of every commit (repeatable)")
	f.StringArrayVar(&o.sets, "set", nil, "override a parameter of the experiment: NAME=V1[,V2...] (repeatable)")
	f.StringVar(&o.splat, "splat", "", "bad: a kernel splat whose title contains this text")
	f.StringVar(&o.splatFamily, "splat-family", "", "bad: a kernel splat of this type (warning, bug, kasan, lockdep, hung-task, ...)")
	f.StringVar(&o.check, "check", "", "bad: the experiment's check of this name fails")
	f.StringVar(&o.test, "test", "", "bad: the suite's test of this name fails (generic/013)")
	f.StringVar(&o.row, "row", "", `bad: this row of the report has the bad commit's value: its number (from 1) or its name ("create transport=dev")`)
	f.IntVar(&o.rounds, "rounds", 0, "rounds per step (default: the spec's; with --row at least 3; the endpoints run twice as many with --row)")
	f.IntVar(&o.maxRounds, "max-rounds", 0, "with --row: the most rounds an ambiguous step gets before it is skipped (default: twice --rounds)")
	f.StringVar(&o.fstestsSrc, "fstests-src", "", "fstests source of a suite experiment: a checkout or a tarball (default $"+experimentsfstests.SrcEnv+")")
	f.StringVar(&o.resume, "resume", "", "continue the bisection RUN (a run id, a directory, or last) where it stopped")
	f.StringVar(&o.format, "format", "text", "report printed at the end: "+strings.Join(bisectreport.Formats, ", "))
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the report")
	return cmd
}

// isGlobalFlag reports whether name is one of the root's persistent
// flags.
func isGlobalFlag(cmd *cobra.Command, name string) bool {
	return cmd.Root().PersistentFlags().Lookup(name) != nil
}

// runBisect starts a bisection of the experiment name.
func runBisect(ctx context.Context, g *globalOptions, o *bisectOptions, name string, runner bisectRunner, stdout, stderr io.Writer) error {
	if err := checkBisectFormat(o.format); err != nil {
		return badInput(err)
	}
	sets := map[string]string{}
	for _, s := range o.sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return badInput(fmt.Errorf("--set %q: want NAME=V1[,V2...], e.g. --set jobs=1,4", s))
		}
		sets[k] = v
	}
	var config []string
	for _, c := range o.config {
		if c = strings.TrimSpace(c); c != "" {
			config = append(config, c)
		}
	}
	m, f, err := bisect.Prepare(ctx, bisect.Options{
		Tree: o.tree, Good: o.good, Bad: o.bad, Config: config, Patches: o.patches, Spec: name, Sets: sets,
		Splat: o.splat, SplatFamily: o.splatFamily, Check: o.check, Test: o.test, Row: o.row,
		Rounds: o.rounds, MaxRounds: o.maxRounds, FstestsSrc: o.fstestsSrc, Command: os.Args,
	})
	if err != nil {
		return badInput(flagNames(err))
	}
	for _, w := range specWarnings(f) {
		fmt.Fprintln(stderr, w)
	}
	// f.Data is the spec as written; its --set overrides are in m.
	b, err := bisect.Create(g.runsDir, m, f.Data)
	if err != nil {
		return err
	}
	r, closeLog, err := bisectSetup(ctx, g, o, b, runner, stderr)
	if err != nil {
		// Nothing ran: a bisection refused leaves nothing behind.
		_ = os.RemoveAll(b.Dir)
		return err
	}
	defer closeLog()
	return driveBisect(ctx, o, b, r, stdout, stderr)
}

// resumeBisect continues the bisection o.resume names.
func resumeBisect(ctx context.Context, g *globalOptions, o *bisectOptions, runner bisectRunner, stdout, stderr io.Writer) error {
	if err := checkBisectFormat(o.format); err != nil {
		return badInput(err)
	}
	dir, err := findRun(g, o.resume)
	if err != nil {
		return badInput(fmt.Errorf("--resume: %w", err))
	}
	if !bisect.IsRun(dir) {
		return badInput(fmt.Errorf("--resume %s: not a bisection (klab runs list shows each run's kind)", dir))
	}
	b, err := bisect.Open(dir)
	if err != nil {
		return badInput(fmt.Errorf("--resume: %w", err))
	}
	if b.Result != nil && b.Manifest.Status == bisect.StatusComplete {
		fmt.Fprintf(stderr, "klab: %s has ended already; its report:\n", dir)
		return finishBisect(b, o.format, stdout, stderr)
	}
	fmt.Fprintf(stderr, "klab: resuming %s: %d commit(s) tested already\n", dir, doneSteps(b))
	r, closeLog, err := bisectSetup(ctx, g, o, b, runner, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	return driveBisect(ctx, o, b, r, stdout, stderr)
}

func doneSteps(b *bisect.Bisection) int {
	n := 0
	for _, s := range b.Steps {
		if s.Done {
			n++
		}
	}
	return n
}

// bisectSetup makes bisection b's runner, with the builds' and runs'
// progress going to its progress.log (and to stderr with --verbose);
// closeLog closes that log.
func bisectSetup(ctx context.Context, g *globalOptions, o *bisectOptions, b *bisect.Bisection, runner bisectRunner, stderr io.Writer) (r bisect.Runner, closeLog func(), err error) {
	f, err := experiments.LoadFile(filepath.Join(b.Dir, bisect.SpecFile))
	if err != nil {
		return nil, nil, fmt.Errorf("the bisection's spec: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(b.Dir, bisect.ProgressFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	var log io.Writer = logf
	if g.verbose && !o.quiet {
		log = io.MultiWriter(logf, stderr)
	}
	if r, err = runner(ctx, g, b, f, log); err != nil {
		logf.Close()
		return nil, nil, err
	}
	return r, func() { logf.Close() }, nil
}

// driveBisect runs bisection b to its end with r and prints its report.
func driveBisect(ctx context.Context, o *bisectOptions, b *bisect.Bisection, r bisect.Runner, stdout, stderr io.Writer) error {
	var progress io.Writer
	if !o.quiet {
		progress = stderr
	}
	_, err := b.Run(ctx, r, progress)
	resume := "klab bisect --resume " + b.Dir
	switch {
	case err == nil:
		return finishBisect(b, o.format, stdout, stderr)
	case errors.Is(err, bisect.ErrBusy):
		return badInput(err)
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "klab: interrupted; what finished is in %s; continue with: %s\n", b.Dir, resume)
		return &exitError{code: exitInterrupted}
	}
	return fmt.Errorf("%w (what finished is in %s; continue with: %s)", err, b.Dir, resume)
}

// finishBisect prints an ended bisection's report in format and exits 0
// when it found the first bad commit, 1 when not.
func finishBisect(b *bisect.Bisection, format string, stdout, stderr io.Writer) error {
	if err := bisectreport.Write(stdout, b.Report(), format); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "klab: bisection saved to %s (HTML report: %s)\n", b.Dir, filepath.Join(b.Dir, "report.html"))
	if b.Result == nil || !b.Result.Found {
		return &exitError{code: 1}
	}
	return nil
}

func checkBisectFormat(f string) error {
	for _, x := range bisectreport.Formats {
		if f == x {
			return nil
		}
	}
	return fmt.Errorf("--format %q: want one of %s", f, strings.Join(bisectreport.Formats, ", "))
}

// experimentRunner is a real bisection's Runner: it builds in klab's
// cache and boots QEMU guests (a suite's with fstests built from the
// source the bisection names).
func experimentRunner(ctx context.Context, g *globalOptions, b *bisect.Bisection, f *experiments.File, log io.Writer) (bisect.Runner, error) {
	m := b.Manifest
	lo := g.labOptions()
	lo.Progress, lo.Log = log, log
	r := &bisect.ExperimentRunner{Tree: m.Tree, Config: m.Config, Patches: m.Patches, CacheDir: g.cacheDir, File: f, Sets: m.Sets,
		RunsDir: b.RunsRoot(), Opener: &lo, Log: log, Command: os.Args}
	if f.Spec.Suite != nil {
		env, err := suiteEnv(ctx, g, m.FstestsSrc, log)
		if err != nil {
			return nil, err
		}
		r.Fstests = func(context.Context) (experimentsfstests.Env, error) { return env, nil }
	}
	return r, nil
}
