package xreport

import (
	"fmt"
	"io"
	"strings"
	"unicode"
)

// TextWidth is the widest line Text writes, in columns.
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
// footnotes saying why values are missing, the splats per kernel, the
// skipped cells, the failures, the warnings and the result. Other long
// lines are wrapped; control characters are dropped and other non-ASCII
// characters replaced.
func Text(w io.Writer, m *Matrix) error {
	var t textWriter
	t.line(titleLine(m))
	t.line(kernelsLine(m))
	t.blank()
	tb := newTable(m)
	t.tables(tb)
	t.blank()
	t.line(legendLine(m))
	for i, n := range tb.notes {
		t.line(noteLine(i+1, n))
	}
	t.section(splatLines(m))
	t.section(skippedLines(m))
	t.section(failureLines(m))
	var warnings []string
	for _, w := range warningLines(m) {
		warnings = append(warnings, "warning: "+w)
	}
	t.section(warnings)
	t.blank()
	t.line(resultLine(m))
	if _, err := io.WriteString(w, t.b.String()); err != nil {
		return fmt.Errorf("writing text matrix report: %w", err)
	}
	return nil
}

// textWriter collects Text's lines, each made ASCII and wrapped at
// TextWidth.
type textWriter struct {
	b strings.Builder
}

// blank adds an empty line.
func (t *textWriter) blank() {
	t.b.WriteByte('\n')
}

// section adds a blank line and lines, when there are any.
func (t *textWriter) section(lines []string) {
	if len(lines) == 0 {
		return
	}
	t.blank()
	for _, l := range lines {
		t.line(l)
	}
}

// line adds s, wrapped at spaces into lines of at most TextWidth columns;
// continuation lines are indented 4 columns more than s (at most half
// the width).
func (t *textWriter) line(s string) {
	for l := range strings.SplitSeq(s, "\n") {
		l = strings.TrimRight(toASCII(expandTabs(l)), " ")
		indent := strings.Repeat(" ", min(len(l)-len(strings.TrimLeft(l, " "))+4, TextWidth/2))
		for len(l) > TextWidth {
			cut := strings.LastIndexByte(l[:TextWidth+1], ' ')
			if cut <= len(indent) {
				cut = TextWidth
			}
			t.b.WriteString(strings.TrimRight(l[:cut], " "))
			t.b.WriteByte('\n')
			l = indent + strings.TrimLeft(l[cut:], " ")
		}
		t.b.WriteString(l)
		t.b.WriteByte('\n')
	}
}

// tables adds the table, its columns aligned: a kernel's column shows
// the value right-aligned and the change and footnote mark after it,
// left-aligned. The kernel columns are split over several tables when
// they do not fit TextWidth.
func (t *textWriter) tables(tb *table) {
	if len(tb.rows) == 0 {
		t.line("no measurements")
		return
	}
	const gap = "  "
	n := len(tb.kernels)
	header, sub := make([]string, n), make([]string, n)
	valueW, changeW, widths := make([]int, n), make([]int, n), make([]int, n)
	for i, k := range tb.kernels {
		header[i] = cut(toASCII(oneLine(k.Ref)), maxHeader)
		if i == tb.base {
			sub[i] = "baseline"
		}
		for _, r := range tb.rows {
			valueW[i] = max(valueW[i], len(toASCII(r.cells[i].value)))
			changeW[i] = max(changeW[i], len(toASCII(r.cells[i].changePart())))
		}
		widths[i] = max(len(header[i]), len(sub[i]), valueW[i])
		if changeW[i] > 0 {
			widths[i] = max(widths[i], valueW[i]+1+changeW[i])
		}
	}
	const labelHeader = "row"
	labelW := len(labelHeader)
	for _, r := range tb.rows {
		labelW = max(labelW, len(toASCII(r.label)))
	}
	all := labelW
	for _, w := range widths {
		all += len(gap) + w
	}
	if all > TextWidth {
		labelW = len(labelHeader)
		for _, r := range tb.rows {
			if l := len(toASCII(r.label)); l <= labelCap {
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
			t.blank()
		}
		row := func(label string, cell func(i int) string) {
			var b strings.Builder
			b.WriteString(padRight(label, labelW))
			for _, i := range g {
				b.WriteString(gap)
				b.WriteString(padLeft(cell(i), widths[i]))
			}
			t.line(b.String())
		}
		row(labelHeader, func(i int) string { return header[i] })
		if hasSub(sub, g) {
			row("", func(i int) string { return sub[i] })
		}
		for _, r := range tb.rows {
			label := toASCII(r.label)
			if len(label) > labelW {
				t.line(label)
				label = ""
			}
			row(label, func(i int) string {
				c := r.cells[i]
				s := padLeft(toASCII(c.value), valueW[i])
				if changeW[i] > 0 {
					s += " " + padRight(toASCII(c.changePart()), changeW[i])
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

// expandTabs replaces tabs with spaces up to the next multiple of 8
// columns.
func expandTabs(s string) string {
	if !strings.Contains(s, "\t") {
		return s
	}
	var b strings.Builder
	col := 0
	for _, r := range s {
		if r == '\t' {
			n := 8 - col%8
			b.WriteString(strings.Repeat(" ", n))
			col += n
			continue
		}
		b.WriteRune(r)
		col++
	}
	return b.String()
}

// asciiFor spells common non-ASCII characters in ASCII.
var asciiFor = map[rune]string{
	'µ': "u", 'μ': "u", '±': "+-", '×': "x", '÷': "/", '–': "-", '—': "-",
	'−': "-", '‘': "'", '’': "'", '“': `"`, '”': `"`, '…': "...", '≤': "<=",
	'≥': ">=", '≈': "~", '→': "->", '←': "<-", '•': "*", '·': ".",
	'\u00a0': " ", '°': "deg",
}

// toASCII returns s in printable ASCII: control characters dropped, the
// characters in asciiFor spelled out, any other character made '?'.
func toASCII(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= ' ' && r < 0x7f:
			b.WriteRune(r)
		case asciiFor[r] != "":
			b.WriteString(asciiFor[r])
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}
