package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"klab/bisect"
	"klab/experiments"
	experimentsfstests "klab/experiments/fstests"
	"klab/results/report"
)

func newRerunCommand(g *globalOptions) *cobra.Command {
	var quiet, strict bool
	var fstestsSrc string
	cmd := &cobra.Command{
		Use:   "rerun RUN",
		Short: "Repeat an experiment run from its manifest, then compare the two",
		Long: `Repeat an experiment run from its manifest alone: the spec saved in the run
directory, the same parameters, rounds, order and seed, the same guest
shape, and exactly the kernels it used (a Debian package pinned to its
version, or the same image file; never a moving alias such as debian:7.3).
Then print what differed (kernel hash, QEMU version, accelerator, host) and
the comparison of the two runs. A suite experiment's run (fstests) is run
again from the fstests source given (--fstests-src, $` + experimentsfstests.SrcEnv + `, else
the one its manifest records), and its report printed.

Exit status: as klab run's: 0, or 1 when the new run has failures; 2 for a
run that cannot be repeated; 125 when klab failed; 130 when interrupted.`,
		Example: `  klab rerun last
  klab rerun 20261201-101500-exp-fuse-transport-a1b2c3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			dir, err := findRun(g, args[0])
			if err != nil {
				return badInput(err)
			}
			if bisect.IsRun(dir) {
				return badInput(fmt.Errorf("%s is a bisection; klab bisect --resume %s continues it", dir, dir))
			}
			if !experiments.IsRun(dir) {
				return badInput(fmt.Errorf("%s is a boot run; klab rerun repeats experiment runs", dir))
			}
			old, err := experiments.Open(dir)
			if err != nil {
				return err
			}
			base := experiments.RunOptions{RunsDir: g.runsDir, Command: os.Args, Userspace: g.defaultUserspaceImage(os.Stderr)}
			if !quiet {
				base.Progress = os.Stderr
				base.Terminal = isTerminal(os.Stderr)
			}
			f, o, err := experiments.RerunOptions(old, base)
			if err != nil {
				return badInput(err)
			}
			if old.IsSuite() {
				return rerunSuite(ctx, g, old, f, o.Kernels, fstestsSrc, quiet)
			}
			if o.Opener, err = experimentOpener(g, o.Kernels); err != nil {
				return badInput(err)
			}
			fmt.Fprintf(os.Stderr, "klab: rerunning %s with kernels %v\n", old.Manifest.RunID, o.Kernels)
			res, err := experiments.Run(ctx, f, o)
			if res == nil {
				return err
			}
			code, rerr := finishRun(res.Dir, "text", strict, os.Stdout, os.Stderr)
			if err != nil && ctx.Err() != nil {
				fmt.Fprintf(os.Stderr, "klab: interrupted; what finished is in %s\n", res.Dir)
				return &exitError{code: exitInterrupted}
			}
			if rerr != nil {
				return rerr
			}
			if err != nil {
				return fmt.Errorf("%w (what finished is in %s)", err, res.Dir)
			}
			fmt.Println()
			printDifferences(os.Stdout, old.Manifest, res.Manifest)
			fresh, err := experiments.Open(res.Dir)
			if err != nil {
				return err
			}
			cmp, err := experiments.CompareRuns(old, fresh)
			if err != nil {
				return err
			}
			fmt.Println()
			if err := report.Text(os.Stdout, cmp); err != nil {
				return err
			}
			if code != 0 {
				return &exitError{code: code} // the rerun has failures, as klab run says
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the reports")
	cmd.Flags().BoolVar(&strict, "strict-reference", false, "a row or check that contradicts its reference (the spec's expect:) fails the rerun")
	cmd.Flags().StringVar(&fstestsSrc, "fstests-src", "", "fstests source of a suite run: a checkout or a tarball (default $"+experimentsfstests.SrcEnv+", else the run's)")
	return cmd
}

// printDifferences says what differed between a run and its rerun.
func printDifferences(w io.Writer, a, b *experiments.Manifest) {
	diffs := experiments.Differences(a, b)
	if len(diffs) == 0 {
		fmt.Fprintln(w, "same kernels, QEMU, accelerator, host and initramfs as the original run")
		return
	}
	fmt.Fprintln(w, "what differed from the original run:")
	for _, d := range diffs {
		fmt.Fprintln(w, "  "+d)
	}
}
