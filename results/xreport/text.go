package xreport

import (
	"fmt"
	"io"
	"strings"

	"klab/internal/textsafe"
	"klab/results/internal/render"
)

// TextWidth is the widest line Text writes, in columns; the header's
// lines (title, kernels) are at most render.HeaderWidth wide.
const TextWidth = 100

// The text table's limits: a kernel's column header is cut to
// maxHeader columns (the kernels line names it in full), and when the
// table does not fit TextWidth the label column is as wide as the
// longest label of at most labelCap columns, longer labels getting a
// line of their own above their row.
const (
	maxHeader = 24
	labelCap  = 40
)

// Text writes m as fixed-width plain text: ASCII only, no line wider
// than TextWidth. It shows the title, the kernels, the table (a row per
// measured row, a column per kernel with the median and the change vs
// the baseline; split into several tables, each repeating the label
// column, when the kernels do not fit the width), the legend and the
// footnotes saying why values are missing, the references' table (a row
// per row and check held against its reference, a column per kernel
// with the B/A within its cell and the short verdict, its footnotes
// numbered on from the first table's) with the experiments whose
// expectations get no verdict, a line per suite cell, the splats per
// kernel, the skipped cells, the failures, the warnings and the result.
// Other long lines are wrapped; control characters are dropped and
// other non-ASCII characters replaced.
func Text(w io.Writer, m *Matrix) error {
	t := textWriter{render.TextWriter{Width: TextWidth}}
	for _, l := range render.WrapPhrases(titlePhrases(m), render.HeaderWidth, "    ") {
		t.Line(l)
	}
	for _, l := range render.WrapPhrases(kernelsPhrases(m), render.HeaderWidth, "    ") {
		t.Line(l)
	}
	t.Blank()
	tb := newTable(m)
	t.tables(tb)
	t.Blank()
	t.Line(legendLine(m))
	for _, l := range tb.noteLines() {
		t.Line(l)
	}
	t.references(m, tb.notes)
	t.Section(suiteLines(m))
	t.Section(splatLines(m))
	t.Section(skippedLines(m))
	t.Section(failureLines(m))
	if lines := bisectLines(m, TextWidth); len(lines) > 0 {
		t.Section(append([]string{bisectTitle}, lines...))
	}
	var warnings []string
	for _, w := range warningLines(m) {
		warnings = append(warnings, "warning: "+w)
	}
	t.Section(warnings)
	t.Blank()
	t.Line(resultLine(m))
	if _, err := io.WriteString(w, t.String()); err != nil {
		return fmt.Errorf("writing text matrix report: %w", err)
	}
	return nil
}

// references adds the references' block when the matrix says anything
// of references: the title, table, legend and footnotes (numbered on
// from notes') when a row has a verdict, and the experiments whose
// expectations get none.
func (t *textWriter) references(m *Matrix, notes *footnotes) {
	if !hasReferences(m) {
		return
	}
	t.Blank()
	if rt := newRefTable(m, notes); len(rt.rows) > 0 {
		t.Line(refTitle)
		t.tables(rt)
		t.Line(refLegend)
		for _, l := range rt.noteLines() {
			t.Line(l)
		}
	}
	for _, l := range refNoteLines(m) {
		t.Line(l)
	}
}

// textWriter collects Text's lines, each made ASCII and wrapped at
// TextWidth, and adds Text's tables.
type textWriter struct {
	render.TextWriter
}

// tables adds the table, its columns aligned: a kernel's column shows
// the value right-aligned and the change and footnote mark after it,
// left-aligned. The kernel columns are split over several tables when
// they do not fit TextWidth.
func (t *textWriter) tables(tb *table) {
	if len(tb.rows) == 0 {
		t.Line("no measurements")
		return
	}
	const gap = "  "
	n := len(tb.kernels)
	header, sub := make([]string, n), make([]string, n)
	valueW, changeW, widths := make([]int, n), make([]int, n), make([]int, n)
	for i, k := range tb.kernels {
		header[i] = cut(render.ToASCII(textsafe.OneLine(k.Ref)), maxHeader)
		if i == tb.base {
			sub[i] = "baseline"
		}
		for _, r := range tb.rows {
			valueW[i] = max(valueW[i], len(render.ToASCII(r.cells[i].value)))
			changeW[i] = max(changeW[i], len(render.ToASCII(r.cells[i].changePart())))
		}
		widths[i] = max(len(header[i]), len(sub[i]), valueW[i])
		if changeW[i] > 0 {
			widths[i] = max(widths[i], valueW[i]+1+changeW[i])
		}
	}
	const labelHeader = "row"
	labelW := len(labelHeader)
	for _, r := range tb.rows {
		labelW = max(labelW, len(render.ToASCII(r.label)))
	}
	all := labelW
	for _, w := range widths {
		all += len(gap) + w
	}
	if all > TextWidth {
		labelW = len(labelHeader)
		for _, r := range tb.rows {
			if l := len(render.ToASCII(r.label)); l <= labelCap {
				labelW = max(labelW, l)
			}
		}
	}
	var groups [][]int
	var group []int
	used := labelW
	for i, w := range widths {
		if len(group) > 0 && used+len(gap)+w > TextWidth {
			groups = append(groups, group)
			group, used = nil, labelW
		}
		group = append(group, i)
		used += len(gap) + w
	}
	groups = append(groups, group)
	for gi, g := range groups {
		if gi > 0 {
			t.Blank()
		}
		row := func(label string, cell func(i int) string) {
			var b strings.Builder
			b.WriteString(padRight(label, labelW))
			for _, i := range g {
				b.WriteString(gap)
				b.WriteString(padLeft(cell(i), widths[i]))
			}
			t.Line(b.String())
		}
		row(labelHeader, func(i int) string {
			if tb.leftHeader {
				return padRight(header[i], widths[i])
			}
			return header[i]
		})
		if hasSub(sub, g) {
			row("", func(i int) string { return sub[i] })
		}
		for _, r := range tb.rows {
			label := render.ToASCII(r.label)
			if len(label) > labelW {
				t.Line(label)
				label = ""
			}
			row(label, func(i int) string {
				c := r.cells[i]
				s := padLeft(render.ToASCII(c.value), valueW[i])
				if changeW[i] > 0 {
					s += " " + padRight(render.ToASCII(c.changePart()), changeW[i])
				}
				return s
			})
		}
	}
}

// hasSub reports whether any of the columns in group has a second
// header line.
func hasSub(sub []string, group []int) bool {
	for _, i := range group {
		if sub[i] != "" {
			return true
		}
	}
	return false
}

// cut shortens s to n columns, ending it with ".." when it was longer.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-2] + ".."
}

// padLeft right-aligns s in w columns.
func padLeft(s string, w int) string {
	return strings.Repeat(" ", max(0, w-len(s))) + s
}

// padRight left-aligns s in w columns.
func padRight(s string, w int) string {
	return s + strings.Repeat(" ", max(0, w-len(s)))
}
