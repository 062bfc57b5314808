package render

import (
	"strings"
	"unicode"
)

// TextWriter collects the lines of a plain-text report, each made
// printable ASCII (ToASCII, tabs expanded) and wrapped at Width
// columns. Its zero value does not wrap; use it through a pointer.
type TextWriter struct {
	// Width is the widest line in columns; 0 or less leaves lines as
	// long as they are.
	Width int
	b     strings.Builder
}

// Blank adds an empty line.
func (t *TextWriter) Blank() {
	t.b.WriteByte('\n')
}

// Section adds a blank line and lines, when there are any.
func (t *TextWriter) Section(lines []string) {
	if len(lines) == 0 {
		return
	}
	t.Blank()
	for _, l := range lines {
		t.Line(l)
	}
}

// Line adds s, one line per line of s, made ASCII without trailing
// spaces and wrapped at spaces into lines of at most Width columns;
// continuation lines are indented 4 columns more than their line (at
// most half the width). A word longer than a line is cut.
func (t *TextWriter) Line(s string) {
	width := t.Width
	for l := range strings.SplitSeq(s, "\n") {
		l = strings.TrimRight(ToASCII(ExpandTabs(l)), " ")
		if width > 0 {
			indent := strings.Repeat(" ", min(len(l)-len(strings.TrimLeft(l, " "))+4, width/2))
			for len(l) > width {
				cut := strings.LastIndexByte(l[:width+1], ' ')
				if cut <= len(indent) {
					cut = width
				}
				t.b.WriteString(strings.TrimRight(l[:cut], " "))
				t.b.WriteByte('\n')
				l = indent + strings.TrimLeft(l[cut:], " ")
			}
		}
		t.b.WriteString(l)
		t.b.WriteByte('\n')
	}
}

// String returns the lines added so far, each ending in a newline.
func (t *TextWriter) String() string {
	return t.b.String()
}

// ExpandTabs replaces tabs with spaces up to the next multiple of 8
// columns.
func ExpandTabs(s string) string {
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

// ToASCII returns s in printable ASCII: control and format characters
// dropped, common symbols spelled out ('µ' as "u", '±' as "+-", '—' as
// "-", curly quotes as straight ones), any other character made '?'.
func ToASCII(s string) string {
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
