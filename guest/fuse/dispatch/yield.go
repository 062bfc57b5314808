package dispatch

import (
	"runtime"
	"time"
)

// YieldEvery is how often a Yielder passes through the Go scheduler: well
// under the runtime's 10 ms preemption period, so that the runtime's
// monitor always sees the goroutine scheduled recently.
const YieldEvery = 4 * time.Millisecond

// Yielder keeps a transport goroutine in good standing with the Go
// scheduler. A goroutine that serves requests in a loop of blocking system
// calls (read and writev on /dev/fuse, io_uring_enter) never passes
// through the scheduler. After 10 ms on the same scheduling tick the
// runtime's monitor (sysmon) takes it for a goroutine that hogs its P,
// and from then on takes the P away whenever it finds the goroutine in a
// system call: the thread comes back from the kernel without a P and
// waits for one, and the P is handed to another thread that finds nothing
// to do. Measured on a klab server, that cost a futex round trip and one
// or two extra context switches per request, and kept sysmon polling
// every 20 µs. Calling Tick once per loop iteration yields
// (runtime.Gosched) every YieldEvery, which is enough to stop it. (A
// goroutine that waits in the kernel longer than that still loses its
// P, as it should.) The transport must also leave a P free for every
// goroutine that may wait in a system call at once (see
// EnsureProcs), or the monitor must take Ps away all the time to run
// the others.
//
// Reading the clock costs about 100 ns in a VM (a system call where there
// is no vDSO clock source), so Tick reads it only every so many calls
// (up to maxEvery), adapting that count to the request rate.
//
// A Yielder belongs to one goroutine; the zero value is ready to use.
type Yielder struct {
	n, every       uint32
	check, yielded time.Time
	yield          func() // runtime.Gosched; tests count the calls
}

// checkEvery is how often a busy Yielder reads the clock, and maxEvery
// the most calls between two readings: it bounds how long a loop whose
// rate just dropped goes without reading it.
const (
	checkEvery = 500 * time.Microsecond
	maxEvery   = 16
)

// Tick is called once per iteration of a transport's loop.
func (y *Yielder) Tick() {
	if y.n++; y.n < y.every {
		return
	}
	y.n = 0
	now := time.Now()
	switch d := now.Sub(y.check); {
	case d > 4*checkEvery:
		y.every = 1
	case d > 2*checkEvery:
		y.every = max(y.every/2, 1)
	case d < checkEvery/2 && y.every < maxEvery:
		y.every = max(y.every*2, 2)
	}
	y.check = now
	if now.Sub(y.yielded) < YieldEvery {
		return
	}
	y.yielded = now
	if y.yield != nil {
		y.yield()
		return
	}
	runtime.Gosched()
}

// Checked returns the time Tick last read the clock (zero before the
// first reading): a coarse clock for a transport loop, at most a few
// hundred microseconds old while the loop is busy.
func (y *Yielder) Checked() time.Time { return y.check }

// EnsureProcs raises GOMAXPROCS to n when it is lower. A transport calls
// it with the number of its goroutines that may wait in system calls at
// once, plus one for the rest of the program: each of them keeps its P
// while in the kernel (that is what makes the next request cheap), and
// Go runs no more goroutines at once than there are Ps. With fewer Ps
// than waiting goroutines, the runtime would take Ps away from threads
// in system calls every 20 µs to run the others, which costs a thread
// hand-off per request. It is never lowered: other transports in the
// process may count on it.
func EnsureProcs(n int) {
	if runtime.GOMAXPROCS(0) < n {
		runtime.GOMAXPROCS(n)
	}
}
