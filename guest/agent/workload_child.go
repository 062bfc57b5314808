package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"klab/guest/proto"
	"klab/guest/workload"
)

// WorkloadChildArg is the hidden first argument with which the agent's
// executable runs one workload as a child process (WorkloadChildMain).
const WorkloadChildArg = "__klab-workload"

// Why a child process: the agent also serves FUSE mounts (fuse steps), and
// a workload usually runs against such a mount. A job thread that faults on
// an mmap'd FUSE file waits in the kernel for the FUSE server; if the Go
// runtime of the same process then stops the world (garbage collection),
// it waits for that thread forever while the server's goroutines are
// stopped: the agent deadlocks. In its own process the workload can only
// wait for the agent, never the reverse. It also keeps the agent's
// goroutines and heap out of the measured process, as fio is.

// childLine is one line the child writes on stdout: a sample while it
// runs, then the final metrics and error.
type childLine struct {
	Sample  *proto.Sample  `json:"sample,omitempty"`
	Metrics *proto.Metrics `json:"metrics,omitempty"`
	Error   string         `json:"error,omitempty"`
	Final   bool           `json:"final,omitempty"`
}

// childRequest is what the child reads on stdin.
type childRequest struct {
	Workload *proto.WorkloadStep `json:"workload"`
	// Deadline, when set, is when the child stops the workload (the
	// step's timeout), in Unix nanoseconds.
	Deadline int64 `json:"deadline_unix_ns,omitempty"`
}

// childGrace is how long a cancelled child may take to report what it
// measured before it is killed.
const childGrace = 5 * time.Second

// maxChildLine bounds one line from the child.
const maxChildLine = 1 << 20

// workloadChildCommand returns the argv that runs a workload child: this
// executable with WorkloadChildArg. Tests replace it.
var workloadChildCommand = func() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return []string{exe, WorkloadChildArg}, nil
}

// runWorkloadChild runs s in a child process and relays its samples to
// onSample. The child stops at ctx's deadline by itself, keeping what it
// measured; cancelling ctx sends it SIGTERM, which does the same, and
// SIGKILL when it does not end within childGrace.
func runWorkloadChild(ctx context.Context, s *proto.WorkloadStep, onSample func(proto.Sample)) (*proto.Metrics, error) {
	argv, err := workloadChildCommand()
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	req := childRequest{Workload: s}
	if dl, ok := ctx.Deadline(); ok {
		req.Deadline = dl.UnixNano()
	}
	spec, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	// The child stops itself at the deadline; only a cancellation, or a
	// child that overruns its deadline by childGrace, signals it.
	cmdCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopAfter := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			time.AfterFunc(childGrace, cancel)
			return
		}
		cancel()
	})
	defer stopAfter()
	cmd := exec.CommandContext(cmdCtx, argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(spec)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{b: &stderr, max: 64 << 10}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = childGrace
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("workload: start %s: %w", argv[0], err)
	}
	var final *childLine
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), maxChildLine)
	for sc.Scan() {
		var l childLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue
		}
		switch {
		case l.Final:
			final = &l
		case l.Sample != nil && onSample != nil:
			onSample(*l.Sample)
		}
	}
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if final == nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("workload: %w", ctx.Err())
		}
		return nil, fmt.Errorf("workload: the engine's process ended without a result (%v): %s", werr, bytes.TrimSpace(stderr.Bytes()))
	}
	if final.Error != "" {
		return final.Metrics, errors.New(final.Error)
	}
	return final.Metrics, nil
}

// WorkloadChildMain is the child's side: it reads a proto.WorkloadStep as
// JSON on stdin, runs it, and writes samples and the final result as JSON
// lines on stdout. It returns the process's exit status.
func WorkloadChildMain(stdin io.Reader, stdout io.Writer) int {
	var req childRequest
	if err := json.NewDecoder(io.LimitReader(stdin, maxChildLine)).Decode(&req); err != nil || req.Workload == nil {
		fmt.Fprintf(os.Stderr, "klab-agent %s: bad workload on stdin: %v\n", WorkloadChildArg, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if req.Deadline != 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Unix(0, req.Deadline))
		defer cancel()
	}
	var mu sync.Mutex
	enc := json.NewEncoder(stdout)
	emit := func(l childLine) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(l)
	}
	m, err := workload.Run(ctx, req.Workload, workload.Options{
		OnSample: func(smp proto.Sample) { emit(childLine{Sample: &smp}) },
		Version:  Version,
	})
	final := childLine{Metrics: m, Final: true}
	if err != nil {
		final.Error = err.Error()
	}
	emit(final)
	return 0
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
