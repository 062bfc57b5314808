// Package render holds what the report formats of results/report (one
// experiment) and results/xreport (a matrix across kernels) share: the
// sanitising of untrusted strings, the formatting of numbers, the
// wrapped ASCII text writer, Markdown escaping, the JUnit XML elements,
// JSON encoding, and the HTML pages' common sections.
package render

import (
	"strings"
	"unicode"
)

// Clean returns s without control and format characters (escape
// sequences, bidirectional overrides, zero-width characters) other than
// newline and tab: reports carry text from an untrusted guest.
func Clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
}

// OneLine is Clean(s) on one line, runs of white space made one space.
func OneLine(s string) string {
	return strings.Join(strings.Fields(Clean(s)), " ")
}

// JoinNonEmpty joins the non-empty parts with sep.
func JoinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
