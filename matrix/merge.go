package matrix

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"klab/internal/fileio"
	"klab/internal/option"
)

// Merge copies the finished cells of shard trees (or of partial runs of
// one matrix) into a new tree at out, as if one machine had run them all,
// and returns it. Every tree must come from the same matrix file; a cell
// finished in two trees is an error naming both. Nothing is written when
// the trees do not fit together.
func Merge(dirs []string, out string) (*Tree, error) {
	if len(dirs) == 0 {
		return nil, errors.New("nothing to merge: give the shards' results directories")
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return nil, option.Errorf("out", "%s exists and is not empty", out)
	}
	trees := make([]*Tree, len(dirs))
	from := map[string]int{} // cell ID -> tree index
	var cells []Cell
	var errs []error
	for i, d := range dirs {
		t, err := Open(d)
		if err != nil {
			return nil, fmt.Errorf("merge %s: %w", d, err)
		}
		trees[i] = t
		if t.Manifest.SHA256 != trees[0].Manifest.SHA256 {
			return nil, fmt.Errorf("merge: %s ran %s (sha256 %.12s) but %s ran %s (sha256 %.12s): not the same matrix",
				dirs[0], trees[0].Manifest.File, trees[0].Manifest.SHA256, d, t.Manifest.File, t.Manifest.SHA256)
		}
		for _, c := range t.Manifest.Cells {
			r := t.Results[c.ID]
			if r == nil || r.Status == StatusIncomplete {
				continue
			}
			if j, ok := from[c.ID]; ok {
				errs = append(errs, fmt.Errorf("cell %s finished in both %s and %s", c.Name(), dirs[j], d))
				continue
			}
			from[c.ID] = i
			cells = append(cells, c)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	base := trees[0].Manifest
	m := &Manifest{Schema: ManifestSchema, Name: base.Name, File: base.File, SHA256: base.SHA256,
		Kernels: base.Kernels, Experiments: base.Experiments, Baseline: base.Baseline,
		Cells: sortedCells(cells), Total: base.Total, Start: time.Now().UTC()}
	if len(cells) < base.Total {
		// Not every cell: keep the tree resumable as the missing part.
		m.Cells = sortedCells(allCells(trees))
	}
	if err := os.MkdirAll(filepath.Join(out, CellsDir), 0o755); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dirs[0], FileCopy))
	if err != nil {
		return nil, fmt.Errorf("merge: %w", err)
	}
	if err := fileio.WriteAtomic(filepath.Join(out, FileCopy), data, 0o644); err != nil {
		return nil, err
	}
	t := &Tree{Dir: out, Manifest: m, Results: map[string]*CellResult{}}
	for _, c := range cells {
		src := filepath.Join(dirs[from[c.ID]], CellsDir, c.ID)
		if err := os.CopyFS(filepath.Join(out, CellsDir, c.ID), os.DirFS(src)); err != nil {
			return nil, fmt.Errorf("merge: copy %s: %w", src, err)
		}
		t.Results[c.ID] = trees[from[c.ID]].Results[c.ID]
	}
	if err := fileio.WriteJSON(filepath.Join(out, ManifestFile), m); err != nil {
		return nil, err
	}
	return t, nil
}

// allCells is the union of the trees' cells.
func allCells(trees []*Tree) []Cell {
	seen := map[string]bool{}
	var out []Cell
	for _, t := range trees {
		for _, c := range t.Manifest.Cells {
			if !seen[c.ID] {
				seen[c.ID] = true
				out = append(out, c)
			}
		}
	}
	return out
}
