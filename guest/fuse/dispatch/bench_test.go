package dispatch

import (
	"sync/atomic"
	"syscall"
	"testing"

	"klab/guest/fuse/abi"
)

// nopReplier accepts every reply.
type nopReplier struct{}

func (nopReplier) WriteReply(abi.OutHeader, []byte, []byte) error { return nil }

// replyAttr answers like GETATTR: a 104-byte fixed reply built in the
// request's reply buffer.
func replyAttr(r *Request) {
	out := r.ReplyBuffer()[:104]
	_ = r.Reply(0, out)
}

// benchDispatch runs one goroutine's share of requests through Reset,
// Dispatch (in-flight table included) and Reply, as a transport does.
func benchDispatch(b *testing.B, c *Conn, next *atomic.Uint64, loop func(func() bool)) {
	m := msg(abi.OpGetattr, 0, 1, make([]byte, 16))
	r := new(Request)
	loop(func() bool {
		h := (*abi.InHeader)(abi.View[abi.InHeader](m))
		h.Unique = next.Add(2)
		if err := r.Reset(m, nopReplier{}, nil); err != nil {
			b.Fatal(err)
		}
		c.Dispatch(r)
		if !r.Done() {
			b.Fatal("not replied")
		}
		return true
	})
}

// BenchmarkDispatch is the per-request cost of the dispatcher: Reset,
// registering in the in-flight table, the handler's Reply, unregistering.
func BenchmarkDispatch(b *testing.B) {
	c := New(Config{Handler: HandlerFunc(replyAttr)})
	var next atomic.Uint64
	b.ReportAllocs()
	benchDispatch(b, c, &next, func(f func() bool) {
		for i := 0; i < b.N; i++ {
			f()
		}
	})
}

// BenchmarkDispatchParallel is BenchmarkDispatch from GOMAXPROCS
// goroutines at once, as transport threads do: contention in the
// in-flight table shows here.
func BenchmarkDispatchParallel(b *testing.B) {
	c := New(Config{Handler: HandlerFunc(replyAttr)})
	var next atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		m := msg(abi.OpGetattr, 0, 1, make([]byte, 16))
		r := new(Request)
		for pb.Next() {
			h := (*abi.InHeader)(abi.View[abi.InHeader](m))
			h.Unique = next.Add(2)
			if err := r.Reset(m, nopReplier{}, nil); err != nil {
				b.Fatal(err)
			}
			c.Dispatch(r)
		}
	})
}

// BenchmarkInterruptLookup is an INTERRUPT finding its target among
// requests in flight (the path that needs the in-flight table).
func BenchmarkInterruptLookup(b *testing.B) {
	held := make(chan *Request, 64)
	c := New(Config{Handler: HandlerFunc(func(r *Request) { held <- r }), Interrupts: InterruptPolicy{Mode: InterruptIgnore}})
	for u := uint64(2); u <= 128; u += 2 {
		r := new(Request)
		if err := r.Reset(msg(abi.OpRead, u, 1, make([]byte, 40)), nopReplier{}, nil); err != nil {
			b.Fatal(err)
		}
		c.Dispatch(r)
	}
	in := abi.InterruptIn{Unique: 64}
	m := msg(abi.OpInterrupt, 1001, 0, abi.Bytes(&in))
	r := new(Request)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := r.Reset(m, nopReplier{}, nil); err != nil {
			b.Fatal(err)
		}
		c.Dispatch(r)
	}
	for len(held) > 0 {
		_ = (<-held).Reply(syscall.EINTR, nil)
	}
}

// BenchmarkYielderTick is what a transport loop pays per request to stay
// in good standing with the scheduler.
func BenchmarkYielderTick(b *testing.B) {
	var y Yielder
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		y.Tick()
	}
}
