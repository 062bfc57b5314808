// Package dispatch is the transport-neutral core that every klab FUSE
// server shares. A Transport (/dev/fuse today, FUSE-over-io_uring later)
// receives requests from the kernel and hands each to Conn.Dispatch; the Conn
// answers INIT and INTERRUPT itself and passes everything else to the
// server's Handler, which replies through Request.Reply — at once or later,
// from any goroutine.
//
// The Conn owns the protocol-level policy a server must not have to repeat:
// INIT negotiation (flags, flags2, max_pages, request_timeout, and the
// transport's own bits such as FUSE_OVER_IO_URING), the table of requests in
// flight, and what to do when the kernel interrupts one of them
// (InterruptPolicy). Servers never see INIT or INTERRUPT requests.
package dispatch

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/guest/fuse/abi"
)

// Handler serves FUSE requests.
type Handler interface {
	// Handle serves r. It must end r exactly once: with r.Reply or
	// r.ReplyData for ordinary requests, with nothing for FORGET and
	// BATCH_FORGET (the Conn drops those). It may return before replying and
	// reply later from another goroutine; r (and r.Arg) then stay valid until
	// the reply.
	Handle(r *Request)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(r *Request)

// Handle calls f(r).
func (f HandlerFunc) Handle(r *Request) { f(r) }

// Initer is implemented by Handlers that take part in INIT: they ask for
// capability bits (writeback cache, readdirplus, passthrough, ...) and may
// adjust the reply. Init runs once, before any other request.
type Initer interface {
	// Init adjusts in before the reply is sent. An error fails the mount.
	Init(in *Init) error
}

// Replier sends replies back over the transport a request came from. Every
// Request carries the Replier its transport gave it.
type Replier interface {
	// WriteReply sends hdr, out and data as one message. hdr.Len is already
	// set. It is called at most once per request, from any goroutine, and
	// must not keep out or data after it returns.
	WriteReply(hdr abi.OutHeader, out, data []byte) error
}

// Finisher is implemented by Repliers that must know when a request has
// fully ended, e.g. to hand its buffer back to the kernel (an io_uring
// entry is re-armed only then). ReplyDone runs once per request, after
// the reply was written (or the request dropped) and after the Request
// stopped touching its own state, from whichever goroutine ended it.
type Finisher interface {
	ReplyDone(r *Request)
}

// FdReplier is implemented by Repliers that can send a reply's data
// straight from a file descriptor (see Request.ReplyFd).
type FdReplier interface {
	// WriteReplyFd sends a successful reply to request unique whose data
	// are up to size bytes of fd at off (fewer at the end of the file).
	// It returns handled false, having sent nothing, when it does not
	// take this descriptor or size: the caller then reads the data
	// itself. When reading fd failed before anything was sent, it
	// returns srcErr and sends nothing, and the caller replies with that
	// error. err is the error of writing the reply; n is how many bytes
	// of fd the reply carried. It is called at most once per request, in
	// place of WriteReply.
	WriteReplyFd(unique uint64, fd int, off int64, size int) (handled bool, n int, srcErr syscall.Errno, err error)
}

// Backer is implemented by Repliers whose transport can register FUSE
// passthrough backing files (FUSE_DEV_IOC_BACKING_OPEN on /dev/fuse).
type Backer interface {
	// OpenBacking registers fd as a backing file and returns its ID for
	// OpenOut.BackingID.
	OpenBacking(fd int) (int32, error)
	// CloseBacking drops a backing ID.
	CloseBacking(id int32) error
}

// Transport moves requests between the kernel and a Conn.
type Transport interface {
	// Serve receives requests and passes each to c.Dispatch, in whatever
	// goroutine received it, until the connection ends. When the kernel
	// ends it (unmount, abort, request timeout, the last device close), it
	// calls c.SetGone with the error it saw and returns that error (for
	// /dev/fuse: ENODEV).
	Serve(c *Conn) error
}

// InitHook is implemented by Transports that take part in INIT: an
// io_uring transport offers FUSE_OVER_IO_URING and registers its queues once
// the reply is out.
type InitHook interface {
	// NegotiateInit adjusts in after the server's Initer ran.
	NegotiateInit(in *Init) error
	// Initialized runs after the INIT reply was written successfully.
	Initialized(in *Init)
}

// ErrReplied is returned by Reply when the request was already ended.
var ErrReplied = errors.New("fuse: request already replied")

// Config configures a Conn.
type Config struct {
	// Handler serves every request except INIT and INTERRUPT.
	Handler Handler
	// MaxWrite is the largest WRITE the kernel may send; 0 means 1 MiB.
	// Transports size their read buffers from it (MaxWrite +
	// abi.BufferHeaderSize).
	MaxWrite int
	// MaxPages bounds a request's pages (FUSE_MAX_PAGES); 0 means
	// MaxWrite/4096. The kernel caps it at fs.fuse.max_pages_limit.
	MaxPages int
	// MaxBackground and CongestionThreshold tune the kernel's background
	// queue; 0 keeps the kernel's defaults.
	MaxBackground, CongestionThreshold uint16
	// Want are INIT flags the server asks for beyond what its Initer adds;
	// only those the kernel offers are sent.
	Want abi.InitFlags
	// RequestTimeout, when non-zero, is sent in the INIT reply with
	// FUSE_REQUEST_TIMEOUT (seconds; the kernel uses at least 15).
	RequestTimeout uint16
	// Interrupts says what to do with FUSE_INTERRUPT requests.
	Interrupts InterruptPolicy
	// OnInterrupt, when set, is called after each INTERRUPT was handled.
	// It runs on the transport's goroutine and must not block.
	OnInterrupt func(InterruptEvent)
	// Log receives protocol-level messages; nil discards them.
	Log *slog.Logger
}

// DefaultMaxWrite is Config.MaxWrite's default: 1 MiB, as libfuse.
const DefaultMaxWrite = 1 << 20

// Init is the INIT negotiation: the kernel's offer and the reply being
// built. Initer and InitHook implementations adjust Want and Out.
type Init struct {
	// Kernel is the kernel's INIT request.
	Kernel abi.InitIn
	// Offered are the flags the kernel offered.
	Offered abi.InitFlags
	// Want are the flags the server asks for. The reply carries
	// Want&Offered, plus INIT_EXT when the kernel offered it.
	Want abi.InitFlags
	// Out is the reply. Its Flags and Flags2 are set from Want at the end.
	Out abi.InitOut
}

// Granted returns the flags the reply carries (valid once INIT is done).
func (in *Init) Granted() abi.InitFlags { return in.Out.Flags64() }

// The table of requests in flight, which INTERRUPT looks its targets up
// in, has shardCount shards of shardSlots slots. The kernel numbers
// requests 2, 4, 6, ... so consecutive requests fall in different shards
// (transport threads rarely meet on a lock), and a request's slot is
// free unless a request shardCount*shardSlots numbers older is still in
// flight; those go to the shard's map. Registering and unregistering a
// request then needs no map operation.
const (
	shardCount = 64
	shardSlots = 64
)

// A request takes a free slot with a compare-and-swap, without the lock:
// a lookup that misses a request being registered answers as if it had
// not arrived yet (EAGAIN, and the kernel repeats the INTERRUPT).
// Emptying a slot, and every lookup, hold the shard's lock, so that a
// request a lookup found cannot end and be reused while it is looked at.
type shard struct {
	mu    sync.Mutex // guards more, and emptying slots
	slots [shardSlots]atomic.Pointer[Request]
	more  map[uint64]*Request // requests whose slot was taken
	_     [48]byte            // keep shards on separate cache lines
}

// lookup returns the request in flight with unique, or nil; sh.mu is
// held.
func (sh *shard) lookup(unique uint64, slot int) *Request {
	if r := sh.slots[slot].Load(); r != nil && r.Header.Unique == unique {
		return r
	}
	return sh.more[unique]
}

// count returns the requests in the shard; sh.mu is held.
func (sh *shard) count() int {
	n := len(sh.more)
	for i := range sh.slots {
		if sh.slots[i].Load() != nil {
			n++
		}
	}
	return n
}

// Conn is one FUSE connection's dispatcher. Create it with New, then run a
// transport with Serve.
type Conn struct {
	cfg     Config
	log     *slog.Logger
	handler Handler

	shards [shardCount]shard

	transport Transport
	initOnce  sync.Once
	ready     chan struct{}
	init      *Init // set before ready is closed
	initErr   error // set before ready is closed

	goneOnce sync.Once
	gone     chan struct{}
	goneErr  error // set before gone is closed

	stats counters
}

// counters are Conn statistics, updated atomically.
type counters struct {
	interrupts, interruptsNotFound, interruptsEAGAIN, interruptsENOSYS, interruptsCancelled, interruptsIgnored atomic.Uint64
	replyENOENT, replyErrors, lateReplies                                                                      atomic.Uint64
	// readBytes is written by every transport thread, for READ replies
	// only: on a cache line of its own.
	_         [64]byte
	readBytes atomic.Uint64
	_         [56]byte
}

// Stats are counters of a Conn.
type Stats struct {
	// Interrupts is the number of INTERRUPT requests received.
	Interrupts uint64 `json:"interrupts"`
	// InterruptsNotFound counts interrupts whose target was not in flight
	// (answered with EAGAIN, so that the kernel retries while the target
	// is still being received).
	InterruptsNotFound uint64 `json:"interrupts_not_found"`
	// InterruptsEAGAIN, InterruptsENOSYS, InterruptsCancelled and
	// InterruptsIgnored count what the policy did with found targets.
	InterruptsEAGAIN    uint64 `json:"interrupts_eagain"`
	InterruptsENOSYS    uint64 `json:"interrupts_enosys"`
	InterruptsCancelled uint64 `json:"interrupts_cancelled"`
	InterruptsIgnored   uint64 `json:"interrupts_ignored"`
	// ReplyENOENT counts replies the kernel refused with ENOENT: the
	// request had ended (interrupted and finished, or the connection was
	// aborted).
	ReplyENOENT uint64 `json:"reply_enoent"`
	// ReplyErrors counts other failed reply writes.
	ReplyErrors uint64 `json:"reply_errors"`
	// InFlight is the number of requests read but not yet replied.
	InFlight int `json:"in_flight"`
	// ReadBytes counts the file data READ replies carried, from the
	// server's memory or spliced from a file by the transport.
	ReadBytes uint64 `json:"read_bytes"`
}

// New returns a Conn for cfg.
func New(cfg Config) *Conn {
	if cfg.MaxWrite <= 0 {
		cfg.MaxWrite = DefaultMaxWrite
	}
	if cfg.MaxWrite < 4096 {
		cfg.MaxWrite = 4096
	}
	if cfg.MaxPages <= 0 {
		cfg.MaxPages = (cfg.MaxWrite + 4095) / 4096
	}
	c := &Conn{cfg: cfg, log: cfg.Log, handler: cfg.Handler, ready: make(chan struct{}), gone: make(chan struct{})}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.handler == nil {
		c.handler = HandlerFunc(func(r *Request) { _ = r.Reply(syscall.ENOSYS, nil) })
	}
	return c
}

// BufferSize is the read buffer a transport needs per request: MaxWrite
// plus room for the headers, at least abi.MinReadBuffer.
func (c *Conn) BufferSize() int { return max(c.cfg.MaxWrite+abi.BufferHeaderSize, abi.MinReadBuffer) }

// Serve runs t until the connection ends and returns its error.
func (c *Conn) Serve(t Transport) error {
	c.transport = t
	return t.Serve(c)
}

// Ready is closed once INIT was answered (successfully or not).
func (c *Conn) Ready() <-chan struct{} { return c.ready }

// Negotiated returns the INIT negotiation and its error; both are nil
// before Ready is closed.
func (c *Conn) Negotiated() (*Init, error) {
	select {
	case <-c.ready:
		return c.init, c.initErr
	default:
		return nil, nil
	}
}

// Gone is closed when the transport saw the connection end.
func (c *Conn) Gone() <-chan struct{} { return c.gone }

// GoneErr is the error the transport saw when the connection ended (for
// /dev/fuse: ENODEV), nil while it is alive.
func (c *Conn) GoneErr() error {
	select {
	case <-c.gone:
		return c.goneErr
	default:
		return nil
	}
}

// SetGone records that the connection ended with err. Transports call it;
// only the first call counts.
func (c *Conn) SetGone(err error) {
	c.goneOnce.Do(func() {
		c.goneErr = err
		close(c.gone)
	})
}

// Stats returns a snapshot of the counters.
func (c *Conn) Stats() Stats {
	s := Stats{
		Interrupts:          c.stats.interrupts.Load(),
		InterruptsNotFound:  c.stats.interruptsNotFound.Load(),
		InterruptsEAGAIN:    c.stats.interruptsEAGAIN.Load(),
		InterruptsENOSYS:    c.stats.interruptsENOSYS.Load(),
		InterruptsCancelled: c.stats.interruptsCancelled.Load(),
		InterruptsIgnored:   c.stats.interruptsIgnored.Load(),
		ReplyENOENT:         c.stats.replyENOENT.Load(),
		ReplyErrors:         c.stats.replyErrors.Load(),
		ReadBytes:           c.stats.readBytes.Load(),
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		s.InFlight += sh.count()
		sh.mu.Unlock()
	}
	return s
}

// InFlight returns the requests read but not replied yet, in no order.
// They must only be inspected (Header), never replied, by the caller.
func (c *Conn) InFlight() []abi.InHeader {
	var hs []abi.InHeader
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for i := range sh.slots {
			if r := sh.slots[i].Load(); r != nil {
				hs = append(hs, r.Header)
			}
		}
		for _, r := range sh.more {
			hs = append(hs, r.Header)
		}
		sh.mu.Unlock()
	}
	return hs
}

// shard returns the shard and slot of request unique.
func (c *Conn) shard(unique uint64) (*shard, int) {
	k := unique >> 1
	return &c.shards[k%shardCount], int(k/shardCount) % shardSlots
}

func (c *Conn) register(r *Request) {
	u := r.Header.Unique
	sh, slot := c.shard(u)
	if sh.slots[slot].CompareAndSwap(nil, r) {
		return
	}
	sh.mu.Lock()
	if sh.more == nil {
		sh.more = make(map[uint64]*Request)
	}
	sh.more[u] = r
	sh.mu.Unlock()
}

func (c *Conn) unregister(r *Request) {
	u := r.Header.Unique
	sh, slot := c.shard(u)
	sh.mu.Lock()
	if sh.slots[slot].Load() == r {
		sh.slots[slot].Store(nil)
	} else if sh.more[u] == r {
		delete(sh.more, u)
	}
	sh.mu.Unlock()
}

// Dispatch serves one request. Transports call it for every message they
// receive; it returns once the request was replied or handed to a handler
// that replies later (see Request.Done).
func (c *Conn) Dispatch(r *Request) {
	r.conn = c
	switch r.Header.Opcode {
	case abi.OpInit:
		c.handleInit(r)
		return
	case abi.OpInterrupt:
		c.handleInterrupt(r)
		return
	case abi.OpForget, abi.OpBatchForget:
		c.handler.Handle(r)
		r.Drop()
		return
	}
	r.registered = true
	c.register(r)
	c.handler.Handle(r)
}

func (c *Conn) handleInit(r *Request) {
	var err error
	c.initOnce.Do(func() {
		defer close(c.ready)
		in, ierr := c.negotiate(r)
		c.init, c.initErr = in, ierr
		if ierr != nil {
			c.log.Error("fuse: INIT failed", "err", ierr)
			_ = r.Reply(syscall.EPROTO, nil)
			return
		}
		out := abi.Bytes(&in.Out)
		switch {
		case in.Kernel.Minor < 5:
			out = out[:8]
		case in.Kernel.Minor < 23:
			out = out[:24]
		}
		if err = r.Reply(0, out); err != nil {
			c.initErr = fmt.Errorf("fuse: write INIT reply: %w", err)
			return
		}
		if h, ok := c.transport.(InitHook); ok {
			h.Initialized(in)
		}
		c.log.Debug("fuse: INIT done", "minor", in.Out.Minor, "flags", in.Granted().String(),
			"max_write", in.Out.MaxWrite, "max_pages", in.Out.MaxPages, "request_timeout", in.Out.RequestTimeout)
	})
	if !r.Done() {
		// A second INIT: refuse it.
		_ = r.Reply(syscall.EIO, nil)
	}
}

// negotiate builds the INIT reply.
func (c *Conn) negotiate(r *Request) (*Init, error) {
	kin := abi.View[abi.InitIn](r.Arg)
	var k abi.InitIn
	if kin != nil {
		k = *kin
	} else if len(r.Arg) >= 16 {
		// Kernels before 7.36 send the 16-byte fuse_init_in.
		copy(abi.Bytes(&k), r.Arg)
	} else {
		return nil, fmt.Errorf("fuse: INIT request of %d bytes", len(r.Arg))
	}
	in := &Init{Kernel: k, Offered: k.Flags64()}
	if k.Major != abi.KernelVersion {
		return nil, fmt.Errorf("fuse: kernel speaks FUSE %d.%d, klab needs %d.x", k.Major, k.Minor, abi.KernelVersion)
	}
	in.Out = abi.InitOut{
		Major:               abi.KernelVersion,
		Minor:               min(k.Minor, abi.KernelMinorVersion),
		MaxReadahead:        k.MaxReadahead,
		MaxWrite:            uint32(c.cfg.MaxWrite),
		MaxBackground:       c.cfg.MaxBackground,
		CongestionThreshold: c.cfg.CongestionThreshold,
		TimeGran:            1,
	}
	in.Want = c.cfg.Want | abi.InitBigWrites | abi.InitAsyncRead | abi.InitMaxPages
	in.Out.MaxPages = uint16(min(c.cfg.MaxPages, 65535))
	if c.cfg.RequestTimeout > 0 {
		in.Want |= abi.InitRequestTimeout
		in.Out.RequestTimeout = c.cfg.RequestTimeout
	}
	if h, ok := c.handler.(Initer); ok {
		if err := h.Init(in); err != nil {
			return nil, err
		}
	}
	if h, ok := c.transport.(InitHook); ok {
		if err := h.NegotiateInit(in); err != nil {
			return nil, err
		}
	}
	granted := in.Want & in.Offered &^ abi.InitExt
	if in.Offered&abi.InitExt != 0 {
		granted |= abi.InitExt
	} else {
		granted &= 0xffffffff
	}
	if granted&abi.InitRequestTimeout == 0 {
		if in.Out.RequestTimeout != 0 {
			c.log.Warn("fuse: the kernel does not offer FUSE_REQUEST_TIMEOUT; request_timeout not sent", "timeout", in.Out.RequestTimeout)
		}
		in.Out.RequestTimeout = 0
	}
	if granted&abi.InitMaxPages == 0 {
		in.Out.MaxPages = 0
	}
	if granted&abi.InitPassthrough == 0 {
		in.Out.MaxStackDepth = 0
	}
	in.Out.SetFlags64(granted)
	return in, nil
}

// InterruptMode is what a Conn does when the kernel interrupts a request.
type InterruptMode uint8

// Interrupt modes.
const (
	// InterruptCancel closes the target's Interrupted channel; its handler
	// decides whether to end the request early (typically with EINTR).
	InterruptCancel InterruptMode = iota
	// InterruptIgnore does nothing: the request ends when its handler
	// replies.
	InterruptIgnore
	// InterruptEAGAIN replies EAGAIN to the first N interrupts of each
	// request, so that the kernel requeues them, then cancels.
	InterruptEAGAIN
	// InterruptENOSYS replies ENOSYS: the kernel sends no more interrupts
	// on this connection, and the request ends when its handler replies.
	InterruptENOSYS
)

// InterruptPolicy says what a Conn does with FUSE_INTERRUPT.
type InterruptPolicy struct {
	// Mode is the action.
	Mode InterruptMode
	// EAGAIN is N for InterruptEAGAIN (at least 1).
	EAGAIN int
}

// String returns the policy in ParseInterruptPolicy's syntax.
func (p InterruptPolicy) String() string {
	switch p.Mode {
	case InterruptIgnore:
		return "ignore"
	case InterruptEAGAIN:
		return fmt.Sprintf("eagain:%d", max(p.EAGAIN, 1))
	case InterruptENOSYS:
		return "enosys"
	default:
		return "cancel"
	}
}

// ParseInterruptPolicy parses "cancel", "ignore", "enosys", "eagain" or
// "eagain:N".
func ParseInterruptPolicy(s string) (InterruptPolicy, error) {
	switch s {
	case "", "cancel":
		return InterruptPolicy{Mode: InterruptCancel}, nil
	case "ignore":
		return InterruptPolicy{Mode: InterruptIgnore}, nil
	case "enosys":
		return InterruptPolicy{Mode: InterruptENOSYS}, nil
	case "eagain":
		return InterruptPolicy{Mode: InterruptEAGAIN, EAGAIN: 1}, nil
	}
	var n int
	if _, err := fmt.Sscanf(s, "eagain:%d", &n); err == nil && n >= 1 && fmt.Sprintf("eagain:%d", n) == s {
		return InterruptPolicy{Mode: InterruptEAGAIN, EAGAIN: n}, nil
	}
	return InterruptPolicy{}, fmt.Errorf("interrupt policy %q: want cancel, ignore, enosys, eagain or eagain:N (N >= 1)", s)
}

// InterruptAction is what happened to one INTERRUPT.
type InterruptAction string

// Interrupt actions.
const (
	ActionNotFound  InterruptAction = "not-found" // target not in flight: replied EAGAIN
	ActionEAGAIN    InterruptAction = "eagain"
	ActionENOSYS    InterruptAction = "enosys"
	ActionCancelled InterruptAction = "cancelled"
	ActionIgnored   InterruptAction = "ignored"
)

// InterruptEvent describes one INTERRUPT the Conn handled.
type InterruptEvent struct {
	// Target is the unique of the interrupted request.
	Target uint64
	// Op is the target's opcode (0 when not found).
	Op abi.Opcode
	// N counts the interrupts the target received, this one included.
	N int
	// Action is what the Conn did.
	Action InterruptAction
	// ReplyErr is the error of the reply to the interrupt, if one was sent.
	ReplyErr error
}

func (c *Conn) handleInterrupt(r *Request) {
	c.stats.interrupts.Add(1)
	in := abi.View[abi.InterruptIn](r.Arg)
	if in == nil {
		r.Drop()
		return
	}
	ev := InterruptEvent{Target: in.Unique}
	sh, slot := c.shard(in.Unique)
	sh.mu.Lock()
	// The shard lock keeps the target from being replied and reused while
	// we look at it (Reply unregisters under the same lock).
	if t := sh.lookup(in.Unique, slot); t == nil {
		ev.Action = ActionNotFound
	} else {
		ev.Op = t.Header.Opcode
		t.mu.Lock()
		t.nIntr++
		ev.N = t.nIntr
		p := c.cfg.Interrupts
		switch {
		case p.Mode == InterruptIgnore:
			ev.Action = ActionIgnored
		case p.Mode == InterruptENOSYS:
			ev.Action = ActionENOSYS
		case p.Mode == InterruptEAGAIN && ev.N <= max(p.EAGAIN, 1):
			ev.Action = ActionEAGAIN
		default:
			ev.Action = ActionCancelled
			t.cancelLocked()
		}
		t.mu.Unlock()
	}
	sh.mu.Unlock()
	switch ev.Action {
	case ActionNotFound:
		c.stats.interruptsNotFound.Add(1)
		ev.ReplyErr = r.Reply(syscall.EAGAIN, nil)
	case ActionEAGAIN:
		c.stats.interruptsEAGAIN.Add(1)
		ev.ReplyErr = r.Reply(syscall.EAGAIN, nil)
	case ActionENOSYS:
		c.stats.interruptsENOSYS.Add(1)
		ev.ReplyErr = r.Reply(syscall.ENOSYS, nil)
	case ActionCancelled:
		c.stats.interruptsCancelled.Add(1)
		r.Drop()
	default:
		c.stats.interruptsIgnored.Add(1)
		r.Drop()
	}
	if c.cfg.OnInterrupt != nil {
		c.cfg.OnInterrupt(ev)
	}
}

// Request is one FUSE request. Transports fill it with Reset and pass it to
// Conn.Dispatch; handlers read Header and Arg and end it with Reply.
type Request struct {
	// Header is the request's fuse_in_header.
	Header abi.InHeader
	// Arg is the rest of the message in the classic /dev/fuse layout: the
	// per-opcode struct, then names or data.
	Arg []byte

	conn       *Conn
	rep        Replier
	scratch    []byte
	registered bool
	state      atomic.Uint32
	replyErr   error // set before state becomes stateDone

	// small holds a reply's fixed part, so that callers need not
	// allocate it; uint64s keep it aligned for the structs built in it.
	small [smallReply / 8]uint64

	mu          sync.Mutex // guards intr, interrupted, nIntr
	intr        chan struct{}
	interrupted bool
	nIntr       int

	onEnd func(error) // see OnEnd
}

// smallReply is the largest reply body ReplyData copies into the request
// (CREATE's entry_out and open_out are 144 bytes).
const smallReply = 256

// Request states.
const (
	statePending uint32 = iota
	stateReplying
	stateDone
)

// Reset makes r the request in msg (header and arguments, as read from
// /dev/fuse), to be answered through rep. scratch, when not nil, is a buffer
// Scratch may hand out. It is for transports; r must not be in use.
func (r *Request) Reset(msg []byte, rep Replier, scratch []byte) error {
	h := abi.View[abi.InHeader](msg)
	if h == nil {
		return fmt.Errorf("fuse: short request of %d bytes", len(msg))
	}
	if int(h.Len) > len(msg) || int(h.Len) < abi.InHeaderSize {
		return fmt.Errorf("fuse: request length %d does not match the %d bytes read", h.Len, len(msg))
	}
	r.Header = *h
	r.Arg = msg[abi.InHeaderSize:h.Len]
	r.conn = nil
	r.rep = rep
	r.scratch = scratch
	r.registered = false
	r.replyErr = nil
	r.state.Store(statePending)
	r.intr = nil
	r.interrupted = false
	r.nIntr = 0
	r.onEnd = nil
	return nil
}

// Conn returns the connection r arrived on.
func (r *Request) Conn() *Conn { return r.conn }

// Scratch returns a buffer of n bytes that stays valid until r is replied,
// for building reply data (e.g. the bytes of a READ). It reuses the
// transport's buffer when that is large enough.
func (r *Request) Scratch(n int) []byte {
	if cap(r.scratch) < n {
		r.scratch = make([]byte, n)
	}
	return r.scratch[:n]
}

// ReplyBuffer returns a zeroed buffer inside r of smallReply bytes for
// building a reply's fixed part without allocating; pass a prefix of it
// to Reply. It must not be used after r is replied.
func (r *Request) ReplyBuffer() []byte {
	clear(r.small[:])
	return r.smallBytes()
}

func (r *Request) smallBytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&r.small[0])), smallReply)
}

// ScratchBuffer returns r's scratch buffer, so that a transport can keep
// one that Scratch grew. Only valid after r is Done.
func (r *Request) ScratchBuffer() []byte { return r.scratch }

// Reply ends r with errno (0 for success) and, on success, the reply body
// out. It returns ErrReplied if r was already ended, and the transport's
// error otherwise (ENOENT when the kernel no longer waits for r).
func (r *Request) Reply(errno syscall.Errno, out []byte) error { return r.ReplyData(errno, out, nil) }

// ReplyData is Reply with a second body part appended after out: out is
// the small fixed part (copied, so it may live on the caller's stack) and
// data the bulk (READ data, directory entries), which is not copied.
func (r *Request) ReplyData(errno syscall.Errno, out, data []byte) error {
	if !r.state.CompareAndSwap(statePending, stateReplying) {
		return ErrReplied
	}
	return r.end(r.send(errno, out, data))
}

// send writes the reply (errno, out, data) through the transport; r is
// in stateReplying.
func (r *Request) send(errno syscall.Errno, out, data []byte) error {
	if r.Header.Opcode.NoReply() {
		return nil
	}
	hdr := abi.OutHeader{Unique: r.Header.Unique}
	var body []byte
	if errno != 0 {
		hdr.Error = -int32(errno)
		data = nil
	} else if small := r.smallBytes(); len(out) <= len(small) {
		body = small[:copy(small, out)]
	} else {
		body = append([]byte(nil), out...)
	}
	hdr.Len = uint32(abi.OutHeaderSize + len(body) + len(data))
	err := r.counted(r.rep.WriteReply(hdr, body, data))
	if err == nil && len(data) > 0 && r.Header.Opcode == abi.OpRead && r.conn != nil {
		r.conn.stats.readBytes.Add(uint64(len(data)))
	}
	return err
}

// counted counts a failed reply write in the connection's statistics.
func (r *Request) counted(err error) error {
	if err != nil && r.conn != nil {
		if errors.Is(err, syscall.ENOENT) {
			r.conn.stats.replyENOENT.Add(1)
		} else {
			r.conn.stats.replyErrors.Add(1)
		}
	}
	return err
}

// end finishes r after its reply was sent (or failed with err).
func (r *Request) end(err error) error {
	if err != nil {
		err = fmt.Errorf("fuse: reply to %s (unique %d): %w", r.Header.Opcode, r.Header.Unique, err)
	}
	r.replyErr = err
	r.finish()
	return err
}

// ReplyFd ends r successfully with up to size bytes of file fd at offset
// off as the data (fewer at the end of the file): a READ's reply. A
// transport that implements FdReplier sends them without copying them
// through the server's memory where it can (a splice on /dev/fuse, a
// read straight into the io_uring buffer); otherwise, and for sizes the
// transport does not take, they are read into r's scratch buffer and
// sent as ReplyData does. An error reading fd ends r with that error.
func (r *Request) ReplyFd(fd int, off int64, size int) error {
	if !r.state.CompareAndSwap(statePending, stateReplying) {
		return ErrReplied
	}
	if fr, ok := r.rep.(FdReplier); ok && !r.Header.Opcode.NoReply() {
		handled, n, srcErr, err := fr.WriteReplyFd(r.Header.Unique, fd, off, size)
		if handled {
			if srcErr != 0 && err == nil {
				return r.end(r.send(srcErr, nil, nil))
			}
			if err == nil && r.conn != nil {
				r.conn.stats.readBytes.Add(uint64(n))
			}
			return r.end(r.counted(err))
		}
	}
	buf := r.Scratch(size)
	for {
		n, err := unix.Pread(fd, buf, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			errno, ok := err.(syscall.Errno)
			if !ok {
				errno = syscall.EIO
			}
			return r.end(r.send(errno, nil, nil))
		}
		return r.end(r.send(0, nil, buf[:n]))
	}
}

// Drop ends r without a reply (FORGET, an INTERRUPT that needs none). It
// does nothing if r already ended.
func (r *Request) Drop() {
	if r.state.CompareAndSwap(statePending, stateReplying) {
		r.finish()
	}
}

func (r *Request) finish() {
	if r.registered && r.conn != nil {
		r.conn.unregister(r)
	}
	if f := r.onEnd; f != nil {
		r.onEnd = nil
		f(r.replyErr)
	}
	f, _ := r.rep.(Finisher)
	r.state.Store(stateDone)
	if f != nil {
		f.ReplyDone(r)
	}
}

// OnEnd sets f to run once when r ends, with the error of its reply (nil
// when the reply was written or r was dropped), before the transport may
// reuse r. A handler that replies from another goroutine while the
// transport may still be dispatching r learns the reply's outcome
// through it: once r is Done, r may already serve another request, and
// ReplyErr would read that one's. OnEnd must be called before r is
// replied; f must not block.
func (r *Request) OnEnd(f func(err error)) { r.onEnd = f }

// ReplyErr returns the error of r's reply once r is Done (nil when the
// reply was written or r was dropped). Only the transport's goroutine, or
// a handler that knows r was not yet handed back (see OnEnd), may call it
// after the reply.
func (r *Request) ReplyErr() error {
	if !r.Done() {
		return nil
	}
	return r.replyErr
}

// Done reports whether r has ended. A transport that finds r not Done after
// Dispatch returned must leave r and its buffers to the handler.
func (r *Request) Done() bool { return r.state.Load() == stateDone }

// Interrupted returns a channel that is closed when the kernel interrupted
// r and the interrupt policy cancels.
func (r *Request) Interrupted() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.intr == nil {
		r.intr = make(chan struct{})
		if r.interrupted {
			close(r.intr)
		}
	}
	return r.intr
}

// Interrupts returns how many INTERRUPTs r received so far.
func (r *Request) Interrupts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nIntr
}

// cancelLocked marks r interrupted; r.mu must be held.
func (r *Request) cancelLocked() {
	if r.interrupted {
		return
	}
	r.interrupted = true
	if r.intr != nil {
		close(r.intr)
	}
}

// OpenBacking registers fd as a passthrough backing file with r's
// transport. It fails with ENOTSUP when the transport cannot.
func (r *Request) OpenBacking(fd int) (int32, error) {
	b, ok := r.rep.(Backer)
	if !ok {
		return 0, fmt.Errorf("fuse: transport has no backing files: %w", syscall.ENOTSUP)
	}
	return b.OpenBacking(fd)
}

// CloseBacking drops a backing ID registered through r's transport.
func (r *Request) CloseBacking(id int32) error {
	b, ok := r.rep.(Backer)
	if !ok {
		return fmt.Errorf("fuse: transport has no backing files: %w", syscall.ENOTSUP)
	}
	return b.CloseBacking(id)
}

// ReplyStruct ends r successfully with *v as the body.
func ReplyStruct[T any](r *Request, v *T) error { return r.Reply(0, abi.Bytes(v)) }
