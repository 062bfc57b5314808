package splat

import "strings"

// Where a title's function comes from. Each report format has a recipe: a
// few steps that walk the report's lines from its header down, each from
// where the last one stopped, and offer candidate functions. The title
// names the first candidate that is not a generic helper (skipFrames and
// the recipe's own skip list), or the one a picker chooses. When no
// candidate is left the title says "in corrupted", as syzkaller's do: the
// report was cut, interleaved, or has no usable frame.

// op is what a step does.
type op uint8

const (
	// opHeader offers the function named on the header line
	// ("BUG: KASAN: use-after-free in foo+0x1/0x2").
	opHeader op = iota
	// opRIP offers the function of the next kernel instruction pointer
	// line (x86 "RIP:"/"IP:", arm64 "pc :", arm "PC is at", powerpc
	// "NIP" or "--- interrupt: ... at"). A user-mode or unsymbolised one
	// offers nothing; without one, the steps after it see no lines.
	opRIP
	// opSeek moves past the next line that holds one of texts; without
	// one, the steps after it see no lines.
	opSeek
	// opTrace moves past the next call trace start ("Call Trace:").
	opTrace
	// opFrames offers the frames from here to the start of the next
	// stack ("Call Trace:", "Allocated by task 1:", "Freed by task 1:",
	// " backtrace:"), or to a line that holds one of texts.
	opFrames
	// opAt offers the function of the next lockdep "at:" reference:
	// "... at: foo+0x1/0x2", "at: [<ffffffff81234567>] foo+0x1/0x2", or
	// a line ending in "at:" before "[<ffffffff81234567>] foo+0x1/0x2".
	opAt
	// opPC offers the function of the next "[<ffffffff81234567>] foo+0x1"
	// line.
	opPC
	// opAfter offers the function that follows texts[0] on the next line
	// that holds it ("last function: foo").
	opAfter
)

// step is one step of a recipe.
type step struct {
	op    op
	texts []string
	// raw: the function this step offers names the report even when it
	// is a generic helper (it is the exact place the report names, not a
	// guess from a stack).
	raw bool
}

// recipe says where the function of a title comes from.
type recipe struct {
	steps []step
	// alts are tried in turn when steps find nothing.
	alts [][]step
	// skip are frames to skip for this format, on top of skipFrames.
	skip *patterns
	// pick chooses among the candidates left after skipping, given as
	// titles name them (titleFunc): it returns the index of its choice,
	// or -1, and the name the title gives it when that is another one.
	// nil takes the first.
	pick func(fns []string) (int, string)
}

// candidate is a function a recipe's steps offer.
type candidate struct {
	fn   string
	line int  // its index in the report's lines
	raw  bool // see step.raw
}

// found is what a recipe found in a report.
type found struct {
	fn      string // the function, or "" when none is usable
	named   string // what the title calls it, when a picker renamed it
	line    int    // its index in the report's lines, when fn != ""
	cut     bool   // a line that corrupts stacks (fault injection) was met
	anyLine bool   // the steps found their lines (a trace, an "at:"), even if all frames were skipped
}

// corruptingFrames are frames that belong to another report printed into
// the middle of this one: fault injection dumps a stack at every
// injected failure.
var corruptingFrames = []string{"should_fail", "should_failslab"}

// run applies the recipe to lines, starting at the header (lines[from]).
func (r *recipe) run(lines []string, from int, h *header) found {
	f := r.runSteps(r.steps, lines, from, h)
	for _, alt := range r.alts {
		if f.fn != "" && !f.cut {
			break
		}
		f = r.runSteps(alt, lines, from, h)
	}
	return f
}

func (r *recipe) runSteps(steps []step, lines []string, from int, h *header) found {
	var (
		cands []candidate
		out   found
	)
	at := from
	offer := func(fn string, line int, raw bool) {
		if fn != "" && (raw || !skipped(fn, r.skip)) {
			cands = append(cands, candidate{fn: fn, line: line, raw: raw})
		}
	}
	for _, s := range steps {
		if r.pick == nil && len(cands) > 0 {
			break // the first candidate is the one
		}
		if s.op == opHeader {
			offer(h.fn, from, s.raw)
			continue
		}
		// Each step reads lines from at until it is done. A frame of
		// another report's stack (fault injection) ends any step: the
		// lines after it are not this report's.
	scan:
		for ; at < len(lines); at++ {
			l := strings.TrimPrefix(lines[at], "kmemleak: ")
			fn, q, isFrame := parseFrame(l)
			if isFrame && !q && !s.raw && corrupting(fn) {
				out.cut = true
				at++
				break
			}
			switch s.op {
			case opRIP:
				if fn, ok := ripFunc(strings.TrimLeft(l, " \t")); ok {
					offer(fn, at, s.raw)
					at++
					break scan
				}
			case opSeek, opTrace:
				texts := s.texts
				if s.op == opTrace {
					texts = traceStarts
				}
				if holdsAny(l, texts) {
					at++
					break scan
				}
			case opFrames:
				if isStackStart(l) || holdsAny(l, s.texts) {
					at++
					break scan
				}
				if !isFrame || q {
					continue
				}
				out.anyLine = true
				offer(fn, at, s.raw)
				if _, caller, ok := armFrame(l); ok {
					offer(caller, at, s.raw)
				}
				if r.pick == nil && len(cands) > 0 {
					at++
					break scan
				}
			case opAt, opPC, opAfter:
				fn, ok := "", false
				switch s.op {
				case opAt:
					fn, ok = atFunc(lines, at)
				case opPC:
					fn, ok = pcFunc(l)
				case opAfter:
					if j := strings.Index(l, s.texts[0]); j >= 0 {
						fn, ok = symbolName(l[j+len(s.texts[0]):]), true
					}
				}
				if ok {
					out.anyLine = true
					offer(fn, at, s.raw)
					at++
					break scan
				}
			}
		}
	}
	if len(cands) == 0 {
		return out
	}
	if r.pick == nil || cands[0].raw {
		out.fn, out.line = cands[0].fn, cands[0].line
		return out
	}
	fns := make([]string, len(cands))
	for i, c := range cands {
		fns[i] = titleFunc(c.fn)
	}
	if i, name := r.pick(fns); i >= 0 {
		out.fn, out.line, out.named = cands[i].fn, cands[i].line, name
	}
	return out
}

// traceStarts are what call traces start with.
var traceStarts = []string{"Call Trace:", "Call trace:", "Backtrace:"}

// stackStarts are the lines that start a stack: a call trace, where KASAN's
// object was allocated or freed, kmemleak's backtrace, where KMSAN's value
// was stored.
var stackStarts = []string{"Call Trace", "Call trace", "Backtrace:", "Allocated:", "Freed:",
	"Uninit was stored to memory at"}

// isStackStart reports whether l starts a stack.
func isStackStart(l string) bool {
	if holdsAny(l, stackStarts) {
		return true
	}
	for _, p := range []string{"Allocated by task ", "Freed by task "} {
		if i := strings.Index(l, p); i >= 0 && strings.HasSuffix(strings.TrimSpace(l), ":") {
			return true
		}
	}
	// " backtrace:" or " backtrace (crc 1a2b):", but not lockdep's
	// "stack backtrace:".
	if i := strings.Index(l, " backtrace"); i > 0 && l[i-1] != 'k' {
		rest := l[i+len(" backtrace"):]
		return strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, " (crc ")
	}
	return false
}

func holdsAny(l string, texts []string) bool {
	for _, t := range texts {
		if strings.Contains(l, t) {
			return true
		}
	}
	return false
}

func corrupting(fn string) bool {
	for _, c := range corruptingFrames {
		if fn == c {
			return true
		}
	}
	return false
}

// atFunc returns the function of lockdep's "at:" reference on lines[i]:
// "... at: foo+0x1/0x2", "... at: [<ffffffff81234567>] foo+0x1/0x2", or a
// line ending in "at:" before a "[<...>] foo+0x1/0x2" line.
func atFunc(lines []string, i int) (string, bool) {
	l := lines[i]
	j := strings.Index(l, "at: ")
	if j >= 0 {
		if fn := symbolOf(l[j+len("at: "):]); fn != "" {
			return fn, true
		}
	}
	if strings.HasSuffix(strings.TrimSpace(l), " at:") && i+1 < len(lines) {
		if fn := symbolOf(lines[i+1]); fn != "" {
			return fn, true
		}
	}
	return "", false
}

// pcFunc returns the function of a "[<ffffffff81234567>] foo+0x1/0x2" or
// "[ffffffff81234567] foo+0x1/0x2" reference anywhere on l.
func pcFunc(l string) (string, bool) {
	for off := 0; off < len(l); {
		i := strings.IndexByte(l[off:], '[')
		if i < 0 {
			return "", false
		}
		i += off
		j := strings.IndexByte(l[i:], ']')
		if j < 0 {
			return "", false
		}
		inner := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(l[i+1:i+j], "<"), "0x"), ">")
		if isHex(inner) {
			rest := strings.TrimLeft(l[i+j+1:], " ")
			if fn := symbolName(rest); fn != "" && rest != "" && len(rest) > len(fn) {
				return fn, true
			}
		}
		off = i + 1
	}
	return "", false
}

// symbolName returns the function at the start of s: "foo" of
// "foo+0x1/0x2" or "foo.isra.0+0x1"; a name followed by something else is
// not one.
func symbolName(s string) string {
	s = strings.TrimLeft(s, " ")
	if s == "" || !isSymStart(s[0]) && !isDigit(s[0]) {
		return ""
	}
	i := 0
	for i < len(s) && (isSymStart(s[i]) || isDigit(s[i])) {
		i++
	}
	if i < len(s) && (s[i] == '.' || s[i] == '+') || i == len(s) {
		return s[:i]
	}
	return ""
}

// Pickers.

// pickStall names a stall or lockup. The stall was caught at a random
// point of a loop that may span several functions; the frame just before
// the first dispatch point (stallAnchors: syscall entry, workqueues,
// timers, softirqs, and the file and socket operations that tell
// syscalls apart) is a stable name for it. smp_call_function is its own
// name. Without a dispatch point there is no stable name.
func pickStall(fns []string) (int, string) {
	prev := 0
	for i, fn := range fns {
		if stallAnchorSet.match(fn) {
			if strings.Contains(fn, "smp_call_function") {
				return i, "smp_call_function"
			}
			return prev, ""
		}
		prev = i
	}
	return -1, ""
}

// pickHang names a hung task: by the primitive it waits on when that is
// all there is to say (hangAnchors: tasks hung in synchronize_rcu are all
// one bug), else by the first frame past the scheduler, lock and wait
// primitives.
func pickHang(fns []string) (int, string) {
	for i, fn := range fns {
		for _, a := range hangAnchors {
			if strings.Contains(fn, a.frame) {
				return i, a.title
			}
		}
	}
	for i, fn := range fns {
		if hangSkipSet.match(fn) {
			continue
		}
		if !entryFrameSet.match(fn) {
			return i, ""
		}
		// Every frame before the entry point has a word of a wait or a
		// lock in its name ("splatgen_waiter"): name the first that is
		// not one of the primitives themselves.
		for j, fn := range fns[:i] {
			if !hangWaitSet.match(fn) {
				return j, ""
			}
		}
		return i, ""
	}
	return -1, ""
}

// Recipes shared by several formats.
var (
	// An oops: the faulting instruction, then the call trace after it.
	byRIPTrace = []step{{op: opRIP}, {op: opTrace}, {op: opFrames}}
	// Only the faulting instruction: divide error, invalid opcode,
	// double fault.
	byRIPOnly = []step{{op: opRIP}}
	// The call trace.
	byTrace = []step{{op: opTrace}, {op: opFrames}}
	// A WARNING: the instruction pointer and the frames after it (the
	// stack that old kernels print around it), else the call trace.
	byWarnRIP = []step{{op: opRIP}, {op: opFrames}}
	// Sanitizers that name the function on their header, then a stack.
	byHeader       = []step{{op: opHeader}}
	byHeaderTrace  = []step{{op: opHeader}, {op: opTrace}, {op: opFrames}}
	byHeaderFrames = []step{{op: opHeader}, {op: opFrames}}
)

func traceRecipe(skip ...string) *recipe {
	return &recipe{steps: byTrace, skip: newPatterns(skip...)}
}

// warnRecipe names a WARNING by its instruction pointer; when the RIP
// line is lost (another CPU's or a task's console output cut into the
// report), by the function its header names, which is the same place;
// else by the call trace.
func warnRecipe(skip ...string) *recipe {
	return &recipe{steps: byWarnRIP, alts: [][]step{byHeader, byTrace}, skip: newPatterns(skip...)}
}

// rawAfter is a recipe that names the function of the first lockdep "at:"
// (or "[<pc>] f" when pc is set) reference after a line holding marker,
// helper or not.
func rawAfter(marker string, pc bool) *recipe {
	o := opAt
	if pc {
		o = opPC
	}
	steps := []step{{op: o, raw: true}}
	if marker != "" {
		steps = append([]step{{op: opSeek, texts: []string{marker}}}, steps...)
	}
	return &recipe{steps: steps}
}
