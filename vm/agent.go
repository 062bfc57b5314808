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
	msgs   chan queued // closed when the channel ends
	budget *byteBudget // bounds the bytes in msgs
	virtio bool

	wmu    sync.Mutex // serialises send's deadline and write
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
	if err := a.send(&proto.Message{Kind: proto.KindStep, Step: &s}); err != nil {
		return nil, fmt.Errorf("send step: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case q, ok := <-a.msgs:
			msg := a.take(q)
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
	if err := a.send(&proto.Message{Kind: proto.KindShutdown}); err != nil {
		return fmt.Errorf("send shutdown: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return errors.New("agent did not acknowledge shutdown")
		case q, ok := <-a.msgs:
			if msg := a.take(q); !ok || msg.Kind == proto.KindBye {
				return nil
			}
		}
	}
}

// NextID reserves a step ID, for a caller that must know it before Run
// sends the step (to send its Input).
func (a *Agent) NextID() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nextID++
	return a.nextID
}

// Input sends a chunk of standard input for the running step id (eof
// ends it). Each call is bounded by WriteTimeout like every send.
func (a *Agent) Input(id int, data []byte, eof bool) error {
	return a.send(&proto.Message{Kind: proto.KindInput, Input: &proto.Input{Step: id, Data: data, EOF: eof}})
}

// Sysrq asks the agent to trigger the given sysrq keys at once, out of
// band: it works while a step runs, as long as the agent still reads.
func (a *Agent) Sysrq(keys string) error {
	return a.send(&proto.Message{Kind: proto.KindSysrq, Sysrq: keys})
}

// maxQueuedBytes bounds the agent messages read from the guest but not yet
// handled, in bytes (a message is at most proto.MaxLine).
const maxQueuedBytes = 8 << 20

// queued is a message read from the agent, with its size on the wire.
type queued struct {
	msg *proto.Message
	n   int
}

// take returns q's message and gives its bytes back to the budget.
func (a *Agent) take(q queued) *proto.Message {
	if q.msg != nil {
		a.budget.release(q.n)
	}
	return q.msg
}

// byteBudget counts bytes held, up to max; acquire waits for room.
type byteBudget struct {
	mu     sync.Mutex
	cond   *sync.Cond
	used   int
	max    int
	closed bool
}

func newByteBudget(max int) *byteBudget {
	b := &byteBudget{max: max}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// acquire takes n bytes, waiting while they do not fit (one message
// always fits when nothing is held). It returns false once closed.
func (b *byteBudget) acquire(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.closed && b.used > 0 && b.used+n > b.max {
		b.cond.Wait()
	}
	if b.closed {
		return false
	}
	b.used += n
	return true
}

// release gives n bytes back.
func (b *byteBudget) release(n int) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

// close wakes and fails every acquire, now and later.
func (b *byteBudget) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
}

// WriteTimeout bounds one message to the agent: a guest that stops
// reading cannot block klab (nor, behind the encoder's lock, the hang
// handler's sysrq request) for longer.
var WriteTimeout = 30 * time.Second

// send writes m to the agent within WriteTimeout.
func (a *Agent) send(m *proto.Message) error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if err := a.conn.SetWriteDeadline(time.Now().Add(WriteTimeout)); err != nil {
		return err
	}
	return a.enc.Encode(m)
}
