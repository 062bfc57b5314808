package report

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"klab/results/internal/render"
	"klab/results/stats"
)

// TextWidth is the widest line Text writes, in columns; the header's
// lines are at most render.HeaderWidth wide.
const TextWidth = 100

// Text writes r as fixed-width plain text that a kernel developer can
// paste under a patch in a mail: ASCII only, no line wider than
// TextWidth. It shows the experiment, the two sides, where it ran, the
// A/B table (medians, change with its confidence interval, p-value,
// samples per side, minimum detectable change, verdict), what each row
// without a significant change could have seen, the checks (a failed
// one with the tail of its output), the skipped cells, the splat diff,
// the warnings (the rows' own ones once each), the reference table and
// the result.
// Longer lines are wrapped; control characters from the report are
// dropped and other non-ASCII characters replaced.
func Text(w io.Writer, r *Report) error {
	t := textWriter{render.TextWriter{Width: TextWidth}}
	t.phrases(titlePhrases(r), "    ")
	t.sides(r)
	t.phrases(legendPhrases(r), "    ")
	t.phrases(envPhrases(r), "    ")
	t.phrases(roundsPhrases(r), "    ")
	if l := leadPhrases(r); len(l) > 0 {
		t.Blank()
		t.phrases(l, "    ")
	}
	t.Blank()
	t.table(r.Rows)
	for _, l := range weighLines(r) {
		t.Line(l)
	}
	if hasReferences(r) {
		t.refBlock(r)
	}
	var checks, skipped []string
	for _, c := range r.Checks {
		checks = append(checks, checkLines(c, "    | ")...)
	}
	for _, s := range r.Skipped {
		skipped = append(skipped, skippedLine(s))
	}
	for _, p := range r.Profiles {
		t.Blank()
		t.Line(profileTitle(p))
		t.grid(profileHeader, profileRows(p))
		t.Line(profileNote)
	}
	t.Section(checks)
	t.Section(skipped)
	t.Section(splatLines(r))
	if ws := warningItems(r); len(ws) > 0 {
		t.Blank()
		for _, w := range ws {
			p := w.phrases()
			p[0] = "warning: " + p[0]
			for _, l := range render.WrapPhrases(p, TextWidth, "    ") {
				t.Line(l)
			}
		}
	}
	if ref := referenceText(r); ref != "" {
		t.Blank()
		t.Line("reference (the table this experiment reproduces):")
		for l := range strings.SplitSeq(ref, "\n") {
			if l != "" {
				l = "  " + render.ExpandTabs(l)
			}
			t.Line(l)
		}
	}
	t.Blank()
	t.Line(resultLine(r))
	if _, err := io.WriteString(w, t.String()); err != nil {
		return fmt.Errorf("writing text report: %w", err)
	}
	return nil
}

// textWriter collects Text's lines, each made ASCII and wrapped at
// TextWidth, and adds Text's tables.
type textWriter struct {
	render.TextWriter
}

// phrases adds the lines of a header line's phrases, wrapped between
// phrases at render.HeaderWidth (see render.WrapPhrases), continuation
// lines starting with indent.
func (t *textWriter) phrases(phrases []string, indent string) {
	for _, l := range render.WrapPhrases(phrases, render.HeaderWidth, indent) {
		t.Line(l)
	}
}

// sides adds the line naming the two sides when it fits, else a side per
// line, each wrapped as a phrase of its own. Each kernel is described in
// full (name, version, short ID), except that when both sides ran the
// same kernel (a parameter is compared) it is described with less detail
// until the line fits.
func (t *textWriter) sides(r *Report) {
	for detail := kernelFull; detail >= kernelName; detail-- {
		if l := render.WrapPhrases(sidePhrases(r, detail), render.HeaderWidth, ""); len(l) == 1 {
			t.Line(l[0])
			return
		}
		if r.A.Kernel != r.B.Kernel {
			break
		}
	}
	for _, s := range sidePhrases(r, kernelFull) {
		t.phrases([]string{s}, "    ")
	}
}

// table adds the A/B table, its columns aligned. A name too long to fit
// the table in TextWidth gets a line of its own above its numbers.
func (t *textWriter) table(rows []Row) {
	if len(rows) == 0 {
		t.Line("no measurements")
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
		t.Line("")
		if shortened {
			t.Line(fmt.Sprintf("B/A: ratio of the medians; ~ and n.s.: no significant change (Mann-Whitney U, alpha %.2f)", stats.Alpha))
		}
		t.Line(tableLegend)
	}()
	widths := make([]int, len(tableHeader))
	for _, c := range cells {
		for i := range c {
			c[i] = render.ToASCII(c[i])
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
			t.Line(c[0])
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
		t.Line(b.String())
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
			c[i] = render.ToASCII(c[i])
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
		t.Line(b.String())
	}
}
