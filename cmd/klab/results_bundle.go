package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"klab/experiments"
	"klab/matrix"
	"klab/results"
	"klab/results/bundle"
	"klab/results/xreport"
)

func newResultsPackCommand(g *globalOptions) *cobra.Command {
	var o packOptions
	cmd := &cobra.Command{
		Use:   "pack DIR [-o FILE] [--results-only] [--force]",
		Short: "Pack a matrix results tree and the kernels its cells used into one file",
		Long: `Pack a matrix results tree (klab matrix run --out DIR, klab results merge
--out DIR; a directory, or a tree's name in the runs directory) into one
zstd-compressed tar file, as klab runs pack does a run: every file of the
tree (matrix.json, matrix.yaml, the reports, each cell's cell.json and run
directory) and the artefacts of every kernel that the cells' runs name,
each kernel once however many cells used it, and each file once by content.
Its first member, bundle.json, lists every member with its size and
SHA-256, the tree's name and its cells.

Another machine reads the bundle with klab report FILE (the cross-kernel
report) and places it with klab results unpack FILE (or klab runs unpack
FILE): the tree in the runs directory, the kernels under
<cache>/bundles/<kernel id>/.

--results-only leaves the kernels out: a Debian kernel adds about 35 MiB.
The default file is NAME.klab.tar.zst in the current directory (NAME the
tree's directory name); an existing file is kept unless --force. A file
that changes while it is being packed is refused.

Exit status: 0 when the bundle is written; 2 when DIR is not a matrix
results tree or the file exists; 1 when a file cannot be read.`,
		Example: `  klab results pack merged
  klab results pack merged --results-only -o smoke-results.klab.tar.zst
  klab results pack 20261201-101500-matrix-smoke -o /tmp/smoke.klab.tar.zst --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := findTree(g, args[0])
			if err != nil {
				return badInput(err)
			}
			t, err := matrix.Open(dir)
			if err != nil {
				return badInput(fmt.Errorf("%s: %w", dir, err))
			}
			bt := t.BundleTree()
			if !results.ValidName(bt.Name) {
				return badInput(fmt.Errorf("%s: the tree's name %q is not a plain name (letters, digits, '.', '_' and '-'); rename the directory", dir, bt.Name))
			}
			out := o.out
			if out == "" {
				out = bt.Name + bundle.Extension
			}
			if err := clearOutput(out, o.force); err != nil {
				return err
			}
			res, err := bundle.PackTree(dir, out, bt, bundle.PackOptions{ResultsOnly: o.resultsOnly, KlabVersion: versionLine()})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s: %s, %d members, matrix %s (tree %s, %d cells), ", out, humanBytes(res.Size), len(res.Index.Members),
				bt.Matrix, bt.Name, len(bt.Cells))
			if res.Index.ResultsOnly {
				fmt.Fprintln(w, "results only")
			} else {
				fmt.Fprintf(w, "with the artefacts of %d kernel(s)\n", len(res.Index.Kernels))
			}
			for _, m := range res.Index.Missing {
				fmt.Fprintf(w, "not packed (not on this machine): %s\n", m)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&o.out, "output", "o", "", "the bundle file (default NAME.klab.tar.zst in the current directory)")
	cmd.Flags().BoolVar(&o.resultsOnly, "results-only", false, "pack the tree only, without the kernels' artefacts")
	cmd.Flags().BoolVar(&o.force, "force", false, "replace an existing file")
	return cmd
}

func newResultsUnpackCommand(g *globalOptions) *cobra.Command {
	var dest string
	cmd := &cobra.Command{
		Use:   "unpack FILE [-o DIR]",
		Short: "Verify a matrix results tree's bundle and place its tree and kernels",
		Long: `Verify a bundle that klab results pack wrote and place its matrix results
tree at DIR (-o), by default in the runs directory under the tree's name,
and its kernels in the cache under <cache>/bundles/<kernel id>/, as klab
runs unpack places a run's.

A bundle is untrusted input: every member's size and SHA-256 is checked
against bundle.json, and links, devices, absolute paths, paths with ..,
duplicate, unlisted and missing members are refused before anything is
placed. A damaged or edited bundle, a run's bundle (klab runs unpack places
it) and a DIR that exists already exit 2 and leave nothing behind; a
kernel that is there already is kept.`,
		Example: `  klab results unpack merged.klab.tar.zst
  klab results unpack merged.klab.tar.zst -o /tmp/smoke`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return unpackBundle(cmd.OutOrStdout(), g, args[0], dest, true)
		},
	}
	cmd.Flags().StringVarP(&dest, "output", "o", "", "the tree's directory (must not exist; default: the runs directory/NAME)")
	return cmd
}

// findTree finds the matrix results tree arg names: a directory, or a
// name in the runs directory. Its errors say what arg is instead.
func findTree(g *globalOptions, arg string) (string, error) {
	dir := arg
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		in := filepath.Join(g.runsDir, arg)
		if st, err := os.Stat(in); !results.ValidName(arg) || err != nil || !st.IsDir() {
			return "", fmt.Errorf("%s: no such directory, nor a matrix results tree in %s", arg, g.runsDir)
		}
		dir = in
	}
	switch {
	case matrix.IsTree(dir):
		return dir, nil
	case experiments.IsRun(dir) || fileExists(filepath.Join(dir, results.ManifestFile)):
		return "", fmt.Errorf("%s is a run, not a matrix results tree: klab runs pack %s packs it", dir, arg)
	}
	return "", fmt.Errorf("%s is not a matrix results tree (it has no %s; klab matrix run and klab results merge write them)", dir, matrix.ManifestFile)
}

// fileExists reports whether p exists.
func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// writeTreeReport prints the cross-kernel report of the matrix results
// tree dir, as klab matrix report does without rewriting the tree's
// files; shown, when set, is the directory the report names (a bundle
// file). It returns status 1 when the matrix has failures.
func writeTreeReport(w io.Writer, dir, shown, format string, strict bool) error {
	t, err := matrix.Open(dir)
	if err != nil {
		return badInput(fmt.Errorf("%s: %w", dir, err))
	}
	t.StrictReference = strict
	x := t.Report()
	if shown != "" {
		x.Dir = shown // the temporary directory is gone once printed
	}
	if err := xreport.Write(w, x, format); err != nil {
		return err
	}
	if len(x.Failures) > 0 {
		return &exitError{code: 1}
	}
	return nil
}
