package splat

import (
	"strings"
)

// analysis is what a report's body says beyond its header.
type analysis struct {
	title     string
	frames    []string // the chosen stack's functions, innermost first
	guilty    string   // the function named by the title
	callTrace string   // the chosen stack's lines
	corrupted string   // why the title may be wrong, or ""
}

// analyse titles a report from its header and its lines (without printk
// prefixes); lines[at] is the header. cut says that another task's report
// cut it off (with CONFIG_PRINTK_CALLER): its call trace went on there,
// and the function on its header is the best name left.
func analyse(h header, lines []string, at int, cut bool) analysis {
	var a analysis
	stacks := findStacks(lines)
	title, rec := h.title, h.rec
	switch {
	case h.needs != "" && !holdsAfter(lines, at, h.needs), h.needSrc && !namesSource(lines, at):
		// The format's own words are missing: the report is damaged and
		// is titled by its header line.
		title, rec, a.corrupted = h.line, nil, "the report lacks the lines that name its function"
	case h.access:
		if acc := kasanAccess(lines[at:]); acc != "" {
			title += " " + acc
		} else {
			title, rec, a.corrupted = h.line, nil, "no access line (Read/Write of size)"
		}
	}
	var st *stack
	if rec == nil {
		if st = firstCallTrace(stacks); st == nil && h.typ == TypeKCSAN && len(stacks) > 0 {
			st = &stacks[0] // the first of the racing accesses
		}
	} else {
		f := rec.run(lines, at, &h)
		if f.fn == "" && cut && h.fn != "" && !skipped(h.fn, rec.skip) {
			f.fn, f.line = h.fn, at
		}
		if f.fn != "" {
			name := f.named
			if name == "" {
				name = titleFunc(f.fn)
				a.guilty = f.fn
			} else {
				a.guilty = name
			}
			title += " in " + name + h.suffix
			st = stackAt(stacks, f.line)
		} else {
			title += " in corrupted" + h.suffix
			if st = firstCallTrace(stacks); st == nil && !f.anyLine {
				a.corrupted = "no call trace"
			} else {
				a.corrupted = "no usable frame in the call trace"
			}
		}
		if f.cut && a.corrupted == "" {
			a.corrupted = "another stack (fault injection) is mixed into its call trace"
		}
	}
	if st != nil {
		a.setStack(st, lines)
	}
	a.title = canonical(title)
	return a.bounded(h)
}

// holdsAfter reports whether a line after lines[at] holds text.
func holdsAfter(lines []string, at int, text string) bool {
	for _, l := range lines[min(at+1, len(lines)):] {
		if strings.Contains(l, text) {
			return true
		}
	}
	return false
}

// namesSource reports whether a line after lines[at] names a source
// location ("net/ipv6/ip6_flowlabel.c:254").
func namesSource(lines []string, at int) bool {
	for _, l := range lines[min(at+1, len(lines)):] {
		for _, w := range strings.Fields(l) {
			if isSourceLoc(w) {
				return true
			}
		}
	}
	return false
}

// stackAt returns the stack that holds line, else the first call trace
// after it (the one a RIP line heads), else the first call trace.
func stackAt(stacks []stack, line int) *stack {
	for i := range stacks {
		if stacks[i].start <= line && line < stacks[i].end {
			return &stacks[i]
		}
	}
	for i := range stacks {
		if stacks[i].callTrace && stacks[i].start > line {
			return &stacks[i]
		}
	}
	return firstCallTrace(stacks)
}

// setStack records st as the stack the title comes from.
func (a *analysis) setStack(st *stack, lines []string) {
	a.frames = append(make([]string, 0, min(len(st.frames), MaxFrames)), st.frames[:min(len(st.frames), MaxFrames)]...)
	if st.start < st.end && st.end <= len(lines) {
		a.callTrace = strings.Join(lines[st.start:st.end], "\n")
	}
}

// bounded keeps the title to one bounded, printable, non-empty line.
func (a analysis) bounded(h header) analysis {
	if a.frames == nil {
		a.frames = []string{}
	}
	a.title = titleOr(a.title, h.typ)
	if a.corrupted == "" && mergedTimestamp(a.title) {
		a.corrupted = "a console line is merged into the title"
	}
	return a
}

// boundTitle makes t one printable line of at most MaxTitleBytes.
func boundTitle(t string) string {
	ok := len(t) <= MaxTitleBytes
	for i := 0; ok && i < len(t); i++ {
		if t[i] < 0x20 || t[i] == 0x7f {
			ok = false
		}
	}
	if ok {
		return t
	}
	var b strings.Builder
	for i := 0; i < len(t) && b.Len() < MaxTitleBytes; i++ {
		c := t[i]
		switch {
		case c == '\t':
			b.WriteByte(' ')
		case c < 0x20 || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}

// titleOr returns boundTitle(t), or the type's name when nothing of t is
// left.
func titleOr(t string, typ Type) string {
	if b := boundTitle(t); b != "" {
		return b
	}
	return string(typ)
}

// mergedTimestamp reports whether t holds a printk timestamp, which means
// two console lines ran into each other.
func mergedTimestamp(t string) bool {
	for i := strings.IndexByte(t, '['); i >= 0; {
		if _, _, ok := parseTimestamp(t, i); ok {
			return true
		}
		j := strings.IndexByte(t[i+1:], '[')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

func firstCallTrace(stacks []stack) *stack {
	for i := range stacks {
		if stacks[i].callTrace {
			return &stacks[i]
		}
	}
	return nil
}

// kasanAccess returns "Read" or "Write" from KASAN's "Read of size 8 at
// addr ..." (or, before 4.x, "Write of size 4 by task ...") line.
func kasanAccess(lines []string) string {
	for _, l := range lines {
		for _, acc := range []string{"Read", "Write"} {
			i := strings.Index(l, acc+" ")
			if i < 0 {
				continue
			}
			rest := l[i+len(acc)+1:]
			for _, p := range []string{"of size ", "at addr "} {
				if r, ok := strings.CutPrefix(rest, p); ok && r != "" && isHex(r[:1]) {
					return acc
				}
			}
		}
	}
	return ""
}

// trimTitle trims trailing punctuation and spaces.
func trimTitle(s string) string {
	return strings.TrimRight(strings.TrimSpace(s), " ,:;.!-")
}

// isSourceLoc reports whether s looks like "fs/fuse/dev.c:123" (optionally
// with a column).
func isSourceLoc(s string) bool {
	for _, ext := range []string{".c:", ".h:", ".rs:", ".S:"} {
		if i := strings.Index(s, ext); i > 0 && len(s) > i+len(ext) && isDigit(s[i+len(ext)]) {
			return true
		}
	}
	return false
}

// maxCanonicalTitle is how much of a title canonical keeps, as syzkaller
// does: a longer one is usually two lines run together.
const maxCanonicalTitle = 120

// canonical makes a title the same for the same bug in every run, the way
// syzkaller's titles are: executor names lose their numbers, and then
// addresses become ADDR, IPv4 addresses IP, source lines "file.c:LINE",
// "func+0x1/0x2" "func", "CPU#1" "CPU", and other numbers NUM; the
// result is one printable line of at most maxCanonicalTitle bytes.
func canonical(s string) string {
	s = executorNames(s, "syz-executor")
	s = executorNames(s, "syzkaller")
	s = replaceAddrs(s)
	s = replaceIPs(s)
	s = replaceLines(s)
	s = dropOffsets(s)
	s = strings.ReplaceAll(dropDigitsAfter(s, "CPU#"), "CPU#", "CPU")
	s = replaceNumbers(s)
	return sanitizeTitle(s)
}

func isAlnum(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isWordChar(c byte) bool { return isAlnum(c) || c == '_' }

func isLowerHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' }

// digitsAt returns how many decimal digits start s[i:].
func digitsAt(s string, i int) int {
	n := 0
	for i+n < len(s) && isDigit(s[i+n]) {
		n++
	}
	return n
}

// executorNames cuts the pid and proc numbers from name: "syz-executor.3/123"
// and "syz-executor3:123" become "syz-executor".
func executorNames(s, name string) string {
	if !strings.Contains(s, name) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, name)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+len(name)])
		s = s[i+len(name):]
		j := 0
		if strings.HasPrefix(s, ".") && name == "syz-executor" {
			j = 1
		}
		n := digitsAt(s, j)
		if n == 0 {
			continue
		}
		j += n
		if j < len(s) && (s[j] == '/' || s[j] == ':') {
			if m := digitsAt(s, j+1); m > 0 {
				j += 1 + m
			}
		}
		s = s[j:]
	}
}

// replaceAddrs turns runs of six or more lower-case hex digits (with an
// optional "0x") that follow a character other than a letter or a digit
// into "ADDR".
func replaceAddrs(s string) string {
	return rewrite(s, func(s string, i int) (int, string) {
		if i == 0 || isAlnum(s[i-1]) {
			return 0, ""
		}
		j := i
		if strings.HasPrefix(s[j:], "0x") {
			j += 2
		}
		n := 0
		for j+n < len(s) && isLowerHex(s[j+n]) {
			n++
		}
		if n < 6 && j != i {
			j, n = i, 0 // "0x" and a short number: try the digits alone
			for j+n < len(s) && isLowerHex(s[j+n]) {
				n++
			}
		}
		if n < 6 {
			return 0, ""
		}
		return j + n, "ADDR"
	})
}

// rewrite copies s, replacing the spans match finds: at each index i,
// match returns the end of a span starting there and its replacement, or
// end 0 for none. s itself comes back when nothing matched.
func rewrite(s string, match func(s string, i int) (end int, repl string)) string {
	var b strings.Builder
	changed := false
	for i := 0; i < len(s); {
		if end, repl := match(s, i); end > i {
			if !changed {
				b.WriteString(s[:i])
				changed = true
			}
			b.WriteString(repl)
			i = end
			continue
		}
		if changed {
			b.WriteByte(s[i])
		}
		i++
	}
	if !changed {
		return s
	}
	return b.String()
}

// replaceIPs turns dotted quads of decimal numbers into "IP".
func replaceIPs(s string) string {
	if strings.Count(s, ".") < 3 {
		return s
	}
	return rewrite(s, func(s string, i int) (int, string) {
		if n := ipAt(s, i, 0); n > 0 {
			return i + n, "IP"
		}
		return 0, ""
	})
}

// ipAt returns the length of the dotted quad's parts from part on at s[i:],
// or 0: each part one to three digits, the longest that lets the rest
// match.
func ipAt(s string, i, part int) int {
	for n := min(3, digitsAt(s, i)); n >= 1; n-- {
		if part == 3 {
			return n
		}
		if i+n < len(s) && s[i+n] == '.' {
			if m := ipAt(s, i+n+1, part+1); m > 0 {
				return n + 1 + m
			}
		}
	}
	return 0
}

// replaceLines turns the line numbers of source locations into LINE:
// "fs/fuse/dev.c:123:4" becomes "fs/fuse/dev.c:LINE".
func replaceLines(s string) string {
	return rewrite(s, func(s string, i int) (int, string) {
		if s[i] != '.' {
			return 0, ""
		}
		j := i + 1
		for j < len(s) && isWordChar(s[j]) {
			j++
		}
		k := j
		for k < len(s) && s[k] == ':' && digitsAt(s, k+1) > 0 {
			k += 1 + digitsAt(s, k+1)
		}
		if j > i+1 && k > j {
			return k, s[i:j] + ":LINE"
		}
		return 0, ""
	})
}

// dropOffsets turns "func+0x12/0x340" into "func".
func dropOffsets(s string) string {
	for from := 0; ; {
		i := strings.Index(s[from:], "+0x")
		if i < 0 {
			return s
		}
		i += from
		// The name before it: at least two characters, from a letter.
		j := i
		for j > 0 && (isWordChar(s[j-1]) || s[j-1] == '.') {
			j--
		}
		letter := false
		for k := j; k < i-1; k++ {
			if s[k] >= 'a' && s[k] <= 'z' || s[k] >= 'A' && s[k] <= 'Z' {
				letter = true
				break
			}
		}
		end := offsetEnd(s, i)
		if !letter || end < 0 {
			from = i + 1
			continue
		}
		s = s[:i] + s[end:]
		from = i
	}
}

// offsetEnd returns the end of "+0x12/0x340" at s[i:], or -1.
func offsetEnd(s string, i int) int {
	j := i + len("+0x")
	n := 0
	for j+n < len(s) && isAlnum(s[j+n]) && (isDigit(s[j+n]) || s[j+n] >= 'a' && s[j+n] <= 'z') {
		n++
	}
	if n == 0 || !strings.HasPrefix(s[j+n:], "/0x") {
		return -1
	}
	j += n + len("/0x")
	n = 0
	for j+n < len(s) && (isDigit(s[j+n]) || s[j+n] >= 'a' && s[j+n] <= 'z') {
		n++
	}
	if n == 0 {
		return -1
	}
	return j + n
}

// dropDigitsAfter removes the decimal digits that follow each prefix.
func dropDigitsAfter(s, prefix string) string {
	for from := 0; ; {
		i := strings.Index(s[from:], prefix)
		if i < 0 {
			return s
		}
		i += from + len(prefix)
		s = s[:i] + s[i+digitsAt(s, i):]
		from = i
	}
}

// replaceNumbers turns numbers into NUM: a run of digits between
// characters that are not word characters (nor letters, digits or '_'),
// or at the end; and any run of seven or more digits.
func replaceNumbers(s string) string {
	return rewrite(s, func(s string, i int) (int, string) {
		n := 0
		if isDigit(s[i]) && (i == 0 || !isDigit(s[i-1])) {
			n = digitsAt(s, i)
		}
		if n > 0 && (n >= 7 || i > 0 && !isWordChar(s[i-1]) && (i+n == len(s) || !isWordChar(s[i+n]))) {
			return i + n, "NUM"
		}
		return 0, ""
	})
}

// sanitizeTitle keeps the printable bytes of the first maxCanonicalTitle
// bytes of t, with tabs as spaces and no double spaces, trimmed.
func sanitizeTitle(t string) string {
	b := make([]byte, 0, min(len(t), maxCanonicalTitle))
	prev := byte(' ')
	for i := 0; i < len(t) && i < maxCanonicalTitle; i++ {
		c := t[i]
		switch {
		case c == '\t':
			c = ' '
		case c < 0x20 || c >= 0x7f:
			continue
		}
		if c == ' ' && prev == ' ' {
			continue
		}
		b = append(b, c)
		prev = c
	}
	return strings.TrimSpace(string(b))
}
