// Package textsafe makes untrusted text safe to print: kernel versions
// from kernel images, splat titles and messages from the guest, and
// anything else a report or a terminal shows that klab did not write
// itself. It removes escape sequences and the characters that hide or
// reorder text; everything that prints or records such text goes
// through it.
package textsafe

import (
	"strings"
	"unicode"
)

// Clean returns s without control and format characters (escape
// sequences, bidirectional overrides, zero-width characters) other than
// newline and tab.
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
