package bundle

import (
	"fmt"
	"sort"
	"strings"

	"klab/results"
)

// Tree is the matrix results tree of a bundle of kind KindMatrix, as its
// index describes it. The tree's own files (its matrix.json first of all)
// stay what klab reads; Tree says what the bundle holds without
// unpacking it.
type Tree struct {
	// Name is the tree's directory name: where PlaceTree puts it in a
	// runs directory unless told another place.
	Name string `json:"name"`
	// Matrix is the matrix's name (its file's name:).
	Matrix string `json:"matrix"`
	// Shard is the tree's shard ("i/n"), or empty for a whole matrix.
	Shard string `json:"shard,omitempty"`
	// Cells are the tree's cells, in its manifest's order.
	Cells []TreeCell `json:"cells"`
}

// TreeCell is one cell of a matrix results tree.
type TreeCell struct {
	// ID is the cell's id, the name of its directory in the tree.
	ID string `json:"id"`
	// Kernel and Experiment are the cell's kernel ref and experiment
	// label.
	Kernel     string `json:"kernel"`
	Experiment string `json:"experiment"`
	// Status is the cell's status (complete, error, incomplete), or
	// empty for a cell that did not run.
	Status string `json:"status,omitempty"`
	// Run is the cell's run directory relative to the tree
	// (cells/<id>/<run id>; its base name is the run's id), or empty
	// when the cell made none.
	Run string `json:"run,omitempty"`
}

// check returns the problems of a tree whose bundle holds members: names
// that are not plain, strings beyond lim.MaxName, repeated cells, and
// cells whose run directory holds no member.
func (t *Tree) check(members []Member, lim Limits) []error {
	var errs []error
	if !results.ValidName(t.Name) {
		errs = append(errs, fmt.Errorf("%s: tree name %q is not a plain name", IndexName, t.Name))
	}
	if !results.ValidName(t.Matrix) {
		errs = append(errs, fmt.Errorf("%s: matrix name %q is not a plain name", IndexName, t.Matrix))
	}
	if len(t.Shard) > lim.MaxName {
		errs = append(errs, fmt.Errorf("%s: shard of %d bytes, at most %d allowed", IndexName, len(t.Shard), lim.MaxName))
	}
	if len(t.Cells) > lim.MaxMembers {
		return append(errs, fmt.Errorf("%s: %d cells, at most %d allowed", IndexName, len(t.Cells), lim.MaxMembers))
	}
	// The tree's files, sorted, to find a run directory's first file.
	var files []string
	for _, m := range members {
		if strings.HasPrefix(m.Name, TreePrefix) {
			files = append(files, m.Name)
		}
	}
	sort.Strings(files)
	ids := make(map[string]bool, len(t.Cells))
	for _, c := range t.Cells {
		if err := validRel(c.ID, lim.MaxName); err != nil || strings.Contains(c.ID, "/") {
			errs = append(errs, fmt.Errorf("%s: cell %q: the id is not a plain name", IndexName, c.ID))
			continue
		}
		if ids[c.ID] {
			errs = append(errs, fmt.Errorf("%s: cell %s listed twice", IndexName, c.ID))
		}
		ids[c.ID] = true
		for _, f := range [][2]string{{"kernel", c.Kernel}, {"experiment", c.Experiment}, {"status", c.Status}} {
			if len(f[1]) > lim.MaxName {
				errs = append(errs, fmt.Errorf("%s: cell %s: %s of %d bytes, at most %d allowed", IndexName, c.ID, f[0], len(f[1]), lim.MaxName))
			}
		}
		if c.Run == "" {
			continue
		}
		if err := validRel(c.Run, lim.MaxName); err != nil {
			errs = append(errs, fmt.Errorf("%s: cell %s: run %q: %w", IndexName, c.ID, c.Run, err))
			continue
		}
		dir := TreePrefix + c.Run + "/"
		if i := sort.SearchStrings(files, dir); i == len(files) || !strings.HasPrefix(files[i], dir) {
			errs = append(errs, fmt.Errorf("%s: cell %s: run %s holds no member", IndexName, c.ID, c.Run))
		}
	}
	return errs
}

// RunID is the id of the cell's run (the base name of its directory), or
// empty.
func (c TreeCell) RunID() string {
	if c.Run == "" {
		return ""
	}
	return c.Run[strings.LastIndexByte(c.Run, '/')+1:]
}
