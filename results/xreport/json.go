package xreport

import (
	"io"

	"klab/results/internal/render"
)

// JSON writes m as indented JSON (Schema "klab.matrix/v1") followed by
// a newline. Empty lists (kernels, rows, a row's cells, a cell's
// samples, splats, a reference's cells) are written as [], never null,
// and an empty Schema as Schema; m itself is not changed.
func JSON(w io.Writer, m *Matrix) error {
	c := *m
	if c.Schema == "" {
		c.Schema = Schema
	}
	c.Kernels = render.NonNil(c.Kernels)
	c.Splats = render.NonNil(c.Splats)
	c.Rows = make([]Row, len(m.Rows))
	for i, r := range m.Rows {
		r.Cells = make([]Cell, len(m.Rows[i].Cells))
		for j, cell := range m.Rows[i].Cells {
			cell.Summary.Values = render.NonNil(cell.Summary.Values)
			r.Cells[j] = cell
		}
		c.Rows[i] = r
	}
	if m.References != nil {
		c.References = make([]Reference, len(m.References))
		for i, r := range m.References {
			r.Cells = render.NonNil(r.Cells)
			c.References[i] = r
		}
	}
	return render.WriteJSON(w, &c, "matrix report")
}
