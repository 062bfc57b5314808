package xreport

import (
	"fmt"
	"io"
	"strings"
)

// Markdown writes m as GitHub-flavoured Markdown with the content of
// Text; the table is one Markdown table with a column per kernel, the
// baseline's header marked "(baseline)". Every string from the matrix
// is escaped, so a guest's text shows as written and cannot add links,
// HTML or table cells.
func Markdown(w io.Writer, m *Matrix) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", mdEscape(titleLine(m)))
	fmt.Fprintf(&b, "%s\n\n", mdEscape(kernelsLine(m)))
	tb := newTable(m)
	if len(tb.rows) == 0 {
		b.WriteString("no measurements\n")
	} else {
		header := []string{"row"}
		for i, k := range tb.kernels {
			h := oneLine(k.Ref)
			if i == tb.base {
				h += " (baseline)"
			}
			header = append(header, h)
		}
		b.WriteString(mdTableRow(header))
		b.WriteString("|:---" + strings.Repeat("|---:", len(tb.kernels)) + "|\n")
		for _, r := range tb.rows {
			cells := []string{r.label}
			for _, c := range r.cells {
				cells = append(cells, c.text())
			}
			b.WriteString(mdTableRow(cells))
		}
	}
	fmt.Fprintf(&b, "\n%s\n", mdEscape(legendLine(m)))
	if len(tb.notes) > 0 {
		b.WriteString("\n")
		for i, n := range tb.notes {
			fmt.Fprintf(&b, "- %s\n", mdEscape(noteLine(i+1, n)))
		}
	}
	mdList(&b, "Kernel splats", splatLines(m))
	mdList(&b, "Skipped cells", skippedLines(m))
	mdList(&b, "Failures", failureLines(m))
	mdList(&b, "Warnings", warningLines(m))
	fmt.Fprintf(&b, "\n**%s**\n", mdEscape(resultLine(m)))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing markdown matrix report: %w", err)
	}
	return nil
}

// mdTableRow is one row of a Markdown table.
func mdTableRow(cells []string) string {
	esc := make([]string, len(cells))
	for i, c := range cells {
		esc[i] = mdEscape(c)
	}
	return "| " + strings.Join(esc, " | ") + " |\n"
}

// mdList adds a section with a heading and one list item per line, when
// there are lines.
func mdList(b *strings.Builder, heading string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### %s\n\n", heading)
	for _, l := range lines {
		fmt.Fprintf(b, "- %s\n", mdEscape(l))
	}
}

// mdEscaper backslash-escapes the characters that make Markdown or HTML
// out of text, '|' (a table cell's end) among them.
var mdEscaper = func() *strings.Replacer {
	var pairs []string
	for _, c := range "\\`*_[]<>|~&#!" {
		pairs = append(pairs, string(c), "\\"+string(c))
	}
	return strings.NewReplacer(pairs...)
}()

// mdEscape returns s on one line, cleaned, with Markdown's special
// characters escaped.
func mdEscape(s string) string {
	return mdEscaper.Replace(oneLine(s))
}
