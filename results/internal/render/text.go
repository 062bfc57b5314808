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

// HeaderWidth is the widest line of a text report's header (its title,
// sides, environment and leads), in columns: the width of a mail's text,
// which the header is pasted into above the wider tables.
const HeaderWidth = 72

// WrapPhrases joins phrases with spaces into lines of at most width
// columns, breaking only between phrases: a kernel name, "1024 MiB" or a
// row's name such as "randread bs=4k" never splits across lines. A phrase
// carries its own punctuation ("2 vCPUs,") and may end in spaces to keep
// more room before the next one on the same line; a line never ends in
// spaces. A phrase wider than a line is broken at its spaces, never inside
// a word: a word wider than a line gets a line of its own. Lines after the
// first start with indent. Phrases are made ASCII (ToASCII) first, so
// that columns are bytes.
func WrapPhrases(phrases []string, width int, indent string) []string {
	var lines []string
	cur := ""
	flush := func() {
		if cur != "" {
			lines = append(lines, strings.TrimRight(cur, " "))
			cur = ""
		}
	}
	for _, p := range phrases {
		p = ToASCII(p)
		if strings.TrimSpace(p) == "" {
			continue
		}
		if cur != "" && len(strings.TrimRight(cur+" "+p, " ")) <= width {
			cur += " " + p
			continue
		}
		flush()
		lead := indent
		if len(lines) == 0 {
			lead = ""
		}
		cur = lead + p
		for len(strings.TrimRight(cur, " ")) > width {
			cut := strings.LastIndexByte(cur[:width+1], ' ')
			if cut <= len(lead) {
				// One word wider than the line: it ends the line.
				next := strings.IndexByte(cur[len(lead):], ' ')
				if next < 0 {
					break
				}
				cut = len(lead) + next
			}
			lines = append(lines, strings.TrimRight(cur[:cut], " "))
			lead = indent
			cur = indent + strings.TrimLeft(cur[cut:], " ")
			if strings.TrimSpace(cur) == "" {
				cur = ""
				break
			}
		}
	}
	flush()
	return lines
}
