// Package render holds what the report formats of results/report (one
// experiment) and results/xreport (a matrix across kernels) share: the
// formatting of numbers, the wrapped ASCII text writer, Markdown
// escaping, the JUnit XML elements, JSON encoding, and the HTML pages'
// common sections. Untrusted text is made safe by internal/textsafe.
package render

import "strings"

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
