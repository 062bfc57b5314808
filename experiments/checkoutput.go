package experiments

import (
	"strings"
	"sync"

	"klab/guest/proto"
	"klab/internal/textsafe"
	"klab/results/suite"
)

// Bounds on the output a failed check keeps for the report: its last
// lines, as fstests keeps its diff.
const (
	maxCheckOutputLines = 20
	maxCheckOutputBytes = 2 << 10
)

// outputTail keeps the end of what the guest prints while a check runs
// (stdout and stderr as they come), at most a few times
// maxCheckOutputBytes at any time. It sees every message of the guest's
// steps (lab.BootRequest.OnMessage) and keeps output only between start
// and stop: a check runs alone in its Run call, so what comes then is
// the check's, whatever the guest numbers its steps.
type outputTail struct {
	mu  sync.Mutex // guards on and buf
	on  bool
	buf []byte
}

// start begins keeping output, dropping what was kept before.
func (o *outputTail) start() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.on, o.buf = true, o.buf[:0]
}

// message keeps m's data when m is output and start was called.
func (o *outputTail) message(m *proto.Message) {
	if m.Kind != proto.KindOutput || m.Output == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.on {
		return
	}
	o.buf = append(o.buf, m.Output.Data...)
	if keep := 2 * maxCheckOutputBytes; len(o.buf) > 2*keep {
		o.buf = append(o.buf[:0], o.buf[len(o.buf)-keep:]...)
	}
}

// stop ends keeping output and returns its tail (checkOutput).
func (o *outputTail) stop() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.on = false
	return checkOutput(o.buf)
}

// checkOutput is the tail of a check's output, safe to store and show:
// valid UTF-8 without control characters but newline and tab, at most
// the last maxCheckOutputLines lines and maxCheckOutputBytes bytes
// (from a line start when one is in reach), without trailing empty
// lines.
func checkOutput(b []byte) string {
	s := strings.ToValidUTF8(string(b), "?")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = suite.Tail(strings.TrimRight(textsafe.Clean(s), " \t\n"), maxCheckOutputBytes)
	if lines := strings.Split(s, "\n"); len(lines) > maxCheckOutputLines {
		s = strings.Join(lines[len(lines)-maxCheckOutputLines:], "\n")
	}
	return strings.TrimLeft(s, "\n")
}
