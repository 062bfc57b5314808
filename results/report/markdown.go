package report

import (
	"fmt"
	"io"
	"strings"

	"klab/results/internal/render"
)

// Markdown writes r as GitHub-flavoured Markdown with the content of
// Text: the A/B table is a Markdown table, the reference a code block.
// Every string from the report is escaped where Markdown would read it
// as markup, and kernel references are code spans (see render.MDEscape),
// so a guest's text shows as written, rendered or pasted as plain text,
// and cannot add links, HTML or table cells.
func Markdown(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", render.MDEscape(titleLine(r)))
	head := []string{sideLine(r, 0)}
	if l := legendPhrases(r); len(l) > 0 {
		head = append(head, strings.Join(l, " "))
	}
	fmt.Fprintf(&b, "%s\n\n", render.MDParagraph(append(head, envLine(r))...))
	if l := roundsLine(r); l != "" {
		fmt.Fprintf(&b, "%s\n\n", render.MDEscape(l))
	}
	if l := referenceLead(r); l != "" {
		fmt.Fprintf(&b, "%s\n\n", render.MDStrong(l))
	}
	if len(r.Rows) == 0 {
		b.WriteString("no measurements\n")
	} else {
		b.WriteString(render.MDTableRow(tableHeader))
		align := make([]string, len(tableHeader))
		for i, right := range tableRight {
			align[i] = ":---"
			if right {
				align[i] = "---:"
			}
		}
		b.WriteString("|" + strings.Join(align, "|") + "|\n")
		for _, row := range r.Rows {
			b.WriteString(render.MDTableRow(tableRow(row)))
		}
		fmt.Fprintf(&b, "\n%s\n", render.MDEscape(tableLegend))
		render.MDList(&b, "Not significant", weighLines(r))
	}
	if hasReferences(r) {
		refMarkdown(&b, r)
	}
	for _, p := range r.Profiles {
		fmt.Fprintf(&b, "\n%s\n\n", render.MDEscape(profileTitle(p)))
		b.WriteString(render.MDTableRow(profileHeader))
		b.WriteString("|:---" + strings.Repeat("|---:", len(profileHeader)-1) + "|\n")
		for _, row := range profileRows(p) {
			b.WriteString(render.MDTableRow(row))
		}
		fmt.Fprintf(&b, "\n%s\n", render.MDEscape(profileNote))
	}
	var checks, skipped []string
	for _, c := range r.Checks {
		checks = append(checks, checkLine(c))
	}
	for _, s := range r.Skipped {
		skipped = append(skipped, skippedLine(s))
	}
	render.MDList(&b, "Checks", checks)
	for _, c := range r.Checks {
		if lines := outputLines(c); len(lines) > 0 {
			fmt.Fprintf(&b, "\nOutput of %s (its last lines):\n\n", render.MDEscape(checkLine(c)))
			for _, l := range lines {
				b.WriteString("    " + l + "\n")
			}
		}
	}
	render.MDList(&b, "Skipped cells", skipped)
	render.MDList(&b, "Kernel splats", splatLines(r))
	render.MDList(&b, "Warnings", warningLines(r))
	if ref := referenceText(r); ref != "" {
		fence := strings.Repeat("`", max(3, longestRun(ref, '`')+1))
		fmt.Fprintf(&b, "\n### Reference (the table this experiment reproduces)\n\n%s\n%s\n%s\n", fence, ref, fence)
	}
	fmt.Fprintf(&b, "\n%s\n", render.MDStrong(resultLine(r)))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing markdown report: %w", err)
	}
	return nil
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	longest, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != c {
			n = 0
			continue
		}
		n++
		longest = max(longest, n)
	}
	return longest
}
