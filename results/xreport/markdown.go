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
// baseline's header marked "(baseline)", and so is the references'
// table ("Against the reference"), followed by where each reference
// comes from. Every string from the matrix is escaped, so a guest's
// text shows as written and cannot add links, HTML or table cells.
func Markdown(w io.Writer, m *Matrix) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", render.MDEscape(titleLine(m)))
	fmt.Fprintf(&b, "%s\n\n", render.MDEscape(kernelsLine(m)))
	tb := newTable(m)
	if len(tb.rows) == 0 {
		b.WriteString("no measurements\n")
	} else {
		mdTable(&b, tb)
	}
	fmt.Fprintf(&b, "\n%s\n", render.MDEscape(legendLine(m)))
	mdNotes(&b, tb)
	mdReferences(&b, m, tb.notes)
	render.MDList(&b, "Test suites", suiteLines(m))
	render.MDList(&b, "Kernel splats", splatLines(m))
	render.MDList(&b, "Skipped cells", skippedLines(m))
	render.MDList(&b, "Failures", failureLines(m))
	mdBisects(&b, m)
	render.MDList(&b, "Warnings", warningLines(m))
	fmt.Fprintf(&b, "\n%s\n", render.MDStrong(resultLine(m)))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing markdown matrix report: %w", err)
	}
	return nil
}

// mdTable adds tb as a Markdown table: the label column, then a column
// per kernel, the baseline's header marked.
func mdTable(b *strings.Builder, tb *table) {
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

// mdReferences adds the references' section when the matrix says
// anything of references: the table, its legend and footnotes, the
// sources, and the experiments whose expectations get no verdict.
func mdReferences(b *strings.Builder, m *Matrix, notes *footnotes) {
	if !hasReferences(m) {
		return
	}
	b.WriteString("\n### Against the reference\n\n")
	if rt := newRefTable(m, notes); len(rt.rows) > 0 {
		fmt.Fprintf(b, "%s\n\n", render.MDEscape(refTitle))
		mdTable(b, rt)
		fmt.Fprintf(b, "\n%s\n", render.MDEscape(refLegend))
		mdNotes(b, rt)
		b.WriteString("\nSources:\n\n")
		for _, l := range refSourceLines(m) {
			fmt.Fprintf(b, "- %s\n", render.MDEscape(l))
		}
	}
	if lines := refNoteLines(m); len(lines) > 0 {
		b.WriteString("\n")
		for _, l := range lines {
			fmt.Fprintf(b, "- %s\n", render.MDEscape(l))
		}
	}
}

// mdNotes adds a list of the footnotes, when there are any.
func mdNotes(b *strings.Builder, tb *table) {
	if lines := tb.noteLines(); len(lines) > 0 {
		b.WriteString("\n")
		for _, l := range lines {
			fmt.Fprintf(b, "- %s\n", render.MDEscape(l))
		}
	}
}

// mdBisects adds the commands that chase the new failures, each in a
// code block under what it chases.
func mdBisects(b *strings.Builder, m *Matrix) {
	if len(m.Bisects) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### Find the commit\n\n%s\n", render.MDEscape(bisectTitle))
	for _, bs := range m.Bisects {
		cmd := strings.Join(shellLines(bs.Argv, "", TextWidth), "\n")
		fence := strings.Repeat("`", max(3, longestRun(cmd, '`')+1))
		fmt.Fprintf(b, "\n%s on %s: %s\n\n%s\n%s\n%s\n", render.MDEscape(bs.Experiment), render.MDEscape(bs.Kernel), render.MDEscape(bs.Failure), fence, cmd, fence)
	}
}
