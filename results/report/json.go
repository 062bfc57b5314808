package report

import (
	"io"

	"klab/results/internal/render"
)

// JSON writes r as indented JSON (Schema "klab.report/v1") followed by a
// newline. Empty lists are written as [], never null, and an empty
// Schema as Schema; r itself is not changed.
func JSON(w io.Writer, r *Report) error {
	c := *r
	if c.Schema == "" {
		c.Schema = Schema
	}
	c.Rows = render.NonNil(c.Rows)
	c.Kernels = render.NonNil(c.Kernels)
	c.Splats.New = render.NonNil(c.Splats.New)
	c.Splats.Gone = render.NonNil(c.Splats.Gone)
	c.Splats.Both = render.NonNil(c.Splats.Both)
	return render.WriteJSON(w, &c, "report")
}
