package check

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/fuse"
	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
	"klab/guest/fuse/intr"
	"klab/guest/fuse/match"
)

// InterruptOptions configure Interrupt.
type InterruptOptions struct {
	// Policy is the server's interrupt policy: cancel, ignore, enosys,
	// eagain or eagain:N.
	Policy string
	// Hold is how long the server holds each request; 0 means 2 s.
	Hold time.Duration
	// Dir holds the mount point and backing directory; empty means a new
	// temporary directory.
	Dir string
	// Transport is the server's transport: dev (default) or uring.
	// Over uring the kernel answers replies to INTERRUPT differently (see
	// Interrupt), and the check expects that.
	Transport string
	// Log receives progress; nil discards it.
	Log *slog.Logger
}

// CallDetails describe one blocked call the check interrupted.
type CallDetails struct {
	// Name is the file the call stat()ed.
	Name string `json:"name"`
	// Err is the call's result.
	Err string `json:"err"`
	// Elapsed is how long the call took.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Interrupts is how many FUSE_INTERRUPTs the server got for it.
	Interrupts int `json:"interrupts"`
	// Cancelled says the server ended it with EINTR.
	Cancelled bool `json:"cancelled"`
	// Held is how long the server held it.
	Held time.Duration `json:"held_ns"`
}

// InterruptDetails are Interrupt's measurements.
type InterruptDetails struct {
	Policy string        `json:"policy"`
	Hold   time.Duration `json:"hold_ns"`
	Calls  []CallDetails `json:"calls"`
	// Conn are the dispatcher's counters at the end.
	Conn dispatch.Stats `json:"conn"`
}

// Interrupt checks FUSE_INTERRUPT handling as the kernel documents it. A
// client thread that blocks all signals but SIGUSR1 calls stat() on a
// file whose LOOKUP the server holds; once the server has the request,
// the check sends the thread SIGUSR1 (tgkill), which makes the kernel send
// an INTERRUPT. What must follow depends on the policy:
//
//   - cancel: the server answers EINTR, and the call fails with EINTR at
//     once;
//   - eagain:N: the kernel requeues the interrupt N times, then the server
//     cancels: N+1 interrupts, EINTR;
//   - ignore: one interrupt, and the call completes normally after the
//     hold;
//   - enosys: one interrupt, the call completes normally, and a second
//     signalled call gets no interrupt at all (the kernel set
//     no_interrupt).
func Interrupt(ctx context.Context, o InterruptOptions) (*Result, error) {
	start := time.Now()
	policy, err := dispatch.ParseInterruptPolicy(o.Policy)
	if err != nil {
		return nil, fmt.Errorf("check interrupt: %w", err)
	}
	if o.Hold <= 0 {
		o.Hold = 2 * time.Second
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, cleanup, err := scratchDir(o.Dir, "interrupt")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	d := &InterruptDetails{Policy: policy.String(), Hold: o.Hold}
	uring := transportOr(o.Transport) == fuse.TransportURing
	res := &Result{Name: "interrupt/" + policy.String() + transportSuffix(o.Transport), Details: d}

	cfg := fuse.DefaultConfig()
	cfg.Server = fuse.ServerInterrupt
	cfg.Transport = transportOr(o.Transport)
	cfg.Mountpoint, cfg.Backing = filepath.Join(dir, "mnt"), filepath.Join(dir, "backing")
	cfg.Interrupts = policy
	cfg.Hold = []intr.Hold{{Select: match.Selector{Op: abi.OpLookup, Name: "held*"}, For: o.Hold}}
	cfg.Log = log
	if err := os.MkdirAll(cfg.Backing, 0o755); err != nil {
		return nil, err
	}
	for _, n := range []string{"held1", "held2"} {
		if err := os.WriteFile(filepath.Join(cfg.Backing, n), []byte(n), 0o644); err != nil {
			return nil, err
		}
	}
	sess, err := fuse.Start(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("check interrupt: %w", err)
	}
	defer sess.Teardown(context.Background(), false)

	// The signal must not kill us, and must reach the thread through a
	// handler (the Go runtime's): then the kernel sends an INTERRUPT.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGUSR1)
	defer signal.Stop(sigs)

	names := []string{"held1"}
	if policy.Mode == dispatch.InterruptENOSYS {
		names = append(names, "held2")
	}
	held := sess.Interrupt().Held()
	for _, name := range names {
		c, err := interruptedCall(ctx, sess, held, filepath.Join(cfg.Mountpoint, name))
		if err != nil {
			return nil, err
		}
		d.Calls = append(d.Calls, c)
	}
	d.Conn = sess.Conn().Stats()

	res.Problems = append(res.Problems, gradeInterrupt(policy, uring, d)...)
	for _, c := range d.Calls {
		res.notef("%s: %s after %.3fs (held %.3fs by the server), %d interrupt(s), cancelled %v",
			c.Name, c.Err, c.Elapsed.Seconds(), c.Held.Seconds(), c.Interrupts, c.Cancelled)
	}
	return res.finish(start), nil
}

// gradeInterrupt compares what the calls in d saw with what the kernel
// documents for policy, and returns each mismatch. It judges by what the
// code and the kernel decide, never by how fast the host was: a call the
// server cancelled was interrupted while the server held it (the server
// serves a request when its hold ends, and can cancel it only before),
// and a call the server served waited out the whole hold (the hold's
// timer never fires early).
func gradeInterrupt(policy dispatch.InterruptPolicy, uring bool, d *InterruptDetails) []string {
	var problems []string
	problemf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(d.Calls) == 0 || (policy.Mode == dispatch.InterruptENOSYS && len(d.Calls) < 2) {
		return []string{fmt.Sprintf("%d call(s) measured, too few for policy %s", len(d.Calls), policy)}
	}
	if uring {
		gradeRingInterrupts(problemf, policy, d)
		return problems
	}
	first := d.Calls[0]
	switch policy.Mode {
	case dispatch.InterruptCancel, dispatch.InterruptEAGAIN:
		want := 1
		if policy.Mode == dispatch.InterruptEAGAIN {
			want = max(policy.EAGAIN, 1) + 1
		}
		if first.Err != "EINTR" {
			problemf("interrupted call returned %s, want EINTR", first.Err)
		}
		if !first.Cancelled {
			problemf("the server did not cancel the interrupted call while holding it, want EINTR from the server before the %.1fs hold ended", d.Hold.Seconds())
		}
		if first.Interrupts != want {
			problemf("server got %d interrupts for the call, want %d", first.Interrupts, want)
		}
	case dispatch.InterruptIgnore, dispatch.InterruptENOSYS:
		if first.Err != "ok" {
			problemf("interrupted call returned %s, want success after the hold", first.Err)
		}
		if first.Cancelled {
			problemf("the server cancelled the interrupted call, want it served after the hold")
		}
		if first.Elapsed < d.Hold {
			problemf("interrupted call took %.2fs, want at least the %.1fs hold", first.Elapsed.Seconds(), d.Hold.Seconds())
		}
		if first.Interrupts != 1 {
			problemf("server got %d interrupts for the call, want 1", first.Interrupts)
		}
	}
	if policy.Mode == dispatch.InterruptENOSYS {
		second := d.Calls[1]
		if second.Err != "ok" || second.Elapsed < d.Hold {
			problemf("second call returned %s after %.2fs, want success after the hold", second.Err, second.Elapsed.Seconds())
		}
		if second.Interrupts != 0 {
			problemf("after ENOSYS the server still got %d interrupt(s), want none", second.Interrupts)
		}
		if d.Conn.InterruptsENOSYS != 1 {
			problemf("server answered %d interrupts with ENOSYS, want 1", d.Conn.InterruptsENOSYS)
		}
	}
	return problems
}

// gradeRingInterrupts states what the kernel does with interrupts of
// requests served over io_uring. The INTERRUPT still arrives on /dev/fuse,
// but the kernel looks for its target in the /dev/fuse processing queue,
// where a ring request never is: every reply to an INTERRUPT fails with
// ENOENT. So EAGAIN does not requeue it, and ENOSYS does not turn
// interrupts off for the connection. Ending the request itself with EINTR
// through the ring works. A kernel change that routes interrupt replies to
// the ring shows up here as a failed check.
func gradeRingInterrupts(problemf func(string, ...any), policy dispatch.InterruptPolicy, d *InterruptDetails) {
	first := d.Calls[0]
	switch policy.Mode {
	case dispatch.InterruptCancel:
		if first.Err != "EINTR" || !first.Cancelled {
			problemf("interrupted call returned %s (cancelled by the server %v), want EINTR from the server before the %.1fs hold ended", first.Err, first.Cancelled, d.Hold.Seconds())
		}
	default:
		// ignore, eagain:N and enosys: the call completes after the hold.
		if first.Err != "ok" || first.Elapsed < d.Hold {
			problemf("interrupted call returned %s after %.2fs, want success after the %.1fs hold", first.Err, first.Elapsed.Seconds(), d.Hold.Seconds())
		}
	}
	if first.Interrupts != 1 {
		problemf("server got %d interrupts for the call, want 1 (over io_uring an EAGAIN reply does not requeue)", first.Interrupts)
	}
	replied := d.Conn.InterruptsEAGAIN + d.Conn.InterruptsENOSYS
	if replied > 0 && d.Conn.ReplyENOENT < replied {
		problemf("%d interrupt replies were sent and %d failed with ENOENT; over io_uring the kernel refuses them all", replied, d.Conn.ReplyENOENT)
	}
	if policy.Mode == dispatch.InterruptENOSYS {
		second := d.Calls[1]
		if second.Interrupts != 1 {
			problemf("after an ENOSYS reply the second call got %d interrupt(s), want 1 (over io_uring the ENOSYS reply is refused, so interrupts stay on)", second.Interrupts)
		}
		if second.Err != "ok" || second.Elapsed < d.Hold {
			problemf("second call returned %s after %.2fs, want success after the hold", second.Err, second.Elapsed.Seconds())
		}
	}
}

// transportOr returns t, or dev when empty.
func transportOr(t string) string {
	if t == "" {
		return fuse.TransportDev
	}
	return t
}

// transportSuffix marks results of checks over a transport other than
// /dev/fuse ("@uring").
func transportSuffix(t string) string {
	if t == "" || t == fuse.TransportDev {
		return ""
	}
	return "@" + t
}

// InterruptAll runs Interrupt for cancel, eagain:2, ignore and enosys,
// one after the other (each needs its own connection: ENOSYS is sticky).
func InterruptAll(ctx context.Context, o InterruptOptions) ([]*Result, error) {
	var out []*Result
	for _, p := range []string{"cancel", "eagain:2", "ignore", "enosys"} {
		oo := o
		oo.Policy = p
		if o.Dir != "" {
			oo.Dir = filepath.Join(o.Dir, p)
		}
		r, err := Interrupt(ctx, oo)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// interruptedCall stats path from a dedicated thread, signals that thread
// once the server holds the request, and reports what happened.
func interruptedCall(ctx context.Context, sess *fuse.Session, held <-chan intr.Held, path string) (CallDetails, error) {
	c := CallDetails{Name: filepath.Base(path)}
	type result struct {
		err     error
		elapsed time.Duration
	}
	tids := make(chan int, 1)
	done := make(chan result, 1)
	go func() {
		// This goroutine's thread blocks every signal but SIGUSR1, so
		// that nothing else (SIGURG preemption, SIGCHLD) interrupts the
		// request. It never unlocks: the thread ends with the goroutine.
		runtime.LockOSThread()
		var set unix.Sigset_t
		for i := range set.Val {
			set.Val[i] = ^uint64(0)
		}
		set.Val[0] &^= 1 << (uint(syscall.SIGUSR1) - 1)
		if err := unix.PthreadSigmask(unix.SIG_SETMASK, &set, nil); err != nil {
			tids <- -1
			done <- result{err: fmt.Errorf("sigprocmask: %w", err)}
			return
		}
		tids <- unix.Gettid()
		var st unix.Stat_t
		t0 := time.Now()
		err := unix.Stat(path, &st)
		done <- result{err, time.Since(t0)}
	}()
	tid := <-tids
	if tid < 0 {
		r := <-done
		return c, r.err
	}
	var unique uint64
	timeout := time.After(10 * time.Second)
wait:
	for {
		select {
		case h := <-held:
			if h.Name == c.Name {
				unique = h.Unique
				break wait
			}
		case <-timeout:
			return c, fmt.Errorf("check interrupt: the server never received the LOOKUP of %s", c.Name)
		case <-ctx.Done():
			return c, ctx.Err()
		}
	}
	if err := unix.Tgkill(os.Getpid(), tid, syscall.SIGUSR1); err != nil {
		return c, fmt.Errorf("tgkill: %w", err)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		_ = sess.Abort()
		r = <-done
		r.err = fmt.Errorf("did not return within 30 s (aborted): %w", r.err)
	}
	c.Err, c.Elapsed = Errno(r.err), r.elapsed
	// The server records the outcome right after replying.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, o := range sess.Interrupt().Outcomes() {
			if o.Unique == unique {
				c.Interrupts, c.Cancelled, c.Held = o.Interrupts, o.Cancelled, o.Duration
				return c, nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c, fmt.Errorf("check interrupt: no outcome recorded for %s", c.Name)
}
