// Package intr is a FUSE server for exercising FUSE_INTERRUPT. It wraps
// another Handler (normally the passthrough file system) and holds the
// requests its rules select, as a slow server would: a held request is
// served normally after its hold time, or ended with EINTR as soon as the
// Conn cancels it. Whether and when the Conn cancels is its
// dispatch.InterruptPolicy (ignore, EAGAIN N times, ENOSYS, cancel), so
// that the same server shows every kernel behaviour.
//
// Held is a handshake for test clients: it reports each request the server
// holds, so that the client signals a thread only once the server has read
// its request (the kernel sends an INTERRUPT only for requests already
// read).
package intr

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"klab/guest/fuse/dispatch"
	"klab/guest/fuse/match"
)

// Hold is one rule: requests it selects are held for For.
type Hold struct {
	// Select picks the requests.
	Select match.Selector
	// For is how long a request is held before it is served.
	For time.Duration
}

// String returns h in ParseHold's syntax.
func (h Hold) String() string { return fmt.Sprintf("%s=%s", h.Select, h.For) }

// ParseHold parses "OP[:NAME]=DURATION", e.g. "lookup:held*=2s".
func ParseHold(s string) (Hold, error) {
	selS, d, ok := strings.Cut(s, "=")
	if !ok {
		return Hold{}, fmt.Errorf("hold rule %q: want OP[:NAME]=DURATION, e.g. lookup:held*=2s", s)
	}
	sel, err := match.ParseSelector(selS)
	if err != nil {
		return Hold{}, fmt.Errorf("hold rule %q: %w", s, err)
	}
	dur, err := time.ParseDuration(d)
	if err != nil || dur < 0 {
		return Hold{}, fmt.Errorf("hold rule %q: %q is not a duration such as 2s", s, d)
	}
	return Hold{Select: sel, For: dur}, nil
}

// Held describes one held request.
type Held struct {
	// Unique, Op and Name identify the request.
	Unique uint64 `json:"unique"`
	Op     string `json:"op"`
	Name   string `json:"name,omitempty"`
	// PID is the calling process (thread group) from the request header.
	PID uint32 `json:"pid"`
	// At is when the server started holding it.
	At time.Time `json:"at"`
}

// Outcome is how a held request ended.
type Outcome struct {
	Held
	// Interrupts is how many INTERRUPTs the request received.
	Interrupts int `json:"interrupts"`
	// Cancelled is true when it ended with EINTR because the Conn
	// cancelled it.
	Cancelled bool `json:"cancelled"`
	// Duration is how long it was held.
	Duration time.Duration `json:"duration_ns"`
}

// Server is the interrupt server.
type Server struct {
	inner dispatch.Handler
	namer match.Namer
	holds []Hold

	mu       sync.Mutex // guards outcomes and watchers
	outcomes []Outcome
	watchers []chan Held

	wg sync.WaitGroup
}

// New returns a Server holding what holds select before serving it with
// inner. namer names nodes for rules on requests without a name argument;
// it may be nil.
func New(inner dispatch.Handler, namer match.Namer, holds []Hold) *Server {
	return &Server{inner: inner, namer: namer, holds: holds}
}

// Init passes INIT negotiation to the inner handler.
func (s *Server) Init(in *dispatch.Init) error {
	if x, ok := s.inner.(dispatch.Initer); ok {
		return x.Init(in)
	}
	return nil
}

// Held returns a channel that receives each request held from now on
// (buffered; events that do not fit are dropped).
func (s *Server) Held() <-chan Held {
	ch := make(chan Held, 64)
	s.mu.Lock()
	s.watchers = append(s.watchers, ch)
	s.mu.Unlock()
	return ch
}

// Outcomes returns how the held requests that ended so far ended.
func (s *Server) Outcomes() []Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Outcome(nil), s.outcomes...)
}

// Handle implements dispatch.Handler.
func (s *Server) Handle(r *dispatch.Request) {
	if r.Header.Opcode.NoReply() {
		s.inner.Handle(r)
		return
	}
	for _, h := range s.holds {
		if !h.Select.Match(r, s.namer) {
			continue
		}
		held := Held{Unique: r.Header.Unique, Op: r.Header.Opcode.String(), Name: match.Name(r, s.namer), PID: r.Header.PID, At: time.Now()}
		intr := r.Interrupted()
		s.mu.Lock()
		for _, w := range s.watchers {
			select {
			case w <- held:
			default:
			}
		}
		s.mu.Unlock()
		s.wg.Add(1)
		// Hold asynchronously, so that the transport keeps reading (and
		// can receive the INTERRUPT for r).
		go func() {
			defer s.wg.Done()
			t := time.NewTimer(h.For)
			defer t.Stop()
			o := Outcome{Held: held}
			// Count r's interrupts as it ends: once replied, r may serve
			// another request.
			r.OnEnd(func(error) { o.Interrupts = r.Interrupts() })
			select {
			case <-t.C:
				s.inner.Handle(r)
			case <-intr:
				o.Cancelled = true
				_ = r.Reply(syscall.EINTR, nil)
			case <-r.Conn().Gone():
				r.Drop()
			}
			o.Duration = time.Since(held.At)
			s.mu.Lock()
			s.outcomes = append(s.outcomes, o)
			s.mu.Unlock()
		}()
		return
	}
	s.inner.Handle(r)
}

// WaitLate waits up to d for held requests to end.
func (s *Server) WaitLate(d time.Duration) bool {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
