package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// JSON writes r as indented JSON (Schema "klab.report/v1") followed by a
// newline. Empty lists are written as [], never null, and an empty
// Schema as Schema; r itself is not changed.
func JSON(w io.Writer, r *Report) error {
	c := *r
	if c.Schema == "" {
		c.Schema = Schema
	}
	c.Rows = nonNil(c.Rows)
	c.Kernels = nonNil(c.Kernels)
	c.Splats.New = nonNil(c.Splats.New)
	c.Splats.Gone = nonNil(c.Splats.Gone)
	c.Splats.Both = nonNil(c.Splats.Both)
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding report: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing json report: %w", err)
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
