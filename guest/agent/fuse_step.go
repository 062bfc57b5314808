package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"klab/guest/fuse"
	"klab/guest/proto"
	"klab/internal/procfs"
)

// fuseGrace is how long after its own timeout the step a fuse step wraps
// may take before the connection is aborted: a process killed while a
// FUSE server holds its request waits for the reply, even for SIGKILL,
// and only an abort frees it.
const fuseGrace = 5 * time.Second

// runFUSE runs a fuse step: it mounts the server, runs the wrapped step
// against it, and always tears the mount down — normally when all went
// well, else with an abort and a lazy unmount.
func runFUSE(ctx context.Context, a *Agent, s *proto.Step) proto.Done {
	cfg, err := fuse.ConfigFromStep(s.FUSE)
	if err != nil {
		return proto.Done{ExitCode: -1, Error: fmt.Sprintf("fuse step: %v", err)}
	}
	cfg.Log = slog.New(slog.NewTextHandler(logWriter{a}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if p := a.Libfuse[cfg.Server]; p != "" {
		cfg.LibfusePath = p
	}
	// fuse is a spare module: load it here rather than through the
	// kernel's modprobe (a second Go program to start).
	if err := EnsureModule(ModulesDir, "fuse"); err != nil {
		return proto.Done{ExitCode: -1, Error: fmt.Sprintf("fuse step: %v", err)}
	}
	sess, err := fuse.Start(ctx, cfg)
	if err != nil {
		return proto.Done{ExitCode: -1, Error: fmt.Sprintf("fuse step: start %s server on %s: %v", cfg.Server, cfg.Mountpoint, err)}
	}
	st := sess.Stats()
	init := ""
	if st.InitFlags != "" {
		init = ", INIT " + st.InitFlags
	}
	if s.FUSE.NoSplice {
		init += ", READ data copied, not spliced"
	}
	a.Logf("fuse: %s server over %s mounted on %s (backing %s, connection %d%s)",
		cfg.Server, cfg.Transport, cfg.Mountpoint, cfg.Backing, st.ConnID, init)

	var d proto.Done
	failed := false // the step failed or we aborted the connection
	aborted := false
	before := serverIO(sess)
	if s.FUSE.Then != nil {
		then := *s.FUSE.Then
		if then.ID == 0 {
			then.ID = s.ID
		}
		if then.Root != "" {
			// A step chrooted into the userspace sees the mount at the
			// same path there.
			undo, err := bindInto(then.Root, cfg.Mountpoint)
			if err != nil {
				d = proto.Done{ExitCode: -1, Error: err.Error()}
			} else {
				d, aborted = runWatched(ctx, a, sess, &then, s.TimeoutMs)
				undo()
			}
		} else {
			d, aborted = runWatched(ctx, a, sess, &then, s.TimeoutMs)
		}
		failed = aborted
	}
	after := serverIO(sess)
	if d.ExitCode != 0 || d.Error != "" {
		failed = true
	}
	var serverErr error
	select {
	case <-sess.Done():
		if !aborted {
			serverErr = sess.Err()
		}
		failed = true
	default:
	}
	d.FUSE = fuseStats(sess.Stats(), before, after)
	terr := sess.Teardown(context.Background(), failed)
	if b, err := json.Marshal(sess.Stats()); err == nil {
		a.Logf("fuse: %s server on %s stopped: %s", cfg.Server, cfg.Mountpoint, b)
	}
	var problems []string
	if serverErr != nil {
		problems = append(problems, fmt.Sprintf("the fuse server stopped while the step ran: %v", serverErr))
	}
	if terr != nil {
		problems = append(problems, fmt.Sprintf("fuse teardown: %v", terr))
	}
	if len(problems) > 0 {
		if d.Error != "" {
			problems = append([]string{d.Error}, problems...)
		}
		d.Error = strings.Join(problems, "; ")
		if d.ExitCode == 0 {
			d.ExitCode = 1
		}
	}
	return d
}

// runWatched runs then while sess is mounted. When then's own timeout
// (plus fuseGrace), the fuse step's timeout or ctx expires first, it
// aborts the connection so that processes waiting on the server can end,
// and cancels then. It reports whether it had to.
func runWatched(ctx context.Context, a *Agent, sess *fuse.Session, then *proto.Step, stepTimeoutMs int64) (proto.Done, bool) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan proto.Done, 1)
	go func() { res <- a.RunStep(tctx, then) }()

	var deadline <-chan time.Time
	var limit time.Duration
	if then.TimeoutMs > 0 {
		limit = time.Duration(then.TimeoutMs)*time.Millisecond + fuseGrace
	}
	if stepTimeoutMs > 0 && (limit == 0 || time.Duration(stepTimeoutMs)*time.Millisecond < limit) {
		limit = time.Duration(stepTimeoutMs) * time.Millisecond
	}
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		deadline = t.C
	}
	var why string
	select {
	case d := <-res:
		return d, false
	case <-deadline:
		why = fmt.Sprintf("still running after %v", limit)
	case <-ctx.Done():
		why = fmt.Sprintf("canceled: %v", ctx.Err())
	}
	a.Logf("fuse: step %d %s; aborting FUSE connection %d", then.ID, why, sess.ConnID())
	if err := sess.Abort(); err != nil {
		a.Logf("fuse: abort: %v", err)
	}
	cancel()
	select {
	case d := <-res:
		note := fmt.Sprintf("step %d %s: aborted FUSE connection %d", then.ID, why, sess.ConnID())
		if d.Error == "" {
			d.Error = note
		} else {
			d.Error += "; " + note
		}
		if d.ExitCode == 0 {
			d.ExitCode = -1
		}
		return d, true
	case <-time.After(time.Minute):
		return proto.Done{ExitCode: -1, Error: fmt.Sprintf("fuse step %s, and step %d did not end within a minute of the abort", why, then.ID)}, true
	}
}

// logWriter turns slog text lines into agent Log messages.
type logWriter struct{ a *Agent }

func (w logWriter) Write(p []byte) (int, error) {
	w.a.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fuseStats are the typed counters a fuse step's Done carries, with what
// the server read and wrote of file data between before and after.
func fuseStats(st fuse.Stats, before, after ioCount) *proto.FUSEStats {
	out := &proto.FUSEStats{Server: st.Server, Transport: st.Transport, InitFlags: st.InitFlags,
		RequestTimeoutS: int(st.RequestTimeout), ServerReadBytes: -1, ServerWrittenBytes: -1, ServerCPUNs: -1}
	if c := st.Conn; c != nil {
		out.Interrupts, out.InterruptsEAGAIN, out.InterruptsENOSYS = c.Interrupts, c.InterruptsEAGAIN, c.InterruptsENOSYS
		out.ReplyENOENT, out.ReplyErrors = c.ReplyENOENT, c.ReplyErrors
	}
	if r := st.Ring; r != nil {
		out.RingRequests = r.Requests
	}
	if before.read >= 0 && after.read >= before.read {
		out.ServerReadBytes = after.read - before.read
	}
	if before.written >= 0 && after.written >= before.written {
		out.ServerWrittenBytes = after.written - before.written
	}
	if before.cpuNs >= 0 && after.cpuNs >= before.cpuNs {
		out.ServerCPUNs = after.cpuNs - before.cpuNs
	}
	return out
}

// ioCount is what a server has read and written of file data so far, and
// the CPU time it has used; -1 when unknown.
type ioCount struct{ read, written, cpuNs int64 }

// serverIO counts what the session's server has read and written of file
// data. klab's servers count it themselves: the agent's rchar would also
// count the workload processes it reaped (a reaped child's I/O is added to
// its parent's), and READ data spliced from the backing files, which never
// pass through the server's memory, would be missing. libfuse's servers
// run as processes of their own (passthrough_hp without splicing): their
// rchar and wchar.
//
// The CPU time is the server process's user and system time: for klab's
// servers the agent's own (they run in it; the workloads and the prepare
// commands run in child processes, whose time is not the agent's own),
// for libfuse's that of their process.
func serverIO(sess *fuse.Session) ioCount {
	if st := sess.Stats(); st.ServedBytes >= 0 && st.WrittenBytes >= 0 {
		return ioCount{read: st.ServedBytes, written: st.WrittenBytes, cpuNs: serverCPU(0)}
	}
	pid := sess.ServerPID()
	r, w := procIO(pid)
	return ioCount{read: r, written: w, cpuNs: serverCPU(pid)}
}

// serverCPU is process pid's CPU time in nanoseconds (pid 0: this
// process), -1 when unknown.
func serverCPU(pid int) int64 {
	d, err := procfs.CPUTime(pid)
	if err != nil {
		return -1
	}
	return d.Nanoseconds()
}

// procIO returns rchar and wchar of process pid, -1 when unknown.
func procIO(pid int) (rchar, wchar int64) {
	rchar, wchar = -1, -1
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "rchar":
			rchar = n
		case "wchar":
			wchar = n
		}
	}
	return
}
