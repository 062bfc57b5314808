package render

import (
	"encoding/json"
	"fmt"
	"io"
)

// NonNil returns s, or an empty slice when s is nil, so that JSON shows
// an empty list as [] rather than null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// WriteJSON writes v to w as JSON indented by two spaces, followed by a
// newline. what names the document in errors ("report": "encoding
// report: ...", "writing json report: ...").
func WriteJSON(w io.Writer, v any, what string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", what, err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing json %s: %w", what, err)
	}
	return nil
}
