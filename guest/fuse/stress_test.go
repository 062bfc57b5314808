package fuse

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/match"
	"klab/guest/fuse/stuck"
)

// stressDuration is how long TestStress runs per transport: a minute, 10 s
// with -short, or KLAB_FUSE_STRESS (a Go duration).
func stressDuration(t *testing.T) time.Duration {
	if v := os.Getenv("KLAB_FUSE_STRESS"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("KLAB_FUSE_STRESS=%q: %v", v, err)
		}
		return d
	}
	if testing.Short() {
		return 10 * time.Second
	}
	return time.Minute
}

// TestStress runs many client threads of mixed metadata and data
// operations against the stuck server (so that some LOOKUPs are answered
// late, from another goroutine) over each transport, with shallow io_uring
// queues so that entries are recycled all the time. Every client keeps a
// model of its own directory and checks each result against it. A lost
// reply shows as an operation that does not return (the watchdog fails
// the test); a duplicated or misrouted one as a wrong result, a reply
// error, or a request count that does not match the commits.
func TestStress(t *testing.T) {
	requireFUSE(t)
	d := stressDuration(t)
	for _, transport := range []string{TransportDev, TransportURing} {
		t.Run(transport, func(t *testing.T) {
			if transport == TransportURing {
				requireURing(t)
			}
			cfg := DefaultConfig()
			cfg.Server = ServerStuck
			cfg.Transport = transport
			cfg.Threads = 2
			cfg.QueueDepth = 0
			if transport == TransportURing {
				cfg.QueueDepth = 2
			}
			cfg.AttrTimeout, cfg.EntryTimeout = 0, 0 // every stat is a request
			cfg.Stuck = []stuck.Rule{{Select: match.Selector{Op: abi.OpLookup, Name: "slow*"}, Action: stuck.Delay, Delay: time.Millisecond}}
			s := mount(t, cfg)
			dd := d
			if transport == TransportDev {
				dd = min(d, 10*time.Second) // the baseline; the ring is what is under test
			}
			ops, errs := stress(t, s.Mountpoint(), 16, dd)
			// close() sends RELEASE without waiting for it: let the last
			// ones finish before counting.
			st := s.Stats()
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				if st = s.Stats(); st.Conn.InFlight == 0 && (st.Ring == nil || st.Ring.Requests == st.Ring.Commits) {
					break
				}
			}
			t.Logf("%d operations in %v over %s; conn %+v; ring %+v", ops, dd, transport, *st.Conn, st.Ring)
			for _, e := range errs {
				t.Error(e)
			}
			// A signal to a client (the Go runtime's preemption, say)
			// interrupts its request, and the kernel may end an
			// interrupted request before the server's reply comes: that
			// reply is refused with ENOENT. At most once per interrupt,
			// that is the protocol; any other refused reply is a bug.
			if st.Conn.ReplyErrors != 0 || st.Conn.ReplyENOENT > st.Conn.Interrupts {
				t.Errorf("reply errors %d, ENOENT %d (%d interrupts), want no errors and no more ENOENT than interrupts",
					st.Conn.ReplyErrors, st.Conn.ReplyENOENT, st.Conn.Interrupts)
			}
			if st.Conn.InFlight != 0 {
				t.Errorf("%d requests still in flight after the clients stopped", st.Conn.InFlight)
			}
			if r := st.Ring; r != nil {
				if r.Requests == 0 || r.Requests != r.Commits {
					t.Errorf("ring: %d requests, %d commits; want equal and > 0", r.Requests, r.Commits)
				}
				if r.AsyncCommits == 0 {
					t.Errorf("ring: no reply came from another goroutine; the delay rule should have made some")
				}
			}
		})
	}
}

// stress runs clients workers for d and returns the operations done and
// every mismatch found.
func stress(t *testing.T, mnt string, clients int, d time.Duration) (uint64, []error) {
	var ops atomic.Uint64
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		if len(errs) < 20 {
			errs = append(errs, err)
		}
		mu.Unlock()
	}
	// last holds each client's last progress time, for the watchdog.
	last := make([]atomic.Int64, clients)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A client that stopped is not waiting for a reply.
			defer last[c].Store(0)
			runtime.LockOSThread()
			cl := &stressClient{dir: filepath.Join(mnt, "c"+strconv.Itoa(c)), rng: rand.New(rand.NewPCG(uint64(c), 7)), files: map[string][]byte{}}
			if err := os.Mkdir(cl.dir, 0o755); err != nil {
				fail(err)
				return
			}
			for {
				select {
				case <-stop:
					if err := cl.verifyAll(); err != nil {
						fail(fmt.Errorf("client %d final check: %w", c, err))
					}
					return
				default:
				}
				last[c].Store(time.Now().UnixNano())
				if err := cl.step(); err != nil {
					fail(fmt.Errorf("client %d: %w", c, err))
					return
				}
				ops.Add(1)
			}
		}()
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		now := time.Now().UnixNano()
		for c := range last {
			if l := last[c].Load(); l != 0 && time.Duration(now-l) > 20*time.Second {
				// A reply was lost: the client waits forever. Say so and
				// let the session's teardown abort the connection.
				fail(fmt.Errorf("client %d has been waiting for one operation for %v: a reply was lost", c, time.Duration(now-l)))
				close(stop)
				return ops.Load(), errs
			}
		}
	}
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fail(errors.New("clients did not stop within 30 s: a reply was lost"))
	}
	return ops.Load(), errs
}

// stressMaxFiles bounds each client's directory: the server holds a
// descriptor for every inode the kernel remembers, and the clients share
// the process's open file limit with it.
const stressMaxFiles = 300

// stressClient works in its own directory and remembers what it holds.
type stressClient struct {
	dir   string
	rng   *rand.Rand
	files map[string][]byte
	n     int
}

func (c *stressClient) pick() (string, bool) {
	if len(c.files) == 0 {
		return "", false
	}
	i := c.rng.IntN(len(c.files))
	for name := range c.files {
		if i == 0 {
			return name, true
		}
		i--
	}
	return "", false
}

func (c *stressClient) step() error {
	switch op := c.rng.IntN(10); {
	case (op < 3 || len(c.files) < 4) && len(c.files) < stressMaxFiles: // create and write
		c.n++
		prefix := "f"
		if c.n%3 == 0 {
			prefix = "slow" // answered late by the stuck server
		}
		name := prefix + strconv.Itoa(c.n)
		data := make([]byte, c.rng.IntN(256<<10))
		for i := range data {
			data[i] = byte(c.rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(c.dir, name), data, 0o644); err != nil {
			return err
		}
		c.files[name] = data
	case op < 5: // read back
		name, _ := c.pick()
		got, err := os.ReadFile(filepath.Join(c.dir, name))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, c.files[name]) {
			return fmt.Errorf("%s: read %d bytes that differ from the %d written", name, len(got), len(c.files[name]))
		}
	case op == 5: // stat
		name, _ := c.pick()
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(c.dir, name), &st); err != nil {
			return err
		}
		if st.Size != int64(len(c.files[name])) {
			return fmt.Errorf("%s: size %d, want %d", name, st.Size, len(c.files[name]))
		}
	case op == 6: // rename
		name, _ := c.pick()
		c.n++
		to := name + "r" + strconv.Itoa(c.n)
		if err := os.Rename(filepath.Join(c.dir, name), filepath.Join(c.dir, to)); err != nil {
			return err
		}
		c.files[to] = c.files[name]
		delete(c.files, name)
	case op == 7: // truncate
		name, _ := c.pick()
		n := c.rng.IntN(len(c.files[name]) + 1)
		if err := os.Truncate(filepath.Join(c.dir, name), int64(n)); err != nil {
			return err
		}
		c.files[name] = c.files[name][:n]
	case op == 8: // unlink
		name, _ := c.pick()
		if err := os.Remove(filepath.Join(c.dir, name)); err != nil {
			return err
		}
		delete(c.files, name)
	default: // readdir, mkdir and rmdir
		ents, err := os.ReadDir(c.dir)
		if err != nil {
			return err
		}
		if len(ents) != len(c.files) {
			return fmt.Errorf("readdir: %d entries, want %d", len(ents), len(c.files))
		}
		sub := filepath.Join(c.dir, "d"+strconv.Itoa(c.n))
		if err := os.Mkdir(sub, 0o755); err != nil {
			return err
		}
		if err := os.Remove(sub); err != nil {
			return err
		}
	}
	return nil
}

func (c *stressClient) verifyAll() error {
	for name, want := range c.files {
		got, err := os.ReadFile(filepath.Join(c.dir, name))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s: content differs", name)
		}
	}
	return nil
}
