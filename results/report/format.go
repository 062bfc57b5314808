package report

import (
	"fmt"
	"io"
	"strings"
)

// Formats are the report formats Write knows, in the order they are
// listed to users.
var Formats = []string{"text", "md", "json", "junit", "html"}

// Write writes r to w in format, one of Formats: "text" (Text), "md"
// (Markdown), "json" (JSON), "junit" (JUnit) or "html" (HTML).
func Write(w io.Writer, r *Report, format string) error {
	switch format {
	case "text":
		return Text(w, r)
	case "md":
		return Markdown(w, r)
	case "json":
		return JSON(w, r)
	case "junit":
		return JUnit(w, r)
	case "html":
		return HTML(w, r)
	}
	return fmt.Errorf("unknown report format %q, want one of %s", format, strings.Join(Formats, ", "))
}
