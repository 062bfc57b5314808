// Package stuck is a FUSE server that misbehaves on purpose, to exercise
// the kernel's request timeouts and teardown. It wraps another Handler
// (normally the passthrough file system) and applies rules to the
// requests they select: never reply, reply after a delay, or reply only
// after the connection was aborted. Requests no rule selects are served by
// the wrapped handler.
package stuck

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"klab/guest/fuse/dispatch"
	"klab/guest/fuse/match"
)

// Action is what a rule does with a request.
type Action string

// Actions.
const (
	// Never keeps the request forever: no reply is ever written.
	Never Action = "never"
	// Delay serves the request normally after Rule.Delay.
	Delay Action = "delay"
	// AfterAbort holds the request until the connection ended, then
	// serves it; the kernel refuses that late reply (ENOENT or ENODEV).
	AfterAbort Action = "after-abort"
)

// Rule is one rule. It marshals as its ParseRule text.
type Rule struct {
	// Select picks the requests.
	Select match.Selector
	// Action is what happens to them.
	Action Action
	// Delay is the wait for Delay.
	Delay time.Duration
}

// String returns r in ParseRule's syntax.
func (r Rule) String() string {
	if r.Action == Delay {
		return fmt.Sprintf("%s=delay:%s", r.Select, r.Delay)
	}
	return fmt.Sprintf("%s=%s", r.Select, r.Action)
}

// MarshalText implements encoding.TextMarshaler.
func (r Rule) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// ParseRule parses "OP[:NAME]=ACTION", ACTION being never, after-abort or
// delay:DURATION; e.g. "lookup:stuck=never", "getattr=delay:5s",
// "*:slow*=after-abort".
func ParseRule(s string) (Rule, error) {
	selS, actS, ok := strings.Cut(s, "=")
	if !ok {
		return Rule{}, fmt.Errorf("stuck rule %q: want OP[:NAME]=never|after-abort|delay:DURATION, e.g. lookup:stuck=never", s)
	}
	sel, err := match.ParseSelector(selS)
	if err != nil {
		return Rule{}, fmt.Errorf("stuck rule %q: %w", s, err)
	}
	r := Rule{Select: sel}
	switch {
	case actS == string(Never):
		r.Action = Never
	case actS == string(AfterAbort):
		r.Action = AfterAbort
	case strings.HasPrefix(actS, "delay:"):
		d, err := time.ParseDuration(strings.TrimPrefix(actS, "delay:"))
		if err != nil || d < 0 {
			return Rule{}, fmt.Errorf("stuck rule %q: delay %q: want a duration such as 500ms or 20s", s, strings.TrimPrefix(actS, "delay:"))
		}
		r.Action, r.Delay = Delay, d
	default:
		return Rule{}, fmt.Errorf("stuck rule %q: action %q: want never, after-abort or delay:DURATION", s, actS)
	}
	return r, nil
}

// Event records one request a rule held.
type Event struct {
	// Rule is the rule that matched.
	Rule Rule `json:"rule"`
	// Op and Unique identify the request; Name is its name, if any.
	Op     string `json:"op"`
	Unique uint64 `json:"unique"`
	Name   string `json:"name,omitempty"`
	// Held is when the request was held.
	Held time.Time `json:"held"`
	// Replied is when a reply was attempted (zero for Never).
	Replied time.Time `json:"replied,omitzero"`
	// ReplyErr is the error of that reply: for AfterAbort, the kernel's
	// answer to a late reply.
	ReplyErr string `json:"reply_err,omitempty"`
}

// Server is the stuck server.
type Server struct {
	inner dispatch.Handler
	namer match.Namer
	rules []Rule

	mu     sync.Mutex // guards events and notify
	events []Event
	notify []chan Event

	late sync.WaitGroup // Delay and AfterAbort goroutines
}

// New returns a Server applying rules before inner. namer names nodes for
// name rules on requests without a name argument; it may be nil.
func New(inner dispatch.Handler, namer match.Namer, rules []Rule) *Server {
	return &Server{inner: inner, namer: namer, rules: rules}
}

// Init passes INIT negotiation to the inner handler.
func (s *Server) Init(in *dispatch.Init) error {
	if x, ok := s.inner.(dispatch.Initer); ok {
		return x.Init(in)
	}
	return nil
}

// Events returns what the rules did so far.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// Held returns a channel that receives every request a rule holds from
// now on (buffered; events that do not fit are dropped).
func (s *Server) Held() <-chan Event {
	ch := make(chan Event, 64)
	s.mu.Lock()
	s.notify = append(s.notify, ch)
	s.mu.Unlock()
	return ch
}

func (s *Server) record(ev Event) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
	for _, ch := range s.notify {
		select {
		case ch <- ev:
		default:
		}
	}
	return len(s.events) - 1
}

func (s *Server) replied(i int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events[i].Replied = time.Now()
	if err != nil {
		s.events[i].ReplyErr = err.Error()
	}
}

// Handle implements dispatch.Handler.
func (s *Server) Handle(r *dispatch.Request) {
	for _, rule := range s.rules {
		if !rule.Select.Match(r, s.namer) {
			continue
		}
		if r.Header.Opcode.NoReply() {
			break
		}
		i := s.record(Event{Rule: rule, Op: r.Header.Opcode.String(), Unique: r.Header.Unique, Name: match.Name(r, s.namer), Held: time.Now()})
		switch rule.Action {
		case Never:
			// Keep r: the transport leaves its buffer to us.
		case Delay:
			s.late.Add(1)
			go func() {
				defer s.late.Done()
				select {
				case <-time.After(rule.Delay):
				case <-r.Conn().Gone():
				}
				s.serveLate(r, i)
			}()
		case AfterAbort:
			s.late.Add(1)
			go func() {
				defer s.late.Done()
				<-r.Conn().Gone()
				s.serveLate(r, i)
			}()
		}
		return
	}
	s.inner.Handle(r)
}

// serveLate serves a held request through the inner handler and records
// how its reply went.
func (s *Server) serveLate(r *dispatch.Request, i int) {
	// r may serve another request as soon as it is replied (the
	// transport may still be dispatching it): learn the outcome from the
	// reply itself.
	replied := false
	r.OnEnd(func(err error) {
		replied = true
		s.replied(i, err)
	})
	s.inner.Handle(r)
	if !replied {
		s.replied(i, nil)
	}
}

// WaitLate waits up to d for held requests that will still be replied
// (Delay, AfterAbort) to be replied, so that their late replies reach the
// device before it is closed. It reports whether they all were.
func (s *Server) WaitLate(d time.Duration) bool {
	done := make(chan struct{})
	go func() { s.late.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
