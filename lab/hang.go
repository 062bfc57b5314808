package lab

import (
	"strings"
	"sync"
	"time"

	"klab/vm"
)

// watch tracks when the guest last said anything, on the console or the
// agent channel, and can capture console lines for diagnostics.
type watch struct {
	// now is the clock: time.Now, or a fake in tests.
	now func() time.Time

	mu        sync.Mutex // guards the fields below
	last      time.Time
	capturing bool
	captured  []string
	capBytes  int
}

// maxDiagnostics bounds the captured diagnostics.
const maxDiagnostics = 4 << 20

func newWatch() *watch { return newWatchClock(time.Now) }

func newWatchClock(now func() time.Time) *watch { return &watch{now: now, last: now()} }

func (w *watch) touch() {
	w.mu.Lock()
	w.last = w.now()
	w.mu.Unlock()
}

func (w *watch) console(line string) {
	w.mu.Lock()
	w.last = w.now()
	if w.capturing && w.capBytes < maxDiagnostics {
		w.captured = append(w.captured, line)
		w.capBytes += len(line) + 1
	}
	w.mu.Unlock()
}

// silence is how long both channels have been quiet.
func (w *watch) silence() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now().Sub(w.last)
}

func (w *watch) startCapture() {
	w.mu.Lock()
	w.capturing, w.captured, w.capBytes = true, nil, 0
	w.mu.Unlock()
}

// capturedLines returns the lines captured so far.
func (w *watch) capturedLines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.captured...)
}

func (w *watch) stopCapture() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.capturing = false
	lines := w.captured
	w.captured, w.capBytes = nil, 0
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// diagnose asks a guest that looks hung for task dumps (sysrq w and t):
// through the agent when it still reads its channel, else by pressing the
// keys through QMP. It returns the console output and the way used.
func diagnose(m *vm.Machine, a *vm.Agent, w *watch, factor float64) (string, string) {
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) * factor) }
	w.startCapture()
	sawSysrq := func(deadline time.Duration) bool {
		end := time.Now().Add(deadline)
		for time.Now().Before(end) {
			for _, l := range w.capturedLines() {
				if strings.Contains(l, "sysrq: Show") {
					return true
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		return false
	}
	via := "the agent"
	if a == nil || a.Sysrq("wt") != nil || !sawSysrq(scaled(2*time.Second)) {
		via = "QMP send-key"
		_ = m.SendKeys("alt", "sysrq", "w")
		time.Sleep(scaled(200 * time.Millisecond))
		_ = m.SendKeys("alt", "sysrq", "t")
		if !sawSysrq(scaled(2 * time.Second)) {
			via = "nothing (neither the agent nor the keyboard answered)"
		}
	}
	// Collect until the console has been quiet for a second, at most 15 s.
	end := time.Now().Add(scaled(15 * time.Second))
	for time.Now().Before(end) && w.silence() < scaled(time.Second) {
		time.Sleep(100 * time.Millisecond)
	}
	return w.stopCapture(), via
}

// blockedTasks returns up to n lines of the "Show Blocked State" section
// of a task dump (sysrq w), else its first n lines, or fallback when the
// dump is empty.
func blockedTasks(text string, n int, fallback []string) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return fallback
	}
	l := strings.Split(text, "\n")
	for i, line := range l {
		if strings.Contains(line, "sysrq: Show Blocked State") {
			l = l[i:]
			break
		}
	}
	if len(l) > n {
		l = l[:n]
	}
	return l
}
