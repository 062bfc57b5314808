package render

import (
	"fmt"
	"strings"

	"klab/internal/textsafe"
)

// MDTableRow is one row of a Markdown table, each cell escaped with
// MDEscape.
func MDTableRow(cells []string) string {
	esc := make([]string, len(cells))
	for i, c := range cells {
		esc[i] = MDEscape(c)
	}
	return "| " + strings.Join(esc, " | ") + " |\n"
}

// MDList adds to b a section with a "###" heading and one list item per
// line, each escaped with MDEscape; nothing when lines is empty.
func MDList(b *strings.Builder, heading string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(b, "\n### %s\n\n", heading)
	for _, l := range lines {
		fmt.Fprintf(b, "- %s\n", MDEscape(l))
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

// MDEscape returns s on one line (textsafe.OneLine) with the characters that
// make Markdown or HTML out of text, '|' among them, backslash-escaped:
// the text shows as written and cannot add links, HTML or table cells.
func MDEscape(s string) string {
	return mdEscaper.Replace(textsafe.OneLine(s))
}
