package bundle

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"klab/results"
)

// PackTree writes the bundle of the matrix results tree dir, which tree
// describes, to out, which must not exist yet: every file of the tree
// under tree/ and, unless opts.ResultsOnly, the artefacts of the kernels
// that its cells' runs' manifests name, each kernel once (by id) and each
// blob once, however many cells share them. An empty tree.Name is dir's
// base name. Kernel artefacts are read where the manifests say they are.
func PackTree(dir, out string, tree Tree, opts PackOptions) (*PackResult, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	if tree.Name == "" {
		tree.Name = filepath.Base(abs)
	}
	ix := &Index{Schema: SchemaV2, Kind: KindMatrix, Tree: &tree, KlabVersion: opts.KlabVersion,
		Created: opts.Now, ResultsOnly: opts.ResultsOnly}
	if ix.Created.IsZero() {
		ix.Created = time.Now().UTC()
	}
	if !results.ValidName(tree.Name) {
		return nil, fmt.Errorf("pack %s: the tree's name %q is not a plain name (letters, digits, '.', '_' and '-')", dir, tree.Name)
	}
	for _, c := range tree.Cells {
		if c.Run == "" {
			continue
		}
		if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(c.Run))); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("pack %s: cell %s: its run directory %s is missing", dir, c.ID, c.Run)
		}
	}
	srcs, err := dirSources(dir, TreePrefix)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	if !opts.ResultsOnly {
		blobs, err := treeKernelSources(dir, ix)
		if err != nil {
			return nil, fmt.Errorf("pack %s: %w", dir, err)
		}
		srcs = append(srcs, blobs...)
	}
	for _, s := range srcs {
		ix.Members = append(ix.Members, s.member)
	}
	if err := ix.Check(DefaultLimits); err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	size, err := writeArchive(out, ix, srcs)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	return &PackResult{Index: ix, Size: size}, nil
}

// treeKernelSources returns the blobs of the kernels and initramfs images
// of every cell's run of the tree dir, filling ix.Kernels with each kernel
// once (the first cell's, by id), ix.Initramfs with each image once, and
// ix.Missing with what is missing, each once and named by the first cell's
// run that misses it. A blob is returned once however many kernels and
// cells hold it.
func treeKernelSources(dir string, ix *Index) ([]source, error) {
	kernels := map[string]bool{} // ids in ix.Kernels
	packed := map[string]bool{}  // blob names in the result
	missing := map[string]bool{}
	initramfs := map[string]bool{} // blob names in ix.Initramfs
	var srcs []source
	for _, c := range ix.Tree.Cells {
		if c.Run == "" {
			continue
		}
		var run Index
		runSrcs, err := artefactSources(filepath.Join(dir, filepath.FromSlash(c.Run)), &run, nil)
		if err != nil {
			return nil, fmt.Errorf("cell %s: %w", c.ID, err)
		}
		// The blobs of a kernel that an earlier cell brought are left
		// out; blobs of no kernel are kept.
		ofKernel, keep := map[string]bool{}, map[string]bool{}
		for _, k := range run.Kernels {
			for _, f := range k.Files {
				ofKernel[f.Blob] = true
				if !kernels[k.Kernel.ID] {
					keep[f.Blob] = true
				}
			}
		}
		for _, k := range run.Kernels {
			if !kernels[k.Kernel.ID] {
				kernels[k.Kernel.ID] = true
				ix.Kernels = append(ix.Kernels, k)
			}
		}
		for _, s := range runSrcs {
			n := s.member.Name
			if packed[n] || (ofKernel[n] && !keep[n]) {
				continue
			}
			packed[n] = true
			srcs = append(srcs, s)
		}
		for _, f := range run.Initramfs {
			if !initramfs[f.Blob] {
				initramfs[f.Blob] = true
				ix.Initramfs = append(ix.Initramfs, f)
			}
		}
		for _, m := range run.Missing {
			if !missing[m] {
				missing[m] = true
				ix.Missing = append(ix.Missing, c.Run+": "+m)
			}
		}
	}
	return srcs, nil
}

// dirSources lists the regular files under dir as members named prefix
// and their slash paths relative to dir, in lexical order. Anything else
// (a link, a device) is refused: a bundle holds only regular files.
func dirSources(dir, prefix string) ([]source, error) {
	var srcs []source
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file (%s), and a bundle holds only regular files", p, d.Type())
		}
		s, err := hashSource(p, prefix+filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		srcs = append(srcs, s)
		return nil
	})
	return srcs, err
}
