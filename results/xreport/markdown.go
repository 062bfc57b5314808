package xreport

import (
	"fmt"
	"io"
	"strings"

	"klab/internal/textsafe"
	"klab/results/internal/render"
)

// Markdown writes m as GitHub-flavoured Markdown with the content of
// Text; the table is one Markdown table with a column per kernel, the
// baseline's header marked "(baseline)". Every string from the matrix
// is escaped, so a guest's text shows as written and cannot add links,
// HTML or table cells.
func Markdown(w io.Writer, m *Matrix) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", render.MDEscape(titleLine(m)))
	fmt.Fprintf(&b, "%s\n\n", render.MDEscape(kernelsLine(m)))
	tb := newTable(m)
	if len(tb.rows) == 0 {
		b.WriteString("no measurements\n")
	} else {
		header := []string{"row"}
		for i, k := range tb.kernels {
			h := textsafe.OneLine(k.Ref)
			if i == tb.base {
				h += " (baseline)"
			}
			header = append(header, h)
		}
		b.WriteString(render.MDTableRow(header))
		b.WriteString("|:---" + strings.Repeat("|---:", len(tb.kernels)) + "|\n")
		for _, r := range tb.rows {
			cells := []string{r.label}
			for _, c := range r.cells {
				cells = append(cells, c.text())
			}
			b.WriteString(render.MDTableRow(cells))
		}
	}
	fmt.Fprintf(&b, "\n%s\n", render.MDEscape(legendLine(m)))
	if len(tb.notes) > 0 {
		b.WriteString("\n")
		for i, n := range tb.notes {
			fmt.Fprintf(&b, "- %s\n", render.MDEscape(noteLine(i+1, n)))
		}
	}
	render.MDList(&b, "Test suites", suiteLines(m))
	render.MDList(&b, "Kernel splats", splatLines(m))
	render.MDList(&b, "Skipped cells", skippedLines(m))
	render.MDList(&b, "Failures", failureLines(m))
	render.MDList(&b, "Warnings", warningLines(m))
	fmt.Fprintf(&b, "\n**%s**\n", render.MDEscape(resultLine(m)))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing markdown matrix report: %w", err)
	}
	return nil
}
