package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"klab/guest/proto"
)

// Agent is the host's end of one guest agent's channel.
type Agent struct {
	// Hello is what the agent said first.
	Hello *proto.Hello
	// HelloAt is when the Hello arrived.
	HelloAt time.Time

	conn   net.Conn
	enc    *proto.Encoder
	msgs   chan *proto.Message // closed when the channel ends
	virtio bool

	mu     sync.Mutex // guards err and nextID
	err    error
	nextID int
}

// ErrAgentGone is returned when the channel closes before a step is done.
var ErrAgentGone = errors.New("agent channel closed before the step was done")

// Channel names the host side of the channel the agent chose.
func (a *Agent) Channel() string {
	if a.virtio {
		return "virtio-serial"
	}
	return "ttyS1"
}

func (a *Agent) setErr(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
}

// StepHandler receives the messages of a running step: Output and Log.
type StepHandler func(*proto.Message)

// Run sends step s and waits for its Done. Messages other than Done are
// passed to h as they come. A closed channel is ErrAgentGone; ctx ending
// returns ctx.Err() (the guest keeps running the step). A step keeps the
// ID its caller gave it, so that results are matched to the caller's
// steps by ID; a step without one (ID 0) gets the next free ID.
func (a *Agent) Run(ctx context.Context, s proto.Step, h StepHandler) (*proto.Done, error) {
	a.mu.Lock()
	if s.ID <= 0 {
		a.nextID++
		s.ID = a.nextID
	} else if s.ID > a.nextID {
		a.nextID = s.ID
	}
	a.mu.Unlock()
	if err := a.enc.Encode(&proto.Message{Kind: proto.KindStep, Step: &s}); err != nil {
		return nil, fmt.Errorf("send step: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case msg, ok := <-a.msgs:
			if !ok {
				a.mu.Lock()
				err := a.err
				a.mu.Unlock()
				if err != nil {
					return nil, fmt.Errorf("%w: %v", ErrAgentGone, err)
				}
				return nil, ErrAgentGone
			}
			if msg.Kind == proto.KindDone && msg.Done.Step == s.ID {
				return msg.Done, nil
			}
			if h != nil {
				h(msg)
			}
		}
	}
}

// Shutdown asks the agent to power the guest down and waits up to timeout
// for its Bye. The caller then waits for QEMU to exit.
func (a *Agent) Shutdown(timeout time.Duration) error {
	if err := a.enc.Encode(&proto.Message{Kind: proto.KindShutdown}); err != nil {
		return fmt.Errorf("send shutdown: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return errors.New("agent did not acknowledge shutdown")
		case msg, ok := <-a.msgs:
			if !ok || msg.Kind == proto.KindBye {
				return nil
			}
		}
	}
}

// Sysrq asks the agent to trigger the given sysrq keys at once, out of
// band: it works while a step runs, as long as the agent still reads.
func (a *Agent) Sysrq(keys string) error {
	return a.enc.Encode(&proto.Message{Kind: proto.KindSysrq, Sysrq: keys})
}
