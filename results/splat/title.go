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
// prefixes, the header among them).
func analyse(h header, lines []string) analysis {
	var a analysis
	switch h.kind {
	case kindPlain, kindPanic:
		a.title = h.title
		stacks := findStacks(lines)
		st := firstCallTrace(stacks)
		if st == nil && h.typ == TypeKCSAN && len(stacks) > 0 {
			st = &stacks[0] // the first of the racing accesses
		}
		if st != nil {
			a.setStack(st, lines)
		}
		return a.bounded(h)
	}
	stacks := findStacks(lines)
	base := h.base
	if h.access {
		if acc := kasanAccess(lines); acc != "" {
			base += " " + acc
		} else {
			a.corrupted = "no access line (Read/Write of size)"
		}
	}
	var (
		st  *stack
		fn  string
		pre []string // candidates before the stack's frames
	)
	switch h.kind {
	case kindFrame:
		st = firstCallTrace(stacks)
		pre = []string{h.fn}
	case kindSanitizer:
		if h.typ == TypeKASAN {
			st = firstCallTrace(stacks)
		} else if len(stacks) > 0 {
			st = &stacks[0]
		}
		pre = []string{h.fn}
	case kindLockdepAt:
		st = firstCallTrace(stacks)
		pre = atFuncs(lines, h.marker)
	case kindHang:
		st = firstCallTrace(stacks)
	case kindStall:
		st = stallStack(stacks)
	case kindLeak:
		st = labelled(stacks, "backtrace")
	case kindBadPage:
		if st = labelled(stacks, "page last allocated"); st == nil {
			st = firstCallTrace(stacks)
		}
	}
	if st != nil {
		a.setStack(st, lines)
	}
	var frames []frame
	if st != nil {
		frames = st.frames
	}
	switch h.kind {
	case kindHang:
		fn = hangFrame(frames)
	case kindStall:
		fn = stallFrame(frames, h.skip)
	default:
		fn = guiltyFrame(pre, frames, h.skip)
	}
	switch {
	case fn != "":
		a.guilty = fn
		a.title = base + " in " + titleFunc(fn)
	case st == nil:
		a.title = fallbackTitle(h, base)
		a.corrupted = "no call trace"
	default:
		a.title = fallbackTitle(h, base)
		a.corrupted = "no usable frame in the call trace"
	}
	return a.bounded(h)
}

// fallbackTitle is the title of a report whose frame is unknown: the base,
// with the source file (not the line, which changes between kernels) when
// the header names one.
func fallbackTitle(h header, base string) string {
	if h.loc != "" && (h.typ == TypeWarning || base == "kernel BUG") {
		return base + " at " + locFile(h.loc)
	}
	return base
}

// setStack records st as the stack the title comes from.
func (a *analysis) setStack(st *stack, lines []string) {
	a.frames = make([]string, 0, min(len(st.frames), MaxFrames))
	for _, f := range st.frames {
		if len(a.frames) == MaxFrames {
			break
		}
		a.frames = append(a.frames, f.fn)
	}
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

// labelled returns the first stack whose label starts with prefix.
func labelled(stacks []stack, prefix string) *stack {
	for i := range stacks {
		if strings.HasPrefix(stacks[i].label, prefix) {
			return &stacks[i]
		}
	}
	return nil
}

// stallStack returns the first call trace with frames outside interrupt
// context: the code that a stall or lockup detector interrupted.
func stallStack(stacks []stack) *stack {
	for i := range stacks {
		if !stacks[i].callTrace {
			continue
		}
		for _, f := range stacks[i].frames {
			if !f.irq {
				return &stacks[i]
			}
		}
	}
	return firstCallTrace(stacks)
}

// guiltyFrame returns the first function of pre, then of frames, that is
// not a generic helper.
func guiltyFrame(pre []string, frames []frame, extra *patterns) string {
	for _, fn := range pre {
		if fn != "" && !skipped(fn, extra) {
			return fn
		}
	}
	for _, f := range frames {
		if !skipped(f.fn, extra) {
			return f.fn
		}
	}
	return ""
}

// hangFrame names a hung task: by the primitive it waits on when that is
// one of hangAnchors, else by the first frame past the scheduler, lock and
// wait primitives.
func hangFrame(frames []frame) string {
	for _, f := range frames {
		for _, a := range hangAnchors {
			if strings.Contains(f.fn, a.frame) {
				return a.title
			}
		}
	}
	for _, f := range frames {
		if !skipped(f.fn, hangSkipSet) {
			return f.fn
		}
	}
	return ""
}

// stallFrame names a stall or lockup by the frame just before the first
// dispatch point (stallAnchors) of the interrupted stack; interrupt frames
// and helpers do not count. With no dispatch point it is the first frame.
func stallFrame(frames []frame, extra *patterns) string {
	var fns []string
	for _, f := range frames {
		if f.irq || skipped(f.fn, extra) || stallSkipSet.match(f.fn) {
			continue
		}
		fns = append(fns, f.fn)
	}
	if len(fns) == 0 {
		return ""
	}
	for i, fn := range fns {
		if stallAnchorSet.match(fn) {
			if strings.Contains(fn, "smp_call_function") || i == 0 {
				return fn
			}
			return fns[i-1]
		}
	}
	return fns[0]
}

// stallSkip are interrupt entry frames that a stall's stack starts with.
var stallSkip = []string{"apic_timer_interrupt", "^sysvec_", "^asm_sysvec_", "^irqentry_", "^asm_common_interrupt",
	"^common_interrupt", "^el1h_64_irq", "^el1_interrupt", "^handle_irq", "^__irq_exit_rcu", "^irq_exit_rcu",
	"^delay_tsc$", "^delay_loop$", "^__const_udelay$", "^__udelay$", "^__delay$", "^cpu_relax", "^native_safe_halt",
	"^pv_native_safe_halt"}

// kasanAccess returns "Read" or "Write" from KASAN's "Read of size 8 at
// addr ..." line.
func kasanAccess(lines []string) string {
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "Read of size"), strings.HasPrefix(l, "Read at addr"):
			return "Read"
		case strings.HasPrefix(l, "Write of size"), strings.HasPrefix(l, "Write at addr"):
			return "Write"
		}
	}
	return ""
}

// atFuncs returns the functions of the first two lockdep "at:" references
// after the line holding marker: "ffff888004c1a0e8 (&fc->lock){+.+.}-{3:3},
// at: fuse_dev_do_read+0x9c/0x1d0", or a line ending in "at:" followed by
// "[<ffffffff81234567>] foo+0x1/0x2".
func atFuncs(lines []string, marker string) []string {
	var out []string
	seen := false
	for i, l := range lines {
		if !seen {
			seen = marker != "" && strings.Contains(l, marker)
			if !seen {
				continue
			}
		}
		fn := ""
		if j := strings.Index(l, "at: "); j >= 0 {
			fn = symbolOf(l[j+len("at: "):])
		} else if strings.HasSuffix(strings.TrimSpace(l), " at:") && i+1 < len(lines) {
			fn = symbolOf(lines[i+1])
		}
		if fn != "" {
			out = append(out, fn)
			if len(out) == 2 {
				break
			}
		}
	}
	return out
}

// trimTitle trims trailing punctuation and spaces.
func trimTitle(s string) string {
	return strings.TrimRight(strings.TrimSpace(s), " ,:;.!-")
}

// addrWords are the words that introduce an address; they go with it.
var addrWords = []string{"address", "address:", "addr", "addr:", "virtual", "at", "for"}

// numLabels are the words that introduce a number that changes from run to
// run; they go with it.
var numLabels = []string{"CPU:", "CPU", "cpu", "cpu:", "PID:", "pid:", "Pid:", "pid", "tgid:", "ppid:", "on"}

// normalise removes from a title what changes from run to run: hex
// addresses, numbers, pids, "+0x12/0x34" offsets, "key=value" counters and
// "(123)" counts, with the words that introduce them; source locations
// (file.c:123) stay.
func normalise(s string) string {
	var out []string
	afterFunc := false
	for _, w := range strings.Fields(s) {
		prevFunc := afterFunc
		afterFunc = false
		open, core, closer, trail := splitWord(w)
		switch {
		case open == "(" && (core == "null" || core == "____ptrval____") || isAddr(core):
			out = popWords(out, addrWords)
			continue
		case isNumber(core):
			out = popWords(out, numLabels)
			continue
		case prevFunc && open == "[" && closer == "]":
			continue // the module after func+0x1/0x2
		}
		if k, v, ok := strings.Cut(core, "="); ok && k != "" && (isNumber(v) || isAddr(v) || isHex(v)) {
			continue
		}
		if i := strings.Index(core, "+0x"); i > 0 {
			core, trail, afterFunc = core[:i], "", true
		} else if !isSourceLoc(core) {
			core = stripIDs(core)
		}
		if core == "" {
			continue
		}
		out = append(out, open+core+closer+trail)
	}
	return trimTitle(strings.Join(out, " "))
}

// splitWord splits "[fio:123]," into "[", "fio:123", "]" and ",".
func splitWord(w string) (open, core, closer, trail string) {
	core = strings.TrimRight(w, ",:;!.")
	trail = w[len(core):]
	if len(core) >= 2 {
		switch {
		case core[0] == '[' && core[len(core)-1] == ']':
			open, closer = "[", "]"
		case core[0] == '(' && core[len(core)-1] == ')':
			open, closer = "(", ")"
		}
		if open != "" {
			core = core[1 : len(core)-1]
		}
	}
	return open, core, closer, trail
}

// popWords drops the trailing words of out that are in words, then a comma
// left at the end.
func popWords(out, words []string) []string {
	for len(out) > 0 {
		last := out[len(out)-1]
		found := false
		for _, w := range words {
			if last == w {
				found = true
				break
			}
		}
		if !found {
			break
		}
		out = out[:len(out)-1]
	}
	if n := len(out); n > 0 {
		out[n-1] = strings.TrimRight(out[n-1], ",")
	}
	return out
}

// stripIDs removes pid-like suffixes: "fio/123/0x00000002" -> "fio",
// "fio:123" -> "fio", "pfn:12345" -> "pfn", "mm:ffff888012345678" -> "mm".
func stripIDs(s string) string {
	for {
		i := strings.LastIndexAny(s, ":/")
		if i <= 0 {
			return s
		}
		tail := s[i+1:]
		if !isNumber(tail) && !isAddr(tail) && !(isHex(tail) && strings.ContainsAny(tail, "0123456789")) {
			return s
		}
		s = s[:i]
	}
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

// isAddr reports whether s is an address: "0x" and hex digits, or eight or
// more hex digits with at least one decimal digit.
func isAddr(s string) bool {
	if h, ok := strings.CutPrefix(s, "0x"); ok {
		return h != "" && isHex(h)
	}
	if len(s) < 8 || !isHex(s) {
		return false
	}
	return strings.ContainsAny(s, "0123456789")
}

// isNumber reports whether s is a decimal number, optionally signed, with an
// optional time or size unit, or a "#N" / "CPU#N" counter.
func isNumber(s string) bool {
	if i := strings.IndexByte(s, '#'); i >= 0 && (i == 0 || s[:i] == "CPU" || s[:i] == "cpu") {
		return isDigits(s[i+1:])
	}
	s = strings.TrimPrefix(s, "-")
	for _, unit := range []string{"ms", "us", "ns", "s", "kB", "KB", "MB", "%"} {
		if t, ok := strings.CutSuffix(s, unit); ok && isDigits(t) {
			return true
		}
	}
	return isDigits(s)
}
