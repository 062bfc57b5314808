package bisectreport

import (
	"fmt"
	"io"
	"strings"

	"klab/results/internal/render"
)

// Markdown writes r as Markdown: the result as a heading, the author,
// the evidence with its excerpt in a code block, what was bisected, and
// the step table. Every string from the bisection is escaped.
func Markdown(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", render.MDEscape(resultLine(r)))
	for _, l := range candidateLines(r) {
		fmt.Fprintf(&b, "- %s\n", render.MDEscape(l))
	}
	if len(r.Candidates) > 0 {
		b.WriteString("\n")
	}
	for _, l := range authorLines(r) {
		fmt.Fprintf(&b, "%s  \n", render.MDEscape(l))
	}
	if l := evidenceLine(r); l != "" {
		fmt.Fprintf(&b, "%s\n", render.MDEscape(l))
		if d := evidenceDetail(r.Evidence); d != "" {
			fence := strings.Repeat("`", max(3, longestRun(d, '`')+1))
			fmt.Fprintf(&b, "\n%s\n%s\n%s\n", fence, d, fence)
		}
	}
	b.WriteString("\n")
	for _, l := range contextLines(r) {
		fmt.Fprintf(&b, "- %s\n", render.MDEscape(l))
	}
	if len(r.Steps) > 0 {
		b.WriteString("\n")
		b.WriteString(render.MDTableRow(stepHeader))
		b.WriteString("|" + strings.Repeat("---|", len(stepHeader)) + "\n")
		for _, s := range r.Steps {
			b.WriteString(render.MDTableRow(stepCells(s, 60, 300)))
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing markdown bisection report: %w", err)
	}
	return nil
}

// longestRun is the longest run of c in s.
func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}
