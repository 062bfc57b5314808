package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
)

// runExec runs an exec step: the command gets /dev/null as stdin (or, with
// Step.Stdin, a pipe fed by the host's Input messages), its own
// process group, and its stdout and stderr are streamed to the host as
// Output messages while it runs. Step and DurationNs of the result are
// filled in by runStep.
func (a *Agent) runExec(ctx context.Context, s *proto.Step) proto.Done {
	if s.Stdin {
		defer a.stdin.forget(s.ID)
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return proto.Done{ExitCode: -1, Error: "exec step without argv"}
	}
	env := a.execEnv(s.Env)
	var path string
	var err error
	if s.Root != "" {
		env = chrootEnv(s.Env)
		path, err = lookPathIn(s.Root, s.Argv[0], envValue(env, "PATH"))
	} else {
		path, err = lookPath(s.Argv[0], envValue(env, "PATH"))
	}
	if err != nil {
		return proto.Done{ExitCode: -1, Error: err.Error()}
	}
	if s.Root != "" {
		if m, err := inRoot(s.Root, cmp.Or(s.Dir, "/")); err != nil || m&unix.S_IFMT != unix.S_IFDIR {
			return proto.Done{ExitCode: -1, Error: fmt.Sprintf("exec %q: working directory %s in %s: not a directory (%v)", s.Argv[0], cmp.Or(s.Dir, "/"), s.Root, err)}
		}
	} else if s.Dir != "" {
		if fi, err := os.Stat(s.Dir); err != nil {
			return proto.Done{ExitCode: -1, Error: fmt.Sprintf("exec %q: working directory: %v", s.Argv[0], err)}
		} else if !fi.IsDir() {
			return proto.Done{ExitCode: -1, Error: fmt.Sprintf("exec %q: working directory %s: not a directory", s.Argv[0], s.Dir)}
		}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return proto.Done{ExitCode: -1, Error: fmt.Sprintf("stdout pipe: %v", err)}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return proto.Done{ExitCode: -1, Error: fmt.Sprintf("stderr pipe: %v", err)}
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        argvFor(path, s.Argv),
		Env:         env,
		Dir:         s.Dir,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if s.Root != "" {
		// The child changes root, then directory, then runs path: all
		// three inside the userspace.
		cmd.Args, cmd.Dir, cmd.SysProcAttr.Chroot = s.Argv, cmp.Or(s.Dir, "/"), s.Root
	}
	var inQ *stdinQueue
	var inW *os.File
	if s.Stdin {
		if inQ = a.stdin.get(s.ID); inQ == nil { // a step run outside Serve
			inQ = newStdinQueue()
			inQ.put(&proto.Input{EOF: true})
		}
		var inR *os.File
		if inR, inW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return proto.Done{ExitCode: -1, Error: fmt.Sprintf("stdin pipe: %v", err)}
		}
		cmd.Stdin = inR
		defer inR.Close()
	}
	err = cmd.Start()
	// The child holds its own copies of the write ends now.
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inQ.close()
			inW.Close()
		}
		return proto.Done{ExitCode: -1, Error: err.Error()}
	}
	if inW != nil {
		defer inQ.close()
		go func() {
			if inQ.pump(inW) {
				a.Logf("step %d: standard input over %d MiB: the rest was dropped (copy big inputs in with --file)", s.ID, MaxStdinQueue>>20)
			}
		}()
	}

	fw := &forwarder{a: a, step: s.ID}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go fw.pump(outR, proto.Stdout, &pumps)
	go fw.pump(errR, proto.Stderr, &pumps)

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var deadline <-chan time.Time
	timeout := time.Duration(s.TimeoutMs) * time.Millisecond
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	var killed string
	var timedOut bool
	select {
	case err = <-waited:
	case <-deadline:
		killGroup(cmd.Process.Pid)
		killed = fmt.Sprintf("timed out after %v", timeout)
		timedOut = true
		err = <-waited
	case <-ctx.Done():
		killGroup(cmd.Process.Pid)
		killed = fmt.Sprintf("canceled: %v", ctx.Err())
		err = <-waited
	}

	// The pipes reach EOF once every process holding them is gone. A
	// background child may keep them open forever: wait a little, then
	// stop forwarding so that no Output follows the Done.
	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	grace := time.NewTimer(a.outputGrace())
	defer grace.Stop()
	select {
	case <-drained:
	case <-grace.C:
		fw.detach()
	}

	d := proto.Done{}
	var ee *exec.ExitError
	switch {
	case killed != "":
		d.ExitCode = -1
		d.Error = killed
		d.TimedOut = timedOut
	case err == nil:
	case errors.As(err, &ee):
		d.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			d.ExitCode = -1
			d.Error = fmt.Sprintf("killed by signal %v", ws.Signal())
		}
	default:
		d.ExitCode = -1
		d.Error = err.Error()
	}
	fw.mu.Lock()
	ferr := fw.err
	fw.mu.Unlock()
	if ferr != nil && d.Error == "" {
		d.Error = fmt.Sprintf("forwarding output: %v", ferr)
	}
	return d
}

// killGroup kills the process group led by pid.
func killGroup(pid int) {
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// forwarder sends a step's output to the host until it is detached.
type forwarder struct {
	a    *Agent
	step int

	mu       sync.Mutex // guards detached and err, and orders sends
	detached bool
	err      error
}

// pump reads r until EOF and forwards each read as one Output message of at
// most proto.MaxChunk bytes. After detach it keeps reading but drops the
// data, so that writers left behind do not get EPIPE.
func (f *forwarder) pump(r *os.File, stream proto.Stream, wg *sync.WaitGroup) {
	defer wg.Done()
	defer r.Close()
	buf := make([]byte, proto.MaxChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			f.send(stream, buf[:n])
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				f.mu.Lock()
				if f.err == nil && !f.detached {
					f.err = fmt.Errorf("reading %s: %w", stream, err)
				}
				f.mu.Unlock()
			}
			return
		}
	}
}

func (f *forwarder) send(stream proto.Stream, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.detached || f.err != nil {
		return
	}
	// Encode marshals synchronously, so data may be reused afterwards.
	f.err = f.a.Send(&proto.Message{Kind: proto.KindOutput, Output: &proto.Output{Step: f.step, Stream: stream, Data: data}})
}

func (f *forwarder) detach() {
	f.mu.Lock()
	f.detached = true
	f.mu.Unlock()
}

// execEnv returns the environment of an exec step: the agent's own, with
// PATH set to the agent's path, then the step's extra pairs (which win).
func (a *Agent) execEnv(extra []string) []string {
	base := os.Environ()
	env := make([]string, 0, len(base)+1+len(extra))
	for _, kv := range base {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+a.path())
	return append(env, extra...)
}

// envValue returns the last value of key in env.
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath finds file in the directories of pathEnv, as a shell would. A
// name containing a slash is used as is (relative to the step's Dir).
func lookPath(file, pathEnv string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %q: executable file not found in PATH %s", file, pathEnv)
}

// argvFor returns the argv to exec path with. When path is a symlink (as
// every u-root busybox command is), argv[0] becomes the full path, because
// the busybox picks the command by resolving argv[0]'s symlinks.
func argvFor(path string, argv []string) []string {
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 || strings.Contains(argv[0], "/") {
		return argv
	}
	out := append([]string{path}, argv[1:]...)
	return out
}
