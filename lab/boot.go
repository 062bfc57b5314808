package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"klab/guest/proto"
	"klab/internal/proc"
	"klab/results"
	"klab/results/splat"
	"klab/vm"
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
	// Stdout and Stderr receive the guest command's output.
	Stdout, Stderr io.Writer
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
	// output) as it arrives.
	OnMessage func(*proto.Message)
	// QEMUArgs are appended to QEMU's argv (and so recorded in the
	// manifest), e.g. -icount for instruction-counted virtual time.
	QEMUArgs []string
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

// Boot runs one boot request end to end and saves it. A kernel that panics,
// hangs or never reaches the agent gives a *KernelError; the run is saved
// either way.
func (o *Options) Boot(ctx context.Context, req BootRequest) (*BootResult, error) {
	opt := o.withDefaults()
	o = &opt
	start := time.Now()
	k, err := o.ResolveKernel(ctx, req.Kernel)
	if err != nil {
		return nil, err
	}
	extra, err := req.extraFiles()
	if err != nil {
		return nil, err
	}
	libfuse, err := o.libfuseFiles(ctx, &req)
	if err != nil {
		return nil, err
	}
	extra = dedupExtra(append(extra, libfuse...))
	ir, err := o.InitramfsWith(ctx, k, extra)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(o.qemu()); err != nil {
		return nil, &vm.QEMUMissingError{Binary: o.qemu()}
	}
	verdict, err := o.ChooseAccel(ctx, k, ir.Path)
	if err != nil {
		return nil, err
	}
	factor := verdict.Accel.Factor()
	bootTimeout := scale(req.BootTimeout, 30*time.Second, factor)
	stepTimeout := scale(req.StepTimeout, 10*time.Minute, factor)

	store := results.Store{Root: o.RunsDir}
	run, err := store.Create("boot")
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	res := &BootResult{RunDir: run.Dir, ExitCode: -1}
	man := newManifest(run, req.Command, k, ir, verdict)
	man.Times.Start = start
	res.Manifest = man

	console, err := run.ConsoleWriter()
	if err != nil {
		return nil, err
	}
	events, err := run.Events()
	if err != nil {
		console.Close()
		return nil, err
	}
	w := newWatch()
	scanner := splat.NewScanner()
	var scanMu sync.Mutex
	fatal := make(chan splat.Report, 1)
	var consoleOut io.Writer = console
	if req.Console != nil {
		consoleOut = io.MultiWriter(console, req.Console)
	}

	cfg := vm.Config{
		QEMU: o.QEMU, Kernel: k.Image, Initrd: ir.Path, Cmdline: req.Cmdline,
		Accel: verdict.Accel, MemMB: req.MemMB, CPUs: req.CPUs,
		ExtraArgs: req.QEMUArgs, MultiThreadTCG: req.MultiThreadTCG,
	}
	o.progressf("booting %s (%s) under %s...", k.Name, k.Version, verdict.Accel)
	m, err := vm.Start(ctx, cfg, vm.StartOptions{
		Console: consoleOut,
		OnConsoleLine: func(line string) {
			w.console(line)
			scanMu.Lock()
			r := scanner.Line(line)
			scanMu.Unlock()
			if r != nil {
				_ = events.Append(Event{Kind: "splat", Splat: &SplatEvent{Type: string(r.Type), Title: r.Title, Line: r.Line}})
				if r.Fatal {
					select {
					case fatal <- *r:
					default:
					}
				}
			}
		},
	})
	if err != nil {
		man.Outcome = results.NewOutcome(results.StatusInfraError, err.Error(), 0)
		o.finish(run, man, console, events, nil, start)
		return nil, err
	}
	man.QEMU = results.QEMU{Binary: m.Argv()[0], Version: QEMUVersion(ctx, m.Argv()[0]), Argv: m.Argv()}

	// From here on the run always ends by stopping QEMU and saving.
	runErr := o.drive(ctx, m, req, res, man, events, fatal, w, factor, bootTimeout, stepTimeout)
	m.Quit()
	_ = m.Wait()
	select {
	case <-m.ConsoleDone():
	case <-time.After(2 * time.Second):
	}
	scanMu.Lock()
	res.Splats = scanner.Reports()
	scanMu.Unlock()
	if runErr == nil && !req.IgnoreSplats {
		runErr = policyVerdict(req.Policy, res.Splats, man)
	}
	var ke *KernelError
	if errors.As(runErr, &ke) {
		ke.RunDir = run.Dir
		if ke.Status == string(results.StatusKernelPanic) {
			for _, r := range res.Splats {
				if r.Fatal {
					ke.Console = excerpt(r.Text, nil)
					break
				}
			}
		}
		if len(ke.Console) == 0 {
			ke.Console = m.LastConsoleLines(15)
		}
	}
	if res.Diagnostics != "" {
		if err := results.WriteFileAtomic(filepath.Join(run.Dir, "diagnostics.log"), []byte(res.Diagnostics), 0o644); err != nil {
			o.progressf("warning: save diagnostics: %v", err)
		}
	}
	if metrics := stepMetrics(res.Steps); len(metrics) > 0 {
		if err := run.WriteJSON("metrics.json", metrics); err != nil {
			o.progressf("warning: save metrics: %v", err)
		}
	}
	o.finish(run, man, console, events, res.Splats, start)
	res.Wall = time.Since(start)
	return res, runErr
}

// drive waits for the agent, runs the steps and shuts the guest down. It
// fills man.Outcome.
func (o *Options) drive(ctx context.Context, m *vm.Machine, req BootRequest, res *BootResult, man *results.Manifest,
	events *results.EventLog, fatal <-chan splat.Report, w *watch, factor float64, bootTimeout, stepTimeout time.Duration) error {
	kernelFail := func(status results.Status, msg string, console []string) error {
		man.Outcome = results.NewOutcome(status, msg, 0)
		return &KernelError{Status: string(status), Msg: msg, Console: console}
	}
	panicked := func(r splat.Report) error {
		// Let the rest of the report reach the console before QEMU goes.
		select {
		case <-m.Exited():
		case <-time.After(5 * time.Second):
		}
		select {
		case <-m.ConsoleDone():
		case <-time.After(2 * time.Second):
		}
		// Boot fills in the console excerpt from the completed report.
		return kernelFail(results.StatusKernelPanic, r.Title, nil)
	}

	// Boot to agent.
	timer := time.NewTimer(bootTimeout)
	defer timer.Stop()
	var a *vm.Agent
	select {
	case a = <-m.AgentReady():
	case r := <-fatal:
		return panicked(r)
	case data := <-m.Panicked():
		return kernelFail(results.StatusKernelPanic, "guest panicked (pvpanic "+data+")", nil)
	case <-m.Exited():
		select {
		case r := <-fatal:
			return panicked(r)
		case <-m.ConsoleDone():
		case <-time.After(2 * time.Second):
		}
		select {
		case r := <-fatal:
			return panicked(r)
		default:
		}
		msg := "the guest stopped before its agent started"
		if out := strings.TrimSpace(m.QEMUOutput()); out != "" {
			msg += "; qemu said: " + lastLine(out)
		}
		return kernelFail(results.StatusKernelError, msg, m.LastConsoleLines(15))
	case <-timer.C:
		return kernelFail(results.StatusBootTimeout, fmt.Sprintf("the kernel did not reach the klab agent within %s", bootTimeout), m.LastConsoleLines(15))
	case <-ctx.Done():
		man.Outcome = results.NewOutcome(results.StatusInfraError, "interrupted: "+ctx.Err().Error(), 0)
		return ctx.Err()
	}
	res.BootToAgent = a.HelloAt.Sub(m.Started())
	man.Times.BootToAgentMs = res.BootToAgent.Milliseconds()
	_ = events.Append(Event{Kind: "hello", Hello: a.Hello})
	o.progressf("agent %s ready after %.1fs on %s (guest %s, %d CPUs)", a.Hello.AgentVersion, res.BootToAgent.Seconds(), a.Channel(), a.Hello.Uname.Release, a.Hello.CPUs)
	if a.Hello.AgentVersion != man.AgentVersion {
		man.Outcome = results.NewOutcome(results.StatusInfraError, "agent version mismatch", 0)
		return fmt.Errorf("the guest agent is %s but the initramfs was built with %s", a.Hello.AgentVersion, man.AgentVersion)
	}

	var steps []proto.Step
	for _, s := range req.Sysctls {
		steps = append(steps, proto.Step{Kind: proto.StepSysctl, Key: s.Key, Value: s.Value})
	}
	steps = append(steps, req.Steps...)
	if len(req.Argv) > 0 {
		steps = append(steps, proto.Step{Kind: proto.StepExec, Argv: req.Argv, TimeoutMs: stepTimeout.Milliseconds()})
	}
	stdout, stderr := req.Stdout, req.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	for i, s := range steps {
		type result struct {
			done *proto.Done
			err  error
		}
		ch := make(chan result, 1)
		stepCtx, cancel := context.WithCancel(ctx)
		go func() {
			d, err := a.Run(stepCtx, s, func(msg *proto.Message) {
				w.touch()
				switch msg.Kind {
				case proto.KindOutput:
					if msg.Output.Stream == proto.Stderr {
						_, _ = stderr.Write(msg.Output.Data)
					} else {
						_, _ = stdout.Write(msg.Output.Data)
					}
					_ = events.Append(Event{Kind: "output", Output: msg.Output})
				case proto.KindLog:
					_ = events.Append(Event{Kind: "agent-log", Message: msg.Log.Msg})
				case proto.KindSample:
					_ = events.Append(Event{Kind: "sample", Sample: msg.Sample})
				}
				if req.OnMessage != nil {
					req.OnMessage(msg)
				}
			})
			ch <- result{d, err}
		}()
		var r result
		// The agent enforces the step's own timeout. The guest is hung when
		// the step has run past it and a grace period, and the console and
		// the agent have both been silent for that grace period.
		grace := time.Duration(float64(5*time.Second) * factor)
		limit := stepTimeout
		if s.TimeoutMs > 0 {
			limit = time.Duration(s.TimeoutMs) * time.Millisecond
		}
		stepStart := time.Now()
		w.touch()
		hang := time.NewTicker(250 * time.Millisecond)
	wait:
		for {
			select {
			case r = <-ch:
				break wait
			case rep := <-fatal:
				cancel()
				hang.Stop()
				return panicked(rep)
			case data := <-m.Panicked():
				cancel()
				hang.Stop()
				return kernelFail(results.StatusKernelPanic, "guest panicked (pvpanic "+data+")", nil)
			case <-hang.C:
				if time.Since(stepStart) < limit+grace || w.silence() < grace {
					continue
				}
				cancel()
				hang.Stop()
				o.progressf("the guest is silent %.0fs past the step's timeout; asking it for task dumps (sysrq w, t)...", grace.Seconds())
				diag, via := diagnose(m, a, w, factor)
				res.Diagnostics = diag
				msg := fmt.Sprintf("kernel hang: step %d (%s) ran past its %s timeout and the guest went silent; task dumps via %s saved to diagnostics.log", i+1, s.Kind, limit, via)
				return kernelFail(results.StatusKernelHang, msg, blockedTasks(diag, 25, m.LastConsoleLines(15)))
			case <-ctx.Done():
				cancel()
				hang.Stop()
				man.Outcome = results.NewOutcome(results.StatusInfraError, "interrupted: "+ctx.Err().Error(), 0)
				return ctx.Err()
			}
		}
		cancel()
		hang.Stop()
		if r.err != nil {
			// The channel died: most likely the kernel did.
			select {
			case rep := <-fatal:
				return panicked(rep)
			case <-time.After(3 * time.Second):
			}
			select {
			case rep := <-fatal:
				return panicked(rep)
			default:
			}
			return kernelFail(results.StatusKernelError, "the agent channel closed during a step: "+r.err.Error(), m.LastConsoleLines(15))
		}
		_ = events.Append(Event{Kind: "done", Done: r.done})
		res.Steps = append(res.Steps, StepResult{Step: s, Done: *r.done})
		if r.done.Error != "" && s.Kind == proto.StepSysctl {
			man.Outcome = results.NewOutcome(results.StatusInfraError, r.done.Error, r.done.ExitCode)
			return fmt.Errorf("sysctl %s=%s: %s", s.Key, s.Value, r.done.Error)
		}
		if s.Kind != proto.StepExec && s.Kind != proto.StepSysctl && (r.done.Error != "" || r.done.ExitCode != 0) {
			msg := fmt.Sprintf("%s step %d failed (exit %d): %s", s.Kind, i+1, r.done.ExitCode, r.done.Error)
			man.Outcome = results.NewOutcome(results.StatusStepFailed, msg, r.done.ExitCode)
			res.ExitCode = 1
			return &StepError{Msg: msg}
		}
		if s.Kind == proto.StepExec {
			res.ExitCode = r.done.ExitCode
			if r.done.Error != "" {
				fmt.Fprintf(stderr, "klab: %s\n", r.done.Error)
			}
			switch {
			case r.done.TimedOut:
				res.ExitCode = ExitTimeout
			case res.ExitCode < 0 && strings.HasPrefix(r.done.Error, "killed by signal"):
				res.ExitCode = 128 + 9
			case res.ExitCode < 0:
				res.ExitCode = ExitNotRun
			}
		}
	}
	if err := a.Shutdown(scale(5*time.Second, 0, 1)); err != nil {
		o.progressf("warning: %v", err)
	}
	select {
	case <-m.Exited():
	case <-time.After(scale(10*time.Second, 0, 1)):
	}
	man.Outcome = results.NewOutcome(results.StatusOK, "", res.ExitCode)
	select {
	case rep := <-fatal:
		return panicked(rep)
	default:
	}
	return nil
}

// finish closes the run's files and writes splats.json and the manifest.
func (o *Options) finish(run *results.Run, man *results.Manifest, console io.Closer, events *results.EventLog, reps []splat.Report, start time.Time) {
	man.Times.End = time.Now()
	console.Close()
	events.Close()
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
	// Kind is "hello", "output", "done", "splat" or "agent-log".
	Kind string `json:"kind"`
	// Hello is the agent's Hello, for "hello".
	Hello *proto.Hello `json:"hello,omitempty"`
	// Output is a chunk of step output, for "output".
	Output *proto.Output `json:"output,omitempty"`
	// Done ends a step, for "done".
	Done *proto.Done `json:"done,omitempty"`
	// Splat is a kernel report seen on the console, for "splat".
	Splat *SplatEvent `json:"splat,omitempty"`
	// Sample is a workload sample, for "sample".
	Sample *proto.Sample `json:"sample,omitempty"`
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
