// Package splat finds kernel splats (panics, oopses, BUGs, WARNINGs, hung
// tasks, lockups, RCU stalls, lockdep and KASAN reports) in a guest's console
// output, as it arrives, and gives each a stable title for deduplication.
//
// The console is untrusted input: lines are bounded, reports are bounded,
// and the number of reports kept is bounded, so a guest that floods its
// console cannot grow the host's memory without limit.
//
// This is the first scanner: titles come from the report's first line (see
// detect in title.go). A parser that titles reports from their call traces,
// as syzkaller's pkg/report does, can replace detect later without changing
// the API.
package splat

import (
	"bytes"
	"strings"
	"sync"
)

// Type is the kind of a splat.
type Type string

// Splat types.
const (
	TypePanic    Type = "panic"     // Kernel panic - not syncing: ...
	TypeOops     Type = "oops"      // Oops: ..., general protection fault, Unable to handle kernel ...
	TypeBug      Type = "bug"       // BUG: ..., kernel BUG at ..., UBSAN: ...
	TypeWarning  Type = "warning"   // WARNING: ... at file:line func+0x...
	TypeHungTask Type = "hung-task" // INFO: task ... blocked for more than N seconds
	TypeLockup   Type = "lockup"    // watchdog: BUG: soft lockup, hard LOCKUP
	TypeRCUStall Type = "rcu-stall" // rcu: INFO: rcu_preempt detected stalls
	TypeLockdep  Type = "lockdep"   // WARNING: possible circular locking dependency detected, ...
	TypeKASAN    Type = "kasan"     // BUG: KASAN: ...
)

// Limits on what the scanner keeps.
const (
	// MaxLineBytes is the longest console line kept; the rest of a longer
	// line is dropped.
	MaxLineBytes = 4 << 10
	// MaxReportLines bounds the lines of one report's Text.
	MaxReportLines = 200
	// MaxReportBytes bounds one report's Text.
	MaxReportBytes = 64 << 10
	// MaxReports is the most reports a Scanner keeps; later ones are
	// still returned by Line and passed to OnReport callbacks, and
	// counted by Dropped.
	MaxReports = 1000
	// MaxTotalBytes bounds the Text of all kept reports together. Past
	// it, new reports keep only their first line.
	MaxTotalBytes = 8 << 20
)

// Report is one splat found on the console.
type Report struct {
	// Type is the kind of splat.
	Type Type `json:"type"`
	// Title is a one-line summary without addresses, pids or other values
	// that change from run to run, so that equal titles mean the same bug.
	Title string `json:"title"`
	// Line is the 1-based console line where the report starts.
	Line int `json:"line"`
	// Text is the report's console lines, bounded by MaxReportLines and
	// MaxReportBytes. It is complete only in Reports.
	Text string `json:"text"`
	// Fatal is true for a panic, and for a report that a panic followed
	// (an Oops with panic_on_oops, a WARNING with panic_on_warn, a hung
	// task with hung_task_panic, ...). It is final only in Reports.
	Fatal bool `json:"fatal"`
}

// Scanner finds reports in console lines. Feed it with Line or Write; it is
// safe for concurrent use.
type Scanner struct {
	mu        sync.Mutex     // guards every field below
	callbacks []func(Report) // OnReport callbacks
	lineNo    int            // lines seen
	tsLines   int            // lines seen with a printk timestamp
	reports   []Report       // kept reports; Text of the open one is in open
	dropped   int            // reports not kept (MaxReports)
	textBytes int            // total Text bytes of kept reports
	open      *openReport    // the report still collecting text, or nil
	// candidate is the index in reports of the last non-panic report
	// that a later panic may have been caused by, or -1.
	candidate int
	prevLine  string // the previous line when it is a banner, else ""
	pending   []byte // Write's partial line
	overflow  bool   // pending reached MaxLineBytes; drop until newline
}

// openReport is a report whose text is still being collected.
type openReport struct {
	idx      int      // index in Scanner.reports, or -1 when not kept
	start    int      // line number of the header
	typ      Type     // the report's type
	lines    []string // Text so far
	bytes    int      // bytes of lines, with newlines
	full     bool     // MaxTotalBytes reached: keep no more lines
	banner   bool     // ends at a closing "=====" line (sanitizers)
	sawTrace bool     // a "Call Trace:" line has been seen
	wantOops bool     // an "Oops: ... [#N]" line may follow as part of it
	lastTS   float64  // printk time of the last line, when hasTS
	hasTS    bool     // lastTS is set
}

// tsTrust is how many timestamped lines make the scanner ignore report
// headers on lines without a timestamp: once the kernel is known to print
// times, an untimed "BUG:" line is user space writing to the console.
const tsTrust = 8

// maxGap is the largest jump in printk time, in seconds, between two lines
// of one report. One report is printed in one burst.
const maxGap = 10

// oopsWindow is how many lines after a BUG header its Oops line may come.
const oopsWindow = 40

// NewScanner returns an empty Scanner.
func NewScanner() *Scanner {
	return &Scanner{candidate: -1}
}

// OnReport registers f to be called with each report as it starts (Text
// holds the first line, Fatal may still change). f is called without the
// scanner's lock held, after the Line or Write call that found the report;
// reports found by one call are passed in order.
func (s *Scanner) OnReport(f func(Report)) {
	s.mu.Lock()
	s.callbacks = append(s.callbacks, f)
	s.mu.Unlock()
}

// Line feeds one console line (with or without its "\n" or "\r\n") and
// returns the report that starts at this line, or nil. A panic is thus known
// as soon as its first line is seen. The returned report's Text holds only
// its first line (and the banner before it); Reports has the rest. A report
// past MaxReports is returned too, though not kept.
func (s *Scanner) Line(line string) *Report {
	s.mu.Lock()
	r := s.line(line)
	cbs := s.callbacks
	s.mu.Unlock()
	if r == nil {
		return nil
	}
	for _, f := range cbs {
		f(*r)
	}
	return r
}

// Write feeds console output. It splits p into lines, keeping a partial
// last line for the next call, and truncates lines to MaxLineBytes. It
// never fails.
func (s *Scanner) Write(p []byte) (int, error) {
	n := len(p)
	var started []Report
	s.mu.Lock()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.buffer(p)
			break
		}
		chunk := p[:i]
		p = p[i+1:]
		var line string
		if len(s.pending) > 0 || s.overflow {
			s.buffer(chunk)
			line = string(s.pending)
			s.pending = s.pending[:0]
			s.overflow = false
		} else {
			line = string(chunk[:min(len(chunk), MaxLineBytes)])
		}
		if r := s.line(line); r != nil {
			started = append(started, *r)
		}
	}
	cbs := s.callbacks
	s.mu.Unlock()
	for _, r := range started {
		for _, f := range cbs {
			f(r)
		}
	}
	return n, nil
}

// buffer appends b to the partial line, up to MaxLineBytes.
func (s *Scanner) buffer(b []byte) {
	if room := MaxLineBytes - len(s.pending); len(b) > room {
		b = b[:room]
		s.overflow = true
	}
	s.pending = append(s.pending, b...)
}

// Flush feeds the partial line that Write holds, if any, as a complete
// line: call it when the console has ended.
func (s *Scanner) Flush() *Report {
	s.mu.Lock()
	if len(s.pending) == 0 && !s.overflow {
		s.mu.Unlock()
		return nil
	}
	line := string(s.pending)
	s.pending = s.pending[:0]
	s.overflow = false
	s.mu.Unlock()
	return s.Line(line)
}

// Reports returns a copy of the reports found so far, in console order, with
// their Text complete (or as far as the console has got, for a report still
// being printed).
func (s *Scanner) Reports() []Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Report, len(s.reports))
	copy(out, s.reports)
	if o := s.open; o != nil && o.idx >= 0 {
		out[o.idx].Text = strings.Join(o.lines, "\n")
	}
	return out
}

// Dropped returns how many reports were not kept because MaxReports was
// reached.
func (s *Scanner) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Lines returns how many console lines the scanner has seen.
func (s *Scanner) Lines() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lineNo
}

// line handles one line. s.mu is held.
func (s *Scanner) line(raw string) *Report {
	s.lineNo++
	p := parseLine(raw)
	if p.hasTS {
		s.tsLines++
	}
	defer func() {
		if isBanner(p.msg) {
			s.prevLine = p.raw
		} else {
			s.prevLine = ""
		}
	}()

	var h header
	found := false
	if p.msg != "" && (p.hasTS || s.tsLines < tsTrust) {
		h, found = detect(p.msg)
	}
	if found && h.oopsLine {
		// "Oops: 0000 [#1] ..." after "BUG: kernel NULL pointer
		// dereference" or "kernel BUG at" is part of that report.
		if o := s.open; o != nil && o.wantOops && s.lineNo-o.start <= oopsWindow {
			o.wantOops = false
			s.appendLine(o, p)
			return nil
		}
	}
	if !found {
		if s.open != nil {
			s.continueReport(p)
		}
		return nil
	}
	if h.typ == TypePanic {
		s.markFatal(h.title)
	}
	s.closeReport()
	return s.startReport(h, p)
}

// markFatal marks the report that the panic with the given title follows
// from as fatal: the report still open, or a recent one when the panic's
// reason says it was caused by an earlier splat. s.mu is held.
func (s *Scanner) markFatal(title string) {
	idx := -1
	switch {
	case s.open != nil && s.open.typ != TypePanic:
		idx = s.open.idx
	case s.candidate >= 0 && s.lineNo-s.reports[s.candidate].Line <= MaxReportLines && consequence(title):
		idx = s.candidate
	}
	if idx >= 0 {
		s.reports[idx].Fatal = true
	}
	s.candidate = -1
}

// consequences are words in a panic's reason that say that an earlier splat
// caused it.
var consequences = []string{
	"fatal exception", "panic_on_warn", "panic_on_oops", "hung_task", "hung tasks",
	"softlockup", "lockup", "attempted to kill", "aiee", "rcu stall", "oops", "kasan",
}

func consequence(title string) bool {
	t := strings.ToLower(title)
	for _, c := range consequences {
		if strings.Contains(t, c) {
			return true
		}
	}
	return false
}

// startReport opens a report for header h at line p. s.mu is held.
func (s *Scanner) startReport(h header, p parsedLine) *Report {
	o := &openReport{
		idx:      -1,
		start:    s.lineNo,
		typ:      h.typ,
		banner:   h.banner,
		wantOops: h.wantOops,
	}
	r := Report{Type: h.typ, Title: h.title, Line: s.lineNo, Fatal: h.typ == TypePanic}
	if len(s.reports) < MaxReports {
		o.idx = len(s.reports)
		s.reports = append(s.reports, r)
		if h.typ != TypePanic {
			s.candidate = o.idx
		}
	} else {
		s.dropped++
	}
	s.open = o
	if s.prevLine != "" {
		s.appendLine(o, parsedLine{raw: s.prevLine})
	}
	s.appendLine(o, p)
	if o.full && len(o.lines) == 0 {
		// Over MaxTotalBytes: keep the first line anyway.
		o.lines = append(o.lines, p.raw)
		o.bytes += len(p.raw)
	}
	r.Text = strings.Join(o.lines, "\n")
	return &r
}

// closeReport finishes the open report, if any. s.mu is held.
func (s *Scanner) closeReport() {
	o := s.open
	if o == nil {
		return
	}
	s.open = nil
	if o.idx >= 0 {
		s.reports[o.idx].Text = strings.Join(o.lines, "\n")
	}
}

// appendLine adds p to the open report's text, closing the report when a
// bound is reached. s.mu is held.
func (s *Scanner) appendLine(o *openReport, p parsedLine) {
	if p.hasTS {
		o.lastTS, o.hasTS = p.ts, true
	}
	if o.idx < 0 || o.full {
		return
	}
	n := len(p.raw) + 1
	if len(o.lines) >= MaxReportLines || o.bytes+n > MaxReportBytes {
		s.closeReport()
		return
	}
	if s.textBytes+n > MaxTotalBytes {
		o.full = true
		return
	}
	o.lines = append(o.lines, p.raw)
	o.bytes += n
	s.textBytes += n
}

// continueReport decides whether p belongs to the open report. s.mu is held.
func (s *Scanner) continueReport(p parsedLine) {
	o := s.open
	if p.hasTS && o.hasTS && (p.ts-o.lastTS > maxGap || p.ts < o.lastTS-1) {
		s.closeReport() // a new burst, or a new boot
		return
	}
	if o.banner {
		s.appendLine(o, p)
		end := (isBanner(p.msg) && p.msg[0] == '=') || strings.HasPrefix(p.msg, "---[ end ")
		if end && s.open == o {
			s.closeReport()
		}
		return
	}
	if strings.HasPrefix(p.msg, "---[ end ") {
		s.appendLine(o, p)
		if s.open == o {
			s.closeReport()
		}
		return
	}
	if o.sawTrace && !isContinuation(p.msg) {
		s.closeReport()
		return
	}
	if isTraceStart(p.msg) {
		o.sawTrace = true
	}
	s.appendLine(o, p)
}

// parsedLine is a console line split into its printk prefix and message.
type parsedLine struct {
	raw   string  // the line, without "\r" and "\n", bounded
	msg   string  // the message after the timestamp and caller prefixes
	ts    float64 // printk time in seconds, when hasTS
	hasTS bool
}

// parseLine strips the line ending and the "[   12.345678]" timestamp and
// "[  T123]" / "[    C1]" caller prefixes. Text before a timestamp (user
// space output that the kernel line interrupted) is dropped from raw and
// msg; so is text before a lone '\r'.
func parseLine(line string) parsedLine {
	line = strings.TrimRight(line, "\r\n")
	if i := strings.LastIndexByte(line, '\r'); i >= 0 && i+1 < len(line) {
		line = line[i+1:]
	}
	if len(line) > MaxLineBytes {
		line = line[:MaxLineBytes]
	}
	p := parsedLine{raw: line, msg: line}
	for off := 0; off < len(line); {
		i := strings.IndexByte(line[off:], '[')
		if i < 0 {
			break
		}
		i += off
		if end, ts, ok := parseTimestamp(line, i); ok {
			p.raw, p.ts, p.hasTS = line[i:], ts, true
			rest := line[end:]
			if end := parseCaller(rest); end > 0 {
				rest = rest[end:]
			}
			p.msg = strings.TrimPrefix(rest, " ")
			return p
		}
		off = i + 1
		if i == 0 {
			if end := parseCaller(line); end > 0 {
				p.msg = strings.TrimPrefix(line[end:], " ")
				return p
			}
		}
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
	var sec, frac, scale float64 = 0, 0, 1
	d := j
	for j < len(s) && s[j] >= '0' && s[j] <= '9' && j-d < 12 {
		sec = sec*10 + float64(s[j]-'0')
		j++
	}
	if j == d || j >= len(s) || s[j] != '.' {
		return 0, 0, false
	}
	j++
	d = j
	for j < len(s) && s[j] >= '0' && s[j] <= '9' && j-d < 9 {
		frac = frac*10 + float64(s[j]-'0')
		scale *= 10
		j++
	}
	if j == d || j >= len(s) || s[j] != ']' {
		return 0, 0, false
	}
	return j + 1, sec + frac/scale, true
}

// parseCaller parses a "[  T123]" or "[    C1]" prefix at the start of s and
// returns its length, or 0.
func parseCaller(s string) int {
	if len(s) < 4 || s[0] != '[' {
		return 0
	}
	j := 1
	for j < len(s) && s[j] == ' ' {
		j++
	}
	if j >= len(s) || (s[j] != 'T' && s[j] != 'C') {
		return 0
	}
	j++
	d := j
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	if j == d || j >= len(s) || s[j] != ']' {
		return 0
	}
	return j + 1
}

// isBanner reports whether msg is a separator line that opens a report:
// "------------[ cut here ]------------" or a row of '='.
func isBanner(msg string) bool {
	if strings.HasPrefix(msg, "------------[ cut here ]") {
		return true
	}
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

// isTraceStart reports whether msg begins a stack trace.
func isTraceStart(msg string) bool {
	return strings.HasPrefix(msg, "Call Trace:") || strings.HasPrefix(msg, "Call trace:") ||
		strings.HasPrefix(msg, "Backtrace:")
}

// continuations are line prefixes that belong to a report after its stack
// trace: more traces, registers, module lists and end markers.
var continuations = []string{
	"Call Trace:", "Call trace:", "Backtrace:", "<TASK>", "</TASK>", "<IRQ>", "</IRQ>",
	"<NMI>", "</NMI>", "<SOFTIRQ>", "</SOFTIRQ>", "[<", "Code:", "Modules linked in:",
	"---[", "Kernel Offset:", "CPU: ", "Hardware name:", "Workqueue:", "Tainted:",
	"irq event stamp:", "hardirqs last", "softirqs last", "Sending NMI", "NMI backtrace",
	"task:", "rcu: ", "note: ", "Rebooting in", "Dumping ftrace", "Fixing recursive fault",
	"Disabling lock debugging", "Stack:", "Exception stack", "Process ", "PC is at",
	"LR is at", "pstate:", "Mem abort info:", "Data abort info:", "Preemption disabled at:",
	"Showing busy workqueues", "Kernel Offset",
}

// isContinuation reports whether msg, seen after a report's stack trace,
// still belongs to the report.
func isContinuation(msg string) bool {
	if msg == "" {
		return false
	}
	if msg[0] == ' ' || msg[0] == '\t' {
		return true
	}
	if isRegister(msg) {
		return true
	}
	for _, c := range continuations {
		if strings.HasPrefix(msg, c) {
			return true
		}
	}
	return false
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
