package check

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/fuse"
	"klab/guest/fuse/devfuse"
)

// KillOptions configure Kill.
type KillOptions struct {
	// ServerArgv starts a server process; the check appends
	// "--server stuck --rule lookup:stuck*=never --threads 2 --backing DIR
	// MOUNTPOINT". Empty means this executable's "fuse serve" (klab and
	// klab-agent both have it).
	ServerArgv []string
	// Transport is the server's transport: dev (default) or uring.
	Transport string
	// ServerEnv is extra environment for the server process.
	ServerEnv []string
	// Stuck is how many client threads block in LOOKUPs the server never
	// answers; 0 means 4.
	Stuck int
	// Writers is how many client threads write in a loop; 0 means 2.
	Writers int
	// Bound is how long the clients may take to return after the kill;
	// 0 means 10 s.
	Bound time.Duration
	// Dir holds the mount points and backing directories; empty means a
	// new temporary directory.
	Dir string
	// Log receives progress; nil discards it.
	Log *slog.Logger
}

// KillDetails are Kill's measurements.
type KillDetails struct {
	// ServerPID is the killed server's process ID.
	ServerPID int `json:"server_pid"`
	// Waiting is fusectl's waiting count just before the kill.
	Waiting int `json:"waiting"`
	// ClientErrs counts the clients' results after the kill by errno.
	ClientErrs map[string]int `json:"client_errs"`
	// Exited is how long after the kill the server had exited (its files
	// closed, and so its connection ended); -1 if it never did.
	Exited time.Duration `json:"exited_ns"`
	// Returned is how long after the kill the last client returned.
	Returned time.Duration `json:"returned_ns"`
	// Aborted says the check had to abort the connection through fusectl
	// because clients were still blocked a bound after the kill.
	Aborted bool `json:"aborted"`
	// ServerStacks are the kernel stacks of the server's threads when
	// clients were still blocked a bound after the kill and the server had
	// not exited yet: where its exit waits.
	ServerStacks string `json:"server_stacks,omitempty"`
	// ClientStacks are the kernel stacks of the check's own threads that
	// wait in FUSE (the blocked clients) at the same moment.
	ClientStacks string `json:"client_stacks,omitempty"`
	// ServerOutput is the end of the server's output, when the check
	// found a problem.
	ServerOutput string `json:"server_output,omitempty"`
	// AfterErr is what a call on the dead mount got.
	AfterErr string `json:"after_err"`
	// UnmountErr is the lazy unmount's result.
	UnmountErr string `json:"unmount_err"`
	// Remount says a new mount at another place worked afterwards.
	Remount string `json:"remount"`
}

// Kill starts a server in its own process, blocks client threads in
// requests it never answers while others write, kills the server with
// SIGKILL, and checks that the guest stays usable: every client returns
// within the bound (ECONNABORTED or ENOTCONN; a writer may also see EIO),
// the server exits, the dead mount answers ENOTCONN, a lazy unmount removes
// it, and a new FUSE mount works.
//
// The kernel ends the connection when the server's last /dev/fuse file is
// closed, in its exit. When clients are still blocked after the bound, the
// details say whether the server had exited, and if not, where each of its
// threads waits in the kernel.
func Kill(ctx context.Context, o KillOptions) (*Result, error) {
	start := time.Now()
	if o.Stuck <= 0 {
		o.Stuck = 4
	}
	if o.Writers <= 0 {
		o.Writers = 2
	}
	if o.Bound <= 0 {
		o.Bound = 10 * time.Second
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(o.ServerArgv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("check kill: %w", err)
		}
		o.ServerArgv = []string{exe, "fuse", "serve"}
	}
	dir, cleanup, err := scratchDir(o.Dir, "kill")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	d := &KillDetails{ClientErrs: map[string]int{}}
	res := &Result{Name: "kill" + transportSuffix(o.Transport), Details: d}
	mnt, back := filepath.Join(dir, "mnt"), filepath.Join(dir, "backing")
	for _, p := range []string{mnt, back} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
	}

	argv := append(append([]string(nil), o.ServerArgv...), "--server", "stuck", "--rule", "lookup:stuck*=never", "--threads", "2", "--transport", transportOr(o.Transport), "--backing", back, mnt)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), o.ServerEnv...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("check kill: start server: %w", err)
	}
	exited := make(chan error, 1)
	var exitedAt time.Time // written before the send on exited
	go func() {
		err := cmd.Wait()
		exitedAt = time.Now()
		exited <- err
	}()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = devfuse.Unmount(mnt, true)
	}()
	d.ServerPID = cmd.Process.Pid

	// Wait until the mount is served.
	deadline := time.Now().Add(15 * time.Second)
	var m devfuse.MountInfo
	for {
		var st unix.Stat_t
		if mi, err := devfuse.FindMount(mnt); err == nil && unix.Stat(mnt, &st) == nil {
			m = mi
			break
		}
		select {
		case err := <-exited:
			return nil, fmt.Errorf("check kill: server %q exited before serving: %v\n%s", argv, err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("check kill: server %q did not mount %s within 15 s\n%s", argv, mnt, out.String())
		}
	}

	// Clients: some blocked for good, some busy writing. The writers open
	// their files first: an O_CREAT open needs the directory lock that a
	// stuck LOOKUP holds shared, and would queue every later lookup behind
	// it in the VFS.
	type clientRes struct {
		writer bool
		err    error
	}
	results := make(chan clientRes, o.Stuck+o.Writers)
	var fds []int
	for i := 0; i < o.Writers; i++ {
		fd, err := unix.Open(filepath.Join(mnt, "w"+strconv.Itoa(i)), unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return nil, fmt.Errorf("check kill: open a file to write: %w", err)
		}
		fds = append(fds, fd)
	}
	var wg sync.WaitGroup
	for _, fd := range fds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer unix.Close(fd)
			buf := make([]byte, 4096)
			for {
				if _, err := unix.Write(fd, buf); err != nil {
					results <- clientRes{true, err}
					return
				}
			}
		}()
	}
	for i := 0; i < o.Stuck; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st unix.Stat_t
			results <- clientRes{false, unix.Stat(filepath.Join(mnt, "stuck"+strconv.Itoa(i)), &st)}
		}()
	}
	// Let the stuck LOOKUPs reach the server.
	for t := time.Now(); time.Since(t) < 5*time.Second; time.Sleep(20 * time.Millisecond) {
		if n, err := devfuse.Waiting(m.ConnID()); err == nil {
			d.Waiting = n
			if n >= o.Stuck {
				break
			}
		}
	}
	if d.Waiting < o.Stuck {
		res.notef("only %d requests waiting before the kill, expected at least %d", d.Waiting, o.Stuck)
	}

	killed := time.Now()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("check kill: kill server: %w", err)
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	gone := false
	select {
	case <-allDone:
		d.Returned = time.Since(killed)
	case <-time.After(o.Bound):
		d.ClientStacks = taskStacks(os.Getpid(), "fuse")
		select {
		case <-exited:
			gone = true
			res.problemf("clients still blocked %v after the server was killed, although it exited %v after the kill; aborting the connection",
				o.Bound, exitedAt.Sub(killed).Round(time.Millisecond))
		default:
			d.ServerStacks = taskStacks(d.ServerPID, "")
			res.problemf("clients still blocked %v after the server was killed, and the server has not exited; aborting the connection", o.Bound)
			if ownMountWait(d.ServerStacks) {
				res.problemf("a thread of the dying server waits in its exit for its own mount's answer: the server process had a file open on its own mount, whose FLUSH at exit only that dead server could answer (the /dev/fuse release that ends the connection runs after every flush); a server must not touch its own mount")
			}
		}
		d.Aborted = true
		_ = devfuse.Abort(m.ConnID())
		<-allDone
		d.Returned = time.Since(killed)
	}
	close(results)
	for r := range results {
		name := Errno(r.err)
		d.ClientErrs[name]++
		switch {
		case errors.Is(r.err, syscall.ECONNABORTED), errors.Is(r.err, syscall.ENOTCONN):
		case errors.Is(r.err, syscall.EIO):
			// A write cut short by the abort, or a request the dying
			// server was copying out of /dev/fuse when it was killed:
			// fuse_dev_do_read ends such a request with EIO.
		case errors.Is(r.err, syscall.ECANCELED) && transportOr(o.Transport) == fuse.TransportURing:
			// Over io_uring, a request the kernel was handing to a ring
			// entry (in task work) when the ring thread exited ends with
			// io_uring's own ECANCELED, which reaches the client as is
			// (fs/fuse/dev_uring.c, fuse_uring_send_in_task). /dev/fuse
			// never returns it; the check records it.
			res.notef("a client got ECANCELED: over io_uring, a request being delivered to a ring entry when the server died ends with io_uring's cancellation errno")
		case errors.Is(r.err, syscall.EINTR) && transportOr(o.Transport) == fuse.TransportURing:
			// Seen over io_uring only (about 1 kill in 8 on a 6.18 host,
			// and in 7.3 guests): a client returns EINTR, with no signal
			// sent to it, when the server dies. Recorded, not failed, so
			// that a kernel change shows up in the notes.
			res.notef("a client got EINTR: over io_uring, a client of a killed server can return EINTR without being signalled")
		case r.writer:
			res.problemf("a writer got %s, want ECONNABORTED, ENOTCONN or EIO", name)
		default:
			res.problemf("a blocked client got %s, want ECONNABORTED or ENOTCONN", name)
		}
	}
	if !gone {
		select {
		case <-exited:
			gone = true
		case <-time.After(o.Bound):
			res.problemf("the killed server did not exit")
		}
	}
	d.Exited = -1
	if gone {
		d.Exited = exitedAt.Sub(killed)
	}
	if gone && len(res.Problems) > 0 {
		// Wait has returned: nothing writes to out any more.
		s := out.String()
		d.ServerOutput = s[max(0, len(s)-4096):]
	}

	var st unix.Stat_t
	aerr := unix.Stat(filepath.Join(mnt, "x"), &st)
	d.AfterErr = Errno(aerr)
	if !errors.Is(aerr, syscall.ENOTCONN) {
		res.problemf("a call on the dead mount got %s, want ENOTCONN", d.AfterErr)
	}
	uerr := devfuse.Unmount(mnt, true)
	d.UnmountErr = Errno(uerr)
	if uerr != nil {
		res.problemf("lazy unmount: %v", uerr)
	} else if _, err := devfuse.FindMount(mnt); err == nil {
		res.problemf("%s is still mounted after the lazy unmount", mnt)
	}
	if err := unix.Stat(mnt, &st); err != nil {
		res.problemf("stat of the unmounted mount point: %v", err)
	}

	// The guest still mounts and serves FUSE.
	cfg := fuse.DefaultConfig()
	cfg.Transport = transportOr(o.Transport)
	cfg.Mountpoint, cfg.Backing = filepath.Join(dir, "mnt2"), back
	cfg.Log = log
	d.Remount = "ok"
	if s2, err := fuse.Start(ctx, cfg); err != nil {
		d.Remount = err.Error()
		res.problemf("a new mount after the kill failed: %v", err)
	} else {
		if err := os.WriteFile(filepath.Join(cfg.Mountpoint, "after"), []byte("alive"), 0o644); err != nil {
			d.Remount = err.Error()
			res.problemf("writing to a new mount after the kill: %v", err)
		}
		if err := s2.Close(); err != nil {
			res.problemf("unmounting the new mount: %v", err)
		}
	}
	if d.ServerStacks != "" {
		res.notef("the killed server's threads, %v after the kill:\n%s", o.Bound, d.ServerStacks)
	}
	if d.ClientStacks != "" {
		res.notef("the blocked clients, %v after the kill:\n%s", o.Bound, d.ClientStacks)
	}
	res.notef("server pid %d killed with %d request(s) waiting, exited after %.3fs; %d client(s) returned within %.3fs: %v; dead mount: %s",
		d.ServerPID, d.Waiting, d.Exited.Seconds(), o.Stuck+o.Writers, d.Returned.Seconds(), d.ClientErrs, d.AfterErr)
	return res.finish(start), nil
}

// ownMountWait reports whether stacks show a thread in do_exit waiting
// for a FUSE answer: a server that had a file open on its own mount.
func ownMountWait(stacks string) bool {
	for _, t := range strings.Split(stacks, "thread ") {
		if strings.Contains(t, "do_exit") && strings.Contains(t, "request_wait_answer") {
			return true
		}
	}
	return false
}

// maxStacks bounds what taskStacks returns.
const maxStacks = 64 << 10

// taskStacks returns the state and kernel stack of each thread of pid,
// from /proc (the stacks need root), or what it could not read. With a
// non-empty match, only the threads whose stack contains it.
func taskStacks(pid int, match string) string {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range ents {
		if b.Len() > maxStacks {
			b.WriteString("...\n")
			break
		}
		stack, serr := os.ReadFile(filepath.Join(dir, e.Name(), "stack"))
		if match != "" && (serr != nil || !strings.Contains(string(stack), match)) {
			continue
		}
		state := ""
		if st, err := os.ReadFile(filepath.Join(dir, e.Name(), "status")); err == nil {
			for _, l := range strings.Split(string(st), "\n") {
				if v, ok := strings.CutPrefix(l, "State:"); ok {
					state = strings.TrimSpace(v)
				}
			}
		}
		fmt.Fprintf(&b, "thread %s (%s):\n", e.Name(), state)
		if serr != nil {
			fmt.Fprintf(&b, "  %v\n", serr)
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(stack)), "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}
