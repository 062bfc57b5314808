package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"

	"klab/results/stats"
)

// TextWidth is the widest line Text writes, in columns.
const TextWidth = 100

// Text writes r as fixed-width plain text that a kernel developer can
// paste under a patch in a mail: ASCII only, no line wider than
// TextWidth. It shows the experiment, the two sides, where it ran, the
// A/B table (medians, change with its confidence interval, p-value,
// verdict), the checks, the skipped cells, the splat diff, the warnings
// (the rows' own ones once each), the reference table and the result.
// Longer lines are wrapped; control characters from the report are
// dropped and other non-ASCII characters replaced.
func Text(w io.Writer, r *Report) error {
	var t textWriter
	t.line(titleLine(r))
	t.line(sideLine(r, TextWidth))
	t.line(envLine(r))
	t.blank()
	t.table(r.Rows)
	var checks, skipped, warnings []string
	for _, c := range r.Checks {
		checks = append(checks, checkLine(c))
	}
	for _, s := range r.Skipped {
		skipped = append(skipped, skippedLine(s))
	}
	for _, w := range warningLines(r) {
		warnings = append(warnings, "warning: "+w)
	}
	for _, p := range r.Profiles {
		t.blank()
		t.line(profileTitle(p))
		t.grid(profileHeader, profileRows(p))
		t.line(profileNote)
	}
	t.section(checks)
	t.section(skipped)
	t.section(splatLines(r))
	t.section(warnings)
	if ref := referenceText(r); ref != "" {
		t.blank()
		t.line("reference (the table this experiment reproduces):")
		for l := range strings.SplitSeq(ref, "\n") {
			if l != "" {
				l = "  " + expandTabs(l)
			}
			t.line(l)
		}
	}
	t.blank()
	t.line(resultLine(r))
	if _, err := io.WriteString(w, t.b.String()); err != nil {
		return fmt.Errorf("writing text report: %w", err)
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

// table adds the A/B table, its columns aligned. A name too long to fit
// the table in TextWidth gets a line of its own above its numbers.
func (t *textWriter) table(rows []Row) {
	if len(rows) == 0 {
		t.line("no measurements")
		return
	}
	const gap = "  "
	cells := [][]string{slices.Clone(tableHeader)}
	shortened := false
	for _, row := range rows {
		c := tableRow(row)
		// The long verdict would push most tables past TextWidth.
		if v := &c[len(c)-1]; *v == string(stats.NoChange) {
			*v, shortened = "n.s.", true
		}
		cells = append(cells, c)
	}
	defer func() {
		if shortened {
			t.line("")
			t.line(fmt.Sprintf("B/A: ratio of the medians; ~ and n.s.: no significant change (Mann-Whitney U, alpha %.2f)", stats.Alpha))
		}
	}()
	widths := make([]int, len(tableHeader))
	for _, c := range cells {
		for i := range c {
			c[i] = toASCII(c[i])
			widths[i] = max(widths[i], len(c[i]))
		}
	}
	rest := len(gap) * (len(widths) - 1)
	for _, w := range widths[1:] {
		rest += w
	}
	const minName = 8
	if widths[0]+rest > TextWidth && TextWidth-rest >= minName {
		widths[0] = TextWidth - rest
	}
	for _, c := range cells {
		if len(c[0]) > widths[0] {
			t.line(c[0])
			c[0] = ""
		}
		var b strings.Builder
		for i, cell := range c {
			if i > 0 {
				b.WriteString(gap)
			}
			pad := strings.Repeat(" ", max(0, widths[i]-len(cell)))
			if tableRight[i] {
				b.WriteString(pad + cell)
			} else {
				b.WriteString(cell + pad)
			}
		}
		t.line(b.String())
	}
}

// grid adds a table: the first column left-aligned and cut to fit
// TextWidth, the others right-aligned.
func (t *textWriter) grid(header []string, rows [][]string) {
	const gap = "  "
	cells := append([][]string{header}, rows...)
	widths := make([]int, len(header))
	for _, c := range cells {
		for i := range c {
			c[i] = toASCII(c[i])
			widths[i] = max(widths[i], len(c[i]))
		}
	}
	rest := 2 + len(gap)*(len(widths)-1)
	for _, w := range widths[1:] {
		rest += w
	}
	if widths[0]+rest > TextWidth {
		widths[0] = max(8, TextWidth-rest)
	}
	for _, c := range cells {
		var b strings.Builder
		b.WriteString("  ")
		for i, cell := range c {
			if i > 0 {
				b.WriteString(gap)
			}
			if i == 0 && len(cell) > widths[0] {
				cell = cell[:widths[0]-2] + ".."
			}
			pad := strings.Repeat(" ", max(0, widths[i]-len(cell)))
			if i > 0 {
				b.WriteString(pad + cell)
			} else {
				b.WriteString(cell + pad)
			}
		}
		t.line(b.String())
	}
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
