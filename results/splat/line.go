package splat

import (
	"strconv"
	"strings"
)

// parsedLine is a console line split into its printk prefix and message.
type parsedLine struct {
	msg   string  // the message after the timestamp and caller prefixes
	ctx   string  // the caller context, "T123" or "C1", or ""
	ts    float64 // printk time in seconds, when hasTS
	hasTS bool
}

// parseLine strips the line ending and the "[   12.345678]" timestamp and
// "[  T123]" / "[    C1]" caller prefixes. Text before a timestamp (user
// space output that the kernel line interrupted, or a "<4>" log level) is
// dropped; so is text before a lone '\r'.
func parseLine(line string) parsedLine {
	line = strings.TrimRight(line, "\r\n")
	if i := strings.LastIndexByte(line, '\r'); i >= 0 {
		line = line[i+1:]
	}
	if len(line) > MaxLineBytes {
		line = line[:MaxLineBytes]
	}
	p := parsedLine{msg: line}
	for off := 0; off < len(line); {
		i := strings.IndexByte(line[off:], '[')
		if i < 0 {
			break
		}
		i += off
		if end, ts, ok := parseTimestamp(line, i); ok {
			p.ts, p.hasTS = ts, true
			rest := line[end:]
			if n, ctx := parseCaller(rest); n > 0 {
				rest, p.ctx = rest[n:], ctx
			}
			p.msg = strings.TrimPrefix(rest, " ")
			return p
		}
		if i == 0 {
			if n, ctx := parseCaller(line); n > 0 {
				p.msg, p.ctx = strings.TrimPrefix(line[n:], " "), ctx
				return p
			}
		}
		off = i + 1
	}
	return p
}

// parseTimestamp parses "[ 12.345678]" at s[i:] and returns the index after
// it and the time in seconds.
func parseTimestamp(s string, i int) (end int, ts float64, ok bool) {
	j := i + 1
	for j < len(s) && s[j] == ' ' {
		j++
	}
	num := j
	d := j
	for j < len(s) && isDigit(s[j]) && j-d < 12 {
		j++
	}
	if j == d || j >= len(s) || s[j] != '.' {
		return 0, 0, false
	}
	j++
	d = j
	for j < len(s) && isDigit(s[j]) && j-d < 9 {
		j++
	}
	if j == d || j >= len(s) || s[j] != ']' {
		return 0, 0, false
	}
	ts, err := strconv.ParseFloat(s[num:j], 64)
	if err != nil {
		return 0, 0, false
	}
	return j + 1, ts, true
}

// parseCaller parses a "[  T123]" or "[    C1]" prefix at the start of s and
// returns its length and the context without spaces ("T123"), or 0.
func parseCaller(s string) (int, string) {
	if len(s) < 4 || s[0] != '[' {
		return 0, ""
	}
	j := 1
	for j < len(s) && s[j] == ' ' {
		j++
	}
	if j >= len(s) || (s[j] != 'T' && s[j] != 'C') {
		return 0, ""
	}
	c := j
	j++
	d := j
	for j < len(s) && isDigit(s[j]) && j-d < 10 {
		j++
	}
	if j == d || j >= len(s) || s[j] != ']' {
		return 0, ""
	}
	return j + 1, s[c:j]
}

// cutHere is the banner that __warn and report_bug print before a report.
const cutHere = "------------[ cut here ]"

// isBanner reports whether msg is a separator line that opens a report:
// "------------[ cut here ]------------" or a row of '='.
func isBanner(msg string) bool {
	if strings.HasPrefix(msg, cutHere) {
		return true
	}
	return isRule(msg)
}

// isRule reports whether msg is a row of at least ten '=' (KASAN, KMSAN,
// lockdep and old UBSAN reports open and close with one).
func isRule(msg string) bool {
	if len(msg) < 10 {
		return false
	}
	for i := 0; i < len(msg); i++ {
		if msg[i] != '=' {
			return false
		}
	}
	return true
}

// isTraceStart reports whether msg begins a call trace.
func isTraceStart(msg string) bool {
	return strings.HasPrefix(msg, "Call Trace:") || strings.HasPrefix(msg, "Call trace:") ||
		strings.HasPrefix(msg, "Backtrace:")
}

// continuations are line prefixes that belong to a report after its call
// trace: more traces, registers, module lists, task dumps and end markers.
var continuations = []string{
	"Call Trace:", "Call trace:", "Backtrace:", "<TASK>", "</TASK>", "<IRQ>", "</IRQ>",
	"<NMI>", "</NMI>", "<SOFTIRQ>", "</SOFTIRQ>", "<EOI>", "[<", "Code:", "Modules linked in:",
	"---[", "Kernel Offset:", "CPU: ", "Hardware name:", "Workqueue:", "Tainted:",
	"irq event stamp:", "hardirqs last", "softirqs last", "Sending NMI", "NMI backtrace",
	"task:", "rcu: ", "note: ", "Rebooting in", "Dumping ftrace", "Fixing recursive fault",
	"Disabling lock debugging", "Stack:", "Exception stack", "Process ", "PC is at",
	"LR is at", "pstate:", "Mem abort info:", "Data abort info:", "Preemption disabled at:",
	"Showing busy workqueues", "Showing all locks held", "INFO: task ", "INFO: lockdep is turned off",
	"Kernel Offset", "Sched_ext:", "Call trace", "pc :", "lr :", "sp :",
}

// isContinuation reports whether msg, seen after a report's call trace,
// still belongs to the report.
func isContinuation(msg string) bool {
	if msg == "" {
		return false
	}
	if msg[0] == ' ' || msg[0] == '\t' {
		return true
	}
	if isRegister(msg) || isLocksHeld(msg) || isStackDump(msg) {
		return true
	}
	for _, c := range continuations {
		if strings.HasPrefix(msg, c) {
			return true
		}
	}
	return false
}

// isStackDump reports whether msg is a line of a raw stack dump, as arm
// prints them: "7cc0: 96737d48 00002218 96737d3c fffffe00".
func isStackDump(msg string) bool {
	i := strings.IndexByte(msg, ':')
	if i < 4 || i > 16 || !isHex(msg[:i]) {
		return false
	}
	words := strings.Fields(msg[i+1:])
	for _, w := range words {
		if !isHex(w) {
			return false
		}
	}
	return len(words) > 0
}

// isLocksHeld reports whether msg is lockdep's "2 locks held by fio/123:"
// or "no locks held by fio/123.".
func isLocksHeld(msg string) bool {
	i := 0
	for i < len(msg) && isDigit(msg[i]) {
		i++
	}
	rest := msg[i:]
	if i == 0 {
		return strings.HasPrefix(rest, "no locks held by ")
	}
	return strings.HasPrefix(rest, " lock held by ") || strings.HasPrefix(rest, " locks held by ")
}

// registers are the register names that start register dump lines (x86,
// then arm64), and other per-report dump prefixes that look like them.
var registers = map[string]bool{
	"RIP": true, "RSP": true, "RAX": true, "RBX": true, "RCX": true, "RDX": true,
	"RSI": true, "RDI": true, "RBP": true, "R08": true, "R09": true, "R10": true,
	"R11": true, "R12": true, "R13": true, "R14": true, "R15": true, "FS": true,
	"GS": true, "CS": true, "DS": true, "ES": true, "CR0": true, "CR2": true,
	"CR3": true, "CR4": true, "DR0": true, "DR1": true, "DR2": true, "DR3": true,
	"DR6": true, "DR7": true, "PKRU": true, "EIP": true, "EAX": true, "EBX": true,
	"ECX": true, "EDX": true, "ESI": true, "EDI": true, "EBP": true, "ESP": true,
	"EFLAGS": true, "KASAN": true, "#PF": true, "pc ": true, "lr ": true, "sp ": true,
}

// isRegister reports whether msg is a register dump line: "RAX: ...",
// "CR2: ...", "PKRU: ..." (x86) or "pc : ...", "x29: ..." (arm64).
func isRegister(msg string) bool {
	i := strings.IndexByte(msg, ':')
	if i < 2 || i > 6 {
		return false
	}
	tok := msg[:i]
	if registers[tok] {
		return true
	}
	// arm64 x0..x30
	return tok[0] == 'x' && isDigits(tok[1:])
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

// Brief is a report's text as a mail quotes it: without the register
// dumps, the Code: bytes and the frames the unwinder is unsure of ("? "),
// which say nothing to a reader; RIP lines stay, as they name the
// function.
func Brief(text string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimLeft(l, " \t")
		if strings.HasPrefix(t, "RIP:") || !(isRegister(t) || strings.HasPrefix(t, "Code: ") || strings.HasPrefix(t, "? ")) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
