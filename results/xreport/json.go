package xreport

import (
	"encoding/json"
	"fmt"
	"io"
)

// JSON writes m as indented JSON (Schema "klab.matrix/v1") followed by
// a newline. Empty lists (kernels, rows, a row's cells, a cell's
// samples, splats) are written as [], never null, and an empty Schema
// as Schema; m itself is not changed.
func JSON(w io.Writer, m *Matrix) error {
	c := *m
	if c.Schema == "" {
		c.Schema = Schema
	}
	c.Kernels = nonNil(c.Kernels)
	c.Splats = nonNil(c.Splats)
	c.Rows = make([]Row, len(m.Rows))
	for i, r := range m.Rows {
		r.Cells = make([]Cell, len(m.Rows[i].Cells))
		for j, cell := range m.Rows[i].Cells {
			cell.Summary.Values = nonNil(cell.Summary.Values)
			r.Cells[j] = cell
		}
		c.Rows[i] = r
	}
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding matrix report: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing json matrix report: %w", err)
	}
	return nil
}

// nonNil returns s, or an empty slice when s is nil.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
