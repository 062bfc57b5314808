package dispatch

import (
	"bytes"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"klab/guest/fuse/abi"
)

// fakeReplier records replies.
type fakeReplier struct {
	mu      sync.Mutex
	replies []reply
}

type reply struct {
	hdr  abi.OutHeader
	body []byte
}

func (f *fakeReplier) WriteReply(hdr abi.OutHeader, out, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies = append(f.replies, reply{hdr, append(append([]byte(nil), out...), data...)})
	return nil
}

func (f *fakeReplier) last(t *testing.T) reply {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.replies) == 0 {
		t.Fatal("no reply")
	}
	return f.replies[len(f.replies)-1]
}

func (f *fakeReplier) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.replies)
}

// msg builds a request message.
func msg(op abi.Opcode, unique, node uint64, arg []byte) []byte {
	h := abi.InHeader{Len: uint32(abi.InHeaderSize + len(arg)), Opcode: op, Unique: unique, NodeID: node}
	return append(append([]byte(nil), abi.Bytes(&h)...), arg...)
}

func dispatch(t *testing.T, c *Conn, rep Replier, m []byte) *Request {
	t.Helper()
	r := new(Request)
	if err := r.Reset(m, rep, nil); err != nil {
		t.Fatal(err)
	}
	c.Dispatch(r)
	return r
}

func initMsg(minor uint32, flags abi.InitFlags) []byte {
	in := abi.InitIn{Major: 7, Minor: minor, MaxReadahead: 128 << 10, Flags: uint32(flags), Flags2: uint32(flags >> 32)}
	return msg(abi.OpInit, 2, 0, abi.Bytes(&in))
}

func TestInit(t *testing.T) {
	offer := abi.InitAsyncRead | abi.InitMaxPages | abi.InitExt | abi.InitRequestTimeout | abi.InitWritebackCache | abi.InitPassthrough
	c := New(Config{MaxWrite: 256 << 10, RequestTimeout: 30, Want: abi.InitWritebackCache | abi.InitFlockLocks})
	rep := &fakeReplier{}
	dispatch(t, c, rep, initMsg(45, offer))
	r := rep.last(t)
	if r.hdr.Error != 0 || r.hdr.Unique != 2 || len(r.body) != 64 || r.hdr.Len != 80 {
		t.Fatalf("reply %+v, %d bytes", r.hdr, len(r.body))
	}
	out := abi.View[abi.InitOut](r.body)
	got := out.Flags64()
	want := abi.InitAsyncRead | abi.InitMaxPages | abi.InitExt | abi.InitRequestTimeout | abi.InitWritebackCache | abi.InitBigWrites&offer
	if got != want {
		t.Errorf("flags %s, want %s (FLOCK_LOCKS was not offered)", got, want)
	}
	if out.Flags2 != uint32(abi.InitRequestTimeout>>32) || r.body[40] != 30 || out.RequestTimeout != 30 {
		t.Errorf("flags2 %#x, request_timeout %d (byte 40 = %d), want bit 10 and 30", out.Flags2, out.RequestTimeout, r.body[40])
	}
	if out.MaxWrite != 256<<10 || out.MaxPages != 64 || out.Minor != 45 || out.Major != 7 {
		t.Errorf("init_out %+v", *out)
	}
	select {
	case <-c.Ready():
	default:
		t.Fatal("Ready not closed after INIT")
	}
	in, err := c.Negotiated()
	if err != nil || in.Granted() != got {
		t.Errorf("Negotiated = %v, %v", in, err)
	}
	// A second INIT is refused.
	dispatch(t, c, rep, initMsg(45, offer))
	if r := rep.last(t); r.hdr.Error != -int32(syscall.EIO) {
		t.Errorf("second INIT answered %d", r.hdr.Error)
	}
}

func TestInitOldKernels(t *testing.T) {
	// Without INIT_EXT there are no flags2 and no request timeout.
	c := New(Config{RequestTimeout: 30})
	rep := &fakeReplier{}
	dispatch(t, c, rep, initMsg(38, abi.InitAsyncRead|abi.InitMaxPages))
	out := abi.View[abi.InitOut](rep.last(t).body)
	if out.Flags2 != 0 || out.RequestTimeout != 0 || out.Flags64()&abi.InitExt != 0 || out.Minor != 38 {
		t.Errorf("init_out %+v", *out)
	}
	// Before 7.23 the reply is 24 bytes.
	c = New(Config{})
	rep = &fakeReplier{}
	dispatch(t, c, rep, initMsg(22, abi.InitAsyncRead))
	if n := len(rep.last(t).body); n != 24 {
		t.Errorf("7.22 reply is %d bytes, want 24", n)
	}
	// Another major version fails.
	c = New(Config{})
	rep = &fakeReplier{}
	in := abi.InitIn{Major: 8, Minor: 1}
	dispatch(t, c, rep, msg(abi.OpInit, 2, 0, abi.Bytes(&in)))
	if rep.last(t).hdr.Error != -int32(syscall.EPROTO) {
		t.Errorf("major 8: %+v", rep.last(t).hdr)
	}
	if _, err := c.Negotiated(); err == nil {
		t.Error("Negotiated has no error after a failed INIT")
	}
}

// initer asks for flags and tweaks the reply.
type initer struct{ HandlerFunc }

func (initer) Init(in *Init) error {
	in.Want |= abi.InitPassthrough
	in.Out.MaxStackDepth = 1
	return nil
}

func TestInitHandlerHook(t *testing.T) {
	c := New(Config{Handler: initer{HandlerFunc(func(r *Request) {})}})
	rep := &fakeReplier{}
	dispatch(t, c, rep, initMsg(45, abi.InitExt|abi.InitPassthrough))
	out := abi.View[abi.InitOut](rep.last(t).body)
	if out.Flags64()&abi.InitPassthrough == 0 || out.MaxStackDepth != 1 {
		t.Errorf("init_out %+v", *out)
	}
	// Not offered: no flag and no stack depth.
	c = New(Config{Handler: initer{HandlerFunc(func(r *Request) {})}})
	rep = &fakeReplier{}
	dispatch(t, c, rep, initMsg(45, abi.InitExt))
	out = abi.View[abi.InitOut](rep.last(t).body)
	if out.Flags64()&abi.InitPassthrough != 0 || out.MaxStackDepth != 0 {
		t.Errorf("init_out %+v", *out)
	}
}

// holdAll keeps every request.
type holdAll struct {
	mu   sync.Mutex
	reqs []*Request
}

func (h *holdAll) Handle(r *Request) {
	h.mu.Lock()
	h.reqs = append(h.reqs, r)
	h.mu.Unlock()
}

func interruptMsg(target uint64) []byte {
	in := abi.InterruptIn{Unique: target}
	return msg(abi.OpInterrupt, target|abi.InterruptBit, 0, abi.Bytes(&in))
}

func TestInterruptPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy  string
		replies []int32 // errors of replies to successive interrupts (0: none)
		cancel  int     // interrupt after which the target is cancelled (0: never)
	}{
		{"cancel", []int32{0, 0}, 1},
		{"ignore", []int32{0, 0}, 0},
		{"enosys", []int32{-int32(syscall.ENOSYS), -int32(syscall.ENOSYS)}, 0},
		{"eagain:2", []int32{-int32(syscall.EAGAIN), -int32(syscall.EAGAIN), 0}, 3},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			p, err := ParseInterruptPolicy(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			var events []InterruptEvent
			h := &holdAll{}
			c := New(Config{Handler: h, Interrupts: p, OnInterrupt: func(ev InterruptEvent) { events = append(events, ev) }})
			rep := &fakeReplier{}
			target := dispatch(t, c, rep, msg(abi.OpRead, 10, 5, make([]byte, 40)))
			intr := target.Interrupted()
			for i, want := range tc.replies {
				before := rep.count()
				dispatch(t, c, rep, interruptMsg(10))
				switch {
				case want == 0 && rep.count() != before:
					t.Errorf("interrupt %d answered %+v, want no reply", i+1, rep.last(t).hdr)
				case want != 0 && (rep.count() != before+1 || rep.last(t).hdr.Error != want || rep.last(t).hdr.Unique != 11 || rep.last(t).hdr.Len != 16):
					t.Errorf("interrupt %d: %d replies, last %+v; want error %d for unique 11", i+1, rep.count()-before, rep.last(t).hdr, want)
				}
				select {
				case <-intr:
					if tc.cancel == 0 || i+1 < tc.cancel {
						t.Errorf("cancelled after interrupt %d", i+1)
					}
				default:
					if tc.cancel != 0 && i+1 >= tc.cancel {
						t.Errorf("not cancelled after interrupt %d", i+1)
					}
				}
			}
			if target.Interrupts() != len(tc.replies) || len(events) != len(tc.replies) || events[0].Op != abi.OpRead {
				t.Errorf("target saw %d interrupts, %d events (%+v)", target.Interrupts(), len(events), events)
			}
			// The handler ends the target; later interrupts find nothing
			// and are answered EAGAIN so that the kernel retries while it
			// still waits (ENOENT once it does not).
			if err := target.Reply(syscall.EINTR, nil); err != nil {
				t.Fatal(err)
			}
			dispatch(t, c, rep, interruptMsg(10))
			if r := rep.last(t); r.hdr.Error != -int32(syscall.EAGAIN) || events[len(events)-1].Action != ActionNotFound {
				t.Errorf("interrupt for a finished request: %+v, %v", r.hdr, events[len(events)-1])
			}
		})
	}
}

func TestReplyOnce(t *testing.T) {
	c := New(Config{Handler: HandlerFunc(func(r *Request) {})})
	rep := &fakeReplier{}
	r := dispatch(t, c, rep, msg(abi.OpGetattr, 4, 1, make([]byte, 16)))
	if r.Done() {
		t.Fatal("Done before a reply")
	}
	if st := c.Stats(); st.InFlight != 1 {
		t.Errorf("in flight %d", st.InFlight)
	}
	body := []byte("0123456789abcdef")
	if err := r.ReplyData(0, body[:4], body[4:]); err != nil {
		t.Fatal(err)
	}
	if got := rep.last(t); got.hdr.Len != 32 || !bytes.Equal(got.body, body) {
		t.Errorf("reply %+v %q", got.hdr, got.body)
	}
	if err := r.Reply(0, nil); !errors.Is(err, ErrReplied) {
		t.Errorf("second reply: %v", err)
	}
	if !r.Done() || c.Stats().InFlight != 0 {
		t.Errorf("after reply: done %v, in flight %d", r.Done(), c.Stats().InFlight)
	}
	// An error reply carries no body.
	r = dispatch(t, c, rep, msg(abi.OpGetattr, 6, 1, nil))
	_ = r.Reply(syscall.ENOENT, body)
	if got := rep.last(t); got.hdr.Len != 16 || got.hdr.Error != -int32(syscall.ENOENT) || len(got.body) != 0 {
		t.Errorf("error reply %+v %q", got.hdr, got.body)
	}
	// FORGET gets no reply even if the handler tries.
	n := rep.count()
	c2 := New(Config{Handler: HandlerFunc(func(r *Request) { _ = r.Reply(0, nil) })})
	f := abi.ForgetIn{Nlookup: 1}
	r = dispatch(t, c2, rep, msg(abi.OpForget, 8, 3, abi.Bytes(&f)))
	if rep.count() != n || !r.Done() {
		t.Errorf("FORGET replied")
	}
}

func TestResetChecksLength(t *testing.T) {
	r := new(Request)
	if err := r.Reset(make([]byte, 39), &fakeReplier{}, nil); err == nil {
		t.Error("short message accepted")
	}
	m := msg(abi.OpLookup, 2, 1, []byte("name\x00"))
	if err := r.Reset(m[:len(m)-1], &fakeReplier{}, nil); err == nil {
		t.Error("message shorter than its header's len accepted")
	}
	if err := r.Reset(m, &fakeReplier{}, nil); err != nil || string(r.Arg) != "name\x00" {
		t.Errorf("Reset: %v, arg %q", err, r.Arg)
	}
	if unsafe.Sizeof(abi.InHeader{}) != 40 {
		t.Fatal("header size")
	}
}

func TestParseInterruptPolicy(t *testing.T) {
	for in, want := range map[string]InterruptPolicy{
		"": {Mode: InterruptCancel}, "cancel": {Mode: InterruptCancel}, "ignore": {Mode: InterruptIgnore},
		"enosys": {Mode: InterruptENOSYS}, "eagain": {Mode: InterruptEAGAIN, EAGAIN: 1}, "eagain:7": {Mode: InterruptEAGAIN, EAGAIN: 7},
	} {
		got, err := ParseInterruptPolicy(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"eagain:0", "eagain:x", "eagain:3x", "drop"} {
		if _, err := ParseInterruptPolicy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestYielder checks that a busy loop yields about every YieldEvery, and
// that Tick reads the clock rarely at high rates yet keeps yielding when
// the rate drops.
func TestYielder(t *testing.T) {
	// A loaded host can take the CPU from the loop for longer than
	// YieldEvery, which costs yields: of a few tries, one that keeps its
	// CPU shows the Yielder's own rate.
	yields := 0
	var y Yielder
	for try := 0; try < 5; try++ {
		yields = 0
		y = Yielder{yield: func() { yields++ }}
		start := time.Now()
		for time.Since(start) < 50*time.Millisecond {
			y.Tick()
		}
		if yields >= 50/8 && yields <= 50/4+1 {
			break
		}
		t.Logf("try %d: %d yields in 50 ms of ticks", try+1, yields)
	}
	if yields < 50/8 || yields > 50/4+1 {
		t.Errorf("%d yields in 50 ms of ticks, want about one per %v", yields, YieldEvery)
	}
	if y.every < 16 {
		t.Errorf("a busy loop still reads the clock every %d ticks", y.every)
	}
	// A slow loop: a tick per millisecond.
	yields = 0
	for i := 0; i < 40; i++ {
		time.Sleep(time.Millisecond)
		y.Tick()
	}
	if yields < 4 {
		t.Errorf("%d yields in 40 slow ticks (>= 40 ms), want at least 4", yields)
	}
}
