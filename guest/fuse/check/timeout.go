package check

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/fuse"
	"klab/guest/fuse/abi"
	"klab/guest/fuse/devfuse"
	"klab/guest/fuse/match"
	"klab/guest/fuse/stuck"
)

// Ways to set a request timeout.
const (
	// ViaInit sends the timeout in the server's INIT reply
	// (FUSE_REQUEST_TIMEOUT and init_out.request_timeout).
	ViaInit = "init"
	// ViaDefault sets fs.fuse.default_request_timeout before mounting; the
	// server sends none.
	ViaDefault = "default"
	// ViaMax sets fs.fuse.max_request_timeout before mounting; the server
	// sends none.
	ViaMax = "max"
)

// TimerPeriod is the kernel's timeout check period
// (FUSE_TIMEOUT_TIMER_FREQ) and its smallest effective timeout.
const TimerPeriod = 15 * time.Second

// jiffySlack is how far below the timeout an abort may come: request ages
// are compared in jiffies.
const jiffySlack = 20 * time.Millisecond

// TimeoutOptions configure Timeout.
type TimeoutOptions struct {
	// Timeout is the configured request timeout in seconds (1..65535).
	Timeout int
	// Via is how it is set: init, default or max.
	Via string
	// Dir holds the mount point and the backing directory; empty means a
	// new temporary directory, removed afterwards.
	Dir string
	// ProcSys is where sysctls live; empty means /proc/sys.
	ProcSys string
	// Slack is added to the upper bound for scheduling delays; 0 means
	// 5 s.
	Slack time.Duration
	// Transport is the server's transport: dev (default) or uring.
	Transport string
	// Log receives progress; nil discards it.
	Log *slog.Logger
}

// sysctlMu serializes the window from changing the timeout sysctls to
// restoring them after INIT, so that concurrent checks in this process do
// not see each other's settings.
var sysctlMu sync.Mutex

// TimeoutDetails are Timeout's measurements.
type TimeoutDetails struct {
	// Via and Configured are the inputs; Effective is the timeout the
	// kernel applies: max(15, configured) seconds.
	Via        string `json:"via"`
	Configured int    `json:"configured_s"`
	Effective  int    `json:"effective_s"`
	// Negotiated is the request_timeout the INIT reply carried.
	Negotiated uint16 `json:"init_request_timeout"`
	// Waiting is fusectl's waiting count while the request was stuck.
	Waiting int `json:"waiting"`
	// StuckErr and StuckElapsed describe the stuck call (a stat whose
	// LOOKUP the server never answers); it must end within (LowerBound,
	// UpperBound]: after the effective timeout (less a jiffy), and at most
	// one check period (15 s) plus slack later.
	StuckErr     string        `json:"stuck_err"`
	StuckElapsed time.Duration `json:"stuck_elapsed_ns"`
	LowerBound   time.Duration `json:"lower_bound_ns"`
	UpperBound   time.Duration `json:"upper_bound_ns"`
	// LaterErr is what a later call on the mount got.
	LaterErr string `json:"later_err"`
	// ServerErr is what the server's read of /dev/fuse got.
	ServerErr string `json:"server_err"`
	// LateReplyErr is what the kernel said to the reply the server wrote
	// after the abort.
	LateReplyErr string `json:"late_reply_err"`
}

const (
	sysctlDefault = "fs/fuse/default_request_timeout"
	sysctlMax     = "fs/fuse/max_request_timeout"
)

// Timeout checks the kernel's FUSE request timeout as the kernel
// documents it: with the timeout set (through the INIT reply or a sysctl
// set before mounting), a request the server never answers fails with
// ECONNABORTED after more than the timeout and at most one check period
// (15 s) later; the whole connection is aborted, so later calls get
// ENOTCONN, the server's read gets ENODEV, and a late reply gets ENOENT.
func Timeout(ctx context.Context, o TimeoutOptions) (*Result, error) {
	start := time.Now()
	if o.Timeout < 1 || o.Timeout > 65535 {
		return nil, fmt.Errorf("check timeout: %d s is out of range, want 1..65535", o.Timeout)
	}
	switch o.Via {
	case ViaInit, ViaDefault, ViaMax:
	default:
		return nil, fmt.Errorf("check timeout: via %q: want init, default or max", o.Via)
	}
	if o.ProcSys == "" {
		o.ProcSys = "/proc/sys"
	}
	if o.Slack <= 0 {
		o.Slack = 5 * time.Second
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, cleanup, err := scratchDir(o.Dir, "timeout-"+o.Via)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	d := &TimeoutDetails{Via: o.Via, Configured: o.Timeout, Effective: max(o.Timeout, int(TimerPeriod/time.Second))}
	res := &Result{Name: "timeout/" + o.Via + transportSuffix(o.Transport), Details: d}
	// The kernel compares ages in jiffies: allow one jiffy (at HZ=100) and
	// some measurement noise below the bound.
	d.LowerBound = time.Duration(d.Effective)*time.Second - jiffySlack
	d.UpperBound = time.Duration(d.Effective)*time.Second + TimerPeriod + o.Slack

	cfg := fuse.DefaultConfig()
	cfg.Server = fuse.ServerStuck
	cfg.Transport = transportOr(o.Transport)
	cfg.Mountpoint, cfg.Backing = filepath.Join(dir, "mnt"), filepath.Join(dir, "backing")
	cfg.Stuck = []stuck.Rule{{Select: match.Selector{Op: abi.OpLookup, Name: "stuck"}, Action: stuck.AfterAbort}}
	cfg.Log = log
	if o.Via == ViaInit {
		cfg.RequestTimeout = uint16(o.Timeout)
	}

	// Mount with the sysctls set, and restore them right after INIT: the
	// kernel fixes the connection's timeout when it processes the INIT
	// reply.
	sess, err := func() (*fuse.Session, error) {
		sysctlMu.Lock()
		defer sysctlMu.Unlock()
		want := map[string]string{sysctlDefault: "0", sysctlMax: "0"}
		switch o.Via {
		case ViaDefault:
			want[sysctlDefault] = strconv.Itoa(o.Timeout)
		case ViaMax:
			want[sysctlMax] = strconv.Itoa(o.Timeout)
		}
		restore, err := setSysctls(o.ProcSys, want)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := restore(); err != nil {
				res.problemf("restore sysctls: %v", err)
			}
		}()
		return fuse.Start(ctx, cfg)
	}()
	if err != nil {
		return nil, fmt.Errorf("check timeout: %w", err)
	}
	defer sess.Teardown(context.Background(), true)
	if in, _ := sess.Conn().Negotiated(); in != nil {
		d.Negotiated = in.Out.RequestTimeout
	}
	log.Info("stuck LOOKUP issued; waiting for the kernel to time it out", "via", o.Via, "effective_s", d.Effective, "bound_s", d.UpperBound.Seconds())

	held := sess.Stuck().Held()
	type callRes struct {
		err     error
		elapsed time.Duration
	}
	done := make(chan callRes, 1)
	t0 := time.Now()
	go func() {
		var st unix.Stat_t
		err := unix.Stat(filepath.Join(cfg.Mountpoint, "stuck"), &st)
		done <- callRes{err, time.Since(t0)}
	}()
	select {
	case <-held:
		if n, err := devfuse.Waiting(sess.ConnID()); err != nil {
			res.notef("fusectl waiting: %v", err)
		} else {
			d.Waiting = n
			if n < 1 {
				res.problemf("fusectl waiting = %d while a request is held, want > 0", n)
			}
		}
	case <-time.After(10 * time.Second):
		res.problemf("the server never received the stuck LOOKUP")
	}
	var cr callRes
	select {
	case cr = <-done:
	case <-time.After(d.UpperBound + 10*time.Second):
		res.problemf("the stuck call did not return within %v; aborting the connection", d.UpperBound+10*time.Second)
		_ = sess.Abort()
		cr = <-done
	case <-ctx.Done():
		_ = sess.Abort()
		<-done
		return nil, ctx.Err()
	}
	d.StuckErr, d.StuckElapsed = Errno(cr.err), cr.elapsed
	if !errors.Is(cr.err, syscall.ECONNABORTED) {
		res.problemf("stuck call returned %s, want ECONNABORTED", d.StuckErr)
	}
	if cr.elapsed <= d.LowerBound || cr.elapsed > d.UpperBound {
		res.problemf("stuck call ended after %.1fs, want within (%.2fs, %.1fs]", cr.elapsed.Seconds(), d.LowerBound.Seconds(), d.UpperBound.Seconds())
	}

	var st unix.Stat_t
	lerr := unix.Stat(filepath.Join(cfg.Mountpoint, "other"), &st)
	d.LaterErr = Errno(lerr)
	if !errors.Is(lerr, syscall.ENOTCONN) {
		res.problemf("a later call returned %s, want ENOTCONN", d.LaterErr)
	}
	select {
	case <-sess.Done():
		d.ServerErr = Errno(sess.Err())
		if !errors.Is(sess.Err(), syscall.ENODEV) {
			res.problemf("the server's read returned %s, want ENODEV", d.ServerErr)
		}
	case <-time.After(5 * time.Second):
		res.problemf("the server still runs 5 s after the abort")
	}
	for _, ev := range sess.Stuck().Events() {
		if ev.Name == "stuck" && !ev.Replied.IsZero() {
			d.LateReplyErr = lastErrno(ev.ReplyErr)
		}
	}
	// A late reply written to /dev/fuse gets ENOENT; over io_uring the
	// entry was released at the abort, and the transport refuses the
	// reply with ENOTCONN, as the kernel would refuse its COMMIT.
	wantLate := "ENOENT"
	if transportOr(o.Transport) == fuse.TransportURing {
		wantLate = "ENOTCONN"
	}
	if d.LateReplyErr != wantLate {
		res.notef("late reply after the abort got %q (expected %s)", d.LateReplyErr, wantLate)
	}
	res.notef("stuck call: %s after %.1fs (timeout %ds, effective %ds, INIT request_timeout %d, waiting %d)",
		d.StuckErr, d.StuckElapsed.Seconds(), d.Configured, d.Effective, d.Negotiated, d.Waiting)
	return res.finish(start), nil
}

// TimeoutAll runs Timeout for init, default and max concurrently.
func TimeoutAll(ctx context.Context, o TimeoutOptions) ([]*Result, error) {
	vias := []string{ViaInit, ViaDefault, ViaMax}
	out := make([]*Result, len(vias))
	errs := make([]error, len(vias))
	var wg sync.WaitGroup
	for i, via := range vias {
		wg.Add(1)
		go func() {
			defer wg.Done()
			oo := o
			oo.Via = via
			if o.Dir != "" {
				oo.Dir = filepath.Join(o.Dir, via)
			}
			out[i], errs[i] = Timeout(ctx, oo)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// lastErrno extracts the errno name at the end of a wrapped error text.
func lastErrno(s string) string {
	if s == "" {
		return ""
	}
	for _, e := range []syscall.Errno{syscall.ENOENT, syscall.ENODEV, syscall.ENOTCONN, syscall.ECONNABORTED, syscall.EINVAL} {
		if strings.HasSuffix(s, e.Error()) {
			return unix.ErrnoName(e)
		}
	}
	return s
}

// setSysctls writes want (slash-separated keys under procSys) and returns
// a function that restores the old values.
func setSysctls(procSys string, want map[string]string) (func() error, error) {
	old := map[string]string{}
	restore := func() error {
		var errs []error
		for k, v := range old {
			if err := os.WriteFile(filepath.Join(procSys, k), []byte(v), 0); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for k, v := range want {
		p := filepath.Join(procSys, k)
		b, err := os.ReadFile(p)
		if err != nil {
			_ = restore()
			return nil, fmt.Errorf("sysctl %s: %w (the kernel needs FUSE request timeouts, Linux 6.14 or later)", k, err)
		}
		cur := strings.TrimSpace(string(b))
		if cur == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0); err != nil {
			_ = restore()
			return nil, fmt.Errorf("sysctl %s=%s: %w", k, v, err)
		}
		old[k] = cur
	}
	return restore, nil
}

// scratchDir returns dir (created) or a new temporary directory, and a
// cleanup that removes what it created.
func scratchDir(dir, name string) (string, func(), error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		return dir, func() {}, nil
	}
	d, err := os.MkdirTemp("", "klab-fuse-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}
