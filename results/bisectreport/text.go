package bisectreport

import (
	"fmt"
	"io"
	"strings"

	"klab/results/internal/render"
)

// TextWidth is the widest line Text writes, in columns.
const TextWidth = 100

// Text writes r as plain text to paste into a mail: the first bad
// commit, its author and date, the evidence with its excerpt indented;
// what was bisected and how; then the step table (step, commit,
// subject, verdict, build time and mode, reason). ASCII only, no line
// wider than TextWidth.
func Text(w io.Writer, r *Report) error {
	t := &render.TextWriter{Width: TextWidth}
	t.Line(resultLine(r))
	for _, l := range candidateLines(r) {
		t.Line("  " + l)
	}
	for _, l := range authorLines(r) {
		t.Line(l)
	}
	if l := evidenceLine(r); l != "" {
		t.Line(l)
		if d := evidenceDetail(r.Evidence); d != "" {
			for _, dl := range strings.Split(d, "\n") {
				t.Line("    " + dl)
			}
		}
	}
	t.Section(contextLines(r))
	if len(r.Steps) > 0 {
		// A row per step, its reason on the line below.
		t.Blank()
		rows := [][]string{{"step", "commit", "verdict", "build", "subject"}}
		for _, s := range r.Steps {
			c := stepCells(s, 60, 0)
			rows = append(rows, []string{c[0], c[1], c[3], c[4], c[2]})
		}
		for i, l := range grid(rows, TextWidth) {
			t.Line(l)
			if i > 0 && r.Steps[i-1].Reason != "" {
				t.Line("      " + one(r.Steps[i-1].Reason))
			}
		}
	}
	_, err := io.WriteString(w, t.String())
	if err != nil {
		return fmt.Errorf("writing text bisection report: %w", err)
	}
	return nil
}

// grid lays rows out in columns two spaces apart, the last column cut
// so that a line fits width.
func grid(rows [][]string, width int) []string {
	if len(rows) == 0 {
		return nil
	}
	n := len(rows[0])
	widths := make([]int, n)
	for _, r := range rows {
		for i, c := range r[:n-1] {
			widths[i] = max(widths[i], len(render.ToASCII(c)))
		}
	}
	var out []string
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r[:n-1] {
			c = render.ToASCII(c)
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]-len(c)+2))
		}
		last := render.ToASCII(r[n-1])
		if room := width - b.Len(); room > 3 && len(last) > room {
			last = last[:room-3] + "..."
		}
		b.WriteString(last)
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}
