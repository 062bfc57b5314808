package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
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
	// channel names the host side of the channel (Channel).
	channel string

	wmu    sync.Mutex // serialises send's deadline and write
	mu     sync.Mutex // guards err and nextID
	err    error
	nextID int
}

// ErrAgentGone is returned when the channel closes before a step is done.
var ErrAgentGone = errors.New("agent channel closed before the step was done")

// ProtocolError is a guest that broke the agent protocol: a line longer
// than proto.MaxLine, one that is not a valid message (bad JSON, a number
// out of range, an unknown kind or version, a payload missing), or a
// message only the host sends. klab's own agent never sends one, so
// nothing the guest sends after it is trusted: the channel is closed at
// once, and the run ends as a failure of the guest.
type ProtocolError struct {
	// Channel is the channel's name, as Agent.Channel gives it.
	Channel string
	// Messages is how many valid messages came before.
	Messages int
	// Err says what was wrong.
	Err error
}

// maxProtocolDetail bounds how much of Err the message quotes: a JSON
// error may quote a guest's number literal, of any length. The start and
// the end are kept (the end names the field).
const maxProtocolDetail = 200

func (e *ProtocolError) Error() string {
	detail := e.Err.Error()
	if len(detail) > maxProtocolDetail {
		detail = strings.ToValidUTF8(detail[:maxProtocolDetail/2]+"..."+detail[len(detail)-maxProtocolDetail/2:], "")
	}
	return fmt.Sprintf("the guest broke the agent protocol on %s after %d good message(s): %s", e.Channel, e.Messages, detail)
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// Err returns what ended the channel: a *ProtocolError, a read error, or
// nil while it is open or after a clean end.
func (a *Agent) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Channel names the host side of the channel the agent chose.
func (a *Agent) Channel() string { return a.channel }

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
	return a.RunThen(ctx, s, h, nil)
}

// RunThen is Run calling sent once the step is on its way to the agent:
// what belongs to the step (its standard input) must not overtake it.
func (a *Agent) RunThen(ctx context.Context, s proto.Step, h StepHandler, sent func()) (*proto.Done, error) {
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
	if sent != nil {
		sent()
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case q, ok := <-a.msgs:
			msg := a.take(q)
			if !ok {
				if err := a.Err(); err != nil {
					return nil, fmt.Errorf("%w: %w", ErrAgentGone, err)
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
// for its Bye. The caller then waits for QEMU to exit. A channel that
// ends on a *ProtocolError returns it: the guest misbehaved after its
// last step.
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
				var pe *ProtocolError
				if errors.As(a.Err(), &pe) {
					return pe
				}
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

// guestKinds are the kinds a guest may send.
var guestKinds = map[proto.Kind]bool{
	proto.KindHello: true, proto.KindOutput: true, proto.KindDone: true,
	proto.KindLog: true, proto.KindSample: true, proto.KindBye: true,
	proto.KindTest: true,
}

// checkGuest checks what proto's Validate leaves to the receiver: that a
// guest sends only guest kinds, and output on stdout or stderr.
func checkGuest(m *proto.Message) error {
	if !guestKinds[m.Kind] {
		return fmt.Errorf("a guest does not send %q messages", m.Kind)
	}
	if m.Kind == proto.KindOutput && m.Output.Stream != proto.Stdout && m.Output.Stream != proto.Stderr {
		return fmt.Errorf("output on stream %q, want stdout or stderr", m.Output.Stream)
	}
	return nil
}

// newAgent returns the host's end of an agent channel on conn.
func newAgent(conn net.Conn, virtio bool) *Agent {
	name := "ttyS1"
	if virtio {
		name = "virtio-serial"
	}
	return newAgentOn(conn, name)
}

// newAgentOn returns the host's end of the agent channel conn, called
// channel.
func newAgentOn(conn net.Conn, channel string) *Agent {
	return &Agent{conn: conn, enc: proto.NewEncoder(conn), msgs: make(chan queued, 256), channel: channel, budget: newByteBudget(maxQueuedBytes)}
}

// ConnectAgent is the host's end of an agent that talks over conn without
// a VM (an agent in a child process on the host): it waits for the
// agent's Hello until ctx ends, and returns the Agent once it came. The
// channel is read as a guest's: a *ProtocolError ends it. channel names
// it in messages. Closing conn ends the Agent.
func ConnectAgent(ctx context.Context, conn net.Conn, channel string) (*Agent, error) {
	a := newAgentOn(conn, channel)
	ready := make(chan struct{})
	bad := make(chan error, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		a.read(func(*Agent) bool { close(ready); return true }, func(err error) { bad <- err })
	}()
	select {
	case <-ready:
		return a, nil
	case err := <-bad:
		return nil, err
	case <-ended:
		select {
		case err := <-bad:
			return nil, err
		default:
			return nil, fmt.Errorf("the agent on %s ended before its hello", channel)
		}
	case <-ctx.Done():
		a.budget.close()
		return nil, ctx.Err()
	}
}

// readAgent reads one agent channel until it ends, QEMU exits, or the
// guest breaks the protocol (a *ProtocolError, which also goes to
// m.agentBad when it came before the Hello).
func (m *Machine) readAgent(conn net.Conn, virtio bool) {
	a := newAgent(conn, virtio)
	go func() {
		<-m.exited
		a.budget.close()
	}()
	a.read(func(a *Agent) bool {
		select {
		case m.agentReady <- a:
			return true
		default:
			return false // the other channel won
		}
	}, func(err error) {
		select {
		case m.agentBad <- err:
		default:
		}
	})
}

// read decodes the channel into a.msgs, which it closes at the end. ready
// gets the agent once it said Hello, and returns false when it is not
// wanted (the other channel won); bad gets a protocol error that came
// before the Hello, when nobody holds the agent to see it.
func (a *Agent) read(ready func(*Agent) bool, bad func(error)) {
	defer close(a.msgs)
	r := &eofReader{r: a.conn}
	dec := proto.NewDecoder(r)
	good := 0
	for {
		msg, err := dec.Decode()
		if err == nil {
			err = checkGuest(msg)
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if !errors.As(err, &ne) && !tornLast(r, dec) {
				// Everything but the connection's own errors, and
				// a last line torn by the guest's end, is the
				// guest's doing.
				err = &ProtocolError{Channel: a.Channel(), Messages: good, Err: err}
			}
			a.setErr(err)
			if a.Hello == nil {
				bad(err)
			}
			return
		}
		good++
		if a.Hello == nil {
			if msg.Kind != proto.KindHello {
				continue
			}
			a.Hello = msg.Hello
			a.HelloAt = time.Now()
			if !ready(a) {
				return
			}
			continue
		}
		// Wait until the messages not yet taken fit the budget: a guest
		// that sends faster than klab handles is slowed down, and never
		// holds more than maxQueuedBytes of host memory.
		n := dec.Size()
		if !a.budget.acquire(n) {
			return
		}
		a.msgs <- queued{msg, n}
	}
}

// tornLast reports whether the line dec just failed on was the channel's
// last: the guest died in the middle of a message.
func tornLast(r *eofReader, dec *proto.Decoder) bool {
	if !r.eof {
		return false
	}
	_, err := dec.Decode()
	return errors.Is(err, io.EOF)
}

// eofReader notes that its reader reached the end.
type eofReader struct {
	r   io.Reader
	eof bool
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.eof = true
	}
	return n, err
}

// AgentFailed yields the *ProtocolError of a channel whose guest broke the
// protocol before its Hello: the agent will not start on it.
func (m *Machine) AgentFailed() <-chan error { return m.agentBad }
