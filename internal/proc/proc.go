// Package proc is klab's one way to run a host subprocess: every qemu, apt,
// dpkg, make and git call goes through Run or Command. It sets a timeout, a
// parent-death signal so that children never outlive klab, and captures
// output into a typed error.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Error is returned when a command fails to start, exits non-zero or times
// out. It carries the tail of the command's combined output.
type Error struct {
	// Argv is the command line.
	Argv []string
	// ExitCode is the exit status, or -1 when the command did not exit on
	// its own.
	ExitCode int
	// Output is the last part of stdout and stderr (at most 64 KiB).
	Output string
	// TimedOut is true when the command was killed at its timeout.
	TimedOut bool
	// Err is the underlying error.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", strings.Join(e.Argv, " "))
	switch {
	case e.TimedOut:
		b.WriteString(": timed out")
	case e.ExitCode >= 0:
		fmt.Fprintf(&b, ": exit status %d", e.ExitCode)
	default:
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if out := strings.TrimSpace(e.Output); out != "" {
		lines := strings.Split(out, "\n")
		if len(lines) > 12 {
			lines = lines[len(lines)-12:]
		}
		b.WriteString("\n  ")
		b.WriteString(strings.Join(lines, "\n  "))
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Opts tunes Run.
type Opts struct {
	// Timeout kills the command after this long; 0 means no limit other
	// than ctx.
	Timeout time.Duration
	// Dir is the working directory.
	Dir string
	// Env replaces the environment when non-nil.
	Env []string
	// Stdin feeds the command.
	Stdin io.Reader
	// Stdout and Stderr, when set, also receive the output as it comes.
	Stdout, Stderr io.Writer
}

const keepTail = 64 << 10

// tailBuffer keeps the last keepTail bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*keepTail {
		t.b = append(t.b[:0], t.b[len(t.b)-keepTail:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if len(t.b) > keepTail {
		return string(t.b[len(t.b)-keepTail:])
	}
	return string(t.b)
}

// Command returns an exec.Cmd for argv that dies with klab: it gets
// SIGKILL when klab's thread exits (Pdeathsig) and is killed with its process
// group when ctx ends.
func Command(ctx context.Context, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		// Kill the whole group: helpers such as apt's methods are children.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// Run runs argv and returns its stdout. On failure the error is an *Error.
func Run(ctx context.Context, opts Opts, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errors.New("proc: empty command")
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	cmd := Command(ctx, argv...)
	cmd.Dir = opts.Dir
	if opts.Env != nil {
		cmd.Env = opts.Env
	}
	cmd.Stdin = opts.Stdin
	var stdout bytes.Buffer
	var tail tailBuffer
	cmd.Stdout = io.MultiWriter(&stdout, &tail)
	cmd.Stderr = &tail
	if opts.Stdout != nil {
		cmd.Stdout = io.MultiWriter(cmd.Stdout, opts.Stdout)
	}
	if opts.Stderr != nil {
		cmd.Stderr = io.MultiWriter(cmd.Stderr, opts.Stderr)
	}
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	pe := &Error{Argv: argv, ExitCode: -1, Output: tail.String(), Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		pe.ExitCode = ee.ExitCode()
	}
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		pe.TimedOut = true
	}
	return stdout.Bytes(), pe
}
