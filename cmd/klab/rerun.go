package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"klab/bisect"
	"klab/experiments"
	experimentsfstests "klab/experiments/fstests"
	"klab/images/debian"
	"klab/results/bundle"
	"klab/results/report"
)

func newRerunCommand(g *globalOptions) *cobra.Command {
	var quiet, strict bool
	var fstestsSrc string
	cmd := &cobra.Command{
		Use:   "rerun RUN|FILE",
		Short: "Repeat an experiment run from its manifest, then compare the two",
		Long: `Repeat an experiment run from its manifest alone: the spec saved in the run
directory, the same parameters, rounds, order and seed, the same guest
shape, and exactly the kernels it used (a Debian package pinned to its
version, or the same image file; never a moving alias such as debian:7.3).
Then print what differed (kernel hash, QEMU version, accelerator, host) and
the comparison of the two runs. A suite experiment's run (fstests) is run
again from the fstests source given (--fstests-src, $` + experimentsfstests.SrcEnv + `, else
the one its manifest records), and its report printed.

FILE is a run bundle (klab runs pack on the machine that made the run):
klab verifies it, places its run in the runs directory (unless a run of
that id is there already) and its kernels and initramfs images in the
cache (<cache>/bundles/), and reruns from them without the Debian archive.
A run's kernel that a bundle placed earlier (klab runs unpack) is taken
from there too, as bundle:<kernel id>, before any download.

Exit status: as klab run's: 0, or 1 when the new run has failures; 2 for a
run that cannot be repeated; 125 when klab failed; 130 when interrupted.`,
		Example: `  klab rerun last
  klab rerun 20261201-101500-exp-fuse-transport-a1b2c3
  klab rerun 20261201-101500-exp-fuse-transport-a1b2c3.klab.tar.zst   # a bundle from another machine`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var dir string
			var placed *bundle.Placed
			if isBundleArg(args[0]) {
				d, cleanup, p, err := unpackForRerun(g, args[0])
				if err != nil {
					return err
				}
				defer cleanup()
				dir, placed = d, p
			} else {
				d, err := findRun(g, args[0])
				if err != nil {
					return badInput(err)
				}
				dir = d
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
			o.KernelLabels = useBundledKernels(g, old.Manifest, o.Kernels)
			if old.IsSuite() {
				return rerunSuite(ctx, g, old, f, o.Kernels, fstestsSrc, quiet)
			}
			if o.Opener, err = experimentOpener(g, o.Kernels); err != nil {
				return badInput(err)
			}
			fmt.Fprintf(os.Stderr, "klab: rerunning %s with kernels %v\n", old.Manifest.RunID, o.Kernels)
			res, err := experiments.Run(ctx, f, o)
			if res == nil {
				return cannotRepeat(err)
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
			if placed != nil && len(placed.Initramfs) > 0 && len(experiments.Differences(old.Manifest, res.Manifest)) > 0 {
				fmt.Printf("the run's own initramfs images, from the bundle: %s\n", strings.Join(placed.Initramfs, " "))
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

// unpackForRerun verifies the bundle file and places its kernels and
// initramfs images in the cache and its run in the runs directory; when a
// run of that id is there already, the bundle's copy is read from a
// scratch directory instead, which the returned function removes.
func unpackForRerun(g *globalOptions, file string) (string, func(), *bundle.Placed, error) {
	if err := checkBundleFile(file); err != nil {
		return "", nil, nil, badInput(err)
	}
	if err := os.MkdirAll(g.runsDir, 0o755); err != nil {
		return "", nil, nil, err
	}
	stage, err := os.MkdirTemp(g.runsDir, ".unpack-*")
	if err != nil {
		return "", nil, nil, err
	}
	cleanup := func() { os.RemoveAll(stage) }
	dest := filepath.Join(stage, "b")
	ix, err := bundle.Unpack(file, dest, bundle.UnpackOptions{})
	if err != nil {
		cleanup()
		return "", nil, nil, bundleErr(err)
	}
	if ix.IsMatrix() {
		cleanup()
		return "", nil, nil, badInput(fmt.Errorf("%s holds the matrix results tree %s, not a run: klab results unpack %s places it, and klab rerun repeats one of its cells' runs", file, ix.Tree.Name, file))
	}
	runs := g.runsDir
	if _, err := os.Lstat(filepath.Join(runs, ix.RunID)); err == nil {
		fmt.Fprintf(os.Stderr, "klab: run %s is in %s already; reading the bundle's copy\n", ix.RunID, runs)
		runs = filepath.Join(stage, "runs")
	}
	placed, err := bundle.Place(dest, ix, runs, bundlesDir(g))
	if err != nil {
		cleanup()
		return "", nil, nil, err
	}
	printPlaced(os.Stderr, ix, placed)
	return placed.RunDir, cleanup, placed, nil
}

// useBundledKernels replaces, in kernels (the rerun's references, one per
// manifest kernel), each kernel that a bundle placed in the cache with its
// bundle:<kernel id> reference: the same bytes (its id hashes its image
// and config, checked when it is booted), with no download and no build.
//
// It returns the kernels' labels: a replaced kernel keeps the label the
// original run gave it ("debian:7.3", "build:fix"), "" for the others.
func useBundledKernels(g *globalOptions, m *experiments.Manifest, kernels []string) []string {
	orig := &experiments.Plan{}
	for _, k := range m.Kernels {
		orig.Kernels = append(orig.Kernels, k.Ref)
	}
	var labels []string
	for i, k := range m.Kernels {
		if i >= len(kernels) || !strings.HasPrefix(k.Kernel.ID, "k-") {
			continue
		}
		if _, err := os.Stat(filepath.Join(bundlesDir(g), k.Kernel.ID, bundle.KernelInfoFile)); err == nil {
			kernels[i] = "bundle:" + k.Kernel.ID
			if labels == nil {
				labels = make([]string, len(kernels))
			}
			labels[i] = orig.KernelLabel(i)
		}
	}
	return labels
}

// cannotRepeat is err as klab rerun reports it: a kernel that neither the
// cache, a placed bundle nor the Debian archive has makes the run one that
// cannot be repeated here (exit 2), not a failure of klab.
func cannotRepeat(err error) error {
	var pinned *debian.PinnedUnavailableError
	if errors.As(err, &pinned) {
		return badInput(err)
	}
	return err
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
