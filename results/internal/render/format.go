package render

import (
	"fmt"
	"io"
	"strings"
)

// Formats are the report formats, in the order they are listed to users.
var Formats = []string{"text", "md", "json", "junit", "html"}

// Writers are one kind of report's writers, one per format. report and
// xreport each fill one, so that the two take the same format names and
// refuse an unknown one alike.
type Writers[T any] struct {
	Text, Markdown, JSON, JUnit, HTML func(io.Writer, T) error
}

// Write writes v to w in format, one of Formats; what names the kind of
// report in the error for an unknown format.
func (ws Writers[T]) Write(w io.Writer, v T, format, what string) error {
	f := map[string]func(io.Writer, T) error{
		"text": ws.Text, "md": ws.Markdown, "json": ws.JSON, "junit": ws.JUnit, "html": ws.HTML,
	}[format]
	if f == nil {
		return fmt.Errorf("unknown %s format %q, want one of %s", what, format, strings.Join(Formats, ", "))
	}
	return f(w, v)
}
