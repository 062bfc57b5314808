package hostguest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/lab"
	"klab/results"
	"klab/results/splat"
	"klab/vm"
)

// guest is one agent on the host, from Open to Close: a lab.Guest.
type guest struct {
	o      *Opener
	req    lab.BootRequest
	facts  Facts
	root   string
	c      *child
	a      *vm.Agent
	run    *results.Run
	man    *results.Manifest
	res    *lab.BootResult
	start  time.Time
	events *results.EventLog
	// console is the agent's standard error (console.log).
	console *results.CappedFile
	output  *lab.OutputLogs
	// err is the sticky failure: once the agent is gone, every Run
	// returns it.
	err        error
	stepFailed bool
	closed     bool
	closeErr   error
}

// open starts the agent with start, saving the run under o.RunsDir.
func open(ctx context.Context, o *Opener, req lab.BootRequest, k *results.Kernel, f Facts, libfuse map[string]string,
	start func(context.Context, string, map[string]string, io.Writer) (*child, error)) (lab.Guest, error) {
	g := &guest{o: o, req: req, facts: f, start: time.Now()}
	kind := req.RunKind
	if kind == "" {
		kind = "host"
	}
	store := results.Store{Root: o.RunsDir}
	var err error
	if req.RunID != "" {
		g.run, err = store.CreateNamed(req.RunID)
	} else {
		g.run, err = store.Create(kind)
	}
	if err != nil {
		return nil, err
	}
	g.res = &lab.BootResult{RunDir: g.run.Dir, ExitCode: -1}
	g.man = manifestFor(g.run, &req, k, f)
	g.man.Times.Start = g.start
	g.res.Manifest = g.man
	if g.output, err = lab.OpenOutputLogs(g.run, req.MaxOutput); err != nil {
		return nil, err
	}
	if g.console, err = g.run.LogWriter(results.ConsoleFile, results.MaxConsoleLog); err != nil {
		g.output.Close()
		return nil, err
	}
	if g.events, err = g.run.Events(); err != nil {
		g.output.Close()
		g.console.Close()
		return nil, err
	}
	// The private root: an empty directory of the host that the child
	// mounts its tmpfs on, in its own mount namespace only.
	// A klab killed with SIGKILL could not remove its own: the next one
	// does (vm.RemoveStaleTempDirs).
	vm.RemoveStaleTempDirs(os.TempDir(), rootPrefix)
	if g.root, err = vm.MkdirTemp(rootPrefix); err != nil {
		return g, g.fail(ctx, fmt.Errorf("private root: %w", err))
	}
	var console io.Writer = g.console
	if req.Console != nil {
		console = io.MultiWriter(g.console, req.Console)
	}
	o.progressf("starting the agent on this host (%s, kernel %s), confined to %s...", k.Name, k.Version, g.root)
	if g.c, err = start(ctx, g.root, libfuse, console); err != nil {
		return g, g.fail(ctx, err)
	}
	actx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	go func() {
		select {
		case <-g.c.exited:
			cancel() // no hello will come
		case <-actx.Done():
		}
	}()
	g.a, err = vm.ConnectAgent(actx, g.c.conn, channelFor(g.c.pid))
	if err != nil {
		select {
		case <-g.c.exited:
			err = fmt.Errorf("%w (%v): %s", errAgentExited, g.c.err(), lastLine(g.run.Dir))
		case <-time.After(time.Second):
		}
		return g, g.fail(ctx, err)
	}
	g.res.BootToAgent = g.a.HelloAt.Sub(g.start)
	g.man.Times.BootToAgentMs = g.res.BootToAgent.Milliseconds()
	g.man.AgentVersion = g.a.Hello.AgentVersion
	_ = g.events.Append(lab.Event{Kind: "hello", Hello: g.a.Hello})
	o.progressf("agent %s ready after %.2fs on the host (kernel %s, %d CPUs)", g.a.Hello.AgentVersion, g.res.BootToAgent.Seconds(), g.a.Hello.Uname.Release, g.a.Hello.CPUs)
	return g, nil
}

// fail records err as the run's outcome and closes the guest; Open then
// returns it.
func (g *guest) fail(ctx context.Context, err error) error {
	status := results.StatusInfraError
	if ctx.Err() != nil {
		err = fmt.Errorf("interrupted: %w", ctx.Err())
	}
	g.man.Outcome = results.NewOutcome(status, err.Error(), 0)
	g.err = err
	_, _ = g.Close()
	return err
}

// lastLine is the last line of the run's console.log, for messages.
func lastLine(dir string) string {
	b, err := os.ReadFile(dir + "/" + results.ConsoleFile)
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(b))
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// stepGrace is how long past its timeout a step may run before the host
// ends the agent: the agent enforces the step's own timeout, and aborts
// its FUSE connection when it has to.
const stepGrace = 5 * time.Second

// rootPrefix starts the name of a host guest's private root in $TMPDIR.
const rootPrefix = "klab-host-"

// Run runs steps in order, as a VM guest's session does: a step that
// would change the host is refused, a failed step other than exec gives a
// *lab.StepError, and an agent that ran past a step's time is ended (a
// *lab.KernelError: the host's kernel hung the step).
func (g *guest) Run(ctx context.Context, steps []proto.Step) ([]lab.StepResult, error) {
	if g.err != nil {
		return nil, g.err
	}
	if g.closed {
		return nil, errors.New("run steps: the host agent is closed")
	}
	var done []lab.StepResult
	for _, st := range steps {
		if errs := stepProblems(&st, g.facts); len(errs) > 0 {
			return done, fmt.Errorf("this cannot run on the host: %w", errors.Join(errs...))
		}
		r, err := g.step(ctx, st, len(g.res.Steps)+1)
		if r != nil {
			done = append(done, *r)
		}
		if err != nil {
			var se *lab.StepError
			if !errors.As(err, &se) {
				g.err = err
			}
			return done, err
		}
	}
	return done, nil
}

// step runs one step; n numbers it in messages.
func (g *guest) step(ctx context.Context, st proto.Step, n int) (*lab.StepResult, error) {
	stdout, stderr := g.req.Stdout, g.req.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	limit := g.req.StepTimeout
	if limit == 0 {
		limit = 10 * time.Minute
	}
	if st.TimeoutMs > 0 {
		limit = time.Duration(st.TimeoutMs) * time.Millisecond
	}
	sctx, cancel := context.WithTimeout(ctx, limit+stepGrace+lab.HardGrace)
	defer cancel()
	d, err := g.a.Run(sctx, st, func(msg *proto.Message) {
		switch msg.Kind {
		case proto.KindOutput:
			rec := g.output.Add(msg.Output, stdout, stderr)
			_ = g.events.Append(lab.Event{Kind: "output", Output: &rec})
		case proto.KindLog:
			_ = g.events.Append(lab.Event{Kind: "agent-log", Message: msg.Log.Msg})
		case proto.KindSample:
			_ = g.events.Append(lab.Event{Kind: "sample", Sample: msg.Sample})
		}
		if g.req.OnMessage != nil {
			g.req.OnMessage(msg)
		}
	})
	if err != nil {
		switch {
		case ctx.Err() != nil:
			g.man.Outcome = results.NewOutcome(results.StatusInfraError, "interrupted: "+ctx.Err().Error(), 0)
			return nil, ctx.Err()
		case sctx.Err() != nil:
			msg := fmt.Sprintf("kernel hang: step %d (%s) ran past its %s timeout by more than %s on the host; the agent was killed", n, st.Kind, limit, stepGrace+lab.HardGrace)
			g.man.Outcome = results.NewOutcome(results.StatusKernelHang, msg, 0)
			g.c.kill()
			return nil, &lab.KernelError{Status: string(results.StatusKernelHang), Msg: msg}
		}
		msg := fmt.Sprintf("the host agent's channel closed during step %d (%s): %v", n, st.Kind, err)
		g.man.Outcome = results.NewOutcome(results.StatusInfraError, msg, 0)
		return nil, errors.New(msg)
	}
	_ = g.events.Append(lab.Event{Kind: "done", Done: d})
	sr := lab.StepResult{Step: st, Done: *d}
	sr.Step.ID = d.Step
	g.res.Steps = append(g.res.Steps, sr)
	if st.Kind != proto.StepExec && (d.Error != "" || d.ExitCode != 0) {
		msg := fmt.Sprintf("%s step %d failed (exit %d): %s", st.Kind, n, d.ExitCode, d.Error)
		g.man.Outcome = results.NewOutcome(results.StatusStepFailed, msg, d.ExitCode)
		g.res.ExitCode = 1
		g.stepFailed = true
		return &sr, &lab.StepError{Msg: msg}
	}
	if st.Kind == proto.StepExec {
		g.res.ExitCode = d.ExitCode
		if d.TimedOut {
			g.res.ExitCode = lab.ExitTimeout
		}
	}
	return &sr, nil
}

// Close ends the agent, removes the private root and saves the run; see
// lab.Guest.
func (g *guest) Close() (*lab.BootResult, error) {
	if g.closed {
		return g.res, g.closeErr
	}
	g.closed = true
	runErr := g.err
	if g.a != nil && runErr == nil {
		if err := g.a.Shutdown(5 * time.Second); err != nil {
			g.o.progressf("warning: host agent: %v", err)
		}
	}
	if g.c != nil {
		select {
		case <-g.c.exited:
		case <-time.After(10 * time.Second):
			g.o.progressf("warning: the host agent did not exit; killing it")
		}
		// What the agent started (libfuse servers, workload children)
		// goes with it, and with the last of them its mount namespace,
		// private root and FUSE mounts.
		g.c.kill()
		<-g.c.exited
		g.c.conn.Close()
	}
	if g.root != "" {
		if err := os.Remove(g.root); err != nil {
			g.o.progressf("warning: private root: %v", err)
		}
	}
	if runErr == nil && !g.stepFailed {
		g.man.Outcome = results.NewOutcome(results.StatusOK, "", g.res.ExitCode)
	}
	g.man.Times.End = time.Now()
	for _, l := range append(g.output.Files(), g.console) {
		if l == nil {
			continue
		}
		if err := l.Close(); err != nil {
			g.o.progressf("warning: save %s: %v", l.Name(), err)
		}
		if l.Truncated() {
			g.man.Truncated = append(g.man.Truncated, l.Name())
		}
	}
	g.events.Close()
	if g.events.Truncated() {
		g.man.Truncated = append(g.man.Truncated, results.EventsFile)
	}
	g.res.Splats = []splat.Report{}
	if err := g.run.WriteJSON("splats.json", g.res.Splats); err != nil {
		g.o.progressf("warning: save splats: %v", err)
	}
	if err := g.run.WriteManifest(g.man); err != nil {
		g.o.progressf("warning: save manifest: %v", err)
	}
	g.res.Wall = time.Since(g.start)
	g.closeErr = runErr
	return g.res, runErr
}
