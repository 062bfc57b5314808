// Package agent is the klab guest agent: the program that runs as u-root's
// uinit inside a klab VM. It prepares the guest (mounts, kernel modules),
// opens the agent channel to the host, greets the host with a proto.Hello and
// then executes the host's steps one at a time, ending each with exactly one
// proto.Done.
//
// The loop (Agent.Serve) only talks over an io.Reader and an io.Writer and
// never mounts, loads modules or powers down, so that it can be tested on the
// host. Those privileged steps (Setup, OpenChannel, PowerOff) are separate
// functions that guest/cmd/klab-agent calls.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"klab/guest/proto"
)

// Version identifies the agent build. It is set at link time with
// -ldflags "-X klab/guest/agent.Version=...".
var Version = "dev"

// DefaultPath is the PATH exec steps run with unless Agent.Path says
// otherwise: u-root's busybox first, then the usual system directories.
const DefaultPath = "/bbin:/bin:/usr/bin:/sbin:/usr/sbin:/usr/local/bin:/usr/local/sbin"

// DefaultProcSys is where sysctl keys live.
const DefaultProcSys = "/proc/sys"

// DefaultOutputGrace is how long an exec step keeps collecting output after
// its command exited. Output still open after that belongs to background
// processes the command left behind; it is drained and dropped so that the
// step can end.
const DefaultOutputGrace = 250 * time.Millisecond

// Agent runs the host's steps over a message channel. The zero value is not
// usable: In and Out must be set. An Agent must not be copied after first
// use.
type Agent struct {
	// In carries messages from the host.
	In io.Reader
	// Out carries messages to the host.
	Out io.Writer
	// ProcSys is the directory sysctl keys are resolved under; empty means
	// DefaultProcSys.
	ProcSys string
	// Path is the PATH exec steps run with and are looked up in; empty means
	// DefaultPath. A PATH in a step's Env overrides it.
	Path string
	// OutputGrace bounds how long an exec step waits for output after its
	// command exited; zero means DefaultOutputGrace.
	OutputGrace time.Duration
	// Console, when not nil, also receives every Log line the agent sends
	// (in the guest: the agent's stdout, which is the console).
	Console io.Writer
	// SysrqTrigger is the file sysrq keys are written to; empty means
	// /proc/sysrq-trigger.
	SysrqTrigger string
	// Handlers run the step kinds beyond exec and sysctl (fuse, workload,
	// fio, ...). A missing kind is answered as unknown.
	Handlers map[proto.StepKind]Handler
	// Libfuse maps a libfuse server kind (proto.FUSELibfusePassthroughLL,
	// proto.FUSELibfusePassthroughHP) to its binary; a kind not in it is
	// where the initramfs carries it (proto.LibfusePassthroughLLPath,
	// proto.LibfusePassthroughHPPath).
	Libfuse map[string]string

	once  sync.Once
	enc   *proto.Encoder
	stdin stdinRouter
}

// Handler runs one step of a kind registered in Agent.Handlers. It may send
// messages (samples, logs) through a.Send while it runs, and returns the
// step's Done; the agent fills in its Step and DurationNs.
type Handler func(ctx context.Context, a *Agent, s *proto.Step) proto.Done

// RunStep runs a step as Serve would, without sending its Done. Handlers
// use it for the step they wrap (e.g. the workload a fuse step mounts for).
func (a *Agent) RunStep(ctx context.Context, s *proto.Step) proto.Done { return a.runStep(ctx, s) }

func (a *Agent) encoder() *proto.Encoder {
	a.once.Do(func() { a.enc = proto.NewEncoder(a.Out) })
	return a.enc
}

// Send writes one message to the host. It is safe for concurrent use.
func (a *Agent) Send(m *proto.Message) error {
	if err := a.encoder().Encode(m); err != nil {
		return fmt.Errorf("agent: send %s: %w", m.Kind, err)
	}
	return nil
}

// SendHello sends h to the host. When the message would exceed
// proto.MaxLine (a very large /proc/config.gz), it is sent without ConfigGz
// and a Log message says so.
func (a *Agent) SendHello(h *proto.Hello) error {
	err := a.Send(&proto.Message{Kind: proto.KindHello, Hello: h})
	if errors.Is(err, proto.ErrLineTooLong) && len(h.ConfigGz) > 0 {
		n := len(h.ConfigGz)
		h2 := *h
		h2.ConfigGz = nil
		if err = a.Send(&proto.Message{Kind: proto.KindHello, Hello: &h2}); err == nil {
			a.Logf("hello: dropped /proc/config.gz (%d bytes): message over proto.MaxLine", n)
		}
	}
	return err
}

// Logf sends a diagnostic line to the host as a Log message, and to Console
// when it is set. Errors are ignored: logging is best effort.
func (a *Agent) Logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if a.Console != nil {
		fmt.Fprintf(a.Console, "klab-agent: %s\n", msg)
	}
	_ = a.Send(&proto.Message{Kind: proto.KindLog, Log: &proto.Log{Msg: msg}})
}

// decoded is one result of proto.Decoder.Decode.
type decoded struct {
	m   *proto.Message
	err error
	// broken is set when err came from the channel itself (EOF, a read
	// error) rather than from a malformed line.
	broken bool
}

// errRecorder remembers the last error its reader returned, so that Serve
// can tell a broken channel from a malformed line. Only the goroutine that
// decodes uses it.
type errRecorder struct {
	r   io.Reader
	err error
}

func (e *errRecorder) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// Serve reads messages from In and runs each Step in order, ending each with
// exactly one Done. It returns nil after a Shutdown message, once Bye has
// been sent. It returns an error wrapping io.EOF when the host closes the
// channel, the reader's error when reading fails, a write error when
// messages can no longer be sent, and ctx.Err() when ctx is done (a running
// step is killed and still gets its Done). Malformed and over-long lines are
// reported with a Log message and skipped.
//
// Serve never powers the machine down; its caller does that whatever Serve
// returns.
func (a *Agent) Serve(ctx context.Context) error {
	rec := &errRecorder{r: a.In}
	dec := proto.NewDecoder(rec)
	msgs := make(chan decoded)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			m, err := dec.Decode()
			if err == nil && m.Kind == proto.KindSysrq {
				// Out of band: a running step must not delay it.
				a.sysrq(m.Sysrq)
				continue
			}
			if err == nil && m.Kind == proto.KindInput {
				// Out of band too: the step that reads it is running.
				a.stdin.deliver(m.Input)
				continue
			}
			if err == nil && m.Kind == proto.KindStep && m.Step.Stdin {
				// Before the step's first Input can arrive.
				a.stdin.open(m.Step.ID)
			}
			broken := err != nil && rec.err != nil && errors.Is(err, rec.err)
			select {
			case msgs <- decoded{m: m, err: err, broken: broken}:
			case <-stop:
				return
			}
			if broken {
				return
			}
		}
	}()

	for {
		var d decoded
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d = <-msgs:
		}
		if d.err != nil {
			switch {
			case d.broken && errors.Is(d.err, io.EOF):
				return fmt.Errorf("agent: host closed the channel: %w", d.err)
			case d.broken:
				return fmt.Errorf("agent: reading from host: %w", d.err)
			default:
				// The decoder consumed the bad line; go on with the next.
				a.Logf("skipping bad message from host: %v", d.err)
				continue
			}
		}
		switch d.m.Kind {
		case proto.KindStep:
			done := a.runStep(ctx, d.m.Step)
			if err := a.Send(&proto.Message{Kind: proto.KindDone, Done: &done}); err != nil {
				return err
			}
		case proto.KindShutdown:
			return a.Send(&proto.Message{Kind: proto.KindBye})
		default:
			a.Logf("ignoring %s message from host", d.m.Kind)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// runStep executes one step and returns its Done.
func (a *Agent) runStep(ctx context.Context, s *proto.Step) proto.Done {
	start := time.Now()
	var rec *perfRecording
	var perfErr error
	if s.Perf != nil {
		if rec, perfErr = a.startPerf(s.Perf); perfErr != nil {
			a.Logf("step %d: no profile: %v", s.ID, perfErr)
		}
	}
	d := a.dispatch(ctx, s)
	switch {
	case rec != nil:
		d.Profile = rec.finish(ctx)
	case perfErr != nil:
		d.Profile = &proto.Profile{Event: s.Perf.Event, Freq: s.Perf.Freq, Error: perfErr.Error()}
	}
	d.Step = s.ID
	d.DurationNs = time.Since(start).Nanoseconds()
	return d
}

// dispatch runs s by its kind.
func (a *Agent) dispatch(ctx context.Context, s *proto.Step) proto.Done {
	var d proto.Done
	switch s.Kind {
	case proto.StepExec:
		d = a.runExec(ctx, s)
	case proto.StepSysctl:
		d = proto.Done{}
		if err := WriteSysctl(a.procSys(), s.Key, s.Value); err != nil {
			d.ExitCode = 1
			d.Error = err.Error()
		}
	default:
		if h := a.Handlers[s.Kind]; h != nil {
			d = h(ctx, a, s)
		} else {
			d = proto.Done{ExitCode: -1, Error: fmt.Sprintf("unknown step kind %q", s.Kind)}
		}
	}
	return d
}

func (a *Agent) procSys() string {
	if a.ProcSys != "" {
		return a.ProcSys
	}
	return DefaultProcSys
}

func (a *Agent) path() string {
	if a.Path != "" {
		return a.Path
	}
	return DefaultPath
}

func (a *Agent) outputGrace() time.Duration {
	if a.OutputGrace > 0 {
		return a.OutputGrace
	}
	return DefaultOutputGrace
}

// sysrq writes each key to the sysrq trigger and logs what it did.
func (a *Agent) sysrq(keys string) {
	path := a.SysrqTrigger
	if path == "" {
		path = "/proc/sysrq-trigger"
	}
	for _, k := range keys {
		if !strings.ContainsRune("0123456789abcdefghijklmnopqrstuvwxyz", k) {
			a.Logf("sysrq: refusing key %q", k)
			continue
		}
		if err := os.WriteFile(path, []byte{byte(k)}, 0); err != nil {
			a.Logf("sysrq %c: %v", k, err)
			continue
		}
		a.Logf("sysrq %c triggered", k)
	}
}
