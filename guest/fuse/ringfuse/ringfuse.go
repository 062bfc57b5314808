//go:build linux

// Package ringfuse is the FUSE-over-io_uring transport of klab's FUSE
// servers (Linux 6.14 and later, behind fuse's enable_uring parameter).
//
// A connection keeps its /dev/fuse readers: INIT, FORGET, INTERRUPT and
// notifications always travel there. Once INIT granted
// FUSE_OVER_IO_URING, every other request arrives in an io_uring entry:
// the kernel has one queue per possible CPU, and a client's request goes to
// the queue of the CPU it runs on. The transport registers Depth entries
// on every queue (the kernel blocks all requests until each queue has
// one), then runs the COMMIT_AND_FETCH loop: a completion means a request
// sits in an entry's buffers; the reply goes back into the same buffers,
// and one COMMIT_AND_FETCH both commits it and re-arms the entry.
//
// Each ring is owned by one goroutine locked to its OS thread, because
// the kernel delivers requests to the thread that submitted the command
// and cancels them when that thread exits. The thread serves the requests
// it reaps inline and keeps its P while it waits in io_uring_enter; it
// yields to the Go scheduler every few milliseconds (dispatch.Yielder),
// or the runtime would take its P away on every wait. A ring serves one or more
// queues (Options.Threads). Handlers that reply later, from another
// goroutine, hand the entry back through a list and an eventfd the ring
// also waits on.
//
// A ring thread whose queues fall idle while another ring is busy (a
// single client that moved to another CPU) parks: a busy ring that sees a
// sibling waiting in the kernel for ParkAfter asks it to wait in Go's
// poller instead, where it holds no P. Left in io_uring_enter, the
// runtime's monitor would take its P after 10 ms and then poll every
// 20 us for a millisecond or more; in a TCG guest that polling cost more
// CPU than serving the requests.
//
// With Options.ZeroCopy (FUSE 7.46, Linux 7.3) every queue is a zero-copy
// queue with a buffer pool: the kernel puts each request's payload in a
// pool buffer of its choice, and for a READ of a file opened with
// FOPEN_IO_URING_ZERO_COPY it registers the client's pages in the ring's
// buffer table instead, at the entry's slot. The ring thread then reads
// the backing file into them with IORING_OP_READ_FIXED, waits for that
// read (completions reaped meanwhile are served after it) and commits
// the length read: the data are copied once (backing file to client)
// instead of twice (into the server's buffer, then out of it).
//
// Teardown follows the kernel: on unmount or abort, entries waiting in
// the kernel complete with ENOTCONN and entries held by the server are
// released without a completion. The transport stops committing once the
// /dev/fuse readers see the connection end, reaps until no entry is left
// in the kernel (bounded), and only then closes its rings.
package ringfuse

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/devfuse"
	"klab/guest/fuse/dispatch"
	"klab/guest/iouring"
)

// FUSE io_uring commands (include/uapi/linux/fuse.h, enum fuse_uring_cmd).
const (
	cmdRegister       = 1
	cmdCommitAndFetch = 2
	cmdAddQueue       = 3
	cmdAddBufpool     = 4

	// uringZeroCopy is ADD_QUEUE's FUSE_URING_ZERO_COPY, and
	// entZeroCopy ring_ent_in_out's FUSE_URING_ENT_ZERO_COPY.
	uringZeroCopy = 1
	entZeroCopy   = 1
)

// Layout of struct fuse_uring_req_header and its parts.
const (
	reqHeaderSize = 288 // in_out[128], op_in[128], ring_ent_in_out[32]
	opInOff       = 128
	opInMax       = 128
	entOff        = 256 // struct fuse_uring_ent_in_out
	entCommitID   = entOff + 8
	entPayloadSz  = entOff + 16
	entBufOffset  = entOff + 20 // position of the payload in the queue's pool

	// cmd area of the SQE: struct fuse_uring_cmd_req
	cmdCommitIDOff = 8
	cmdQIDOff      = 16
	cmdPoolAddrOff = 24 // ADD_BUFPOOL: bufpool.uaddr, then bufpool.len
	cmdPoolLenOff  = 32
	cmdZCIndexOff  = 24 // REGISTER on a zero-copy queue: ent_zero_copy_buf_index

	// headroom precedes each payload buffer, so that the in header and
	// the op header can be copied in front of the payload and a request
	// reaches the server in the classic contiguous /dev/fuse layout
	// without copying its payload.
	headroom = abi.InHeaderSize + opInMax + 88
)

// DefaultDepth is the number of entries per queue when Options.Depth is
// 0, as libfuse's passthrough_hp --uring-q-depth.
const DefaultDepth = 8

// MaxDepth bounds Options.Depth.
const MaxDepth = 1024

// Options configure a Transport.
type Options struct {
	// Depth is the number of entries per queue; 0 means DefaultDepth.
	// A queue serves at most Depth requests from its CPU at once.
	Depth int
	// Threads is the number of ring threads; 0 means one per queue.
	// Queues are spread over the threads round-robin.
	Threads int
	// DevWorkers is the number of /dev/fuse readers; 0 means 1.
	DevWorkers int
	// OnFatal is called (once, from a ring thread) when the ring cannot
	// serve the connection, e.g. REGISTER is refused. The kernel would
	// then block every request until the request timeout, so the caller
	// should abort the connection.
	OnFatal func(error)
	// ZeroCopy sets every queue up for zero-copy (FUSE 7.46, Linux
	// 7.3+, CAP_SYS_ADMIN): the payloads come from a buffer pool per
	// queue, and for a READ of a file opened with
	// FOPEN_IO_URING_ZERO_COPY the kernel puts the client's pages in the
	// ring's buffer table, where the ring thread reads the backing file
	// into them (IORING_OP_READ_FIXED) instead of copying the data
	// through its own buffer. A kernel without it fails the mount with
	// an error wrapping ErrUnsupported.
	ZeroCopy bool
	// Log receives transport messages; nil discards them.
	Log *slog.Logger
}

// ErrUnsupported is wrapped by every error that says the running kernel
// cannot serve FUSE over io_uring.
var ErrUnsupported = errors.New("unsupported by this kernel")

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// PossibleCPUs returns the number of possible CPUs, which is the number of
// queues the kernel creates (num_possible_cpus(), not the online ones).
func PossibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

// parseCPUList counts the CPUs in a list such as "0-3,6,8-9".
func parseCPUList(s string) (int, error) {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0, fmt.Errorf("cpu list %q: bad entry %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		n += b - a + 1
	}
	if n == 0 || n > 1<<16 {
		return 0, fmt.Errorf("cpu list %q: %d CPUs", s, n)
	}
	return n, nil
}

// Transport serves a connection over io_uring, with /dev/fuse readers for
// what the kernel keeps there. It implements dispatch.Transport and
// dispatch.InitHook.
type Transport struct {
	dev     *devfuse.Device
	opts    Options
	log     *slog.Logger
	nQueues int
	rings   []*ring

	start     chan struct{} // closed by Initialized
	startOnce sync.Once
	payload   int       // payload buffer size, set before start is closed
	startedAt time.Time // when start was closed

	ready     chan struct{} // closed when every ring registered or failed
	readyErr  error         // set before ready is closed
	readyLeft atomic.Int32
	readyOnce sync.Once

	// registerEarly (tests), when not nil, starts REGISTER before the
	// INIT reply and holds the reply until a ring saw one refused (at most
	// 2 s).
	registerEarly chan struct{}
	earlyOnce     sync.Once

	// stopping is read by every ring thread on every request: it sits on
	// a cache line of its own, which nothing else writes to.
	_         [64]byte
	stopping  atomic.Bool
	_         [63]byte
	fatalOnce sync.Once
}

// counters are one ring's statistics. Only the ring's thread writes them
// (bump), so they cost no locked instruction and no cache line shared
// between the ring threads; Stats adds the rings' counters up.
type counters struct {
	requests, commits, asyncCommits, registerRetries, enotconn, parks, zeroCopyReads atomic.Uint64
}

// bump adds n to a counter that only the calling ring thread writes.
func bump(c *atomic.Uint64, n uint64) { c.Store(c.Load() + n) }

// Stats are a Transport's counters.
type Stats struct {
	// Queues and Depth describe the rings; Threads is the number of ring
	// threads.
	Queues  int `json:"queues"`
	Depth   int `json:"depth"`
	Threads int `json:"threads"`
	// Requests counts requests received over the rings.
	Requests uint64 `json:"requests"`
	// Commits counts COMMIT_AND_FETCHes; AsyncCommits those of replies
	// sent from another goroutine.
	Commits      uint64 `json:"commits"`
	AsyncCommits uint64 `json:"async_commits"`
	// RegisterRetries counts REGISTERs repeated after EAGAIN.
	RegisterRetries uint64 `json:"register_retries"`
	// ENOTCONN counts entries the kernel returned at teardown.
	ENOTCONN uint64 `json:"enotconn"`
	// Parks counts the waits idle ring threads spent in Go's poller
	// (see ParkAfter).
	Parks uint64 `json:"parks"`
	// ZeroCopy says the queues are zero-copy; ZeroCopyReads counts the
	// READs served into the client's pages.
	ZeroCopy      bool   `json:"zero_copy,omitempty"`
	ZeroCopyReads uint64 `json:"zero_copy_reads,omitempty"`
	// StartMs is how long the slowest ring took from the INIT reply to
	// every entry registered, in milliseconds (0 before then).
	StartMs float64 `json:"start_ms"`
}

// New sets up the rings for a connection on dev. It fails early, with an
// error wrapping ErrUnsupported, when this kernel cannot create them. It
// raises GOMAXPROCS, when lower, to the ring threads plus the /dev/fuse
// readers plus one, so that a ring thread back from the kernel finds a P.
func New(dev *devfuse.Device, o Options) (*Transport, error) {
	if o.Depth == 0 {
		o.Depth = DefaultDepth
	}
	if o.Depth < 1 || o.Depth > MaxDepth {
		return nil, fmt.Errorf("queue depth %d is out of range, want 1..%d", o.Depth, MaxDepth)
	}
	if o.Threads < 0 {
		return nil, fmt.Errorf("ring threads %d: want >= 0 (0: one per queue)", o.Threads)
	}
	nq, err := PossibleCPUs()
	if err != nil {
		return nil, fmt.Errorf("io_uring queues: %w", err)
	}
	threads := o.Threads
	if threads == 0 || threads > nq {
		threads = nq
	}
	t := &Transport{
		dev: dev, opts: o, log: o.Log, nQueues: nq,
		start: make(chan struct{}), ready: make(chan struct{}),
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	for i := 0; i < threads; i++ {
		r := &ring{t: t, id: i, efd: -1}
		for q := i; q < nq; q += threads {
			r.qids = append(r.qids, uint16(q))
		}
		n := uint32(len(r.qids)*o.Depth + 2)
		r.ring, err = iouring.New(n, iouring.SetupSQE128)
		if err != nil {
			t.closeRings()
			if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) {
				return nil, unsupported("cannot create an io_uring with 128-byte SQEs: %v (see kernel.io_uring_disabled)", err)
			}
			return nil, err
		}
		// /dev/fuse as fixed file 0: no file lookup and no shared
		// reference count bouncing between the ring threads' CPUs on
		// every command.
		if err := r.ring.RegisterFiles([]int32{int32(dev.Fd())}); err != nil {
			t.closeRings()
			return nil, err
		}
		if r.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
			t.closeRings()
			return nil, fmt.Errorf("eventfd: %w", err)
		}
		t.rings = append(t.rings, r)
	}
	t.readyLeft.Store(int32(len(t.rings)))
	// Ring threads hold their Ps while they serve a request inline and
	// hand them back in io_uring_enter; with every P taken, a thread
	// coming back from the kernel waits for one. Leave room for the ring
	// threads plus the /dev/fuse readers and the runtime.
	dispatch.EnsureProcs(len(t.rings) + max(o.DevWorkers, 1) + 1)
	return t, nil
}

func (t *Transport) closeRings() {
	for _, r := range t.rings {
		r.close()
	}
}

// Queues returns the number of queues (possible CPUs).
func (t *Transport) Queues() int { return t.nQueues }

// Progress says where each ring thread is in its start, for an error
// when the rings do not register in time: "ring 0 (queues [0]): serving
// for 2ms; ring 1 (queues [1]): registering its entries for 9.8s (3 EAGAIN
// retries)".
func (t *Transport) Progress() string {
	var b strings.Builder
	for i, r := range t.rings {
		if i > 0 {
			b.WriteString("; ")
		}
		p := r.phase.Load()
		fmt.Fprintf(&b, "ring %d (queues %v): %s", r.id, r.qids, phaseNames[min(int(p), len(phaseNames)-1)])
		if since := r.phaseSince.Load(); since != 0 {
			fmt.Fprintf(&b, " for %v", time.Since(time.Unix(0, since)).Round(time.Millisecond))
		}
		if p == phaseSetup {
			fmt.Fprintf(&b, ", %d of %d entries built", r.built.Load(), len(r.qids)*r.t.opts.Depth)
		}
		if n := r.regTries.Load(); n > 0 {
			fmt.Fprintf(&b, " (%d EAGAIN retries)", n)
		}
	}
	return b.String()
}

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	s := Stats{Queues: t.nQueues, Depth: t.opts.Depth, Threads: len(t.rings), ZeroCopy: t.opts.ZeroCopy}
	for _, r := range t.rings {
		c := &r.stats
		s.Requests += c.requests.Load()
		s.Commits += c.commits.Load()
		s.AsyncCommits += c.asyncCommits.Load()
		s.RegisterRetries += c.registerRetries.Load()
		s.ENOTCONN += c.enotconn.Load()
		s.Parks += c.parks.Load()
		s.ZeroCopyReads += c.zeroCopyReads.Load()
		s.StartMs = max(s.StartMs, float64(r.startTook.Load())/1e6)
	}
	return s
}

// NegotiateInit asks for FUSE_OVER_IO_URING. It implements
// dispatch.InitHook; a kernel that does not offer the flag fails the mount
// with an error wrapping ErrUnsupported.
func (t *Transport) NegotiateInit(in *dispatch.Init) error {
	if in.Offered&abi.InitOverIOUring == 0 || in.Offered&abi.InitExt == 0 {
		return unsupported("the kernel did not offer FUSE_OVER_IO_URING in INIT (FUSE %d.%d; needs 7.42+ with CONFIG_FUSE_IO_URING and /sys/module/fuse/parameters/enable_uring=Y)",
			in.Kernel.Major, in.Kernel.Minor)
	}
	if t.opts.ZeroCopy && in.Offered&abi.InitHasIOUringBufpool == 0 {
		return unsupported("zero-copy needs io_uring buffer pools, which the kernel did not offer in INIT (FUSE %d.%d; needs 7.46, Linux 7.3+)",
			in.Kernel.Major, in.Kernel.Minor)
	}
	in.Want |= abi.InitOverIOUring | abi.InitExt
	if t.registerEarly != nil {
		// Tests: register before the INIT reply is out, which the kernel
		// answers with EAGAIN until it processed the reply.
		t.setPayload(in)
		select {
		case <-t.registerEarly:
		case <-time.After(2 * time.Second):
		}
	}
	return nil
}

// Initialized starts registering the entries, now that the INIT reply is
// out (a REGISTER before it fails with EAGAIN). It implements
// dispatch.InitHook.
func (t *Transport) Initialized(in *dispatch.Init) { t.setPayload(in) }

// setPayload sizes the payload buffers from the INIT reply and lets the
// ring threads register.
func (t *Transport) setPayload(in *dispatch.Init) {
	t.startOnce.Do(func() {
		// The kernel needs a payload buffer of at least max(8192,
		// max_write, max_pages * page size); without FUSE_MAX_PAGES it
		// uses 32 pages.
		pages := int(in.Out.MaxPages)
		if in.Out.Flags64()&abi.InitMaxPages == 0 || pages == 0 {
			pages = 32
		}
		t.payload = max(8192, int(in.Out.MaxWrite), pages*os.Getpagesize())
		t.startedAt = time.Now()
		close(t.start)
	})
}

// Ready is closed when every ring registered its entries, or failed.
func (t *Transport) Ready() <-chan struct{} { return t.ready }

// ReadyErr is why the rings could not register, once Ready is closed.
func (t *Transport) ReadyErr() error {
	select {
	case <-t.ready:
		return t.readyErr
	default:
		return nil
	}
}

func (t *Transport) ringReady(err error) {
	if err != nil {
		t.readyOnce.Do(func() {
			t.readyErr = err
			close(t.ready)
		})
		return
	}
	if t.readyLeft.Add(-1) == 0 {
		t.readyOnce.Do(func() { close(t.ready) })
	}
}

func (t *Transport) fatal(err error) {
	t.fatalOnce.Do(func() {
		t.log.Error("fuse: io_uring transport failed", "err", err)
		t.ringReady(err)
		if t.opts.OnFatal != nil {
			t.opts.OnFatal(err)
		}
	})
}

// Serve implements dispatch.Transport: it runs the /dev/fuse readers and
// the ring threads until the kernel ends the connection, then stops the
// rings in order and returns the readers' error (ENODEV after an unmount,
// an abort or a request timeout).
func (t *Transport) Serve(c *dispatch.Conn) error {
	var wg sync.WaitGroup
	for _, r := range t.rings {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.run(c)
		}()
	}
	err := devfuse.NewTransport(t.dev, max(t.opts.DevWorkers, 1)).Serve(c)
	t.stopping.Store(true)
	t.startOnce.Do(func() { close(t.start) })
	// Poke the rings until they are gone: each checks its deadline when
	// woken.
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, r := range t.rings {
			r.wake()
		}
		select {
		case <-done:
			t.readyOnce.Do(func() {
				t.readyErr = err
				close(t.ready)
			})
			return err
		case <-tick.C:
		}
	}
}

// Entry states.
const (
	entKernel   uint32 = iota // registered: the kernel owns the buffers
	entDispatch               // the ring thread is dispatching the request
	entHeld                   // a handler holds the request
	entReplied                // replied during dispatch; the ring thread commits
)

// entry is one ring entry: the header and payload buffers the kernel
// copies requests into, and the Request they become.
type entry struct {
	r     *ring
	idx   int
	qid   uint16
	state atomic.Uint32
	wrote bool // WriteReply filled the buffers for the current request

	hdr     []byte // fuse_uring_req_header
	buf     []byte // headroom + payload
	payload []byte // buf[headroom:]; on zero-copy queues the request's pool buffer
	iov     [2]unix.Iovec
	req     *dispatch.Request
	scratch []byte

	// Zero-copy queues: pool is the queue's buffer pool, and zc says the
	// current request is a READ whose data go to the client's pages in
	// buffer slot idx+1 (it has no pool buffer).
	pool []byte
	zc   bool
}

// ring is one io_uring and the thread that owns it.
type ring struct {
	t    *Transport
	id   int
	qids []uint16
	ring *iouring.Ring
	ents []*entry

	efd    int
	efdBuf [8]byte

	mu    sync.Mutex // guards async, dead and the eventfd's lifetime
	async []*entry
	dead  bool

	// waitSince is when the ring thread began its current wait in
	// io_uring_enter (Unix nanoseconds, from its Yielder's coarse
	// clock), 0 when it is not waiting there. parkReq asks it to park
	// (see ParkAfter). Other ring threads read and set them.
	waitSince atomic.Int64
	parkReq   atomic.Bool
	noPark    atomic.Bool // parking failed once: always wait in the kernel

	// phase is where the ring thread is in its start (the phase
	// constants), for Transport.Progress; the thread writes it, anyone
	// reads it.
	phase      atomic.Uint32
	phaseSince atomic.Int64 // when phase was entered (Unix nanoseconds)
	built      atomic.Int32 // entries whose buffers exist
	startTook  atomic.Int64 // nanoseconds from start to serving

	inKernel int           // entries with a command the kernel has not completed
	deferred []iouring.CQE // reaped while waiting for a zero-copy read
	reRegs   []*entry
	// regTries counts the rounds of REGISTERs retried after EAGAIN
	// (written by the ring thread, read by Progress).
	regTries atomic.Int32
	closed   bool

	// stats are written by the ring thread only; the padding keeps them
	// off the cache lines of fields other threads touch (mu, async) and
	// of whatever the allocator puts next to the ring.
	_     [64]byte
	stats counters
	_     [64]byte
}

// Ring thread phases, in order.
const (
	phaseWaiting     uint32 = iota // waiting for the INIT reply
	phaseSetup                     // allocating buffers, zero-copy setup
	phaseRegistering               // REGISTERs submitted, not all taken yet
	phaseServing                   // every entry registered
	phaseEnded                     // the thread returned
)

var phaseNames = [...]string{"waiting for the INIT reply", "setting up its buffers", "registering its entries", "serving", "ended"}

func (r *ring) setPhase(p uint32) {
	r.phaseSince.Store(time.Now().UnixNano())
	r.phase.Store(p)
}

// User data of the commands that are not an entry's.
const (
	efdUserData    = ^uint64(0)
	zcReadUserData = ^uint64(1)
	setupUserData  = ^uint64(2)
)

func (r *ring) close() {
	if r.closed {
		return
	}
	r.closed = true
	if r.ring != nil {
		r.ring.Close()
	}
	if r.efd >= 0 {
		unix.Close(r.efd)
	}
}

// wake makes the ring thread look at its async list and at stopping.
// The lock keeps the eventfd from being closed (and its number reused)
// under the write.
func (r *ring) wake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dead {
		return
	}
	var one = [8]byte{1}
	_, _ = unix.Write(r.efd, one[:])
}

// run is the ring thread. It waits for the INIT reply and builds its
// buffers as an ordinary goroutine, and locks its OS thread only to
// register: the kernel ties every registered entry to the thread that
// registered it, so from then on the thread must not change.
func (r *ring) run(c *dispatch.Conn) {
	defer func() {
		r.setPhase(phaseEnded)
		r.mu.Lock()
		r.dead = true
		r.async = nil
		r.close()
		r.mu.Unlock()
	}()
	<-r.t.start
	if r.t.stopping.Load() {
		r.t.ringReady(nil)
		return
	}
	r.setPhase(phaseSetup)
	r.build()
	runtime.LockOSThread()
	// The thread ends with the goroutine (no UnlockOSThread): it carries
	// the CPU affinity set below.
	r.pin()
	if r.t.opts.ZeroCopy {
		if err := r.setUpZeroCopy(); err != nil {
			r.t.fatal(err)
			return
		}
	}
	r.armEventfd()
	for _, e := range r.ents {
		r.register(e)
	}
	r.setPhase(phaseRegistering)
	if err := r.loop(c); err != nil {
		r.t.fatal(err)
	}
}

// build allocates the ring's entries and their buffers, sized from the
// INIT reply.
func (r *ring) build() {
	size := r.t.payload
	zc := r.t.opts.ZeroCopy
	for _, q := range r.qids {
		var pool []byte
		if zc {
			pool = pageAlignedAt(0, r.t.opts.Depth*size)
		}
		for i := 0; i < r.t.opts.Depth; i++ {
			e := &entry{r: r, idx: len(r.ents), qid: q, req: new(dispatch.Request), pool: pool}
			e.hdr = make([]byte, reqHeaderSize)
			e.buf = pageAlignedAt(headroom, headroom+size)
			e.payload = e.buf[headroom:]
			e.iov[0].Base = &e.hdr[0]
			e.iov[0].SetLen(len(e.hdr))
			if !zc {
				// A zero-copy queue takes payloads from its pool: the
				// entry's payload iovec must be empty.
				e.iov[1].Base = &e.payload[0]
				e.iov[1].SetLen(len(e.payload))
			}
			r.ents = append(r.ents, e)
			r.built.Add(1)
		}
	}
}

// pageAlignedAt returns a buffer of n bytes whose byte at off starts a
// page, as libfuse aligns its ring payloads. The kernel copies a payload
// to and from the pages it spans one page at a time; a payload that starts
// mid-page spans one page more and splits every copy in two.
func pageAlignedAt(off, n int) []byte {
	page := os.Getpagesize()
	raw := make([]byte, n+page)
	skip := (page - int(uintptr(unsafe.Pointer(&raw[off]))%uintptr(page))) % page
	return raw[skip : skip+n : skip+n]
}

// pin binds the ring thread to the CPUs of its queues, as libfuse does: a
// request is queued on the CPU its client runs on, so serving it there
// spares a cross-CPU wake-up. CPUs that are offline are left out; when
// none is online the thread stays unbound.
func (r *ring) pin() {
	var set unix.CPUSet
	for _, q := range r.qids {
		set.Set(int(q))
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		r.t.log.Debug("fuse: cannot pin the ring thread to its queues' CPUs", "ring", r.id, "err", err)
	}
}

func (r *ring) sqe() iouring.SQE {
	s, err := r.ring.GetSQE()
	if err != nil {
		// Every entry has at most one command in flight and the ring has
		// room for all of them plus the eventfd read.
		panic(fmt.Sprintf("ringfuse: %v", err))
	}
	return s
}

func (r *ring) armEventfd() {
	s := r.sqe()
	s.SetOpcode(iouring.OpRead)
	s.SetFd(int32(r.efd))
	s.SetAddr(uintptr(unsafe.Pointer(&r.efdBuf[0])))
	s.SetLen(8)
	s.SetUserData(efdUserData)
}

func (r *ring) register(e *entry) {
	s := r.sqe()
	s.SetOpcode(iouring.OpURingCmd)
	s.SetFlags(iouring.SQEFixedFile)
	s.SetFd(0)
	s.SetCmdOp(cmdRegister)
	s.SetAddr(uintptr(unsafe.Pointer(&e.iov[0])))
	s.SetLen(2)
	s.SetUserData(uint64(e.idx))
	cmd := s.Cmd()
	*(*uint16)(unsafe.Pointer(&cmd[cmdQIDOff])) = e.qid
	if e.pool != nil {
		// The slot of the ring's buffer table where the kernel lends
		// this entry the client's pages; 0 means none.
		*(*uint16)(unsafe.Pointer(&cmd[cmdZCIndexOff])) = uint16(e.idx + 1)
	}
	e.state.Store(entKernel)
	r.inKernel++
}

// setUpZeroCopy gives the ring a buffer table with a slot per entry, and
// makes each of its queues a zero-copy queue with the entries' buffer
// pool, before any entry registers.
func (r *ring) setUpZeroCopy() error {
	if err := r.ring.RegisterSparseBuffers(uint32(len(r.ents) + 1)); err != nil {
		return unsupported("zero-copy: %v", err)
	}
	for i := 0; i < len(r.ents); i += r.t.opts.Depth {
		e := r.ents[i]
		s := r.sqe()
		s.SetOpcode(iouring.OpURingCmd)
		s.SetFlags(iouring.SQEFixedFile)
		s.SetCmdOp(cmdAddQueue)
		s.SetUserData(setupUserData)
		cmd := s.Cmd()
		*(*uint64)(unsafe.Pointer(&cmd[0])) = uringZeroCopy
		*(*uint16)(unsafe.Pointer(&cmd[cmdQIDOff])) = e.qid
		if err := r.setupCommand("ADD_QUEUE", e.qid); err != nil {
			return err
		}
		s = r.sqe()
		s.SetOpcode(iouring.OpURingCmd)
		s.SetFlags(iouring.SQEFixedFile)
		s.SetCmdOp(cmdAddBufpool)
		s.SetUserData(setupUserData)
		cmd = s.Cmd()
		*(*uint16)(unsafe.Pointer(&cmd[cmdQIDOff])) = e.qid
		*(*uint64)(unsafe.Pointer(&cmd[cmdPoolAddrOff])) = uint64(uintptr(unsafe.Pointer(&e.pool[0])))
		*(*uint32)(unsafe.Pointer(&cmd[cmdPoolLenOff])) = uint32(len(e.pool))
		if err := r.setupCommand("ADD_BUFPOOL", e.qid); err != nil {
			return err
		}
	}
	return nil
}

// setupCommand submits the one command prepared and returns its result.
// Nothing else is in flight yet.
func (r *ring) setupCommand(name string, qid uint16) error {
	if _, err := r.ring.Submit(1); err != nil {
		return err
	}
	cqe, err := r.ring.WaitCQE()
	if err != nil {
		return err
	}
	switch {
	case cqe.Res == -int32(unix.EPERM):
		return fmt.Errorf("zero-copy: %s for queue %d: %w (zero-copy queues need CAP_SYS_ADMIN)", name, qid, unix.EPERM)
	case cqe.Res == -int32(unix.EINVAL) || cqe.Res == -int32(unix.EOPNOTSUPP):
		return unsupported("zero-copy: %s for queue %d: %v", name, qid, unix.Errno(-cqe.Res))
	case cqe.Res < 0:
		return fmt.Errorf("zero-copy: %s for queue %d: %w", name, qid, unix.Errno(-cqe.Res))
	}
	return nil
}

// readFixed reads size bytes at off of fd into buffer slot buf, where the
// kernel put the client's pages, and waits for the read: the request is
// answered once the data are there. Completions of other commands reaped
// meanwhile wait in r.deferred.
func (r *ring) readFixed(fd int, off int64, size int, buf uint16) (int, syscall.Errno, error) {
	s := r.sqe()
	s.SetOpcode(iouring.OpReadFixed)
	s.SetFd(int32(fd))
	s.SetOff(uint64(off))
	s.SetLen(uint32(size))
	s.SetBufIndex(buf)
	s.SetUserData(zcReadUserData)
	for {
		if _, err := r.ring.Submit(1); err != nil {
			return 0, 0, err
		}
		for {
			cqe, ok := r.ring.PeekCQE()
			if !ok {
				break
			}
			if cqe.UserData != zcReadUserData {
				r.deferred = append(r.deferred, cqe)
				continue
			}
			if cqe.Res < 0 {
				return 0, syscall.Errno(-cqe.Res), nil
			}
			return int(cqe.Res), 0, nil
		}
	}
}

func (r *ring) commit(e *entry) {
	if !e.wrote {
		// The handler dropped the request without a reply; the entry
		// must still go back, with an error the kernel accepts.
		e.writeHeader(-int32(syscall.EIO), e.req.Header.Unique, 0)
	}
	commitID := *(*uint64)(unsafe.Pointer(&e.hdr[entCommitID]))
	s := r.sqe()
	s.SetOpcode(iouring.OpURingCmd)
	s.SetFlags(iouring.SQEFixedFile)
	s.SetFd(0)
	s.SetCmdOp(cmdCommitAndFetch)
	s.SetUserData(uint64(e.idx))
	cmd := s.Cmd()
	*(*uint64)(unsafe.Pointer(&cmd[cmdCommitIDOff])) = commitID
	*(*uint16)(unsafe.Pointer(&cmd[cmdQIDOff])) = e.qid
	e.state.Store(entKernel)
	r.inKernel++
	bump(&r.stats.commits, 1)
}

// ParkAfter is how long a ring thread may wait in io_uring_enter while
// another ring is busy before that one asks it to park: well under the
// 10 ms after which the Go runtime takes the P of a thread in a system
// call.
const ParkAfter = 4 * time.Millisecond

// loop submits and reaps until the connection ended and no entry is left
// in the kernel.
func (r *ring) loop(c *dispatch.Conn) error {
	var stopDeadline time.Time
	var y dispatch.Yielder
	var now time.Time
	for {
		y.Tick()
		if t := y.Checked(); t != now {
			now = t
			r.parkIdleSiblings(now)
		}
		wait := uint32(1)
		if len(r.reRegs) > 0 || r.phase.Load() < phaseServing || len(r.deferred) > 0 {
			// Registering: collect the REGISTERs' immediate failures
			// without waiting for a request.
			wait = 0
		}
		if wait > 0 && r.parkReq.Swap(false) && !r.noPark.Load() && !r.t.stopping.Load() {
			// Hand the kernel what is pending, then wait in the poller
			// unless something came meanwhile.
			if _, err := r.ring.Submit(0); err != nil {
				return err
			}
			if !r.ring.CQReady() {
				bump(&r.stats.parks, 1)
				if err := r.ring.ParkUntilCQE(); err != nil {
					// Parking only saves CPU: wait in the kernel from
					// now on.
					r.t.log.Debug("fuse: a ring thread cannot park; it waits in io_uring_enter", "ring", r.id, "err", err)
					r.noPark.Store(true)
				}
			}
		}
		if wait > 0 {
			r.waitSince.Store(max(now.UnixNano(), 1))
		}
		_, err := r.ring.Submit(wait)
		r.waitSince.Store(0)
		if err != nil {
			return err
		}
		// Completions reaped during a zero-copy read came first.
		for i := 0; i < len(r.deferred); i++ {
			if err := r.complete(c, r.deferred[i]); err != nil {
				return err
			}
		}
		r.deferred = r.deferred[:0]
		for {
			cqe, ok := r.ring.PeekCQE()
			if !ok {
				break
			}
			if err := r.complete(c, cqe); err != nil {
				return err
			}
		}
		if r.t.registerEarly != nil && len(r.reRegs) > 0 {
			// Tests: a REGISTER came back with EAGAIN, so the INIT reply
			// may go out now. (Not after the first pass alone: a loaded
			// host may complete the REGISTER only after the reply, and
			// then nothing was tried early.)
			r.t.earlyOnce.Do(func() { close(r.t.registerEarly) })
		}
		if len(r.reRegs) > 0 {
			tries := r.regTries.Add(1)
			bump(&r.stats.registerRetries, uint64(len(r.reRegs)))
			if tries > 2000 {
				return unsupported("REGISTER kept failing with EAGAIN for %d tries: the connection never became ready for io_uring", tries)
			}
			time.Sleep(time.Millisecond)
			regs := r.reRegs
			r.reRegs = nil
			for _, e := range regs {
				r.register(e)
			}
			continue
		}
		if r.phase.Load() < phaseServing {
			r.setPhase(phaseServing)
			r.startTook.Store(max(int64(time.Since(r.t.startedAt)), 1))
			r.t.ringReady(nil)
		}
		if r.t.stopping.Load() {
			if stopDeadline.IsZero() {
				stopDeadline = time.Now().Add(2 * time.Second)
			}
			if r.inKernel == 0 {
				return nil
			}
			if time.Now().After(stopDeadline) {
				r.t.log.Debug("fuse: ring entries still in the kernel at teardown; closing the ring cancels them", "ring", r.id, "entries", r.inKernel)
				return nil
			}
		}
	}
}

// parkIdleSiblings asks every other ring that has been waiting in the
// kernel for ParkAfter (by this thread's clock, now) to park.
func (r *ring) parkIdleSiblings(now time.Time) {
	rings := r.t.rings
	if len(rings) < 2 {
		return
	}
	limit := now.UnixNano() - int64(ParkAfter)
	for _, s := range rings {
		if s == r || s.parkReq.Load() || s.noPark.Load() {
			continue
		}
		if w := s.waitSince.Load(); w != 0 && w < limit {
			s.parkReq.Store(true)
			s.wake()
		}
	}
}

// complete handles one CQE.
func (r *ring) complete(c *dispatch.Conn, cqe iouring.CQE) error {
	if cqe.UserData == efdUserData {
		if !r.t.stopping.Load() {
			r.mu.Lock()
			async := r.async
			r.async = nil
			r.mu.Unlock()
			for _, e := range async {
				r.commit(e)
				bump(&r.stats.asyncCommits, 1)
			}
		}
		r.armEventfd()
		return nil
	}
	if cqe.UserData >= uint64(len(r.ents)) {
		return fmt.Errorf("ringfuse: completion for unknown entry %d", cqe.UserData)
	}
	e := r.ents[cqe.UserData]
	r.inKernel--
	switch {
	case cqe.Res == 0:
	case cqe.Res == -int32(unix.EAGAIN):
		// The connection is not initialized yet (REGISTER raced INIT).
		r.reRegs = append(r.reRegs, e)
		return nil
	case cqe.Res == -int32(unix.ENOTCONN) || cqe.Res == -int32(unix.ENODEV) || cqe.Res == -int32(unix.ECANCELED):
		bump(&r.stats.enotconn, 1)
		return nil
	case cqe.Res == -int32(unix.EOPNOTSUPP):
		return unsupported("the kernel refused io_uring commands on this connection (EOPNOTSUPP: enable_uring is off or io_uring was not negotiated)")
	default:
		if r.t.stopping.Load() {
			return nil
		}
		return fmt.Errorf("ringfuse: queue %d entry %d: %w", e.qid, e.idx, unix.Errno(-cqe.Res))
	}
	if r.t.stopping.Load() {
		// A request landed while the connection ends; it was aborted.
		return nil
	}
	bump(&r.stats.requests, 1)
	return r.dispatch(c, e)
}

// dispatch turns the entry's buffers into a Request and serves it.
func (r *ring) dispatch(c *dispatch.Conn, e *entry) error {
	h := abi.View[abi.InHeader](e.hdr)
	payloadSz := int(*(*uint32)(unsafe.Pointer(&e.hdr[entPayloadSz])))
	opSz := int(h.Len) - abi.InHeaderSize - payloadSz
	if e.pool != nil {
		if err := e.poolPayload(h.Opcode, payloadSz); err != nil {
			return err
		}
		if e.zc {
			// The READ's data go to the client's pages: nothing of
			// its length is in a buffer.
			payloadSz = 0
		}
	}
	if opSz < 0 || opSz > opInMax || payloadSz > len(e.payload) {
		return fmt.Errorf("ringfuse: malformed request %s: len %d, payload %d", h.Opcode, h.Len, payloadSz)
	}
	// Rebuild the /dev/fuse layout in the headroom: in header, op
	// header, then the payload where the kernel put it.
	start := headroom - opSz - abi.InHeaderSize
	copy(e.buf[start:], e.hdr[:abi.InHeaderSize])
	copy(e.buf[headroom-opSz:], e.hdr[opInOff:opInOff+opSz])
	scratch := e.scratch
	switch h.Opcode {
	case abi.OpRead, abi.OpReaddir, abi.OpReaddirplus, abi.OpReadlink:
		// These carry nothing in the payload: the reply is built in it
		// directly, and WriteReply finds it in place.
		if !e.zc {
			scratch = e.payload
		}
	}
	e.wrote = false
	e.state.Store(entDispatch)
	if err := e.req.Reset(e.buf[start:headroom+payloadSz], e, scratch); err != nil {
		return err
	}
	c.Dispatch(e.req)
	if e.state.CompareAndSwap(entDispatch, entHeld) {
		return nil
	}
	// Replied (and finished) during Dispatch.
	r.commit(e)
	return nil
}

// poolPayload points e.payload at the pool buffer the kernel chose for
// the request (zero-copy queues), and copies a request payload behind the
// headroom, where the request is rebuilt. A zero-copy READ has no pool
// buffer: e.zc is set and e.payload is empty.
func (e *entry) poolPayload(op abi.Opcode, payloadSz int) error {
	flags := *(*uint64)(unsafe.Pointer(&e.hdr[entOff]))
	e.zc = flags&entZeroCopy != 0
	if e.zc {
		if op != abi.OpRead {
			// Only read-only opens ask for zero-copy, so a zero-copy
			// WRITE would mean data this server cannot see.
			return fmt.Errorf("ringfuse: zero-copy %s request: only READs are served zero-copy", op)
		}
		e.payload = nil
		return nil
	}
	off := int(*(*uint32)(unsafe.Pointer(&e.hdr[entBufOffset])))
	size := e.r.t.payload
	if off+size > len(e.pool) {
		size = len(e.pool) - off
	}
	if off < 0 || size <= 0 || payloadSz > size {
		return fmt.Errorf("ringfuse: request %s in pool buffer at %d (payload %d) is outside the %d-byte pool", op, off, payloadSz, len(e.pool))
	}
	e.payload = e.pool[off : off+size : off+size]
	copy(e.buf[headroom:], e.payload[:payloadSz])
	return nil
}

// writeHeader fills the reply's out header and payload size.
func (e *entry) writeHeader(errno int32, unique uint64, payloadSz int) {
	oh := (*abi.OutHeader)(unsafe.Pointer(&e.hdr[0]))
	oh.Len = uint32(abi.OutHeaderSize + payloadSz)
	oh.Error = errno
	oh.Unique = unique
	*(*uint32)(unsafe.Pointer(&e.hdr[entPayloadSz])) = uint32(payloadSz)
}

// WriteReply copies a reply into the entry's buffers. The commit happens
// when the request is done (ReplyDone). It implements dispatch.Replier.
func (e *entry) WriteReply(hdr abi.OutHeader, out, data []byte) error {
	n := len(out) + len(data)
	if e.zc && n > 0 {
		// The kernel takes a zero-copy READ's data from the client's
		// pages only (WriteReplyFd fills them).
		e.writeHeader(-int32(syscall.EIO), hdr.Unique, 0)
		e.wrote = true
		return fmt.Errorf("a %d-byte reply to a zero-copy READ cannot be sent: %w", n, syscall.EIO)
	}
	if n > len(e.payload) {
		e.writeHeader(-int32(syscall.EIO), hdr.Unique, 0)
		e.wrote = true
		return fmt.Errorf("reply of %d bytes does not fit the %d-byte ring buffer: %w", n, len(e.payload), syscall.EFBIG)
	}
	// data may already sit at the start of the payload (Scratch for
	// READ); move it first, then put out in front of it.
	copy(e.payload[len(out):], data)
	copy(e.payload, out)
	if hdr.Error != 0 {
		n = 0
	}
	e.writeHeader(hdr.Error, hdr.Unique, n)
	e.wrote = true
	if e.r.t.stopping.Load() {
		return syscall.ENOTCONN
	}
	return nil
}

// WriteReplyFd reads a READ's data straight into the entry's payload
// buffer, where the kernel copies them from. It implements
// dispatch.FdReplier.
func (e *entry) WriteReplyFd(unique uint64, fd int, off int64, size int) (bool, int, syscall.Errno, error) {
	if e.zc {
		return e.zeroCopyRead(unique, fd, off, size)
	}
	if size > len(e.payload) {
		return false, 0, 0, nil
	}
	for {
		n, err := unix.Pread(fd, e.payload[:size], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			errno, ok := err.(syscall.Errno)
			if !ok {
				errno = syscall.EIO
			}
			return true, 0, errno, nil
		}
		e.writeHeader(0, unique, n)
		e.wrote = true
		if e.r.t.stopping.Load() {
			return true, n, 0, syscall.ENOTCONN
		}
		return true, n, 0, nil
	}
}

// zeroCopyRead serves a zero-copy READ: the ring thread reads the backing
// file into the client's pages and replies with the length read.
func (e *entry) zeroCopyRead(unique uint64, fd int, off int64, size int) (bool, int, syscall.Errno, error) {
	if e.state.Load() != entDispatch {
		// Only the ring thread may use its ring; a handler that
		// replies later cannot reach the client's pages.
		return true, 0, syscall.EIO, nil
	}
	r := e.r
	n, errno, err := r.readFixed(fd, off, size, uint16(e.idx+1))
	if err != nil {
		return true, 0, 0, err
	}
	if errno != 0 {
		return true, 0, errno, nil
	}
	bump(&r.stats.zeroCopyReads, 1)
	e.writeHeader(0, unique, n)
	e.wrote = true
	if r.t.stopping.Load() {
		return true, n, 0, syscall.ENOTCONN
	}
	return true, n, 0, nil
}

// ReplyDone hands the entry back: the ring thread commits it, at once when
// the reply came during dispatch, else through the async list. It
// implements dispatch.Finisher.
func (e *entry) ReplyDone(*dispatch.Request) {
	if e.state.CompareAndSwap(entDispatch, entReplied) {
		return
	}
	r := e.r
	// The entry was held: a fresh Request serves its next use, because
	// the old one belongs to the handler until it returns.
	e.req = new(dispatch.Request)
	r.mu.Lock()
	if r.dead {
		r.mu.Unlock()
		return
	}
	r.async = append(r.async, e)
	r.mu.Unlock()
	r.wake()
}

// OpenBacking registers a passthrough backing file on the connection's
// device. It implements dispatch.Backer.
func (e *entry) OpenBacking(fd int) (int32, error) { return e.r.t.dev.OpenBacking(fd) }

// CloseBacking drops a backing ID. It implements dispatch.Backer.
func (e *entry) CloseBacking(id int32) error { return e.r.t.dev.CloseBacking(id) }

// EnableURingPath is fuse's module parameter that gates FUSE-over-io_uring.
const EnableURingPath = "/sys/module/fuse/parameters/enable_uring"

// EnableURing makes sure the kernel offers FUSE-over-io_uring, setting
// enable_uring when it is off (which needs root). It reports whether it
// changed the parameter. Errors wrap ErrUnsupported.
func EnableURing() (changed bool, err error) {
	b, err := os.ReadFile(EnableURingPath)
	if errors.Is(err, os.ErrNotExist) {
		// fuse may be a module not loaded yet: opening /dev/fuse has
		// the kernel load it (modprobe char-major-10-229).
		if f, oerr := os.Open("/dev/fuse"); oerr == nil {
			f.Close()
			b, err = os.ReadFile(EnableURingPath)
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat("/sys/module/fuse"); serr != nil {
			return false, unsupported("the fuse module is not loaded (no /sys/module/fuse)")
		}
		return false, unsupported("no %s: the kernel was built without CONFIG_FUSE_IO_URING, or is older than 6.14", EnableURingPath)
	}
	if err != nil {
		return false, unsupported("cannot read %s: %v", EnableURingPath, err)
	}
	switch strings.TrimSpace(string(b)) {
	case "Y", "1":
		return false, nil
	}
	if err := os.WriteFile(EnableURingPath, []byte("Y"), 0); err != nil {
		return false, unsupported("%s is off and cannot be set: %v", EnableURingPath, err)
	}
	return true, nil
}
