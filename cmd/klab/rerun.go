package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"klab/experiments"
	"klab/results/report"
)

func newRerunCommand(g *globalOptions) *cobra.Command {
	var quiet bool
	cmd := &cobra.Command{
		Use:   "rerun RUN",
		Short: "Repeat an experiment run from its manifest, then compare the two",
		Long: `Repeat an experiment run from its manifest alone: the spec saved in the run
directory, the same parameters, rounds, order and seed, the same guest
shape, and exactly the kernels it used (a Debian package pinned to its
version, or the same image file; never a moving alias such as debian:7.3).
Then print what differed (kernel hash, QEMU version, accelerator, host) and
the comparison of the two runs.`,
		Example: `  klab rerun last
  klab rerun 20261201-101500-exp-fuse-transport-a1b2c3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			dir, err := findRun(g, args[0])
			if err != nil {
				return badInput(err)
			}
			if !experiments.IsRun(dir) {
				return badInput(fmt.Errorf("%s is a boot run; klab rerun repeats experiment runs", dir))
			}
			old, err := experiments.Open(dir)
			if err != nil {
				return err
			}
			base := experiments.RunOptions{RunsDir: g.runsDir, Command: os.Args}
			if !quiet {
				base.Progress = os.Stderr
				base.Terminal = isTerminal(os.Stderr)
			}
			f, o, err := experiments.RerunOptions(old, base)
			if err != nil {
				return badInput(err)
			}
			if o.Opener, err = experimentOpener(g, o.Kernels); err != nil {
				return badInput(err)
			}
			fmt.Fprintf(os.Stderr, "klab: rerunning %s with kernels %v\n", old.Manifest.RunID, o.Kernels)
			res, err := experiments.Run(ctx, f, o)
			if res == nil {
				return err
			}
			if _, rerr := finishRun(res.Dir, "text", os.Stdout, os.Stderr); rerr != nil {
				return rerr
			}
			if err != nil {
				return fmt.Errorf("%w (what finished is in %s)", err, res.Dir)
			}
			fmt.Println()
			diffs := experiments.Differences(old.Manifest, res.Manifest)
			if len(diffs) == 0 {
				fmt.Println("same kernels, QEMU, accelerator, host and initramfs as the original run")
			} else {
				fmt.Println("what differed from the original run:")
				for _, d := range diffs {
					fmt.Println("  " + d)
				}
			}
			fresh, err := experiments.Open(res.Dir)
			if err != nil {
				return err
			}
			cmp, err := experiments.CompareRuns(old, fresh)
			if err != nil {
				return err
			}
			fmt.Println()
			return report.Text(os.Stdout, cmp)
		},
	}
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the reports")
	return cmd
}
