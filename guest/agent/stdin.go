package agent

import (
	"os"
	"sync"

	"klab/guest/proto"
)

// MaxStdinQueue bounds the standard input an exec step holds in the
// guest before its command reads it. Input past it is dropped, the pipe
// is closed, and the agent says so; bigger inputs belong in a file
// (klab boot --file).
const MaxStdinQueue = 64 << 20

// stdinQueue is one step's standard input: chunks from the host, written
// to the command's pipe by its own goroutine so that a command that does
// not read never blocks the agent's channel.
type stdinQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	chunks  [][]byte
	size    int
	eof     bool
	dropped bool
	closed  bool // the command is gone: drop everything
}

func newStdinQueue() *stdinQueue {
	q := &stdinQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// put queues in, or ends the input on EOF.
func (q *stdinQueue) put(in *proto.Input) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.eof {
		return
	}
	if len(in.Data) > 0 {
		if q.size+len(in.Data) > MaxStdinQueue {
			q.dropped, q.eof = true, true
		} else {
			q.chunks = append(q.chunks, append([]byte(nil), in.Data...))
			q.size += len(in.Data)
		}
	}
	if in.EOF {
		q.eof = true
	}
	q.cond.Broadcast()
}

// pump writes the queue to w until EOF, then closes w. It returns whether
// input was dropped for being too large.
func (q *stdinQueue) pump(w *os.File) (dropped bool) {
	defer w.Close()
	for {
		q.mu.Lock()
		for len(q.chunks) == 0 && !q.eof && !q.closed {
			q.cond.Wait()
		}
		if len(q.chunks) == 0 || q.closed {
			dropped = q.dropped
			q.mu.Unlock()
			return dropped
		}
		c := q.chunks[0]
		q.chunks = q.chunks[1:]
		q.size -= len(c)
		q.mu.Unlock()
		if _, err := w.Write(c); err != nil {
			// The command closed its stdin: it wants no more.
			q.close()
			return false
		}
	}
}

// close drops what is queued and what comes later.
func (q *stdinQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.chunks, q.size = nil, 0
	q.cond.Broadcast()
	q.mu.Unlock()
}

// stdinRouter maps running steps to their input queues.
type stdinRouter struct {
	mu sync.Mutex
	m  map[int]*stdinQueue
}

// open creates step's queue; the reader calls it when the step arrives,
// before any of its Input can.
func (r *stdinRouter) open(step int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[int]*stdinQueue{}
	}
	if r.m[step] == nil {
		r.m[step] = newStdinQueue()
	}
}

// deliver queues in for its step; input for no open step is dropped.
func (r *stdinRouter) deliver(in *proto.Input) {
	r.mu.Lock()
	q := r.m[in.Step]
	r.mu.Unlock()
	if q != nil {
		q.put(in)
	}
}

// get returns step's queue, nil when none was opened.
func (r *stdinRouter) get(step int) *stdinQueue {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[step]
}

// forget drops step's queue: its command is gone.
func (r *stdinRouter) forget(step int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.m[step]; q != nil {
		q.close()
	}
	delete(r.m, step)
}
