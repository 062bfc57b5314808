package splat

import (
	"bytes"
	"strings"
	"sync"
)

// Scanner finds reports in console lines. Feed it with Line or Write (it is
// an io.WriteCloser); it is safe for concurrent use.
//
// A report is known at its header line (Line returns it, OnReport
// callbacks get it) with a provisional title taken from that line alone.
// It is complete, with its final title, frames and Corrupted flag, when it
// ends (OnDone callbacks get it) and in Reports.
type Scanner struct {
	mu      sync.Mutex     // guards every field below
	onStart []func(Report) // OnReport callbacks
	onDone  []func(Report) // OnDone callbacks
	lineNo  int            // lines seen
	// kernelLines counts the lines taken as kernel output (not user
	// space); the ring numbers lines by it.
	kernelLines int
	tsLines     int         // lines seen with a printk timestamp
	reports     []Report    // kept reports; the open one's entry is provisional
	dropped     int         // reports not kept (MaxReports)
	textBytes   int         // total Text bytes of kept reports
	open        *openReport // the report still collecting lines, or nil
	// parent is the report that the open panic report's lines belong to
	// as well: old kernels print a WARNING's stack from panic()
	// (panic_on_warn), after the panic's header.
	parent *openReport
	// bootLine is the number of the first line of a machine's boot
	// sequence (firmware, decompressor), counted in non-empty lines, or
	// 0 until one is seen; nonEmpty counts them.
	bootLine, nonEmpty int
	// held is the last ended report while a panic may still follow that
	// it caused (which makes it Fatal); OnDone gets it when that can no
	// longer happen.
	held    *heldReport
	ring    lineRing // recent lines that belong to no report
	pending []byte   // Write's partial line
	// overflow is set when pending reached MaxLineBytes: the rest of the
	// line is dropped.
	overflow bool
	// started and done are the reports to pass to the callbacks once
	// the lock is released.
	started, done []Report
}

// openReport is a report whose lines are still being collected.
type openReport struct {
	idx         int      // index in Scanner.reports, or -1 when not kept
	h           header   // its header
	r           Report   // Type, Line, Time, Fatal so far
	lines       []string // its lines without printk prefixes
	headerAt    int      // the index of the header in lines
	bytes       int      // bytes of lines, with newlines
	ctx         string   // the header's caller context ("T123"), or ""
	lastTS      float64  // printk time of the last line, when hasTS
	hasTS       bool     // lastTS is set
	sawTrace    bool     // a "Call Trace:" line has been seen
	inTask      bool     // inside <TASK> ... </TASK>
	inFrames    bool     // its last line started a call trace or was a frame
	noFrame     bool     // its call trace has started, and no frame came yet
	wantOops    bool     // an "Oops: ... [#N]" line may still be part of it
	nmi         bool     // it holds NMI backtraces of other CPUs
	intruders   int      // foreign lines in a row inside its call trace
	interleaved bool     // its call trace was interrupted by other output
	cutByOther  bool     // another task's report header ended it
	ended       bool     // its end marker was seen
}

// heldReport is an ended report that a later panic may still make fatal.
type heldReport struct {
	r     Report
	idx   int // index in Scanner.reports, or -1
	until int // the last line at which a panic counts
}

// tsTrust is how many timestamped lines make the scanner ignore lines
// without a timestamp: once the kernel is known to print times, an untimed
// line is user space writing to the console.
const tsTrust = 8

// maxGap is the largest jump in printk time, in seconds, between two lines
// of one report. One report is printed in one burst.
const maxGap = 10

// oopsWindow is how many lines after a BUG header its Oops line may come.
const oopsWindow = 40

// maxIntruders is how many foreign lines in a row a call trace may hold
// before the report is taken as cut off.
const maxIntruders = 8

// NewScanner returns an empty Scanner.
func NewScanner() *Scanner {
	return &Scanner{}
}

// OnReport registers f to be called with each report as it starts: Text
// holds its first lines and Title is provisional, taken from the header
// line alone. f is called without the scanner's lock held, after the Line
// or Write call that found the report; reports found by one call are
// passed in order.
func (s *Scanner) OnReport(f func(Report)) {
	s.mu.Lock()
	s.onStart = append(s.onStart, f)
	s.mu.Unlock()
}

// OnDone registers f to be called with each report once it is complete,
// with its final title, text and frames, in console order. That is when
// the report has ended and no later panic can still be blamed on it, or
// at Close. f is called without the scanner's lock held. Reports past
// MaxReports are passed to f too.
func (s *Scanner) OnDone(f func(Report)) {
	s.mu.Lock()
	s.onDone = append(s.onDone, f)
	s.mu.Unlock()
}

// Line feeds one console line (with or without its "\n" or "\r\n") and
// returns the report that starts at this line, or nil. A panic is thus known
// as soon as its first line is seen. The returned report's Text holds only
// its first lines and its Title is provisional; Reports has the rest. A
// report past MaxReports is returned too, though not kept.
func (s *Scanner) Line(line string) *Report {
	s.mu.Lock()
	r := s.line(line)
	s.unlockAndNotify()
	return r
}

// Write feeds console output. It splits p into lines, keeping a partial
// last line for the next call, and truncates lines to MaxLineBytes. It
// never fails.
func (s *Scanner) Write(p []byte) (int, error) {
	n := len(p)
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
		s.line(line)
	}
	s.unlockAndNotify()
	return n, nil
}

// unlockAndNotify releases s.mu and then calls the callbacks for the
// reports that started and ended meanwhile.
func (s *Scanner) unlockAndNotify() {
	started, done := s.started, s.done
	s.started, s.done = nil, nil
	onStart, onDone := s.onStart, s.onDone
	s.mu.Unlock()
	for _, r := range started {
		for _, f := range onStart {
			f(r)
		}
	}
	for _, r := range done {
		for _, f := range onDone {
			f(r)
		}
	}
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
// line, and returns the report that starts there, or nil.
func (s *Scanner) Flush() *Report {
	s.mu.Lock()
	r := s.flush()
	s.unlockAndNotify()
	return r
}

func (s *Scanner) flush() *Report {
	if len(s.pending) == 0 && !s.overflow {
		return nil
	}
	line := string(s.pending)
	s.pending = s.pending[:0]
	s.overflow = false
	return s.line(line)
}

// Close tells the scanner that the console has ended: it feeds the partial
// line, ends the open report (a report cut off by the end is Corrupted)
// and passes the last reports to OnDone. It never fails.
func (s *Scanner) Close() error {
	s.mu.Lock()
	s.flush()
	s.closeReport(false)
	s.release()
	s.unlockAndNotify()
	return nil
}

// Reports returns a copy of the reports found so far, in console order. A
// report still being printed is analysed as if the console ended there:
// until it ends, it may be Corrupted (cut off).
func (s *Scanner) Reports() []Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Report, len(s.reports))
	copy(out, s.reports)
	if o := s.open; o != nil && o.idx >= 0 {
		out[o.idx] = o.view(false)
	}
	if o := s.parent; o != nil && o.idx >= 0 {
		out[o.idx] = o.view(false)
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

// line handles one line and returns the report that starts there, if any.
// s.mu is held.
func (s *Scanner) line(raw string) *Report {
	s.lineNo++
	p := parseLine(raw)
	if p.hasTS {
		s.tsLines++
	} else if s.tsLines >= tsTrust && !isRebootLine(p.msg) {
		return nil // user space output
	}
	if s.held != nil && s.lineNo > s.held.until {
		s.release()
	}
	s.kernelLines++
	if p.msg != "" {
		s.nonEmpty++
		if s.bootLine == 0 && s.tsLines == 0 && holdsBootSequence(p.msg) {
			s.bootLine = s.nonEmpty
		}
	}
	o := s.open
	// With CONFIG_PRINTK_CALLER, a line from another task or CPU is not
	// part of the open report (NMI backtraces of other CPUs are).
	foreign := o != nil && o.ctx != "" && p.ctx != "" && p.ctx != o.ctx && !(o.nmi && p.ctx[0] == 'C')
	h, found := header{}, false
	if p.msg != "" {
		h, found = detect(p.msg)
	}
	if found && (h.reboot && !s.rebooted() || h.aside && o != nil && !foreign && (o.inTask || o.inFrames)) {
		found = false
	}
	if found && h.oopsLine && o != nil && !foreign && o.wantOops && s.lineNo-o.r.Line <= oopsWindow {
		// "Oops: 0000 [#1] ..." after "BUG: kernel NULL pointer
		// dereference" or "kernel BUG at" is part of that report.
		o.wantOops = false
		s.appendLine(o, p)
		return nil
	}
	if found && h.leak && o != nil && !foreign && o.h.leak && len(o.lines) == 1 &&
		strings.HasPrefix(o.lines[0], "BUG: memory leak") {
		// syzkaller's "BUG: memory leak" before kmemleak's object.
		s.appendLine(o, p)
		return nil
	}
	if !found {
		if o != nil && !foreign {
			s.continueReport(o, p)
		} else {
			s.ring.push(p, s.kernelLines)
		}
		return nil
	}
	if o != nil && foreign {
		o.cutByOther = true
	}
	if h.typ == TypePanic {
		s.markFatal(h)
		if o != nil && !foreign && !h.reboot && o.r.Type != TypePanic && !o.sawTrace {
			// panic() is about to print the stack of the report it
			// follows: the report goes on with the panic's lines.
			s.open, s.parent = nil, o
			return s.startReport(h, p)
		}
	}
	s.closeReport(true)
	return s.startReport(h, p)
}

// rebooted reports whether a "Booting the kernel." line now means that the
// machine rebooted: the kernel printed before, or something other than
// the boot sequence did.
func (s *Scanner) rebooted() bool {
	return s.tsLines > 0 || s.bootLine > 1
}

// isRebootLine reports whether msg is the decompressor's last line, which
// has no timestamp.
func isRebootLine(msg string) bool {
	return len(msg) >= 19 && msg[0] == 'B' && strings.TrimSpace(msg) == "Booting the kernel."
}

func holdsBootSequence(msg string) bool {
	for _, b := range bootSequence {
		if strings.HasPrefix(msg, b) {
			return true
		}
	}
	return false
}

// markFatal marks the report that the panic with header h follows from as
// fatal: the report still open, or the held one when the panic's reason
// says that an earlier splat caused it. s.mu is held.
func (s *Scanner) markFatal(h header) {
	switch {
	case s.open != nil && s.open.r.Type != TypePanic:
		s.open.r.Fatal = true
	case s.held != nil && consequence(h.title):
		s.held.r.Fatal = true
		if s.held.idx >= 0 {
			s.reports[s.held.idx].Fatal = true
		}
	}
}

// consequences are words in a panic's reason that say that an earlier splat
// caused it.
var consequences = []string{
	"fatal exception", "panic_on_warn", "panic_on_oops", "hung_task", "hung tasks",
	"softlockup", "lockup", "attempted to kill", "aiee", "rcu stall", "oops", "kasan",
	"ubsan", "kfence", "kmsan", "panic_on_", "hardlockup", "watchdog",
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
	s.release()
	o := &openReport{
		idx:      -1,
		h:        h,
		ctx:      p.ctx,
		wantOops: h.wantOops,
		r: Report{
			Type:   h.typ,
			Title:  titleOr(h.provisional(), h.typ),
			Line:   s.lineNo,
			Frames: []string{},
			Fatal:  h.typ == TypePanic,
		},
	}
	if p.hasTS {
		o.r.Time = p.ts
	}
	for _, pre := range s.ring.prefix(s.kernelLines) {
		s.appendLine(o, pre)
	}
	s.ring.reset()
	o.headerAt = len(o.lines)
	s.appendLine(o, p)
	r := o.r
	r.Text = strings.Join(o.lines, "\n")
	if len(s.reports) < MaxReports {
		o.idx = len(s.reports)
		kept := r
		kept.Text = p.msg
		s.reports = append(s.reports, kept)
		s.textBytes += len(kept.Text)
	} else {
		s.dropped++
	}
	s.open = o
	s.started = append(s.started, r)
	return &r
}

// closeReport ends the open report, if any. byHeader says that a new
// report's header ends it; otherwise the console did. s.mu is held.
func (s *Scanner) closeReport(byHeader bool) {
	o := s.open
	if o == nil {
		return
	}
	s.open = nil
	if par := s.parent; par != nil {
		// The report whose stack the panic printed ends with it, and
		// is complete before it.
		s.parent = nil
		par.sawTrace, par.inTask, par.ended = o.sawTrace, o.inTask, o.ended
		par.interleaved = par.interleaved || o.interleaved
		s.done = append(s.done, s.keep(par, par.view(byHeader)))
	}
	r := s.keep(o, o.view(byHeader))
	s.release()
	if r.Type == TypePanic {
		s.done = append(s.done, r)
		return
	}
	s.held = &heldReport{r: r, idx: o.idx, until: s.lineNo + MaxReportLines}
}

// keep stores r, the final form of o, in s.reports when o is kept there,
// within MaxTotalBytes, and returns it as stored. s.mu is held.
func (s *Scanner) keep(o *openReport, r Report) Report {
	if o.idx < 0 {
		return r
	}
	s.textBytes -= len(s.reports[o.idx].Text)
	if s.textBytes+len(r.Text) > MaxTotalBytes {
		r.Text = o.lines[o.headerAt]
	}
	s.textBytes += len(r.Text)
	s.reports[o.idx] = r
	return r
}

// release passes the held report to OnDone. s.mu is held.
func (s *Scanner) release() {
	if s.held != nil {
		s.done = append(s.done, s.held.r)
		s.held = nil
	}
}

// view analyses o as if it ended now: byHeader says that a new report's
// header ends it, else the console did (or Reports looks at it). A report
// that has not reached its end is Corrupted when the end of its banner or
// of its call trace is missing.
func (o *openReport) view(byHeader bool) Report {
	r := o.r
	r.Text = strings.Join(o.lines, "\n")
	a := analyse(o.h, o.lines, o.headerAt, o.cutByOther)
	r.Title, r.Frames, r.Guilty, r.CallTrace = a.title, a.frames, a.guilty, a.callTrace
	reason := ""
	switch {
	case o.interleaved:
		reason = "interleaved with other output"
	case !o.ended && o.h.banner:
		reason = "cut off before its closing line"
	case !o.ended && o.inTask:
		reason = "cut off in its call trace"
	case !o.ended && byHeader && !o.sawTrace && o.h.rec != nil && !o.h.leak && o.r.Type != TypePanic:
		reason = "cut off by another report before its call trace"
	case a.corrupted != "":
		reason = a.corrupted
	}
	r.Corrupted, r.CorruptedReason = reason != "", reason
	return r
}

// appendLine adds p to the report's lines, ending it when a bound is
// reached. s.mu is held.
func (s *Scanner) appendLine(o *openReport, p parsedLine) {
	if p.hasTS {
		o.lastTS, o.hasTS = p.ts, true
	}
	n := len(p.msg) + 1
	if par := s.parent; par != nil && o == s.open && len(par.lines) < MaxReportLines && par.bytes+n <= MaxReportBytes {
		par.lines = append(par.lines, p.msg)
		par.bytes += n
	}
	if len(o.lines) >= MaxReportLines || o.bytes+n > MaxReportBytes {
		o.ended = true // truncated, not corrupted
		if s.open == o {
			s.closeReport(false)
		}
		return
	}
	o.lines = append(o.lines, p.msg)
	o.bytes += n
}

// continueReport decides whether p belongs to the open report o. s.mu is
// held.
func (s *Scanner) continueReport(o *openReport, p parsedLine) {
	msg := p.msg
	if p.hasTS && o.hasTS && (p.ts-o.lastTS > maxGap || p.ts < o.lastTS-1) {
		s.closeReport(false) // a new burst, or a new boot
		s.ring.push(p, s.kernelLines)
		return
	}
	if strings.HasPrefix(msg, "Sending NMI") || strings.HasPrefix(msg, "NMI backtrace") {
		o.nmi = true
	}
	end := strings.HasPrefix(msg, "---[ end ")
	if o.h.banner {
		s.appendLine(o, p)
		if (isRule(msg) || end) && s.open == o {
			o.ended = true
			s.closeReport(false)
		}
		return
	}
	if end {
		s.appendLine(o, p)
		if s.open == o {
			o.ended = true
			s.closeReport(false)
		}
		return
	}
	if isBanner(msg) {
		// A banner opens the next report.
		s.closeReport(false)
		s.ring.push(p, s.kernelLines)
		return
	}
	if o.h.leak {
		m := strings.TrimPrefix(msg, "kmemleak: ")
		if m == "" || (m[0] != ' ' && m[0] != '\t') {
			s.closeReport(false)
			s.ring.push(p, s.kernelLines)
			return
		}
		s.appendLine(o, p)
		return
	}
	if o.sawTrace && !isContinuation(msg) {
		limit := maxIntruders
		if o.noFrame {
			// Other output is often flushed just as the trace begins.
			limit *= 4
		}
		if (o.inTask || o.inFrames) && o.intruders < limit {
			// Other output inside the call trace: skip it, and see
			// whether the trace goes on.
			o.intruders++
			s.ring.push(p, s.kernelLines)
			return
		}
		s.closeReport(false)
		s.ring.push(p, s.kernelLines)
		return
	}
	if o.intruders > 0 {
		o.intruders = 0
		o.interleaved = true
	}
	if isTraceStart(msg) {
		o.sawTrace, o.noFrame = true, true
	} else if _, _, ok := parseFrame(msg); ok {
		o.noFrame = false
	}
	switch strings.TrimSpace(msg) {
	case "<TASK>":
		o.inTask = true
	case "</TASK>":
		o.inTask = false
	}
	o.inFrames = o.sawTrace && isFrameLine(msg)
	s.appendLine(o, p)
}

// isFrameLine reports whether msg is part of a call trace's list of
// frames: its start, a frame, or a marker.
func isFrameLine(msg string) bool {
	if isTraceStart(msg) || isUnknownFrame(msg) || strings.HasPrefix(msg, "Exception stack(") {
		return true
	}
	if _, _, ok := parseFrame(msg); ok {
		return true
	}
	irq, open, ok := traceMarker(msg)
	return ok && (irq || open) // "</TASK>" ends the trace
}

// lineRing holds the last few lines that belong to no report: the banner
// and message lines that come before a report's header.
type lineRing struct {
	lines [4]parsedLine
	nos   [4]int // their line numbers
	n     int    // how many are held
	next  int    // where the next one goes
}

func (r *lineRing) push(p parsedLine, no int) {
	r.lines[r.next], r.nos[r.next] = p, no
	r.next = (r.next + 1) % len(r.lines)
	r.n = min(r.n+1, len(r.lines))
}

func (r *lineRing) reset() { r.n = 0 }

// prefix returns the lines just before line no that belong to the report
// starting there: a "cut here" banner and the message lines after it, or
// a row of '='. A data corruption message printed just before the banner
// ("list_add corruption. ...") comes along.
func (r *lineRing) prefix(no int) []parsedLine {
	var rev []parsedLine
	found := false
	for k := 0; k < r.n; k++ {
		i := (r.next - 1 - k + 2*len(r.lines)) % len(r.lines)
		if r.nos[i] != no-1-k {
			break // not contiguous
		}
		l := r.lines[i]
		rev = append(rev, l)
		if isRule(l.msg) {
			found = true
			break
		}
		if strings.HasPrefix(l.msg, cutHere) {
			found = true
			if k+1 < r.n {
				j := (i - 1 + len(r.lines)) % len(r.lines)
				if r.nos[j] == no-2-k && isCorruptionMessage(r.lines[j].msg) {
					rev = append(rev, r.lines[j])
				}
			}
			break
		}
	}
	if !found {
		return nil
	}
	out := make([]parsedLine, len(rev))
	for i, l := range rev {
		out[len(rev)-1-i] = l
	}
	return out
}

// isCorruptionMessage reports whether msg is what CHECK_DATA_CORRUPTION
// prints before its BUG or WARNING.
func isCorruptionMessage(msg string) bool {
	for _, p := range []string{"list_add corruption", "list_del corruption", "list_add_rcu corruption",
		"list_del_rcu corruption", "list_replace corruption", "refcount_t: "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
