package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"klab/experiments"
	experimentsfstests "klab/experiments/fstests"
	"klab/lab"
	"klab/lab/hostguest"
	"klab/results/report"
)

// Statuses of every command: exitBadInput for input refused before any
// work (bad flags, arguments, values, spec and matrix files), and
// exitInterrupted when Ctrl-C or SIGTERM stopped the work.
const (
	exitBadInput    = 2
	exitInterrupted = lab.ExitInterrupted
)

type runOptions struct {
	kernels        []string
	sets           []string
	rounds         int
	compare        string
	order          string
	seed           int64
	cpus           int
	memMB          int
	accel          string
	icount         string
	tcgMultithread bool
	format         string
	quiet          bool
	// strictReference makes a row that contradicts its reference fail
	// the run.
	strictReference bool
	// fstestsSrc is the fstests source of a suite experiment.
	fstestsSrc string

	// auto is --rounds auto, with its target and bound; autoFlags is
	// set when --ci-target or --max-rounds was given.
	auto      bool
	ciTarget  float64
	maxRounds int
	autoFlags bool
}

func newRunCommand(g *globalOptions) *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run EXPERIMENT --kernel A [--kernel B] [flags]",
		Short: "Run an experiment: A against B, with statistics and a report",
		Long: `Run an experiment (a file, or the name of one of klab's: see 'klab experiments
list') and compare A against B: two kernels (the default), or the two values
of one parameter on one kernel (--compare NAME, or the spec's compare:).

Rounds are interleaved A B B A (or --order random --seed S), each in a fresh
guest of the same shape, so that drift on a noisy host hits both sides. Each
table row gets the median with its 95% confidence interval per side, the
relative change, a Mann-Whitney U p-value and a verdict at alpha 0.05,
with the samples per side (n) and the minimum detectable change (MDC: the
smallest change the test would see at this noise); a row without a
significant change says what it could have seen.

--rounds auto starts from the spec's rounds (at least 6, the fewest with a
confidence interval) and adds rounds, one A/B round at a time in the same
order, until every row's change CI is within +-PCT (--ci-target, default 10)
or --max-rounds (default 12) have run. The manifest records the rounds run,
so klab rerun repeats exactly that many.

The run directory keeps the spec as run, the plan, every sample, each guest's
console and events, and report.{txt,md,json,xml,html}. Ctrl-C stops cleanly
and keeps what finished.

--kernel host runs the experiment on this host's own kernel, without a VM
(alone: compare two values of a parameter). It needs root, for FUSE mounts.
klab starts its own agent in a child process, in a private mount namespace
chrooted into a private tmpfs, so that the spec's directories are never the
host's; the host's /usr and /etc are read-only there, and so are /proc/sys
(but for vm/drop_caches, which a spec may write: that drops the whole host's
page cache) and /sys. What would change the host is refused before anything
runs: sysctls, ramdisks, mkfs, module parameters, VM settings (vm.icount,
--cpus, --memory, --accel), and io_uring transports while fuse's
enable_uring is off (turn it on yourself first).

A spec's expect: states what the experiment's reference (its seed) found for
a row or a check; the report gives each one a verdict against it: reproduced,
same or opposite direction but not significant, contradicted, or not
comparable here (the run's mode cannot show the effect: a row that needs KVM,
run under TCG). A contradicted row fails the run only when its expectation
says strict: true, or with --strict-reference.

Exit status: 0 when the run completed and nothing failed; 1 when a check
failed, B printed a new kernel splat, a metric regressed past its threshold,
or a strict expectation was contradicted; 2 for a broken spec or bad flags
(nothing is run); 125 when klab failed; 130 when interrupted.

An experiment with a suite (fstests) runs the suite instead of workloads, in
klab's fstests guests, on one kernel or as an A/B of two, as klab fstests
does: the fstests source is --fstests-src (or $` + experimentsfstests.SrcEnv + `), and
--set, --rounds, --compare, --order, --seed, --cpus, --memory and --accel do
not apply. It exits 1 when B has a regression (with one kernel, when a test
failed, hung or crashed).`,
		Example: `  klab run fuse-transport --kernel debian:7.3
  klab run experiments/fuse-transport.yaml --kernel debian:7.3 --rounds 8
  klab run fuse-transport --kernel debian:7.3 --rounds auto --ci-target 5 --max-rounds 20
  klab run fuse-timeout --kernel debian:7.3 --icount shift=0,sleep=off --set server=passthrough
  klab run my-exp.yaml --kernel debian:7.3 --kernel build:fix
  klab run my-exp.yaml --kernel debian:7.3 --set jobs=1,4 --compare transport --order random --seed 7
  sudo klab run fuse-bench-host --kernel host --set jobs=2
  klab run fstests-klab-uring --kernel build:lab-debug --fstests-src ~/src/xfstests-dev`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.autoFlags = cmd.Flags().Changed("ci-target") || cmd.Flags().Changed("max-rounds")
			return runRun(cmd.Context(), g, o, args[0], os.Stdout, os.Stderr)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.kernels, "kernel", "k", nil, "kernel: debian:<series>, build:<name>, a bzImage path (A first; repeatable), or host: this host, no VM")
	f.StringArrayVar(&o.sets, "set", nil, "override a parameter: NAME=V1[,V2...] (repeatable)")
	f.Var(roundsValue{n: &o.rounds, auto: &o.auto}, "rounds", "rounds per cell (default: the spec's, else 3), or auto: add rounds until every change CI is within --ci-target")
	f.Float64Var(&o.ciTarget, "ci-target", experiments.DefaultCITargetPct, "with --rounds auto: the half-width in percent every row's change CI must reach")
	f.IntVar(&o.maxRounds, "max-rounds", experiments.DefaultMaxRounds, "with --rounds auto: the most rounds run")
	f.StringVar(&o.compare, "compare", "", "the A/B axis: kernel, or a parameter with two values (default: the spec's)")
	f.StringVar(&o.order, "order", "", "round order: abba or random (default: the spec's, else abba)")
	f.Int64Var(&o.seed, "seed", 0, "seed of --order random")
	f.IntVar(&o.cpus, "cpus", 0, "guest vCPUs (default: the spec's, else 2)")
	f.VarP(newMiBValue(0, &o.memMB), "memory", "m", "guest memory: MiB, or a size with a unit K, M, G or T (512M, 2G) (default: the spec's, else 1GiB)")
	f.StringVar(&o.accel, "accel", "", "accelerator: auto, kvm or tcg (default: the spec's, else auto)")
	f.StringVar(&o.icount, "icount", "", "under TCG, count guest time in instructions: QEMU's -icount options, e.g. shift=0,sleep=off (default: the spec's vm.icount)")
	f.BoolVar(&o.tcgMultithread, "tcg-multithread", false, "under TCG, one host thread per vCPU (default: the spec's vm.tcg_multithread)")
	f.StringVar(&o.format, "format", "text", "report printed at the end: "+strings.Join(report.Formats, ", "))
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the report")
	f.BoolVar(&o.strictReference, "strict-reference", false, "a row or check that contradicts its reference (the spec's expect:) fails the run (exit 1), as strict: true does for one")
	f.StringVar(&o.fstestsSrc, "fstests-src", "", "fstests source of a suite experiment: a checkout or a tarball (default $"+experimentsfstests.SrcEnv+")")
	return cmd
}

func runRun(ctx context.Context, g *globalOptions, o *runOptions, name string, stdout, stderr io.Writer) error {
	if err := checkFormat(o.format); err != nil {
		return badInput(err)
	}
	if o.accel != "" {
		if err := checkAccel(o.accel); err != nil {
			return badInput(err)
		}
	}
	if len(o.kernels) == 0 {
		return badInput(errors.New("no kernel: give --kernel A (and --kernel B to compare kernels)"))
	}
	if o.autoFlags && !o.auto {
		return badInput(errors.New("--ci-target and --max-rounds bound --rounds auto: give --rounds auto too"))
	}
	f, err := experiments.Find(name)
	if err != nil {
		return badInput(err)
	}
	for _, w := range specWarnings(f) {
		fmt.Fprintln(stderr, w)
	}
	if f.Spec.Suite != nil {
		return runSuite(ctx, g, o, f, stdout, stderr)
	}
	if o.fstestsSrc != "" {
		return badInput(fmt.Errorf("--fstests-src: %s runs workloads, not a test suite", f.Path))
	}
	sets := map[string]string{}
	for _, s := range o.sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return badInput(fmt.Errorf("--set %q: want NAME=V1[,V2...], e.g. --set jobs=1,4", s))
		}
		sets[k] = v
	}
	if slices.Contains(o.kernels, hostguest.Ref) {
		for _, f := range []struct {
			name string
			set  bool
		}{{"--cpus", o.cpus != 0}, {"--memory", o.memMB != 0}, {"--accel", o.accel != ""}, {"--icount", o.icount != ""}, {"--tcg-multithread", o.tcgMultithread}} {
			if f.set {
				return badInput(fmt.Errorf("%s: --kernel %s runs on this host, without a VM", f.name, hostguest.Ref))
			}
		}
	}
	opener, err := experimentOpener(g, o.kernels)
	if err != nil {
		return badInput(err)
	}
	ro := experiments.RunOptions{
		PlanOptions: experiments.PlanOptions{Kernels: o.kernels, Compare: o.compare, Rounds: o.rounds, Order: o.order},
		Sets:        sets, CPUs: o.cpus, MemMB: o.memMB, Accel: o.accel, Icount: o.icount, TCGMultithread: o.tcgMultithread, RunsDir: g.runsDir,
		Opener: opener, Command: os.Args, Userspace: g.defaultUserspaceImage(stderr),
	}
	if o.order == "random" || o.seed != 0 {
		ro.Seed = &o.seed
	}
	if o.auto {
		ro.Auto = &experiments.AutoRounds{CITargetPct: o.ciTarget, MaxRounds: o.maxRounds}
	}
	if !o.quiet {
		ro.Progress = stderr
		ro.Terminal = isTerminal(stderr)
	}
	res, err := experiments.Run(ctx, f, ro)
	if res == nil {
		return err
	}
	code, rerr := finishRun(res.Dir, o.format, o.strictReference, stdout, stderr)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "klab: interrupted; what finished is in %s\n", res.Dir)
			return &exitError{code: exitInterrupted}
		}
		return fmt.Errorf("%w (what finished is in %s)", err, res.Dir)
	}
	if rerr != nil {
		return rerr
	}
	if code != 0 {
		return &exitError{code: code}
	}
	return nil
}

// experimentOpener returns what runs an experiment's guests on kernels:
// QEMU guests, or, for --kernel host (alone: its numbers come from another
// machine than a guest's), the agent on this host.
func experimentOpener(g *globalOptions, kernels []string) (lab.Opener, error) {
	if !slices.Contains(kernels, hostguest.Ref) {
		lo := g.labOptions()
		return &lo, nil
	}
	if len(kernels) > 1 {
		return nil, fmt.Errorf("--kernel %s runs on this host without a VM: its numbers do not compare with a guest's; give it alone, with --compare PARAM", hostguest.Ref)
	}
	return &hostguest.Opener{CacheDir: g.cacheDir, RunsDir: g.runsDir, Mirror: g.mirror, Progress: os.Stderr}, nil
}

// finishRun writes a run's reports, prints one in format, and returns 1
// when the report has failures; with strict, a row or check that
// contradicts its reference is one.
func finishRun(dir, format string, strict bool, stdout, stderr io.Writer) (int, error) {
	saved, err := experiments.Open(dir)
	if err != nil {
		return 0, err
	}
	saved.StrictReference = strict
	r := saved.Report()
	if err := saved.WriteReports(r); err != nil {
		return 0, fmt.Errorf("write reports: %w", err)
	}
	if err := report.Write(stdout, r, format); err != nil {
		return 0, err
	}
	fmt.Fprintf(stderr, "klab: run saved to %s (HTML report: %s)\n", dir, filepath.Join(dir, "report.html"))
	if len(r.Failures) > 0 {
		return 1, nil
	}
	return 0, nil
}

func checkFormat(f string) error {
	for _, x := range report.Formats {
		if f == x {
			return nil
		}
	}
	return fmt.Errorf("--format %q: want one of %s", f, strings.Join(report.Formats, ", "))
}

// badInput ends klab with status 2 and the error.
func badInput(err error) error {
	return &exitError{code: exitBadInput, msg: err.Error()}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
