package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"klab/images"
	"klab/internal/textsafe"
	"klab/matrix"
	"klab/results/bundle"
)

// bundlesDir is where klab runs unpack places a bundle's kernels:
// <cache>/bundles/<kernel id>/.
func bundlesDir(g *globalOptions) string { return images.BundlesDir(g.cacheDir) }

// packOptions are klab runs pack's flags.
type packOptions struct {
	out         string
	resultsOnly bool
	force       bool
}

func newRunsPackCommand(g *globalOptions) *cobra.Command {
	var o packOptions
	cmd := &cobra.Command{
		Use:   "pack RUN [-o FILE] [--results-only]",
		Short: "Pack a run and the kernels it used into one file (RUNID.klab.tar.zst)",
		Long: `Pack a run (a run id, a run directory, or last) into one zstd-compressed tar
file that another machine can read and compare (klab report FILE, klab
compare FILE_A FILE_B) and unpack (klab runs unpack FILE). The bundle holds
the run directory and the artefacts of every kernel its manifest names,
stored once each by content: the image, the .config, the modules tree, and
for a kernel built from source its build log, patches and config
fragments. Its first member, bundle.json, lists every member with its size
and SHA-256.

--results-only leaves the kernels out, for a small file to read and
compare. The default file is RUNID.klab.tar.zst in the current directory;
an existing file is kept unless --force. A file that changes while it is
being packed is refused.`,
		Example: `  klab runs pack last
  klab runs pack last --results-only -o results.klab.tar.zst
  klab runs pack 20261201-101500-exp-fuse-transport-a1b2c3 -o /tmp/run.klab.tar.zst --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := findRun(g, args[0])
			if err != nil {
				return badInput(err)
			}
			if matrix.IsTree(dir) {
				return badInput(fmt.Errorf("%s is a matrix results tree, not a run: klab results pack %s packs it", dir, args[0]))
			}
			out := o.out
			if out == "" {
				out = filepath.Base(filepath.Clean(dir)) + bundle.Extension
			}
			if err := clearOutput(out, o.force); err != nil {
				return err
			}
			res, err := bundle.Pack(dir, out, bundle.PackOptions{ResultsOnly: o.resultsOnly, KlabVersion: versionLine()})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			kind := "with the artefacts of %d kernel(s)"
			fmt.Fprintf(w, "%s: %s, %d members, run %s, ", out, humanBytes(res.Size), len(res.Index.Members), res.Index.RunID)
			if res.Index.ResultsOnly {
				fmt.Fprintln(w, "results only")
			} else {
				fmt.Fprintf(w, kind+"\n", len(res.Index.Kernels))
			}
			for _, m := range res.Index.Missing {
				fmt.Fprintf(w, "not packed (not on this machine): %s\n", m)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "the bundle file (default RUNID.klab.tar.zst in the current directory)")
	cmd.Flags().BoolVar(&o.resultsOnly, "results-only", false, "pack the run directory only, without the kernels' artefacts")
	cmd.Flags().BoolVar(&o.force, "force", false, "replace an existing file")
	return cmd
}

func newRunsUnpackCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "unpack FILE",
		Short: "Verify a bundle and place its run (or matrix results tree) and kernels",
		Long: `Verify a bundle that klab runs pack wrote and place its run in the runs
directory (--runs-dir) and its kernels in the cache, under
<cache>/bundles/<kernel id>/: the kernel's files at their paths (vmlinuz,
config, modules/...) and kernel.json, the kernel as the run's manifest
recorded it, with its paths pointing there.

A bundle is untrusted input. Every member's size and SHA-256 is checked
against bundle.json, and links, devices, absolute paths, paths with ..,
duplicate, unlisted and missing members are refused, before anything is
placed: a damaged or edited bundle exits 2 naming the member at fault and
leaves nothing behind. A run that exists already is refused; a kernel that
is there already is kept.

A matrix results tree's bundle (klab results pack) is placed in the runs
directory under the tree's name, its kernels as a run's; klab results
unpack FILE -o DIR puts the tree elsewhere.`,
		Example: `  klab runs unpack 20261201-101500-exp-fuse-transport-a1b2c3.klab.tar.zst
  klab runs unpack run.klab.tar.zst --runs-dir ./runs`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return unpackBundle(cmd.OutOrStdout(), g, args[0], "", false)
		},
	}
	return cmd
}

// clearOutput makes way for the bundle file out: an existing file is bad
// input unless force, which removes it (a regular file only).
func clearOutput(out string, force bool) error {
	st, err := os.Lstat(out)
	if err != nil {
		return nil
	}
	if !force {
		return badInput(fmt.Errorf("%s exists already; give --force to replace it, or -o FILE", out))
	}
	if !st.Mode().IsRegular() {
		return badInput(fmt.Errorf("%s is not a regular file; --force replaces only files", out))
	}
	return os.Remove(out)
}

// unpackBundle verifies the bundle file and places it: a run in the runs
// directory, a matrix results tree at dest (default: the runs directory,
// under the tree's name), the kernels under <cache>/bundles/. With
// treeOnly a run's bundle is bad input. It prints where everything went.
func unpackBundle(w io.Writer, g *globalOptions, file, dest string, treeOnly bool) error {
	if err := checkBundleFile(file); err != nil {
		return badInput(err)
	}
	head, err := bundle.ReadIndex(file, bundle.Limits{})
	if err != nil {
		return bundleErr(err)
	}
	stageIn := g.runsDir
	switch {
	case head.IsMatrix():
		if dest == "" {
			dest = filepath.Join(g.runsDir, head.Tree.Name)
		}
		if _, err := os.Lstat(dest); err == nil {
			return badInput(fmt.Errorf("%s holds the matrix results tree %s, and %s exists already; klab results unpack %s -o DIR puts it elsewhere", file, head.Tree.Name, dest, file))
		}
		stageIn = filepath.Dir(dest)
	case treeOnly:
		return badInput(fmt.Errorf("%s holds the run %s, not a matrix results tree: klab runs unpack %s places it", file, head.RunID, file))
	}
	if err := os.MkdirAll(stageIn, 0o755); err != nil {
		return err
	}
	stage, err := os.MkdirTemp(stageIn, ".unpack-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	unpacked := filepath.Join(stage, "b")
	ix, err := bundle.Unpack(file, unpacked, bundle.UnpackOptions{})
	if err != nil {
		return bundleErr(err)
	}
	if ix.IsMatrix() != head.IsMatrix() {
		return fmt.Errorf("unpack %s: %w", file, bundle.ErrChanged)
	}
	var placed *bundle.Placed
	if ix.IsMatrix() {
		if placed, err = bundle.PlaceTree(unpacked, ix, dest, bundlesDir(g)); err != nil {
			return err
		}
		fmt.Fprintf(w, "matrix %s, tree %s (%d cells): %s\n", ix.Tree.Matrix, ix.Tree.Name, len(ix.Tree.Cells), placed.TreeDir)
	} else {
		if placed, err = bundle.Place(unpacked, ix, g.runsDir, bundlesDir(g)); err != nil {
			return err
		}
		fmt.Fprintf(w, "run %s: %s\n", ix.RunID, placed.RunDir)
	}
	printPlacedArtefacts(w, ix, placed)
	return nil
}

// printPlaced says where Place put a bundle's run, kernels and initramfs
// images.
func printPlaced(w io.Writer, ix *bundle.Index, placed *bundle.Placed) {
	fmt.Fprintf(w, "run %s: %s\n", ix.RunID, placed.RunDir)
	printPlacedArtefacts(w, ix, placed)
}

// printPlacedArtefacts says where a bundle's kernels and initramfs images
// went, and what the bundle lacks.
func printPlacedArtefacts(w io.Writer, ix *bundle.Index, placed *bundle.Placed) {
	for _, k := range placed.Kernels {
		state := "placed"
		if k.Existed {
			state = "there already"
		}
		fmt.Fprintf(w, "kernel %s (%s): %s, %s; klab boot --kernel bundle:%s boots it\n", textsafe.OneLine(k.Ref), k.ID, k.Dir, state, k.ID)
	}
	for _, p := range placed.Initramfs {
		fmt.Fprintf(w, "initramfs: %s\n", p)
	}
	for _, m := range ix.Missing {
		fmt.Fprintf(w, "not in the bundle: %s\n", textsafe.OneLine(m))
	}
}

// checkBundleFile says why file cannot be a bundle: it is missing or not
// a regular file.
func checkBundleFile(file string) error {
	st, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", file, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("bundle %s: not a regular file", file)
	}
	return nil
}

// bundleErr is err of bundle.Unpack as klab reports it: a bad bundle is
// bad input.
func bundleErr(err error) error {
	if errors.Is(err, bundle.ErrBad) {
		return badInput(err)
	}
	return err
}

// isBundleArg reports whether the RUN argument arg names a bundle file
// rather than a run: an existing regular file.
func isBundleArg(arg string) bool {
	st, err := os.Stat(arg)
	return err == nil && st.Mode().IsRegular()
}

// openBundleRun verifies the bundle file and unpacks its run, or its
// matrix results tree (the artefacts are verified, not written), into a
// temporary directory. It returns the run's (tree's) directory and a
// function that removes it.
func openBundleRun(file string) (string, func(), error) {
	tmp, err := os.MkdirTemp("", "klab-bundle-*")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	ix, err := bundle.Unpack(file, filepath.Join(tmp, ".b"), bundle.UnpackOptions{SkipBlobs: true})
	if err != nil {
		cleanup()
		return "", nil, bundleErr(err)
	}
	// The run keeps its id as its directory's name, as reports show it;
	// a tree its name.
	dir, from := filepath.Join(tmp, ix.RunID), "run"
	if ix.IsMatrix() {
		dir, from = filepath.Join(tmp, ix.Tree.Name), "tree"
	}
	if err := os.Rename(filepath.Join(tmp, ".b", from), dir); err != nil {
		cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}

// humanBytes is n in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n), ""
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		suffix = s
		if v < unit {
			break
		}
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") + " " + suffix
}

// findRunOrBundle is findRunOfKind, and for a bundle file the directory
// of its run (or matrix results tree) unpacked by openBundleRun. The returned function removes
// what it unpacked; errors are ready to return from a command (bad input
// exits 2).
func findRunOrBundle(g *globalOptions, arg, kind string) (string, func(), error) {
	if isBundleArg(arg) {
		return openBundleRun(arg)
	}
	dir, err := findRunOfKind(g, arg, kind)
	if err != nil {
		return "", nil, badInput(err)
	}
	return dir, func() {}, nil
}
