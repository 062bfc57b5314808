package report

import (
	"io"

	"klab/results/internal/render"
)

// Formats are the report formats Write knows, in the order they are
// listed to users.
var Formats = render.Formats

// Write writes r to w in format, one of Formats: "text" (Text), "md"
// (Markdown), "json" (JSON), "junit" (JUnit) or "html" (HTML).
func Write(w io.Writer, r *Report, format string) error {
	return render.Writers[*Report]{Text: Text, Markdown: Markdown, JSON: JSON, JUnit: JUnit, HTML: HTML}.Write(w, r, format, "report")
}
