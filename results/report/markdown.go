package report

import (
	"fmt"
	"io"
	"strings"
)

// Markdown writes r as GitHub-flavoured Markdown with the content of
// Text: the A/B table is a Markdown table, the reference a code block.
// Every string from the report is escaped, so a guest's text shows as
// written and cannot add links, HTML or table cells.
func Markdown(w io.Writer, r *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", mdEscape(titleLine(r)))
	fmt.Fprintf(&b, "%s\\\n%s\n\n", mdEscape(sideLine(r, 0)), mdEscape(envLine(r)))
	if len(r.Rows) == 0 {
		b.WriteString("no measurements\n")
	} else {
		b.WriteString(mdTableRow(tableHeader))
		align := make([]string, len(tableHeader))
		for i, right := range tableRight {
			align[i] = ":---"
			if right {
				align[i] = "---:"
			}
		}
		b.WriteString("|" + strings.Join(align, "|") + "|\n")
		for _, row := range r.Rows {
			b.WriteString(mdTableRow(tableRow(row)))
		}
	}
	for _, p := range r.Profiles {
		fmt.Fprintf(&b, "\n%s\n\n", mdEscape(profileTitle(p)))
		b.WriteString(mdTableRow(profileHeader))
		b.WriteString("|:---" + strings.Repeat("|---:", len(profileHeader)-1) + "|\n")
		for _, row := range profileRows(p) {
			b.WriteString(mdTableRow(row))
		}
		fmt.Fprintf(&b, "\n%s\n", mdEscape(profileNote))
	}
	var checks, skipped []string
	for _, c := range r.Checks {
		checks = append(checks, checkLine(c))
	}
	for _, s := range r.Skipped {
		skipped = append(skipped, skippedLine(s))
	}
	mdList(&b, "Checks", checks)
	mdList(&b, "Skipped cells", skipped)
	mdList(&b, "Kernel splats", splatLines(r))
	mdList(&b, "Warnings", warningLines(r))
	if ref := referenceText(r); ref != "" {
		fence := strings.Repeat("`", max(3, longestRun(ref, '`')+1))
		fmt.Fprintf(&b, "\n### Reference (the table this experiment reproduces)\n\n%s\n%s\n%s\n", fence, ref, fence)
	}
	fmt.Fprintf(&b, "\n**%s**\n", mdEscape(resultLine(r)))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing markdown report: %w", err)
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
