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
	"klab/images"
	"klab/internal/fileio"
	"klab/results"
	"klab/results/splat"
	"klab/vm"
)

// Guest is a booted guest that runs steps through its agent: the seam
// between run policy (experiments, klab boot) and QEMU. Tests of that
// policy use a fake Guest.
type Guest interface {
	// Run runs steps in order and returns the finished ones. It stops at
	// the first step that fails (a *StepError; the guest stays usable)
	// or at a kernel failure (a *KernelError; every later Run returns it
	// too).
	Run(ctx context.Context, steps []proto.Step) ([]StepResult, error)
	// Close shuts the guest down, saves the run and returns how it went.
	// It may be called more than once; later calls return the same.
	Close() (*BootResult, error)
}

// Opener boots guests: the seam between run policy (experiments,
// matrices) and what runs the guest. *Options boots QEMU; tests use a
// fake. An Opener may be used from several goroutines at once.
type Opener interface {
	// ResolveKernel turns a kernel reference (debian:7.3, build:NAME, a
	// path to a bzImage) into the kernel Open boots for it, fetching it
	// when needed. A caller that boots a reference several times
	// resolves it once and passes the result as BootRequest.Resolved.
	ResolveKernel(ctx context.Context, ref string) (*results.Kernel, error)
	// Open boots req's kernel, saves the run in a new directory under
	// req.RunsDir (the Opener's own runs directory when empty) and waits
	// for the agent. On a kernel failure it returns the error and a Guest
	// already closed, whose Close returns the saved run.
	Open(ctx context.Context, req BootRequest) (Guest, error)
}

// Open boots req's kernel and waits for its agent; req.Steps and
// req.Prepare decide what goes into the initramfs but are not run. It
// implements Opener.
func (o *Options) Open(ctx context.Context, req BootRequest) (Guest, error) {
	s, err := o.OpenSession(ctx, req)
	if s == nil {
		return nil, err
	}
	return s, err
}

// forRequest is o with its defaults and the settings req overrides: the
// runs directory, the accelerator policy and where progress goes.
func (o *Options) forRequest(req *BootRequest) *Options {
	c := *o
	if req.RunsDir != "" {
		c.RunsDir = req.RunsDir
	}
	if req.Accel != "" {
		c.Accel = req.Accel
	}
	if req.Progress != nil {
		c.Progress = req.Progress
	}
	c = c.withDefaults()
	return &c
}

// Session is one booted guest, from Open to Close.
type Session struct {
	o     *Options
	req   BootRequest
	run   *results.Run
	man   *results.Manifest
	res   *BootResult
	start time.Time
	m     *vm.Machine
	a     *vm.Agent
	w     *watch
	// shareSteps mount req.Shares; Boot runs them first.
	shareSteps []proto.Step
	fatal      chan splat.Report
	factor     float64
	// stepTimeout bounds a step that sets no timeout of its own.
	stepTimeout time.Duration
	console     *results.CappedFile
	events      *results.EventLog
	// output keeps the steps' output in stdout.log and stderr.log.
	output *OutputLogs

	scanMu  sync.Mutex // guards scanner
	scanner *splat.Scanner

	// err is the sticky failure: once the kernel failed (or the run was
	// interrupted), every Run returns it.
	err error
	// stepFailed is set once a step failed; the outcome says so.
	stepFailed bool
	closed     bool
	closeErr   error
}

// OpenSession is Open returning the concrete *Session.
func (o *Options) OpenSession(ctx context.Context, req BootRequest) (*Session, error) {
	o = o.forRequest(&req)
	start := time.Now()
	k := req.Resolved
	if k == nil {
		var err error
		if k, err = o.ResolveKernel(ctx, req.Kernel); err != nil {
			return nil, err
		}
	}
	all := req
	all.Steps = append(append([]proto.Step(nil), req.Steps...), req.Prepare...)
	extra, err := all.extraFiles()
	if err != nil {
		return nil, err
	}
	libfuse, err := o.libfuseFiles(ctx, &all)
	if err != nil {
		return nil, err
	}
	extra = dedupExtra(append(append(append([]images.ExtraFile(nil), req.Files...), extra...), libfuse...))
	shareArgs, shareModules, shareSteps, err := req.shares(k)
	if err != nil {
		return nil, err
	}
	ir, err := o.initramfs(ctx, k, extra, append(append([]string(nil), req.Modules...), shareModules...))
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(o.qemu()); err != nil {
		return nil, &vm.QEMUMissingError{Binary: o.qemu()}
	}
	var verdict vm.Verdict
	if req.Icount != "" {
		verdict, err = icountVerdict(o.Accel, req.Icount, req.MultiThreadTCG)
	} else {
		verdict, err = o.ChooseAccel(ctx, k, ir.Path)
	}
	if err != nil {
		return nil, err
	}
	s := &Session{o: o, req: req, start: start, w: newWatch(), scanner: splat.NewScanner(), fatal: make(chan splat.Report, 1), shareSteps: shareSteps}
	s.factor = verdict.Accel.Factor()
	bootTimeout := scale(req.BootTimeout, 30*time.Second, s.factor)
	s.stepTimeout = scale(req.StepTimeout, 10*time.Minute, s.factor)

	store := results.Store{Root: o.RunsDir}
	kind := req.RunKind
	if kind == "" {
		kind = "boot"
	}
	if req.RunID != "" {
		s.run, err = store.CreateNamed(req.RunID)
	} else {
		s.run, err = store.Create(kind)
	}
	if err != nil {
		return nil, err
	}
	s.res = &BootResult{RunDir: s.run.Dir, ExitCode: -1}
	s.man = newManifest(s.run, req.Command, k, ir, verdict)
	s.man.Times.Start = start
	s.res.Manifest = s.man
	if s.output, err = OpenOutputLogs(s.run, req.MaxOutput); err != nil {
		return nil, err
	}
	maxConsole := req.MaxConsole
	if maxConsole <= 0 {
		maxConsole = results.MaxConsoleLog
	}
	if s.console, err = s.run.LogWriter(results.ConsoleFile, maxConsole); err != nil {
		s.output.Close()
		return nil, err
	}
	if s.events, err = s.run.Events(); err != nil {
		s.output.Close()
		s.console.Close()
		return nil, err
	}
	var consoleOut io.Writer = s.console
	if req.Console != nil {
		consoleOut = io.MultiWriter(s.console, req.Console)
	}
	cfg := vm.Config{
		QEMU: o.QEMU, Kernel: k.Image, Initrd: ir.Path, Cmdline: req.Cmdline,
		Accel: verdict.Accel, MemMB: req.MemMB, CPUs: req.CPUs,
		ExtraArgs: append(append(req.icountArgs(), req.QEMUArgs...), shareArgs...), MultiThreadTCG: req.MultiThreadTCG,
		Name: s.run.Dir,
	}
	o.progressf("booting %s (%s) under %s...", k.Name, k.Version, verdict.Accel)
	s.m, err = vm.Start(ctx, cfg, vm.StartOptions{Console: consoleOut, OnConsoleLine: s.consoleLine})
	if err != nil {
		s.man.Outcome = results.NewOutcome(results.StatusInfraError, err.Error(), 0)
		o.finish(s.run, s.man, s.logs(), s.events, nil, start)
		return nil, err
	}
	s.man.QEMU = results.QEMU{Binary: s.m.Argv()[0], Version: QEMUVersion(ctx, s.m.Argv()[0]), Argv: s.m.Argv()}
	if err := s.waitAgent(ctx, bootTimeout); err != nil {
		s.err = err
		_, cerr := s.Close()
		return s, cerr
	}
	return s, nil
}

// logs are the session's capped logs, for finish.
func (s *Session) logs() []*results.CappedFile {
	return []*results.CappedFile{s.console, s.output.files[0], s.output.files[1]}
}

// OutputLogs stores the steps' output: each stream in its own capped file
// (stdout.log, stderr.log), all steps one after the other, while
// events.jsonl records each chunk by step, size and offset only. The
// guest's output is bulk data; base64 inside events.jsonl made it a third
// larger and the events unreadable.
type OutputLogs struct {
	// files are stdout.log and stderr.log, in that order.
	files [2]*results.CappedFile
	// off is how much each stream sent so far, stored or not.
	off [2]int64
}

// OpenOutputLogs creates stdout.log and stderr.log in run, each capped at
// max bytes (0: results.MaxOutputLog).
func OpenOutputLogs(run *results.Run, max int64) (*OutputLogs, error) {
	if max <= 0 {
		max = results.MaxOutputLog
	}
	o := &OutputLogs{}
	for i, name := range []string{results.StdoutFile, results.StderrFile} {
		f, err := run.LogWriter(name, max)
		if err != nil {
			o.Close()
			return nil, err
		}
		o.files[i] = f
	}
	return o, nil
}

// Add streams out to the user's stdout or stderr, keeps it in its file
// and returns the record for events.jsonl. A stream other than stderr is
// stdout: the name the guest gave never reaches the file system.
func (o *OutputLogs) Add(out *proto.Output, stdout, stderr io.Writer) results.OutputRecord {
	i, user := 0, stdout
	if out.Stream == proto.Stderr {
		i, user = 1, stderr
	}
	_, _ = user.Write(out.Data)
	f := o.files[i]
	rec := results.OutputRecord{Step: out.Step, Stream: string([]proto.Stream{proto.Stdout, proto.Stderr}[i]), Bytes: len(out.Data), File: f.Name(), Offset: o.off[i]}
	rec.Stored, _ = f.Append(out.Data)
	o.off[i] += int64(len(out.Data))
	return rec
}

// Files are stdout.log and stderr.log, for closing with the run's other
// capped logs.
func (o *OutputLogs) Files() []*results.CappedFile { return o.files[:] }

// Close closes the files opened so far.
func (o *OutputLogs) Close() {
	for _, f := range o.files {
		if f != nil {
			f.Close()
		}
	}
}

// Hello is the agent's Hello (nil before the agent answered).
func (s *Session) Hello() *proto.Hello {
	if s.a == nil {
		return nil
	}
	return s.a.Hello
}

// StepTimeout is the scaled timeout of a step that sets none.
func (s *Session) StepTimeout() time.Duration { return s.stepTimeout }

func (s *Session) consoleLine(line string) {
	s.w.console(line)
	s.scanMu.Lock()
	r := s.scanner.Line(line)
	s.scanMu.Unlock()
	if r != nil {
		_ = s.events.Append(Event{Kind: "splat", Splat: &SplatEvent{Type: string(r.Type), Title: r.Title, Line: r.Line}})
		if r.Fatal {
			select {
			case s.fatal <- *r:
			default:
			}
		}
	}
}

func (s *Session) kernelFail(status results.Status, msg string, console []string) error {
	s.man.Outcome = results.NewOutcome(status, msg, 0)
	return &KernelError{Status: string(status), Msg: msg, Console: console}
}

func (s *Session) panicked(r splat.Report) error {
	// Let the rest of the report reach the console before QEMU goes.
	select {
	case <-s.m.Exited():
	case <-time.After(5 * time.Second):
	}
	select {
	case <-s.m.ConsoleDone():
	case <-time.After(2 * time.Second):
	}
	// Close fills in the console excerpt from the completed report.
	return s.kernelFail(results.StatusKernelPanic, r.Title, nil)
}

// killedFromOutside is the error of a guest whose QEMU a signal that
// klab did not send ended (kill -9, the OOM killer): an infrastructure
// failure, not the kernel's. It is nil otherwise; QEMU has exited, or is
// given a moment to.
func (s *Session) killedFromOutside() error {
	select {
	case <-s.m.Exited():
	case <-time.After(2 * time.Second):
	}
	msg := s.m.KilledFromOutside()
	if msg == "" {
		return nil
	}
	msg += "; the run is stopped"
	s.man.Outcome = results.NewOutcome(results.StatusInfraError, msg, 0)
	return errors.New(msg)
}

func (s *Session) interrupted(ctx context.Context) error {
	s.man.Outcome = results.NewOutcome(results.StatusInfraError, "interrupted: "+ctx.Err().Error(), 0)
	return ctx.Err()
}

// waitAgent waits for the agent's Hello.
func (s *Session) waitAgent(ctx context.Context, bootTimeout time.Duration) error {
	m := s.m
	timer := time.NewTimer(bootTimeout)
	defer timer.Stop()
	select {
	case s.a = <-m.AgentReady():
	case r := <-s.fatal:
		return s.panicked(r)
	case data := <-m.Panicked():
		return s.kernelFail(results.StatusKernelPanic, "guest panicked (pvpanic "+data+")", nil)
	case err := <-m.AgentFailed():
		return s.kernelFail(results.StatusKernelError, err.Error()+"; the agent never started", m.LastConsoleLines(15))
	case <-m.Exited():
		select {
		case r := <-s.fatal:
			return s.panicked(r)
		case <-m.ConsoleDone():
		case <-time.After(2 * time.Second):
		}
		select {
		case r := <-s.fatal:
			return s.panicked(r)
		default:
		}
		if err := s.killedFromOutside(); err != nil {
			return err
		}
		msg := "the guest stopped before its agent started"
		if out := strings.TrimSpace(m.QEMUOutput()); out != "" {
			msg += "; qemu said: " + lastLine(out)
		}
		return s.kernelFail(results.StatusKernelError, msg, m.LastConsoleLines(15))
	case <-timer.C:
		return s.kernelFail(results.StatusBootTimeout, fmt.Sprintf("the kernel did not reach the klab agent within %s", bootTimeout), m.LastConsoleLines(15))
	case <-ctx.Done():
		return s.interrupted(ctx)
	}
	s.res.BootToAgent = s.a.HelloAt.Sub(m.Started())
	s.man.Times.BootToAgentMs = s.res.BootToAgent.Milliseconds()
	_ = s.events.Append(Event{Kind: "hello", Hello: s.a.Hello})
	s.o.progressf("agent %s ready after %.1fs on %s (guest %s, %d CPUs)", s.a.Hello.AgentVersion, s.res.BootToAgent.Seconds(), s.a.Channel(), s.a.Hello.Uname.Release, s.a.Hello.CPUs)
	if s.a.Hello.AgentVersion != s.man.AgentVersion {
		s.man.Outcome = results.NewOutcome(results.StatusInfraError, "agent version mismatch", 0)
		return fmt.Errorf("the guest agent is %s but the initramfs was built with %s", s.a.Hello.AgentVersion, s.man.AgentVersion)
	}
	return nil
}

// Run runs steps in order; see Guest.
func (s *Session) Run(ctx context.Context, steps []proto.Step) ([]StepResult, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.closed {
		return nil, errors.New("run steps: the guest is closed")
	}
	var done []StepResult
	for _, st := range steps {
		r, err := s.step(ctx, st, len(s.res.Steps)+1)
		if r != nil {
			done = append(done, *r)
		}
		if err != nil {
			var se *StepError
			if !errors.As(err, &se) {
				s.err = err
			}
			return done, err
		}
	}
	return done, nil
}

// pumpStdin sends r to the running step id as Input messages, then EOF.
// It stops when the step ends (ctx); what the host had not sent by then is
// not the guest's to read.
func pumpStdin(ctx context.Context, a *vm.Agent, id int, r io.Reader) {
	if r == nil {
		_ = a.Input(id, nil, true)
		return
	}
	type chunk struct {
		b   []byte
		err error
	}
	// Reads happen in their own goroutine: a terminal read cannot be
	// interrupted, and must not keep the step's end waiting.
	chunks := make(chan chunk)
	go func() {
		for {
			buf := make([]byte, proto.MaxChunk/2)
			n, err := r.Read(buf)
			select {
			case chunks <- chunk{buf[:n], err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-chunks:
			if len(c.b) > 0 {
				if a.Input(id, c.b, false) != nil {
					return
				}
			}
			if c.err != nil {
				_ = a.Input(id, nil, true)
				return
			}
		}
	}
}

// HardGrace is how long past its timeout and the hang grace a step may
// run when the guest keeps printing, before klab stops it anyway.
var HardGrace = time.Minute

// A step's state, as the hang watchdog sees it.
const (
	stepRunning = iota // within its time, or the guest still talks
	stepHung           // past its time, and the guest went silent
	stepOverrun        // past the absolute limit, silent or not
)

// stepState judges a step that has run for elapsed while the guest has
// been silent for silence. The agent enforces the step's own limit; past
// limit+grace a silent guest is hung, and past limit+grace+HardGrace the
// step is stopped whatever the guest prints (a WARNING storm, or a hostile
// agent, is never silent).
func stepState(elapsed, silence, limit, grace time.Duration) int {
	switch {
	case elapsed >= limit+grace+HardGrace:
		return stepOverrun
	case elapsed >= limit+grace && silence >= grace:
		return stepHung
	}
	return stepRunning
}

// step runs one step; n numbers it in messages.
func (s *Session) step(ctx context.Context, st proto.Step, n int) (*StepResult, error) {
	m, a, w, req := s.m, s.a, s.w, &s.req
	stdout, stderr := req.Stdout, req.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	type result struct {
		done *proto.Done
		err  error
	}
	ch := make(chan result, 1)
	stepCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sent func()
	if st.Kind == proto.StepFstests && st.ID <= 0 {
		// Its tests are checked against its ID.
		st.ID = a.NextID()
	}
	tests := newTestFilter(st)
	if st.Kind == proto.StepExec && st.Stdin {
		if st.ID <= 0 {
			st.ID = a.NextID()
		}
		// Input sent before its step would find no step to go to.
		sent = func() { go pumpStdin(stepCtx, a, st.ID, req.Stdin) }
	}
	go func() {
		d, err := a.RunThen(stepCtx, st, func(msg *proto.Message) {
			w.touch()
			switch msg.Kind {
			case proto.KindOutput:
				rec := s.output.Add(msg.Output, stdout, stderr)
				_ = s.events.Append(Event{Kind: "output", Output: &rec})
			case proto.KindLog:
				_ = s.events.Append(Event{Kind: "agent-log", Message: msg.Log.Msg})
			case proto.KindSample:
				_ = s.events.Append(Event{Kind: "sample", Sample: msg.Sample})
			case proto.KindTest:
				if why := tests.take(msg.Test); why != "" {
					_ = s.events.Append(Event{Kind: "agent-log", Message: "dropped a test report: " + why})
					return
				}
				_ = s.events.Append(Event{Kind: "test", Test: msg.Test})
			}
			if req.OnMessage != nil {
				req.OnMessage(msg)
			}
		}, sent)
		ch <- result{d, err}
	}()
	var r result
	// The agent enforces the step's own timeout. The guest is hung when
	// the step has run past it and a grace period, and the console and
	// the agent have both been silent for that grace period.
	grace := time.Duration(float64(5*time.Second) * s.factor)
	limit := s.stepTimeout
	if st.TimeoutMs > 0 {
		limit = time.Duration(st.TimeoutMs) * time.Millisecond
	}
	stepStart := time.Now()
	w.touch()
	hang := time.NewTicker(250 * time.Millisecond)
	defer hang.Stop()
wait:
	for {
		select {
		case r = <-ch:
			break wait
		case rep := <-s.fatal:
			cancel()
			return nil, s.panicked(rep)
		case data := <-m.Panicked():
			cancel()
			return nil, s.kernelFail(results.StatusKernelPanic, "guest panicked (pvpanic "+data+")", nil)
		case <-hang.C:
			switch stepState(time.Since(stepStart), w.silence(), limit, grace) {
			case stepRunning:
				continue
			case stepOverrun:
				cancel()
				msg := fmt.Sprintf("kernel hang: step %d (%s) ran past its %s timeout by more than %s while the guest kept printing; stopped", n, st.Kind, limit, grace+HardGrace)
				return nil, s.kernelFail(results.StatusKernelHang, msg, m.LastConsoleLines(15))
			}
			cancel()
			s.o.progressf("the guest is silent %.0fs past the step's timeout; asking it for task dumps (sysrq w, t)...", grace.Seconds())
			diag, via := diagnose(m, a, w, s.factor)
			s.res.Diagnostics = diag
			msg := fmt.Sprintf("kernel hang: step %d (%s) ran past its %s timeout and the guest went silent; task dumps via %s saved to diagnostics.log", n, st.Kind, limit, via)
			return nil, s.kernelFail(results.StatusKernelHang, msg, blockedTasks(diag, 25, m.LastConsoleLines(15)))
		case <-ctx.Done():
			cancel()
			return nil, s.interrupted(ctx)
		}
	}
	if r.err != nil {
		// The channel died: most likely the kernel did.
		select {
		case rep := <-s.fatal:
			return nil, s.panicked(rep)
		case <-time.After(3 * time.Second):
		}
		select {
		case rep := <-s.fatal:
			return nil, s.panicked(rep)
		default:
		}
		if err := s.killedFromOutside(); err != nil {
			return nil, err
		}
		var pe *vm.ProtocolError
		if errors.As(r.err, &pe) {
			msg := fmt.Sprintf("%s, during step %d (%s); the run is stopped", pe, n, st.Kind)
			return nil, s.kernelFail(results.StatusKernelError, msg, m.LastConsoleLines(15))
		}
		return nil, s.kernelFail(results.StatusKernelError, "the agent channel closed during a step: "+r.err.Error(), m.LastConsoleLines(15))
	}
	boundXUnit(r.done)
	_ = s.events.Append(Event{Kind: "done", Done: r.done})
	sr := StepResult{Step: st, Done: *r.done}
	sr.Step.ID = r.done.Step
	s.res.Steps = append(s.res.Steps, sr)
	if r.done.Error != "" && st.Kind == proto.StepSysctl {
		s.man.Outcome = results.NewOutcome(results.StatusInfraError, r.done.Error, r.done.ExitCode)
		return &sr, fmt.Errorf("sysctl %s=%s: %s", st.Key, st.Value, r.done.Error)
	}
	if st.Kind != proto.StepExec && st.Kind != proto.StepSysctl && (r.done.Error != "" || r.done.ExitCode != 0) {
		msg := fmt.Sprintf("%s step %d failed (exit %d): %s", st.Kind, n, r.done.ExitCode, r.done.Error)
		s.man.Outcome = results.NewOutcome(results.StatusStepFailed, msg, r.done.ExitCode)
		s.res.ExitCode = 1
		s.stepFailed = true
		return &sr, &StepError{Msg: msg}
	}
	if st.Kind == proto.StepExec {
		s.res.ExitCode = r.done.ExitCode
		if r.done.Error != "" {
			fmt.Fprintf(stderr, "klab: %s\n", r.done.Error)
		}
		switch {
		case r.done.TimedOut:
			s.res.ExitCode = ExitTimeout
		case s.res.ExitCode < 0 && strings.HasPrefix(r.done.Error, "killed by signal"):
			s.res.ExitCode = 128 + 9
		case s.res.ExitCode < 0:
			s.res.ExitCode = ExitNotRun
		}
	}
	return &sr, nil
}

// Close shuts the guest down and saves the run; see Guest.
func (s *Session) Close() (*BootResult, error) {
	if s.closed {
		return s.res, s.closeErr
	}
	s.closed = true
	m, res, man := s.m, s.res, s.man
	runErr := s.err
	var pe *vm.ProtocolError
	if runErr == nil {
		if err := s.a.Shutdown(scale(5*time.Second, 0, 1)); errors.As(err, &pe) {
			// The guest broke the protocol after its last step:
			// what it reported before may be whole, but the run is
			// not to be trusted.
			runErr = s.kernelFail(results.StatusKernelError, pe.Error()+", after the last step", nil)
		} else if err != nil {
			s.o.progressf("warning: %v", err)
		}
	}
	if runErr == nil {
		select {
		case <-m.Exited():
		case <-time.After(scale(10*time.Second, 0, 1)):
		}
		if !s.stepFailed {
			man.Outcome = results.NewOutcome(results.StatusOK, "", res.ExitCode)
		}
		select {
		case rep := <-s.fatal:
			runErr = s.panicked(rep)
		default:
		}
	}
	m.Quit()
	_ = m.Wait()
	select {
	case <-m.ConsoleDone():
	case <-time.After(2 * time.Second):
	}
	s.scanMu.Lock()
	res.Splats = s.scanner.Reports()
	s.scanMu.Unlock()
	if runErr == nil && !s.stepFailed && !s.req.IgnoreSplats {
		runErr = policyVerdict(s.req.Policy, res.Splats, man)
	}
	var ke *KernelError
	if errors.As(runErr, &ke) {
		ke.RunDir = s.run.Dir
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
		if err := fileio.WriteAtomic(filepath.Join(s.run.Dir, "diagnostics.log"), []byte(res.Diagnostics), 0o644); err != nil {
			s.o.progressf("warning: save diagnostics: %v", err)
		}
	}
	if metrics := stepMetrics(res.Steps); len(metrics) > 0 {
		if err := s.run.WriteJSON("metrics.json", metrics); err != nil {
			s.o.progressf("warning: save metrics: %v", err)
		}
	}
	s.o.finish(s.run, man, s.logs(), s.events, res.Splats, s.start)
	res.Wall = time.Since(s.start)
	s.closeErr = runErr
	return res, runErr
}

var _ Opener = (*Options)(nil)

// icountArgs are QEMU's arguments for req.Icount.
func (req *BootRequest) icountArgs() []string {
	if req.Icount == "" {
		return nil
	}
	return []string{"-icount", req.Icount}
}
