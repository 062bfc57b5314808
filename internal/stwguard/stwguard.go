// Package stwguard bounds how long Go's stop-the-world pauses can last
// in a process whose goroutines block in system calls, as FUSE servers
// do (a /dev/fuse read, an io_uring wait).
//
// Go 1.26's runtime takes the Ps of goroutines in system calls once, when
// a stop-the-world starts. A goroutine that has just checked for a pending
// stop but not yet marked itself as in a system call is missed; if its
// call then blocks, the stop waits until the runtime's monitor (sysmon)
// retakes that P. While the world is stopping, the monitor sleeps until
// the process's next timer, or for up to a minute. A FUSE server whose
// only timer was its 10 s start deadline thus froze, whole, until that
// deadline (seen in 2-vCPU guests under TCG, about once in 2,000 to
// 6,000 mounts; the MemStats of such a run showed a 10.06 s pause). This
// reading of the runtime fits that pause; a small program built to hit
// the race has not reproduced it.
//
// Hold keeps a timer pending while a server runs, so that the monitor
// wakes at least every Period and such a stop ends within about two
// periods. Each tick costs a thread wake-up or two: about 0.1 ms of CPU
// on a loaded 2-CPU host, so 0.3% of one CPU at 50 ms.
package stwguard

import (
	"sync"
	"time"
)

// Period is how often the guard's timer fires.
const Period = 50 * time.Millisecond

var (
	mu    sync.Mutex
	users int
	stop  chan struct{}
)

// Hold starts the guard unless it runs already, and returns the function
// that ends this hold; the guard stops when the last hold ends. Calling
// the returned function more than once is harmless.
func Hold() (release func()) {
	mu.Lock()
	defer mu.Unlock()
	users++
	if users == 1 {
		stop = make(chan struct{})
		go run(stop)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			users--
			if users == 0 {
				close(stop)
			}
		})
	}
}

// Running says whether a hold is in effect (tests).
func Running() bool {
	mu.Lock()
	defer mu.Unlock()
	return users > 0
}

func run(stop <-chan struct{}) {
	t := time.NewTicker(Period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
	}
}
