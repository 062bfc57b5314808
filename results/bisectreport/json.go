package bisectreport

import (
	"io"

	"klab/results/internal/render"
)

// JSON writes r as indented JSON (schema klab.bisect/v1).
func JSON(w io.Writer, r *Report) error {
	c := *r
	c.Schema = Schema
	c.Steps = render.NonNil(c.Steps)
	c.Config = render.NonNil(c.Config)
	c.Command = render.NonNil(c.Command)
	return render.WriteJSON(w, &c, "bisection report")
}
