package render

import (
	"fmt"
	"regexp"
	"strings"

	"klab/internal/textsafe"
)

// A report's Markdown must show its text as written, whether it is
// rendered or pasted as plain text into a mail. So the text is escaped
// only where Markdown would read it as markup: a block marker at the
// start of a line, a backtick, '<' that opens HTML or an autolink, '&'
// that spells an entity, '*', '_' and '~' that could pair into emphasis
// or strikethrough, ']' that would close a link, '|' in a table cell, a
// backslash before punctuation. Everything else ('~' in a version, '['
// in a splat title, '_' inside a word) is left as it is, and kernel
// references (debian:..., build:..., tree:...) go into code spans, which
// need no escaping at all. A guest's text can thus add no links, HTML,
// emphasis or table cells.

// MDTableRow is one row of a Markdown table, each cell escaped with
// MDCell.
func MDTableRow(cells []string) string {
	esc := make([]string, len(cells))
	for i, c := range cells {
		esc[i] = MDCell(c)
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

// MDEscape returns s on one line (textsafe.OneLine) as Markdown text that
// starts a line (a paragraph, a list item's text, a heading's): escaped
// where Markdown would read it as markup, kernel references in code
// spans (see the comment above).
func MDEscape(s string) string {
	return mdText(textsafe.OneLine(s), mdLineStart)
}

// MDCell is MDEscape for a table cell: '|' is escaped too (in a code
// span as well), and a block marker at its start is none.
func MDCell(s string) string {
	return mdText(textsafe.OneLine(s), mdCell)
}

// MDStrong is s in bold, "**s**", escaped as MDEscape escapes it, and
// every '*' that could end the bold escaped as well.
func MDStrong(s string) string {
	return "**" + mdText(textsafe.OneLine(s), mdStrong) + "**"
}

// MDParagraph is lines as one Markdown paragraph, each escaped as
// MDEscape escapes it, joined by hard line breaks ("\" at a line's end);
// a '*', '_' or '~' that could pair with one on another line is escaped.
func MDParagraph(lines ...string) string {
	one := make([]string, len(lines))
	for i, l := range lines {
		one[i] = textsafe.OneLine(l)
	}
	// The lines are one inline run: delimiters pair across them.
	esc := delimiterEscapes(strings.Join(one, " "), mdLineStart)
	out := make([]string, len(one))
	at := 0
	for i, l := range one {
		out[i] = mdTextAt(l, mdLineStart, esc, at)
		at += len(l) + 1
	}
	return strings.Join(out, "\\\n")
}

// MDCode is s in a code span, fenced with more backticks than it holds.
func MDCode(s string) string {
	return mdCode(textsafe.OneLine(s), false)
}

// Where mdText's text sits.
const (
	// mdLineStart: at the start of a line, where a block marker counts.
	mdLineStart = iota
	// mdCell: in a table cell, where '|' ends the cell.
	mdCell
	// mdStrong: inside "**...**", where one '*' may end it.
	mdStrong
)

// kernelRefRe matches a kernel reference that goes into a code span.
var kernelRefRe = regexp.MustCompile(`^(debian|build|tree):\S`)

// entityRe matches an HTML entity or character reference at its '&'.
var entityRe = regexp.MustCompile(`^&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});`)

// mdText escapes s, in the place where says (mdLineStart, mdCell,
// mdStrong), putting kernel references in code spans.
func mdText(s string, where int) string {
	return mdTextAt(s, where, delimiterEscapes(s, where), 0)
}

// mdTextAt is mdText for s at offset at of the inline run whose
// delimiters to escape are esc (delimiterEscapes).
func mdTextAt(s string, where int, esc map[int]bool, at int) string {
	if s == "" {
		return ""
	}
	var b strings.Builder
	off := at
	words := strings.Split(s, " ")
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
			off++
		}
		lead, core, trail := splitToken(w)
		last := i == len(words)-1
		if kernelRefRe.MatchString(core) {
			b.WriteString(escapeInline(lead, where, esc, off, false))
			b.WriteString(mdCode(core, where == mdCell))
			b.WriteString(escapeInline(trail, where, esc, off+len(lead)+len(core), last))
		} else {
			b.WriteString(escapeInline(w, where, esc, off, last))
		}
		off += len(w)
	}
	out := b.String()
	if where == mdLineStart {
		out = escapeLineStart(out)
	}
	return escapeClosingHashes(out)
}

// splitToken splits a word into the punctuation before it, its core and
// the punctuation after it: "(debian:7.3," gives "(", "debian:7.3", ",".
func splitToken(w string) (lead, core, trail string) {
	start := 0
	for start < len(w) && strings.IndexByte(`(["'`, w[start]) >= 0 {
		start++
	}
	end := len(w)
	for end > start && strings.IndexByte(`)]"',;:.`, w[end-1]) >= 0 {
		end--
	}
	return w[:start], w[start:end], w[end:]
}

// mdCode is s in a code span; in a table cell '|' is escaped, which GFM
// undoes inside the span.
func mdCode(s string, cell bool) string {
	if s == "" {
		return ""
	}
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if s[0] == '`' || s[len(s)-1] == '`' || (s[0] == ' ' && s[len(s)-1] == ' ') {
		s = " " + s + " "
	}
	if cell {
		s = strings.ReplaceAll(s, "|", `\|`)
	}
	return fence + s + fence
}

// isSpace reports whether c is white space (or the text's edge, 0).
func isSpace(c byte) bool { return c == 0 || c == ' ' || c == '\t' }

// isAlpha reports whether c is an ASCII letter.
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool { return c >= '0' && c <= '9' || isAlpha(c) }

// isPunct reports whether c is ASCII punctuation, which a backslash
// escapes.
func isPunct(c byte) bool {
	return c > ' ' && c < 0x7f && !isAlnum(c)
}

// flanking says whether the delimiter s[i] ('*', '_' or '~') can open
// and close emphasis or strikethrough, by CommonMark's rules: the text's
// edges count as white space, a non-ASCII byte as a letter.
func flanking(s string, i int) (open, close bool) {
	prev, next := byte(' '), byte(' ')
	if i > 0 {
		prev = s[i-1]
	}
	if i+1 < len(s) {
		next = s[i+1]
	}
	left := !isSpace(next) && (!isPunct(next) || isSpace(prev) || isPunct(prev))
	right := !isSpace(prev) && (!isPunct(prev) || isSpace(next) || isPunct(next))
	if s[i] == '_' {
		return left && (!right || isPunct(prev)), right && (!left || isPunct(next))
	}
	return left, right
}

// delimiterEscapes are the positions in s of the '*', '_' and '~' to
// escape: for each of them, all that can open or close when one that
// can open comes before one that can close (they could pair); in
// mdStrong, every '*' that can open or close.
func delimiterEscapes(s string, where int) map[int]bool {
	esc := map[int]bool{}
	for _, c := range []byte("*_~") {
		var at []int
		opener, pairs := false, false
		for i := 0; i < len(s); i++ {
			if s[i] != c {
				continue
			}
			open, close := flanking(s, i)
			if !open && !close {
				continue
			}
			at = append(at, i)
			pairs = pairs || (close && opener)
			opener = opener || open
		}
		if pairs || (c == '*' && where == mdStrong) {
			for _, i := range at {
				esc[i] = true
			}
		}
	}
	return esc
}

// escapeInline escapes what Markdown reads as inline markup in s, which
// starts at offset at of the inline run whose delimiters to escape are
// esc, and ends its line when last is set (a backslash there would join
// the hard line break after it).
func escapeInline(s string, where int, esc map[int]bool, at int, last bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		var next byte
		if i+1 < len(s) {
			next = s[i+1]
		}
		e := false
		switch c {
		case '\\':
			e = isPunct(next) || (i == len(s)-1 && last)
		case '`':
			e = true
		case '<':
			e = next == '/' || next == '!' || next == '?' || isAlpha(next)
		case '&':
			e = entityRe.MatchString(s[i:])
		case ']':
			e = next == '(' || next == '[' || next == ':'
		case '|':
			e = where == mdCell
		case '*', '_', '~':
			e = esc[at+i]
		}
		if e {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// orderedRe matches the start of an ordered list item: "1. ", "12)".
var orderedRe = regexp.MustCompile(`^[0-9]{1,9}[.)]( |$)`)

// breakRe matches a thematic break: three or more '-', '*' or '_'.
var breakRe = regexp.MustCompile(`^(-( *-){2,}|\*( *\*){2,}|_( *_){2,}) *$`)

// escapeLineStart escapes a block marker at the start of s: a heading's
// '#', a quote's '>', a list item's '-', '+', '*' or number, a task
// list's "[ ]", a thematic break, a code fence of '~'.
func escapeLineStart(s string) string {
	if s == "" {
		return s
	}
	var next byte
	if len(s) > 1 {
		next = s[1]
	}
	switch {
	case strings.HasPrefix(s, `\`):
		return s // already escaped
	case s[0] == '#' || s[0] == '>':
		return `\` + s
	case (s[0] == '-' || s[0] == '+' || s[0] == '*') && isSpace(next), breakRe.MatchString(s), strings.HasPrefix(s, "~~~"):
		return `\` + s
	case orderedRe.MatchString(s):
		i := strings.IndexAny(s, ".)")
		return s[:i] + `\` + s[i:]
	case strings.HasPrefix(s, "[ ]") || strings.HasPrefix(s, "[x]") || strings.HasPrefix(s, "[X]"):
		return `\` + s
	}
	return s
}

// escapeClosingHashes escapes a run of '#' that ends s after a space,
// which an ATX heading would drop as its closing sequence.
func escapeClosingHashes(s string) string {
	t := strings.TrimRight(s, "#")
	if t == s || !strings.HasSuffix(t, " ") {
		return s
	}
	return t + `\` + s[len(t):]
}
