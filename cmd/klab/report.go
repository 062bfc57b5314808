package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"klab/bisect"
	"klab/experiments"
	"klab/matrix"
	"klab/results/bisectreport"
	"klab/results/report"
)

func newReportCommand(g *globalOptions) *cobra.Command {
	var format string
	var strict bool
	cmd := &cobra.Command{
		Use:   "report RUN|FILE [--format text|md|json|junit|html]",
		Short: "Print an experiment run's, a bisection's or a matrix tree's report",
		Long: `Print the report of an experiment run (a run id, a run directory, or last):
text to paste under a patch, Markdown, JSON (schema klab.report/v1), JUnit
XML, or one self-contained HTML page with charts. With --strict-reference a
row or check that contradicts its reference (the spec's expect:) is a
failure, and klab report exits 1 when the run has failures, as klab run does.

RUN can also be a bundle file (klab runs pack): its run is verified,
read from a temporary directory and removed afterwards, so a bundle that
someone mailed is read without unpacking it. A damaged bundle exits 2
naming the member at fault.

For a matrix results tree (a directory, or a bundle of one that klab
results pack wrote) it prints the cross-kernel report, as klab matrix
report does without rewriting the tree's files, and exits 1 when the
matrix has failures.

For a bisection (klab bisect) it prints the first bad commit with its author
and evidence, then every step (text to paste into a mail; JSON schema
klab.bisect/v1; HTML with the metric per step).`,
		Example: `  klab report last
  klab report last --format html > report.html
  klab report last --strict-reference --format junit > junit.xml
  klab report 20261201-101500-exp-fuse-transport-a1b2c3 --format junit
  klab report 20261201-101500-bisect-fuse-transport-d4e5f6 --format md
  klab report 20261201-101500-exp-fuse-transport-a1b2c3.klab.tar.zst
  klab report merged.klab.tar.zst --format md`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return badInput(err)
			}
			dir, cleanup, err := findRunOrBundle(g, args[0], "")
			if err != nil {
				return err
			}
			defer cleanup()
			if matrix.IsTree(dir) {
				shown := ""
				if isBundleArg(args[0]) {
					shown = args[0]
				}
				return writeTreeReport(cmd.OutOrStdout(), dir, shown, format, strict)
			}
			if bisect.IsRun(dir) {
				if strict {
					return badInput(fmt.Errorf("--strict-reference: %s is a bisection, which holds nothing against references", dir))
				}
				b, err := bisect.Open(dir)
				if err != nil {
					return err
				}
				return bisectreport.Write(cmd.OutOrStdout(), b.Report(), format)
			}
			if !experiments.IsRun(dir) {
				return badInput(fmt.Errorf("%s is a boot run, not an experiment run; klab runs show prints it", dir))
			}
			s, err := experiments.Open(dir)
			if err != nil {
				return err
			}
			if s.IsSuite() {
				return s.WriteSuiteReport(os.Stdout, format)
			}
			s.StrictReference = strict
			r := s.Report()
			if isBundleArg(args[0]) {
				r.RunDir = args[0] // the temporary directory is gone once printed
			}
			if err := report.Write(cmd.OutOrStdout(), r, format); err != nil {
				return err
			}
			if strict && len(r.Failures) > 0 {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "one of "+strings.Join(report.Formats, ", "))
	cmd.Flags().BoolVar(&strict, "strict-reference", false, "hold the run to its references: a row or check that contradicts one is a failure, and the report exits 1 when the run has failures")
	return cmd
}

func newCompareCommand(g *globalOptions) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "compare [RUN_A|FILE_A] RUN_B|FILE_B",
		Short: "Compare two runs of the same experiment, side by side",
		Long: `Compare two runs of the same experiment: every row's samples of run A against
the same row's samples of run B, side by side (A's side and B's side of each
run separately), with the same statistics as klab run. A run is a run id, a
run directory, or last (the newest run).

Given one run, klab compare compares it with the run of the same experiment
before it: klab compare last compares the last two runs of the experiment
you ran last (klab boot and shell runs in between do not count). With fewer
than two runs of it, it says so and exits 2.

A run can also be a bundle file (klab runs pack), read as klab report
reads one: klab compare FILE_A FILE_B compares two bundles without
unpacking them. A matrix results tree, or its bundle (klab results pack),
is refused: its report (klab report FILE) compares each kernel with the
matrix's baseline.`,
		Example: `  klab compare last
  klab compare 20261201-101500-exp-fuse-transport-a1b2c3 last
  klab compare 20261201-101500-exp-fuse-transport-a1b2c3 --format md
  klab compare before.klab.tar.zst after.klab.tar.zst`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return badInput(err)
			}
			var dirs []string
			for _, a := range args {
				dir, cleanup, err := findRunOrBundle(g, a, "experiment")
				var ee *exitError
				if errors.As(err, &ee) && ee.code == exitBadInput && len(args) == 1 && !isBundleArg(a) {
					return badInput(fmt.Errorf("%s, and klab compare needs two runs of one experiment", ee.msg))
				}
				if err != nil {
					return err
				}
				defer cleanup()
				if matrix.IsTree(dir) {
					return badInput(fmt.Errorf("%s holds a matrix results tree, and klab compare compares two runs of one experiment: klab report %s prints the tree's report, which compares each kernel with the matrix's baseline", a, a))
				}
				if bisect.IsRun(dir) {
					return badInput(fmt.Errorf("%s is a bisection: klab compare compares experiment runs (its steps' runs are under %s)", dir, filepath.Join(dir, bisect.RunsDir)))
				}
				if !experiments.IsRun(dir) {
					return badInput(fmt.Errorf("%s is a boot run, not an experiment run; klab compare compares runs of one experiment", dir))
				}
				dirs = append(dirs, dir)
			}
			if len(dirs) == 1 {
				prev, err := previousRun(g, dirs[0])
				if err != nil {
					return badInput(err)
				}
				dirs = []string{prev, dirs[0]}
			}
			var saved [2]*experiments.Saved
			for i, dir := range dirs {
				var err error
				if saved[i], err = experiments.Open(dir); err != nil {
					return err
				}
				if saved[i].IsSuite() {
					return badInput(fmt.Errorf("%s is a test suite's run: klab compare compares runs of workloads; run the suite on both kernels (--kernel A --kernel B) for its verdict", dir))
				}
			}
			r, err := experiments.CompareRuns(saved[0], saved[1])
			if err != nil {
				return badInput(err)
			}
			if last := args[len(args)-1]; isBundleArg(last) {
				r.RunDir = last // the temporary directory is gone once printed
			}
			return report.Write(cmd.OutOrStdout(), r, format)
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "one of "+strings.Join(report.Formats, ", "))
	return cmd
}
