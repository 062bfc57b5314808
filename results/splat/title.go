package splat

import (
	"strings"
)

// header is a recognised first line of a report.
type header struct {
	typ      Type
	title    string
	banner   bool // the report ends at a closing "=====" line
	wantOops bool // an "Oops: ... [#N]" line may follow as part of it
	oopsLine bool // this is an "Oops: ... [#N]"-style line
}

// dieStrings start x86 die() lines ("invalid opcode: 0000 [#1] SMP") on
// kernels that do not prefix them with "Oops: ".
var dieStrings = []string{
	"invalid opcode:", "divide error:", "stack segment:", "double fault:", "int3:",
	"bounds:", "alignment check:", "segment not present:", "invalid TSS:",
	"coprocessor segment overrun:", "kernel stack overflow",
}

// lockdepBugs are BUG: headers printed by lockdep.
var lockdepBugs = []string{
	"BUG: Invalid wait context", "BUG: MAX_LOCKDEP", "BUG: looking up invalid subclass",
	"BUG: held lock freed", "BUG: key ",
}

// lockdepInfos are INFO: headers printed by lockdep (old kernels used INFO:
// where new ones use WARNING:).
var lockdepInfos = []string{
	"trying to register non-static key", "possible recursive locking",
	"inconsistent lock state", "possible circular locking", "possible irq lock inversion",
	"suspicious RCU usage",
}

// defaultTitles title reports whose first line leaves nothing after
// normalisation.
var defaultTitles = map[Type]string{
	TypePanic: "kernel panic", TypeOops: "Oops", TypeBug: "BUG", TypeWarning: "WARNING",
	TypeHungTask: "INFO: task blocked", TypeLockup: "watchdog: lockup", TypeRCUStall: "INFO: rcu stall",
	TypeLockdep: "lockdep", TypeKASAN: "BUG: KASAN",
}

// detect recognises a report's first line. msg has no printk prefix and is
// not empty.
func detect(msg string) (header, bool) {
	h, ok := detectHeader(msg)
	if ok && h.title == "" {
		h.title = defaultTitles[h.typ]
	}
	return h, ok
}

func detectHeader(msg string) (header, bool) {
	switch msg[0] {
	case 'K':
		if reason, ok := strings.CutPrefix(msg, "Kernel panic - not syncing:"); ok {
			t := "kernel panic"
			if r := normalise(reason); r != "" {
				t += ": " + r
			}
			return header{typ: TypePanic, title: t}, true
		}
	case 'O':
		if strings.HasPrefix(msg, "Oops") && (len(msg) == 4 || strings.IndexByte(":[ ", msg[4]) >= 0) {
			return oopsHeader(msg, false), true
		}
	case 'g':
		if strings.HasPrefix(msg, "general protection fault") {
			return oopsHeader(msg, false), true
		}
	case 'U':
		if strings.HasPrefix(msg, "Unable to handle kernel ") {
			return oopsHeader(msg, true), true
		}
		if strings.HasPrefix(msg, "UBSAN: ") {
			return header{typ: TypeBug, title: normalise(msg), banner: true}, true
		}
	case 'B':
		if strings.HasPrefix(msg, "BUG: ") {
			return bugHeader(msg), true
		}
	case 'k':
		if loc, ok := strings.CutPrefix(msg, "kernel BUG at "); ok {
			return header{typ: TypeBug, title: "kernel BUG at " + trimTitle(loc), wantOops: true}, true
		}
	case 'W':
		if rest, ok := strings.CutPrefix(msg, "WARNING: "); ok {
			return warningHeader(msg, rest)
		}
	case 'I':
		if strings.HasPrefix(msg, "Internal error: ") && strings.Contains(msg, "[#") {
			return oopsHeader(msg, false), true
		}
		if rest, ok := strings.CutPrefix(msg, "INFO: "); ok {
			return infoHeader(rest)
		}
	case 'r':
		if rest, ok := strings.CutPrefix(msg, "rcu: INFO: "); ok {
			return infoHeader(rest)
		}
	case 'w', 'N':
		if rest, ok := strings.CutPrefix(strings.TrimPrefix(msg, "NMI "), "watchdog: "); ok {
			return watchdogHeader(rest)
		}
	}
	if strings.Contains(msg, " [#") {
		for _, d := range dieStrings {
			if strings.HasPrefix(msg, d) {
				return oopsHeader(msg, false), true
			}
		}
	}
	return header{}, false
}

// oopsHeader titles an Oops-like line: its text before " [#N]", without
// addresses and, when other words say what happened, the error code.
func oopsHeader(msg string, wantOops bool) header {
	h := header{typ: TypeOops, wantOops: wantOops, oopsLine: strings.Contains(msg, "[#")}
	t := msg
	if i := strings.Index(t, " [#"); i >= 0 {
		t = t[:i]
	} else if i := strings.Index(t, "[#"); i >= 0 { // "Oops[#1]:"
		t = t[:i]
	}
	if i := strings.Index(t, ", probably for "); i >= 0 {
		t = t[:i]
	}
	// Since 6.x x86 prefixes die() messages with "Oops: "; drop it so that
	// "Oops: general protection fault" (7.3) and "general protection
	// fault" (6.1) get the same title. Drop the error code too, unless it
	// is all there is ("Oops: 0002").
	for strings.HasPrefix(t, "Oops: Oops") {
		t = t[len("Oops: "):]
	}
	if code, ok := strings.CutPrefix(t, "Oops: "); ok && len(code) <= 4 && isHex(code) {
		h.title = t
		return h
	}
	if i := strings.LastIndex(t, ": "); i >= 0 && len(t)-i-2 <= 4 && isHex(t[i+2:]) {
		t = t[:i]
	}
	t = strings.TrimPrefix(t, "Oops: ")
	h.title = normalise(t)
	return h
}

// bugHeader handles "BUG: ..." lines.
func bugHeader(msg string) header {
	switch {
	case strings.HasPrefix(msg, "BUG: KASAN: "):
		return header{typ: TypeKASAN, title: normalise(msg), banner: true}
	case strings.HasPrefix(msg, "BUG: KCSAN: "), strings.HasPrefix(msg, "BUG: KMSAN: "),
		strings.HasPrefix(msg, "BUG: KFENCE: "):
		return header{typ: TypeBug, title: normalise(msg), banner: true}
	case strings.HasPrefix(msg, "BUG: soft lockup"): // before 4.x
		return header{typ: TypeLockup, title: softLockupTitle(msg)}
	}
	for _, l := range lockdepBugs {
		if strings.HasPrefix(msg, l) {
			return header{typ: TypeLockdep, title: normalise(msg)}
		}
	}
	t := msg
	if i := strings.Index(t, " - "); i >= 0 {
		t = t[:i]
	}
	want := strings.Contains(t, "unable to handle") || strings.Contains(t, "NULL pointer dereference") ||
		strings.Contains(t, "stack guard page") || strings.Contains(t, "paging request")
	return header{typ: TypeBug, title: normalise(t), wantOops: want}
}

// warningHeader handles "WARNING: ..." lines: __warn's
// "WARNING: CPU: 1 PID: 2 at fs/x.c:12 func+0x1/0x2 [mod]" (before 6.19),
// "WARNING: fs/x.c:12 at func+0x1/0x2 [mod], CPU#1: comm/2" (6.19 on), and
// lockdep's "WARNING: possible circular locking dependency detected".
//
// Other "WARNING: " lines are plain messages, not splats.
func warningHeader(msg, rest string) (header, bool) {
	fn, loc := "", ""
	for _, w := range strings.Fields(rest) {
		w = strings.TrimRight(w, ",")
		if fn == "" {
			if i := strings.Index(w, "+0x"); i > 0 {
				fn = w[:i]
			}
		}
		if loc == "" && isSourceLoc(w) {
			loc = w
		}
	}
	warn := strings.HasPrefix(rest, "CPU: ") || strings.HasPrefix(rest, "at ") ||
		strings.Contains(rest, ", CPU#") || fn != "" || loc != ""
	switch {
	case warn && fn != "":
		return header{typ: TypeWarning, title: "WARNING in " + fn}, true
	case warn && loc != "":
		return header{typ: TypeWarning, title: "WARNING at " + loc}, true
	case warn:
		return header{typ: TypeWarning, title: normalise(msg)}, true
	case strings.Contains(rest, "lock") || strings.Contains(rest, "RCU usage") ||
		strings.Contains(rest, "IRQ-"):
		return header{typ: TypeLockdep, title: normalise(msg)}, true
	}
	return header{}, false
}

// infoHeader handles what follows "INFO: " (or "rcu: INFO: ").
func infoHeader(rest string) (header, bool) {
	if task, ok := strings.CutPrefix(rest, "task "); ok {
		if i := strings.Index(task, " blocked for more than "); i >= 0 {
			return header{typ: TypeHungTask, title: "INFO: task " + commName(task[:i]) + " blocked"}, true
		}
		return header{}, false
	}
	if strings.HasPrefix(rest, "rcu") && strings.Contains(rest, "stall") {
		flavor, _, _ := strings.Cut(rest, " ")
		t := "INFO: " + flavor + " detected"
		if strings.Contains(rest, "expedited") {
			t += " expedited"
		}
		return header{typ: TypeRCUStall, title: t + " stall"}, true
	}
	for _, l := range lockdepInfos {
		if strings.HasPrefix(rest, l) {
			return header{typ: TypeLockdep, title: normalise("INFO: " + rest)}, true
		}
	}
	return header{}, false
}

// watchdogHeader handles what follows "watchdog: ".
func watchdogHeader(rest string) (header, bool) {
	switch {
	case strings.HasPrefix(rest, "BUG: soft lockup"):
		return header{typ: TypeLockup, title: softLockupTitle(rest)}, true
	case strings.Contains(rest, "hard LOCKUP"):
		return header{typ: TypeLockup, title: "watchdog: Watchdog detected hard LOCKUP"}, true
	}
	return header{}, false
}

// softLockupTitle turns "BUG: soft lockup - CPU#1 stuck for 26s! [fio:123]"
// into "watchdog: BUG: soft lockup [fio]".
func softLockupTitle(msg string) string {
	t := "watchdog: BUG: soft lockup"
	if i := strings.LastIndexByte(msg, '['); i >= 0 {
		if j := strings.IndexByte(msg[i:], ']'); j > 0 {
			if c := commName(msg[i+1 : i+j]); c != "" {
				t += " [" + c + "]"
			}
		}
	}
	return t
}

// commName turns "fio:123", "kworker/u8:3" or "swapper/0:1" into the task
// name without its pid and per-CPU suffix: "fio", "kworker", "swapper".
func commName(s string) string {
	if i := strings.LastIndexByte(s, ':'); i >= 0 && isDigits(s[i+1:]) {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '/'); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
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
// addresses, numbers, pids, "+0x12/0x34" offsets and "key=value" counters,
// with the words that introduce them; source locations (file.c:123) stay.
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

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}
