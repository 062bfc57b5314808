// Package proto holds the wire types shared by the klab host and the guest
// agent, and the codec that moves them.
//
// The channel is a byte stream (a virtio-serial port, or a second ISA serial
// port on kernels without virtio console). Every message is one JSON object
// on one line. Each side sends Messages; the Kind field says which of the
// optional payload fields is set. Everything the guest sends is untrusted:
// the host decodes with a line-length limit and validates what it uses.
package proto

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Version is the protocol version. The host refuses a Hello with another
// version, so that a stale initramfs is caught at once.
const Version = 1

// MaxLine is the longest line either side accepts, in bytes. A longer line is
// a protocol error (ErrLineTooLong), never an allocation of that size.
const MaxLine = 1 << 20

// MaxChunk is the most output bytes an agent packs into one Output event.
const MaxChunk = 32 << 10

// ShellExitPrefix starts the line the agent prints on the console when
// the shell of klab shell exits, before it powers the guest off; the
// shell's exit status (0 to 255) follows. The console is the channel of
// klab shell, which reads the status from its log.
const ShellExitPrefix = "klab shell: the shell exited with status "

// Kind names a message type.
type Kind string

// Message kinds. The guest sends Hello, Output, Done, Log and Bye; the host
// sends Step and Shutdown.
const (
	KindHello    Kind = "hello"
	KindStep     Kind = "step"
	KindOutput   Kind = "output"
	KindDone     Kind = "done"
	KindLog      Kind = "log"
	KindBye      Kind = "bye"
	KindShutdown Kind = "shutdown"
	// KindSysrq asks the agent to write Sysrq's keys to
	// /proc/sysrq-trigger at once, even while a step runs: the host's way
	// to get task dumps from a guest that looks hung.
	KindSysrq Kind = "sysrq"
	// KindSample carries a workload's periodic sample while a step runs.
	KindSample Kind = "sample"
	// KindInput carries the host's standard input for a running exec step
	// that asked for it (Step.Stdin), out of band like KindSysrq.
	KindInput Kind = "input"
	// KindTest reports one test of a running StepFstests as it ends.
	KindTest Kind = "test"
)

// Message is one line on the channel.
type Message struct {
	// V is the protocol version of the sender.
	V int `json:"v"`
	// Kind says which payload field below is set.
	Kind Kind `json:"kind"`
	// Hello is set for KindHello.
	Hello *Hello `json:"hello,omitempty"`
	// Step is set for KindStep.
	Step *Step `json:"step,omitempty"`
	// Output is set for KindOutput.
	Output *Output `json:"output,omitempty"`
	// Done is set for KindDone.
	Done *Done `json:"done,omitempty"`
	// Log is set for KindLog.
	Log *Log `json:"log,omitempty"`
	// Sample is set for KindSample.
	Sample *Sample `json:"sample,omitempty"`
	// Sysrq is set for KindSysrq: the sysrq keys to trigger, in order.
	Sysrq string `json:"sysrq,omitempty"`
	// Input is set for KindInput.
	Input *Input `json:"input,omitempty"`
	// Test is set for KindTest.
	Test *TestResult `json:"test,omitempty"`
}

// Input is a chunk of standard input for step Step; EOF ends it.
type Input struct {
	Step int    `json:"step"`
	Data []byte `json:"data,omitempty"`
	EOF  bool   `json:"eof,omitempty"`
}

// Hello is the agent's first message, sent once its channel is open.
type Hello struct {
	// AgentVersion identifies the agent build.
	AgentVersion string `json:"agent_version"`
	// Uname is the guest's `uname -a` fields.
	Uname Uname `json:"uname"`
	// CPUs is the number of online CPUs in the guest.
	CPUs int `json:"cpus"`
	// MemKiB is MemTotal from /proc/meminfo.
	MemKiB int64 `json:"mem_kib"`
	// ConfigGz is /proc/config.gz when the kernel has it (base64 in JSON).
	ConfigGz []byte `json:"config_gz,omitempty"`
	// FUSE is true when /dev/fuse exists after the agent's set-up: fuse is
	// built in or loaded, or a spare module that the first open of
	// /dev/fuse loads.
	FUSE bool `json:"fuse"`
	// IOUring is true when io_uring_setup is not ENOSYS.
	IOUring bool `json:"io_uring"`
	// FUSEUring is the content of /sys/module/fuse/parameters/enable_uring,
	// empty when the kernel has no FUSE-over-io_uring.
	FUSEUring string `json:"fuse_uring,omitempty"`
	// Modules lists the modules the agent loaded, in order, with the result.
	Modules []ModuleLoad `json:"modules,omitempty"`
	// Channel names the device the agent talks over.
	Channel string `json:"channel"`
	// BootNanos is the guest's CLOCK_BOOTTIME when Hello was sent.
	BootNanos int64 `json:"boot_ns"`
	// StartNanos is CLOCK_BOOTTIME when the agent started.
	StartNanos int64 `json:"start_ns,omitempty"`
	// SetupNanos is how long mounting and module loading took.
	SetupNanos int64 `json:"setup_ns,omitempty"`
	// ChannelNanos is how long the agent waited for its channel.
	ChannelNanos int64 `json:"channel_ns,omitempty"`
}

// Uname mirrors the fields of uname(2).
type Uname struct {
	Sysname string `json:"sysname"`
	Release string `json:"release"`
	Version string `json:"version"`
	Machine string `json:"machine"`
}

// ModuleLoad is the result of loading one kernel module in the guest.
type ModuleLoad struct {
	Name  string `json:"name"`
	Error string `json:"error,omitempty"`
}

// StepKind names a step type.
type StepKind string

// Step kinds the agent executes.
const (
	// StepExec runs a command, streaming its output.
	StepExec StepKind = "exec"
	// StepSysctl writes a value under /proc/sys.
	StepSysctl StepKind = "sysctl"
	// StepFUSE mounts a klab FUSE server, runs its Then step against the
	// mount, and tears it down (guest/proto/fuse.go).
	StepFUSE StepKind = "fuse"
	// StepWorkload runs klab's Go I/O engine (guest/proto/workload.go).
	StepWorkload StepKind = "workload"
	// StepFio runs fio and maps its JSON into the same metrics.
	StepFio StepKind = "fio"
	// StepShare mounts a host directory the VM exports over virtio-9p
	// (klab boot --share).
	StepShare StepKind = "share"
	// StepUserspace mounts a userspace image from a read-only disk and
	// prepares it for exec steps that run chrooted into it (Step.Root;
	// guest/proto/userspace.go).
	StepUserspace StepKind = "userspace"
	// StepFstests runs fstests chrooted into a userspace, one KindTest
	// message per test (guest/proto/fstests.go).
	StepFstests StepKind = "fstests"
)

// Step is one unit of work the host asks the agent to do. Each Step ends
// with exactly one Done carrying the same ID.
type Step struct {
	// ID is chosen by the host and echoed in Output and Done.
	ID int `json:"id"`
	// Kind says which of the fields below apply.
	Kind StepKind `json:"kind"`
	// Argv is the command for StepExec. Argv[0] is looked up in PATH.
	Argv []string `json:"argv,omitempty"`
	// Env is extra KEY=VALUE pairs for StepExec.
	Env []string `json:"env,omitempty"`
	// Dir is the working directory for StepExec.
	Dir string `json:"dir,omitempty"`
	// Key is the sysctl name for StepSysctl, in dotted or slash form
	// (fs.fuse.default_request_timeout or fs/fuse/default_request_timeout).
	Key string `json:"key,omitempty"`
	// Value is written to the sysctl.
	Value string `json:"value,omitempty"`
	// TimeoutMs bounds the step inside the guest; 0 means none.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
	// FUSE is set for StepFUSE.
	FUSE *FUSEStep `json:"fuse,omitempty"`
	// Workload is set for StepWorkload.
	Workload *WorkloadStep `json:"workload,omitempty"`
	// Fio is set for StepFio.
	Fio *FioStep `json:"fio,omitempty"`
	// Share is set for StepShare.
	Share *ShareStep `json:"share,omitempty"`
	// Userspace is set for StepUserspace.
	Userspace *UserspaceStep `json:"userspace,omitempty"`
	// Fstests is set for StepFstests.
	Fstests *FstestsStep `json:"fstests,omitempty"`
	// Root, for StepExec, runs the command chrooted into this directory
	// (a userspace a StepUserspace mounted): Argv[0] is looked up in the
	// root's PATH and Dir is a path inside the root.
	Root string `json:"root,omitempty"`
	// Perf, when set, records the whole guest with perf while the step
	// runs and returns the call graph in Done.Profile.
	Perf *Perf `json:"perf,omitempty"`
	// Stdin, for StepExec, gives the command a pipe fed by the host's
	// Input messages instead of /dev/null.
	Stdin bool `json:"stdin,omitempty"`
}

// ShareStep mounts the virtio-9p export Tag on Target (created when
// missing), read-only unless Writable.
type ShareStep struct {
	Tag      string `json:"tag"`
	Target   string `json:"target"`
	Writable bool   `json:"writable,omitempty"`
}

// Stream names an output stream.
type Stream string

// Output streams.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Output is a chunk of a step's output.
type Output struct {
	Step   int    `json:"step"`
	Stream Stream `json:"stream"`
	Data   []byte `json:"data"`
}

// Done ends a step.
type Done struct {
	Step int `json:"step"`
	// ExitCode is the command's exit status; -1 when it was killed or never
	// started.
	ExitCode int `json:"exit_code"`
	// Error describes why the step failed to run, empty on success.
	Error string `json:"error,omitempty"`
	// TimedOut is true when the step was killed at its TimeoutMs.
	TimedOut bool `json:"timed_out,omitempty"`
	// DurationNs is the step's wall time in the guest.
	DurationNs int64 `json:"duration_ns"`
	// Metrics are the final numbers of a workload or fio step.
	Metrics *Metrics `json:"metrics,omitempty"`
	// FUSE are the server's counters, for a fuse step.
	FUSE *FUSEStats `json:"fuse,omitempty"`
	// Profile is the call graph recorded for Step.Perf.
	Profile *Profile `json:"profile,omitempty"`
	// XUnit, for StepFstests, is check's result.xml (-R xunit-quiet),
	// truncated to 256 KiB; empty when check did not finish.
	XUnit string `json:"xunit,omitempty"`
}

// Log is a diagnostic line from the agent itself.
type Log struct {
	Msg string `json:"msg"`
}

// ErrLineTooLong is returned by Decoder.Decode for a line over MaxLine.
var ErrLineTooLong = errors.New("proto: line too long")

// Validate checks that m is well formed: a known version and kind, and the
// payload that kind requires.
func (m *Message) Validate() error {
	if m.V != Version {
		return fmt.Errorf("proto: version %d, want %d", m.V, Version)
	}
	var ok bool
	switch m.Kind {
	case KindHello:
		ok = m.Hello != nil
	case KindStep:
		ok = m.Step != nil
	case KindOutput:
		ok = m.Output != nil
	case KindDone:
		ok = m.Done != nil
	case KindLog:
		ok = m.Log != nil
	case KindSample:
		ok = m.Sample != nil
	case KindSysrq:
		ok = m.Sysrq != ""
	case KindInput:
		ok = m.Input != nil
	case KindTest:
		ok = m.Test != nil
	case KindBye, KindShutdown:
		ok = true
	default:
		return fmt.Errorf("proto: unknown kind %q", m.Kind)
	}
	if !ok {
		return fmt.Errorf("proto: %s message without its payload", m.Kind)
	}
	return nil
}

// Decoder reads Messages from a stream, one per line, with a size limit.
type Decoder struct {
	r    *bufio.Reader
	max  int
	size int // the last decoded line's length
}

// Size is the length in bytes of the line the last Decode returned a
// message from: what holding that message costs, roughly.
func (d *Decoder) Size() int { return d.size }

// NewDecoder returns a Decoder that rejects lines longer than MaxLine.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 64<<10), max: MaxLine}
}

// Decode reads the next message. Blank lines and lines that do not start
// with '{' (noise on a serial line) are skipped. A line over the limit is
// discarded and reported as ErrLineTooLong; the decoder stays usable.
func (d *Decoder) Decode() (*Message, error) {
	for {
		line, err := d.readLine()
		if err != nil {
			return nil, err
		}
		i := 0
		for i < len(line) && (line[i] == ' ' || line[i] == '\r' || line[i] == '\t' || line[i] == 0) {
			i++
		}
		line = line[i:]
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		d.size = len(line)
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("proto: decode: %w", err)
		}
		if err := m.Validate(); err != nil {
			return nil, err
		}
		return &m, nil
	}
}

// readLine returns one line without its newline, or ErrLineTooLong after
// discarding the rest of an overlong line.
func (d *Decoder) readLine() ([]byte, error) {
	var buf []byte
	for {
		frag, err := d.r.ReadSlice('\n')
		if len(buf)+len(frag) > d.max+1 {
			// Discard to the end of this line.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = d.r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) && err != io.EOF {
				return nil, err
			}
			return nil, ErrLineTooLong
		}
		buf = append(buf, frag...)
		switch {
		case err == nil:
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(buf) > 0:
			return buf, nil
		default:
			return nil, err
		}
	}
}

// Encoder writes Messages, one per line. It is safe for concurrent use.
type Encoder struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

// NewEncoder returns an Encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// Encode stamps m with Version and writes it as one line.
func (e *Encoder) Encode(m *Message) error {
	m.V = Version
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > MaxLine {
		return ErrLineTooLong
	}
	b = append(b, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	_, err = e.w.Write(b)
	return err
}
