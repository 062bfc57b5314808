package lab

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/images"
	"klab/internal/proc"
	"klab/results"
	"klab/results/splat"
)

// Sysctl is one sysctl to write in the guest before the command runs.
type Sysctl struct{ Key, Value string }

// BootRequest is one `klab boot`: a kernel, and what to run in it.
type BootRequest struct {
	// Kernel is the kernel reference (debian:7.3, a path, ...).
	Kernel string
	// Argv is the command to run in the guest; empty runs nothing.
	Argv []string
	// Sysctls are written before Argv runs.
	Sysctls []Sysctl
	// MemMB and CPUs size the guest; 0 means the defaults.
	MemMB, CPUs int
	// Cmdline is extra kernel command line.
	Cmdline string
	// Stdout and Stderr receive the guest command's output as it comes.
	// The run keeps its own copy in stdout.log and stderr.log.
	Stdout, Stderr io.Writer
	// MaxOutput caps the stored copy of each output stream (stdout.log,
	// stderr.log), in bytes; 0 means results.MaxOutputLog (1 GiB). What
	// goes past it still streams to Stdout and Stderr.
	MaxOutput int64
	// MaxConsole caps console.log, in bytes; 0 means
	// results.MaxConsoleLog (64 MiB).
	MaxConsole int64
	// Console, when set, also receives the guest console as it comes.
	Console io.Writer
	// BootTimeout bounds boot to agent under KVM; it is scaled by the
	// accelerator's factor. 0 means 30 s.
	BootTimeout time.Duration
	// StepTimeout bounds the command under KVM, scaled likewise. 0 means
	// 10 min.
	StepTimeout time.Duration
	// Steps run after the sysctls and before Argv: workloads, FUSE
	// mounts, fio jobs. A step that fails (an error, or a non-zero exit)
	// stops the run with status step-failed.
	Steps []proto.Step
	// OnMessage, when set, sees every message a step sends (samples, logs,
	// output, tests) as it arrives. Test results come cleaned and bounded
	// (see testFilter); one the step did not ask for never comes.
	OnMessage func(*proto.Message)
	// QEMUArgs are appended to QEMU's argv (and so recorded in the
	// manifest).
	QEMUArgs []string
	// Icount, when set, is QEMU's -icount options (shift=0,sleep=off):
	// guest time then counts the guest's instructions, so that the host's
	// load does not move what the guest measures. It needs single-threaded
	// TCG: auto then picks TCG without probing KVM, and kvm is refused.
	Icount string
	// HostTools are host programs copied into the initramfs with their
	// shared libraries (mke2fs, ...). fio is added by itself when a step
	// runs fio.
	HostTools []string
	// Policy decides which kernel reports fail a run that otherwise
	// worked; nil means splat.DefaultPolicy (any BUG, KASAN, lockdep
	// report or panic fails, and a WARNING unless allowed).
	Policy *splat.Policy
	// MultiThreadTCG gives each vCPU its own host thread under TCG (see
	// vm.Config.MultiThreadTCG).
	MultiThreadTCG bool
	// IgnoreSplats reports kernel splats without ever failing the run.
	IgnoreSplats bool
	// Command is klab's own argv, for the manifest.
	Command []string
	// Prepare are steps a session may run later (through Guest.Run): the
	// initramfs gets what they need (fio, libfuse). Boot ignores it.
	Prepare []proto.Step
	// RunKind names the run directory's kind ("boot" when empty).
	RunKind string
	// Dir is the guest command's working directory; empty means /.
	Dir string
	// Root, when set, runs Argv chrooted into this guest directory (a
	// userspace that one of Steps mounted; see images/userspace), with
	// Dir inside it.
	Root string
	// Stdin, when set, is the guest command's (Argv's) standard input;
	// nil gives it /dev/null.
	Stdin io.Reader
	// Files are the user's own files for the guest (klab boot --file and
	// --dir), with the shared libraries of ELF programs (see UserFiles).
	// They win over klab's own files at the same guest path.
	Files []images.ExtraFile
	// Modules are kernel modules to load besides klab's own (--module).
	Modules []string
	// Shares are host directories the guest mounts over virtio-9p before
	// the sysctls (--share).
	Shares []Share
	// RunID, when set, names the run directory under the runs directory
	// instead of a generated name; it must not exist yet.
	RunID string
	// Resolved, when set, is Kernel already resolved (by
	// Opener.ResolveKernel): every guest of an experiment boots the very
	// kernel resolved at its start, even when an alias such as debian:7.3
	// moves meanwhile.
	Resolved *results.Kernel
	// RunsDir, when set, is where the run directory is made instead of
	// the Opener's runs directory: an experiment keeps its guests' runs
	// inside its own.
	RunsDir string
	// Accel, when set, is the accelerator policy ("auto", "kvm" or
	// "tcg") instead of the Opener's.
	Accel string
	// Progress, when set, receives the run's progress lines (initramfs,
	// accelerator, boot, agent) instead of the Opener's.
	Progress io.Writer
}

// StepResult is one finished step.
type StepResult struct {
	// Step is what was asked.
	Step proto.Step `json:"step"`
	// Done is how it ended, with its metrics.
	Done proto.Done `json:"done"`
}

// BootResult says how a boot went.
type BootResult struct {
	// RunDir is where the run was saved.
	RunDir string
	// ExitCode is the guest command's exit status (-1 when it did not run
	// to completion).
	ExitCode int
	// BootToAgent is the time from QEMU's start to the agent's Hello.
	BootToAgent time.Duration
	// Wall is the whole run's wall time.
	Wall time.Duration
	// Manifest is what was saved.
	Manifest *results.Manifest
	// Splats are the kernel reports seen on the console.
	Splats []splat.Report
	// Steps are the finished steps, in order (sysctls and the command
	// included).
	Steps []StepResult
	// Diagnostics is the console output of the task dumps taken from a
	// hung guest, saved as diagnostics.log.
	Diagnostics string
}

// Boot runs one boot request end to end and saves it: one session that
// runs the sysctls, Steps and Argv, then closes. A kernel that panics,
// hangs or never reaches the agent gives a *KernelError; the run is saved
// either way.
func (o *Options) Boot(ctx context.Context, req BootRequest) (*BootResult, error) {
	g, err := o.OpenSession(ctx, req)
	if err != nil {
		if g != nil {
			res, _ := g.Close()
			return res, err
		}
		return nil, err
	}
	steps := append([]proto.Step(nil), g.shareSteps...)
	for _, s := range req.Sysctls {
		steps = append(steps, proto.Step{Kind: proto.StepSysctl, Key: s.Key, Value: s.Value})
	}
	steps = append(steps, req.Steps...)
	if len(req.Argv) > 0 {
		steps = append(steps, proto.Step{Kind: proto.StepExec, Argv: req.Argv, TimeoutMs: g.StepTimeout().Milliseconds(), Stdin: req.Stdin != nil, Dir: req.Dir, Root: req.Root})
	}
	_, runErr := g.Run(ctx, steps)
	res, err := g.Close()
	if err != nil {
		return res, err
	}
	return res, runErr
}

// finish closes the run's files and writes splats.json and the manifest.
// logs are the capped logs (console.log, stdout.log, stderr.log); nil ones
// were never opened.
func (o *Options) finish(run *results.Run, man *results.Manifest, logs []*results.CappedFile, events *results.EventLog, reps []splat.Report, start time.Time) {
	man.Times.End = time.Now()
	// What the caps cut is on record: a reader of the run knows the
	// logs are not whole.
	for _, l := range logs {
		if l == nil {
			continue
		}
		if err := l.Close(); err != nil {
			o.progressf("warning: save %s: %v", l.Name(), err)
		}
		if l.Truncated() {
			man.Truncated = append(man.Truncated, l.Name())
		}
	}
	if events != nil {
		events.Close()
		if events.Truncated() {
			man.Truncated = append(man.Truncated, results.EventsFile)
		}
	}
	if reps == nil {
		reps = []splat.Report{}
	}
	if err := run.WriteJSON("splats.json", reps); err != nil {
		o.progressf("warning: save splats: %v", err)
	}
	if err := run.WriteManifest(man); err != nil {
		o.progressf("warning: save manifest: %v", err)
	}
}

func scale(d, def time.Duration, factor float64) time.Duration {
	if d == 0 {
		d = def
	}
	return time.Duration(float64(d) * factor)
}

// excerpt returns the report's own lines when there are any.
func excerpt(text string, fallback []string) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return fallback
	}
	lines := strings.Split(text, "\n")
	if len(lines) > 25 {
		lines = lines[:25]
	}
	return lines
}

// QEMUVersion returns the first line of `qemu --version`.
func QEMUVersion(ctx context.Context, qemu string) string {
	out, err := proc.Run(ctx, proc.Opts{Timeout: 10 * time.Second}, qemu, "--version")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}

// Event is one line of a run's events.jsonl.
type Event struct {
	// Kind is "hello", "output", "done", "splat", "sample", "test" or
	// "agent-log".
	Kind string `json:"kind"`
	// Hello is the agent's Hello, for "hello".
	Hello *proto.Hello `json:"hello,omitempty"`
	// Output records a chunk of step output, for "output": its step,
	// stream and size, and where stdout.log or stderr.log keeps it.
	Output *results.OutputRecord `json:"output,omitempty"`
	// Done ends a step, for "done".
	Done *proto.Done `json:"done,omitempty"`
	// Splat is a kernel report seen on the console, for "splat".
	Splat *SplatEvent `json:"splat,omitempty"`
	// Sample is a workload sample, for "sample".
	Sample *proto.Sample `json:"sample,omitempty"`
	// Test is one fstests test's result, for "test", cleaned and
	// bounded (see testFilter).
	Test *proto.TestResult `json:"test,omitempty"`
	// Message is an agent log line, for "agent-log".
	Message string `json:"message,omitempty"`
}

// SplatEvent marks the start of a kernel report on the console.
type SplatEvent struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	Line  int    `json:"line"`
}

// hostInfo describes the host, leaving fields empty that cannot be read.
func hostInfo() results.Host {
	h, _ := results.HostInfo()
	return h
}

// StepError is a step that failed on a kernel that stayed up.
type StepError struct{ Msg string }

func (e *StepError) Error() string { return e.Msg }

// StepMetrics is one step's final numbers in metrics.json.
type StepMetrics struct {
	// Index is the step's position in the run, from 0.
	Index int `json:"index"`
	// Kind is the step kind.
	Kind proto.StepKind `json:"kind"`
	// Metrics are the numbers the step reported.
	Metrics *proto.Metrics `json:"metrics"`
}

// stepMetrics collects the metrics of the steps that reported any.
func stepMetrics(steps []StepResult) []StepMetrics {
	var out []StepMetrics
	for i, s := range steps {
		if s.Done.Metrics != nil {
			out = append(out, StepMetrics{Index: i, Kind: s.Step.Kind, Metrics: s.Done.Metrics})
		}
	}
	return out
}

// policyVerdict fails a run that otherwise worked when the kernel printed
// reports the policy does not accept: a result about the kernel.
func policyVerdict(p *splat.Policy, reports []splat.Report, man *results.Manifest) error {
	if p == nil {
		p = splat.DefaultPolicy()
	}
	v := p.Evaluate(reports)
	if !v.Failed {
		return nil
	}
	var titles []string
	for _, f := range v.Failures {
		titles = append(titles, f.Title)
	}
	msg := fmt.Sprintf("the kernel reported %d failing splat(s): %s", len(titles), strings.Join(titles, "; "))
	man.Outcome = results.NewOutcome(results.StatusKernelError, msg, man.Outcome.ExitCode)
	var excerpt []string
	for _, r := range reports {
		if r.Title == v.Failures[0].Title {
			excerpt = firstLines(r.Text, 25)
			break
		}
	}
	return &KernelError{Status: string(results.StatusKernelError), Msg: msg, Console: excerpt}
}

// firstLines returns up to n lines of text.
func firstLines(text string, n int) []string {
	l := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(l) > n {
		l = l[:n]
	}
	return l
}
