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
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	experimentsfstests "klab/experiments/fstests"
	"klab/images/build"
	"klab/images/debian"
	"klab/matrix"
	"klab/results/xreport"
	"klab/vm"
)

type matrixRunOptions struct {
	out, resume string
	jobs        int
	shard       string
	cpus, memMB int
	accel       string
	format      string
	quiet       bool
	fstestsSrc  string
	// strictReference makes a contradicted reference fail its cell.
	strictReference bool
}

func newMatrixCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Run experiments across kernels: parallel, resumable, sharded for CI",
		Long: `A matrix file names kernels (Debian refs, build:NAME, or build recipes built
first) and experiments; every pair is a cell. klab matrix run runs the cells
in parallel VMs into one results tree with a cross-kernel report: kernels as
columns, each compared against a baseline kernel.

  name: smoke
  baseline: debian:6.12
  kernels:
    - debian:6.12
    - debian:7.3
    - build: {name: my-fix, source: debian:7.3, config: lab, patches: [fix.patch]}
  experiments:
    - fuse-transport
    - {name: fuse-uring, set: {jobs: "1"}, rounds: 2}

An experiment that compares kernels runs on each kernel alone; one that
compares a parameter (fuse-transport's transport) runs its A/B on each
kernel, and the report has a row per side; its rows and checks with an
expect: also get, per kernel, the B/A and the verdict against the reference
(reproduced, n.s., CONTRADICTED, not comparable). One that compares kernels
gets no such verdict: that needs an A/B within the cell. A suite experiment (fstests)
runs on the baseline alone and as an A/B of the baseline and each other
kernel, and the report summarises its tests per side.`,
		Example: `  klab matrix plan matrices/smoke.yaml
  klab matrix run matrices/smoke.yaml --jobs 2
  klab matrix run matrices/smoke.yaml --resume DIR
  klab matrix emit matrices/smoke.yaml --engine github --shards 4`,
	}
	cmd.AddCommand(newMatrixRunCommand(g), newMatrixPlanCommand(), newMatrixReportCommand(),
		newMatrixEmitCommand(), newMatrixCacheKeyCommand())
	return cmd
}

func newMatrixRunCommand(g *globalOptions) *cobra.Command {
	o := &matrixRunOptions{}
	cmd := &cobra.Command{
		Use:   "run FILE [--out DIR | --resume DIR] [--jobs N] [--shard i/n]",
		Short: "Run a matrix's cells and write the cross-kernel report",
		Long: `Run every cell of the matrix (or of one shard of it) into a results tree:
matrix.json, cells/<cell>/ with each experiment's own run directory and a
cell.json written when the cell ends, and report.{txt,md,json,xml,html}.

Cells run in parallel VMs, --jobs at once; the default comes from the CPUs
and the available memory (each VM's memory from its spec), and klab never
runs more VMs than fit in memory. One failing cell never stops the others;
their errors are listed together at the end.

Ctrl-C, a crash or a reboot keeps the finished cells; --resume DIR runs only
the cells that did not complete (interrupted, or unable to run: a QEMU killed
from outside, a full disk, a kernel that could not be had), each exactly
once. When DIR's file system fills up (less than 16 MiB free, or a cell ran
out of space), klab starts no more cells and says why; copy DIR to a bigger
disk and resume the copy. --shard i/n runs every
n-th cell of the sorted list from the i-th (the same split on every machine);
klab results merge joins the shards' trees.

A suite experiment (fstests) is built from --fstests-src (or $` + experimentsfstests.SrcEnv + `)
once per run, only when one of its cells is to run. Its cell on the baseline
runs the suite there alone and fails on a test that fails, hangs or crashes;
its cell on another kernel runs an A/B against the baseline, reruns new
failures on both, and fails on a regression.

Exit status: 0 when every cell ran and nothing failed; 1 when a cell failed,
a check failed, a suite cell failed, a kernel printed a splat the baseline
did not, or a row or check contradicted a strict expectation (any, with
--strict-reference: a JUnit testcase "reference: ROW" fails on that kernel);
2 for a broken matrix file or bad flags (nothing is run); 130 when
interrupted.`,
		Example: `  klab matrix run smoke.yaml
  klab matrix run smoke.yaml --jobs 2 --out /tmp/smoke
  klab matrix run smoke.yaml --resume /tmp/smoke
  klab matrix run smoke.yaml --shard 2/4 --out results-2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMatrix(cmd.Context(), g, o, args[0], os.Stdout, os.Stderr)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "out", "o", "", "results directory (default: a new directory in the runs directory)")
	f.StringVar(&o.resume, "resume", "", "resume the results directory DIR: run only the cells that did not finish")
	f.IntVarP(&o.jobs, "jobs", "j", 0, "cells at once (default: from the CPUs and the available memory)")
	f.StringVar(&o.shard, "shard", "", "run shard i/n of the cells (for CI engines; merge with klab results merge)")
	f.IntVar(&o.cpus, "cpus", 0, "guest vCPUs of every experiment (default: each spec's)")
	f.VarP(newMiBValue(0, &o.memMB), "memory", "m", "guest memory of every experiment: MiB, or a size with a unit K, M, G or T (512M, 2G) (default: each spec's)")
	f.StringVar(&o.accel, "accel", "", "accelerator: auto, kvm or tcg (default: each spec's, else auto)")
	f.StringVar(&o.format, "format", "text", "report printed at the end: "+strings.Join(xreport.Formats, ", "))
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the report")
	f.BoolVar(&o.strictReference, "strict-reference", false, "a row or check that contradicts its reference (the spec's expect:) fails the matrix")
	f.StringVar(&o.fstestsSrc, "fstests-src", "", "fstests source of the suite experiments: a checkout or a tarball (default $"+experimentsfstests.SrcEnv+")")
	return cmd
}

func loadMatrix(path string) (*matrix.File, error) {
	f, err := matrix.LoadFile(path)
	if err != nil {
		return nil, badInput(err)
	}
	return f, nil
}

func checkMatrixFormat(f string) error {
	for _, x := range xreport.Formats {
		if f == x {
			return nil
		}
	}
	return badInput(fmt.Errorf("--format %q: want one of %s", f, strings.Join(xreport.Formats, ", ")))
}

func runMatrix(ctx context.Context, g *globalOptions, o *matrixRunOptions, path string, stdout, stderr io.Writer) error {
	if err := checkMatrixFormat(o.format); err != nil {
		return err
	}
	if o.accel != "" {
		if err := checkAccel(o.accel); err != nil {
			return badInput(err)
		}
	}
	if o.out != "" && o.resume != "" {
		return badInput(errors.New("give --out for a new results directory or --resume for an old one, not both"))
	}
	shard, err := matrix.ParseShard(o.shard)
	if err != nil {
		return badInput(fmt.Errorf("--shard %w", err))
	}
	f, err := loadMatrix(path)
	if err != nil {
		return err
	}
	if o.fstestsSrc != "" && !slices.ContainsFunc(f.Experiments, func(e matrix.Experiment) bool { return e.Spec.Spec.Suite != nil }) {
		return badInput(fmt.Errorf("--fstests-src: %s has no suite experiment (fstests)", path))
	}
	out, resume := o.out, o.resume != ""
	if resume {
		out = o.resume
	}
	if out == "" {
		name := fmt.Sprintf("%s-matrix-%s", time.Now().Format("20060102-150405"), f.Name)
		if shard.N > 1 {
			name += fmt.Sprintf("-shard%dof%d", shard.I, shard.N)
		}
		out = filepath.Join(g.runsDir, name)
	}
	lo := g.labOptions()
	tcg := o.accel == "tcg"
	if v, ok := lo.CachedAccel(); ok && (o.accel == "" || o.accel == "auto") {
		tcg = v.Accel == vm.TCG
	}
	mo := matrix.Options{
		Out: out, Resume: resume, Jobs: o.jobs, Shard: shard, CPUs: o.cpus, MemMB: o.memMB, Accel: o.accel, TCG: tcg,
		StrictReference: o.strictReference,
		Opener:          &lo, Command: os.Args, Userspace: g.defaultUserspaceImage(os.Stderr),
		Build: func(ctx context.Context, r *matrix.Recipe) error {
			_, err := build.Build(ctx, build.Options{
				Source: r.Source, Rev: r.Rev, Patches: r.Patches, Config: r.Config, Name: r.Name, CacheDir: g.cacheDir,
				Debian:   debian.Options{Mirror: g.mirror, CacheDir: g.cacheDir, Progress: stderr},
				Progress: stderr,
			})
			return err
		},
	}
	if !o.quiet {
		mo.Progress = stderr
		mo.Terminal = isTerminal(stderr)
	}
	mo.Fstests = func(ctx context.Context) (experimentsfstests.Env, error) {
		env, err := experimentsfstests.NewEnv(ctx, experimentsfstests.HostOptions{Lab: &lo, Src: o.fstestsSrc, Progress: mo.Progress, Command: os.Args})
		var se *experimentsfstests.SourceError
		switch {
		case !errors.As(err, &se):
		case o.fstestsSrc != "":
			err = &experimentsfstests.SourceError{Err: fmt.Errorf("--fstests-src: %w", se.Err)}
		case os.Getenv(experimentsfstests.SrcEnv) != "":
			err = &experimentsfstests.SourceError{Err: fmt.Errorf("$%s: %w", experimentsfstests.SrcEnv, se.Err)}
		}
		return env, err
	}
	t, err := matrix.Run(ctx, f, mo)
	if t == nil {
		return err
	}
	t.StrictReference = o.strictReference
	code, rerr := finishMatrix(t, o.format, stdout, stderr)
	var full *matrix.DiskFullError
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "klab: interrupted; the finished cells are in %s (go on with --resume %s)\n", t.Dir, t.Dir)
		return &exitError{code: exitInterrupted}
	case errors.As(err, &full):
		// The reports may not fit either: the cells' errors and why
		// the matrix stopped are printed all the same.
		if rerr != nil {
			fmt.Fprintf(stderr, "klab: %v\n", rerr)
		}
		fmt.Fprintf(stderr, "klab: stopped:\n%v\n", err)
		return &exitError{code: 1}
	case rerr != nil:
		return rerr
	case err != nil:
		fmt.Fprintf(stderr, "klab: %d cell(s) failed:\n%v\n", countErrors(err), err)
		return &exitError{code: 1}
	case code != 0:
		return &exitError{code: code}
	}
	return nil
}

// countErrors counts the errors that errors.Join joined into err (one
// per failed cell); an error's own lines (a command's output it quotes)
// do not count.
func countErrors(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

// finishMatrix writes a tree's reports, prints one, and returns 1 when
// the report has failures.
func finishMatrix(t *matrix.Tree, format string, stdout, stderr io.Writer) (int, error) {
	x := t.Report()
	// The report is printed even when the tree's reports cannot be
	// written (a full disk): the cells' results are in memory.
	werr := xreport.WriteAll(t.Dir, x)
	if err := xreport.Write(stdout, x, format); err != nil {
		return 0, err
	}
	if werr != nil {
		return 0, fmt.Errorf("write reports: %w", werr)
	}
	fmt.Fprintf(stderr, "klab: matrix results in %s (HTML report: %s)\n", t.Dir, filepath.Join(t.Dir, "report.html"))
	if len(x.Failures) > 0 {
		return 1, nil
	}
	return 0, nil
}

func newMatrixPlanCommand() *cobra.Command {
	var shard string
	cmd := &cobra.Command{
		Use:   "plan FILE [--shard i/n]",
		Short: "Check a matrix file and list its cells",
		Example: `  klab matrix plan smoke.yaml
  klab matrix plan smoke.yaml --shard 1/2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := matrix.ParseShard(shard)
			if err != nil {
				return badInput(fmt.Errorf("--shard %w", err))
			}
			f, err := loadMatrix(args[0])
			if err != nil {
				return err
			}
			all := f.Cells()
			cells := s.Of(all)
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "CELL\tKERNEL\tEXPERIMENT\n")
			for _, c := range cells {
				fmt.Fprintf(w, "%s\t%s\t%s\n", c.ID, c.Kernel, c.Experiment)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Printf("%d of %d cell(s); %d kernel(s), baseline %s; %d experiment(s)\n", len(cells), len(all), len(f.Kernels), f.Baseline, len(f.Experiments))
			return nil
		},
	}
	cmd.Flags().StringVar(&shard, "shard", "", "list shard i/n only")
	return cmd
}

func newMatrixReportCommand() *cobra.Command {
	var format string
	var strict bool
	cmd := &cobra.Command{
		Use:   "report DIR|FILE",
		Short: "Rewrite and print a matrix results tree's cross-kernel report",
		Long: `Rewrite a matrix results tree's reports (report.{txt,md,json,xml,html}) from
its cells' runs, and print one. FILE, a tree's bundle (klab results pack),
is verified and its report printed; nothing is written.

Exit status: 0 when nothing failed; 1 when a cell failed, a check failed, a
suite cell failed, a kernel printed a splat the baseline did not, or a row or
check contradicted a strict expectation (any, with --strict-reference);
2 when DIR is not a matrix results tree, FILE is a damaged bundle or a flag
is bad.`,
		Example: `  klab matrix report /tmp/smoke --format md
  klab matrix report /tmp/smoke --strict-reference --format junit
  klab matrix report merged.klab.tar.zst --format md`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkMatrixFormat(format); err != nil {
				return err
			}
			if isBundleArg(args[0]) {
				dir, cleanup, err := openBundleRun(args[0])
				if err != nil {
					return err
				}
				defer cleanup()
				if !matrix.IsTree(dir) {
					return badInput(fmt.Errorf("%s holds a run, not a matrix results tree: klab report %s prints its report", args[0], args[0]))
				}
				return writeTreeReport(cmd.OutOrStdout(), dir, args[0], format, strict)
			}
			t, err := matrix.Open(args[0])
			if err != nil {
				return badInput(err)
			}
			t.StrictReference = strict
			code, err := finishMatrix(t, format, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err == nil && code != 0 {
				return &exitError{code: code}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "report format: "+strings.Join(xreport.Formats, ", "))
	cmd.Flags().BoolVar(&strict, "strict-reference", false, "a row or check that contradicts its reference (the spec's expect:) fails the matrix")
	return cmd
}

func newMatrixEmitCommand() *cobra.Command {
	var engine string
	var shards int
	cmd := &cobra.Command{
		Use:   "emit FILE --engine github|gitlab [--shards N]",
		Short: "Print a CI configuration that runs the matrix in N shards and merges them",
		Long: `Print a CI configuration for the engine your CI already is: N parallel jobs
each run klab matrix run FILE --shard i/N, klab's kernel and build cache is
kept across runs under klab matrix cache-key FILE, every shard's results
tree is kept, and a last job merges them into one report with klab results
merge and keeps the merged tree packed in one file as its artifact (klab
results pack --results-only; a comment in the configuration says why
without the kernels), with its JUnit report (merged/report.xml: GitLab's
artifacts: reports: junit, GitHub's klab-matrix-junit artifact). The merge
job fails when a cell failed or a kernel printed a splat the baseline did
not. FILE is the matrix file's path relative to the repository root.`,
		Example: `  klab matrix emit ci/smoke.yaml --engine github --shards 4 > .github/workflows/klab.yml
  klab matrix emit ci/smoke.yaml --engine gitlab --shards 4 > .gitlab-ci.yml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := loadMatrix(args[0]); err != nil {
				return err
			}
			if err := matrix.Emit(os.Stdout, matrix.EmitOptions{Engine: engine, Shards: shards, File: filepath.ToSlash(filepath.Clean(args[0]))}); err != nil {
				return badInput(flagNames(err))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&engine, "engine", "github", "CI engine: "+strings.Join(matrix.Engines, ", "))
	cmd.Flags().IntVar(&shards, "shards", 2, "parallel jobs")
	return cmd
}

func newMatrixCacheKeyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cache-key FILE",
		Short: "Print the key of a CI cache of the matrix's kernels and builds",
		Long: `Print a key that changes when a kernel of the matrix or a build recipe's
inputs (source, revision, config fragments, patch contents) change: a CI
cache of klab's cache directory under it is restored as long as the kernels
are the same.`,
		Example: `  klab matrix cache-key ci/smoke.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := loadMatrix(args[0])
			if err != nil {
				return err
			}
			k, err := f.CacheKey()
			if err != nil {
				return err
			}
			fmt.Println(k)
			return nil
		},
	}
}

func newResultsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "results",
		Short: "Work with matrix results trees: merge shards, pack a tree into one file, unpack it",
		Example: `  klab results merge results-1 results-2 --out merged
  klab results pack merged
  klab results unpack merged.klab.tar.zst`,
	}
	var out, format string
	var strict bool
	merge := &cobra.Command{
		Use:   "merge DIR... --out DIR",
		Short: "Merge matrix shards' results trees into one, with its report",
		Long: `Merge the results trees of a matrix's shards (klab matrix run --shard i/n)
into one tree, as if one machine had run every cell, and write its
cross-kernel report. The trees must come from the same matrix file; a cell
finished in two of them is an error naming both. Cells that are missing can
be run afterwards with klab matrix run FILE --resume OUT.`,
		Example: `  klab results merge results-1 results-2 --out merged`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return badInput(errors.New("--out DIR is needed"))
			}
			if err := checkMatrixFormat(format); err != nil {
				return err
			}
			t, err := matrix.Merge(args, out)
			if err != nil {
				return badInput(flagNames(err))
			}
			t.StrictReference = strict
			code, err := finishMatrix(t, format, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err == nil && code != 0 {
				return &exitError{code: code}
			}
			return err
		},
	}
	merge.Flags().StringVarP(&out, "out", "o", "", "the merged results directory (must not exist)")
	merge.Flags().StringVar(&format, "format", "text", "report printed: "+strings.Join(xreport.Formats, ", "))
	merge.Flags().BoolVar(&strict, "strict-reference", false, "a row or check that contradicts its reference (the spec's expect:) fails the matrix")
	cmd.AddCommand(merge, newResultsPackCommand(g), newResultsUnpackCommand(g))
	return cmd
}
