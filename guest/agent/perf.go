package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"klab/guest/perf"
	"klab/guest/proto"
	"klab/guest/workload"
)

// perfTimeout bounds each exchange with perf: starting, switching the
// events on or off, stopping. perfScriptTimeout bounds perf script.
const (
	perfTimeout       = 60 * time.Second
	perfScriptTimeout = 5 * time.Minute
)

// perfRecording is a perf record of the whole guest, started with its
// events off and switched on and off through its control FIFO, so that
// the profile covers the step and not perf's own start-up.
type perfRecording struct {
	bin, dir string
	cmd      *exec.Cmd
	ctl, ack *os.File
	stderr   *workload.TailBuffer
	exited   chan error
	opts     proto.Perf
}

// startPerf starts perf record on every CPU with call graphs and switches
// its events on once it is ready.
func (a *Agent) startPerf(p *proto.Perf) (*perfRecording, error) {
	o := *p
	if o.Event == "" {
		o.Event = proto.PerfCPUClock
	}
	if o.Freq == 0 {
		o.Freq = proto.DefaultPerfFreq
	}
	if o.Event != proto.PerfCPUClock && o.Event != proto.PerfCycles {
		return nil, fmt.Errorf("perf event %q: want %s or %s", o.Event, proto.PerfCPUClock, proto.PerfCycles)
	}
	if o.Freq < 1 || o.Freq > 10000 {
		return nil, fmt.Errorf("perf frequency %d: want 1..10000", o.Freq)
	}
	bin, err := lookPath("perf", a.path())
	if err != nil {
		return nil, fmt.Errorf("perf is not in the guest (a step with profile: perf adds the host's): %w", err)
	}
	// Kernel addresses resolve to names only when the kernel shows them.
	for k, v := range map[string]string{"kernel.kptr_restrict": "0", "kernel.perf_event_paranoid": "-1"} {
		if err := WriteSysctl(a.procSys(), k, v); err != nil {
			a.Logf("perf: %v", err)
		}
	}
	dir, err := os.MkdirTemp("", "klab-perf-")
	if err != nil {
		return nil, fmt.Errorf("perf: %w", err)
	}
	r := &perfRecording{bin: bin, dir: dir, opts: o, stderr: &workload.TailBuffer{}, exited: make(chan error, 1)}
	fail := func(err error) (*perfRecording, error) {
		r.close()
		return nil, err
	}
	ctl, ack := filepath.Join(dir, "ctl"), filepath.Join(dir, "ack")
	for _, f := range []string{ctl, ack} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			return fail(fmt.Errorf("perf: mkfifo %s: %w", f, err))
		}
	}
	// Both ends opened read-write: neither open blocks for perf.
	if r.ctl, err = os.OpenFile(ctl, os.O_RDWR, 0); err != nil {
		return fail(fmt.Errorf("perf: %w", err))
	}
	if r.ack, err = os.OpenFile(ack, os.O_RDWR, 0); err != nil {
		return fail(fmt.Errorf("perf: %w", err))
	}
	r.cmd = exec.Command(bin, "record", "--all-cpus", "--call-graph", "fp",
		"--event", o.Event, "--freq", strconv.Itoa(o.Freq), "--delay", "-1",
		"--control", "fifo:"+ctl+","+ack, "--output", filepath.Join(dir, "perf.data"))
	r.cmd.Env = a.execEnv(nil)
	r.cmd.Stdout = r.stderr
	r.cmd.Stderr = r.stderr
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		return fail(fmt.Errorf("perf: %w", err))
	}
	go func() { r.exited <- r.cmd.Wait() }()
	if err := r.command("enable"); err != nil {
		return fail(err)
	}
	return r, nil
}

// command sends perf a control command and waits for its ack.
func (r *perfRecording) command(c string) error {
	if _, err := r.ctl.WriteString(c + "\n"); err != nil {
		return fmt.Errorf("perf %s: %w", c, err)
	}
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 16)
		for {
			n, err := r.ack.Read(buf)
			if err != nil {
				got <- err
				return
			}
			if bytes.Contains(buf[:n], []byte("ack")) {
				got <- nil
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			return fmt.Errorf("perf %s: %w", c, err)
		}
		return nil
	case err := <-r.exited:
		r.exited <- err
		return fmt.Errorf("perf %s: perf exited (%v): %s", c, err, tail(r.stderr))
	case <-time.After(perfTimeout):
		// The reader goroutine ends when close closes the FIFO.
		return fmt.Errorf("perf %s: no answer in %v: %s", c, perfTimeout, tail(r.stderr))
	}
}

// finish switches the events off, stops perf, and folds what it
// recorded into a Profile. It always returns a Profile: one whose Error
// says why it is empty when something failed.
func (r *perfRecording) finish(ctx context.Context) *proto.Profile {
	defer r.close()
	p := &proto.Profile{Event: r.opts.Event, Freq: r.opts.Freq}
	if err := r.command("disable"); err != nil {
		p.Error = err.Error()
		return p
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGINT)
	select {
	case err := <-r.exited:
		if err != nil && !isSignalExit(err) {
			p.Error = fmt.Sprintf("perf record: %v: %s", err, tail(r.stderr))
			return p
		}
	case <-time.After(perfTimeout):
		p.Error = fmt.Sprintf("perf record did not stop in %v: %s", perfTimeout, tail(r.stderr))
		return p
	}
	sctx, cancel := context.WithTimeout(ctx, perfScriptTimeout)
	defer cancel()
	script := exec.CommandContext(sctx, r.bin, "script", "--input", filepath.Join(r.dir, "perf.data"))
	stderr := &workload.TailBuffer{}
	script.Stderr = stderr
	out, err := script.StdoutPipe()
	if err != nil {
		p.Error = "perf script: " + err.Error()
		return p
	}
	if err := script.Start(); err != nil {
		p.Error = "perf script: " + err.Error()
		return p
	}
	f, ferr := perf.Fold(out, perf.Limits{})
	truncated := ferr == nil && f.Truncated
	if ferr != nil || truncated {
		// Fold stopped reading: perf script would block on the pipe.
		_ = script.Process.Kill()
	}
	werr := script.Wait()
	switch {
	case ferr != nil:
		p.Error = "perf script: " + ferr.Error()
		return p
	case werr != nil && !truncated:
		p.Error = fmt.Sprintf("perf script: %v: %s", werr, tail(stderr))
		return p
	}
	p.Samples, p.Dropped = f.Samples, f.Dropped
	p.Stacks = make([]proto.ProfileStack, len(f.Stacks))
	for i, s := range f.Stacks {
		p.Stacks[i] = proto.ProfileStack{Stack: s.Stack, Count: s.Count}
	}
	if p.Samples == 0 {
		p.Error = "perf recorded no samples: " + tail(r.stderr)
	}
	return p
}

// close kills perf if it still runs and removes its files.
func (r *perfRecording) close() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		select {
		case err := <-r.exited:
			r.exited <- err
		case <-time.After(5 * time.Second):
		}
	}
	for _, f := range []*os.File{r.ctl, r.ack} {
		if f != nil {
			f.Close()
		}
	}
	os.RemoveAll(r.dir)
}

// isSignalExit reports whether err is the exit of a process that a
// signal ended, or that exited with a signal's status (perf record exits
// with 130 or 0 after SIGINT, depending on its version).
func isSignalExit(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return true
	}
	return ee.ExitCode() == 130
}

// tail is the end of what a program printed, on one line.
func tail(b *workload.TailBuffer) string {
	s := b.String()
	if i := len(s) - 400; i > 0 {
		s = s[i:]
	}
	return strings.Join(strings.Fields(s), " ")
}
