package matrix

import (
	"os"
	"path/filepath"

	"klab/results/bundle"
)

// IsTree reports whether dir holds a results tree (its matrix.json).
func IsTree(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, ManifestFile))
	return err == nil && st.Mode().IsRegular()
}

// BundleTree describes the tree for a bundle's index: its directory's
// name, the matrix's name, its shard, and every cell of its manifest
// with its status and run directory.
func (t *Tree) BundleTree() bundle.Tree {
	bt := bundle.Tree{Matrix: t.Manifest.Name, Shard: t.Manifest.Shard, Cells: []bundle.TreeCell{}}
	if abs, err := filepath.Abs(t.Dir); err == nil {
		bt.Name = filepath.Base(abs)
	}
	for _, c := range t.Manifest.Cells {
		bc := bundle.TreeCell{ID: c.ID, Kernel: c.Kernel, Experiment: c.Experiment}
		if r := t.Results[c.ID]; r != nil {
			bc.Status, bc.Run = r.Status, filepath.ToSlash(r.Run)
		}
		bt.Cells = append(bt.Cells, bc)
	}
	return bt
}

// Pack writes the tree's bundle to out (bundle.PackTree): every file of
// the tree and, unless opts.ResultsOnly, the artefacts of the kernels its
// cells' runs used, each kernel and each blob once however many cells
// share them.
func (t *Tree) Pack(out string, opts bundle.PackOptions) (*bundle.PackResult, error) {
	return bundle.PackTree(t.Dir, out, t.BundleTree(), opts)
}
