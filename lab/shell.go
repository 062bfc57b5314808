package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/images/userspace"
	"klab/internal/textsafe"
	"klab/results"
	"klab/vm"
)

// ExitInterrupted is klab's status for work that Ctrl-C or SIGTERM
// stopped, and for a shell session killed before its shell exited.
const ExitInterrupted = 130

// ShellRequest is one `klab shell`.
type ShellRequest struct {
	// Kernel is the kernel reference; Resolved, when set, is the kernel
	// it was already resolved to.
	Kernel   string
	Resolved *results.Kernel
	// MemMB and CPUs size the guest; 0 means the defaults.
	MemMB, CPUs int
	// Cmdline is extra kernel command line.
	Cmdline string
	// Command is klab's own argv, for the manifest.
	Command []string
	// Script, when set, is what the shell reads instead of a terminal
	// (klab's standard input is a pipe or a file): the guest's sh then
	// runs it as a script through the agent, without a line editor, with
	// its output on Stdout and Stderr, as klab boot -- sh would. When nil,
	// the shell runs on the console, wired to this process's terminal.
	Script io.Reader
	// Stdout and Stderr receive the output of a Script session.
	Stdout, Stderr io.Writer
	// Userspace, when set, is a userspace disk the shell runs chrooted
	// into (klab shell --userspace): Debian's bash and tools instead of
	// u-root's.
	Userspace *userspace.Attachment
}

// ShellResult says how a shell session ended.
type ShellResult struct {
	// RunDir is where the session was saved.
	RunDir string
	// Outcome is the session's outcome, as its manifest records it: ok
	// only when the shell exited (or the guest powered itself off).
	Outcome results.Outcome
	// ExitCode is klab's status for the session: the shell's own when it
	// exited; ExitInterrupted when klab was stopped or QEMU was quit
	// before the shell exited; ExitKernel when the kernel panicked;
	// ExitInfra when QEMU failed.
	ExitCode int
	// Boot is the run of a Script session; nil on the console.
	Boot *BootResult
}

// Shell boots a kernel with a shell. With req.Script it runs the script
// through the agent (see ShellRequest.Script) and returns Boot's error;
// otherwise the shell runs on the console, wired to this process's
// terminal, until the guest powers off, and how the session ended is in
// the result.
func (o *Options) Shell(ctx context.Context, req ShellRequest) (*ShellResult, error) {
	if req.Script != nil {
		return o.scriptShell(ctx, req)
	}
	opt := o.withDefaults()
	o = &opt
	start := time.Now()
	k := req.Resolved
	if k == nil {
		var err error
		if k, err = o.ResolveKernel(ctx, req.Kernel); err != nil {
			return nil, err
		}
	}
	var modules, qemuArgs []string
	cmdline := req.Cmdline
	if u := req.Userspace; u != nil {
		param, err := u.Step.Userspace.Param()
		if err != nil {
			return nil, err
		}
		modules, qemuArgs = u.Modules, u.QEMUArgs
		cmdline = strings.TrimSpace(cmdline + " " + proto.UserspaceParam + "=" + param)
	}
	ir, err := o.initramfs(ctx, k, nil, modules)
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
	run, err := results.Store{Root: o.RunsDir}.Create("shell")
	if err != nil {
		return nil, err
	}
	consoleLog := filepath.Join(run.Dir, results.ConsoleFile)
	cfg := vm.Config{
		QEMU: o.QEMU, Kernel: k.Image, Initrd: ir.Path, Cmdline: cmdline,
		Accel: verdict.Accel, MemMB: req.MemMB, CPUs: req.CPUs, ExtraArgs: qemuArgs,
		Mode: vm.Interactive, AgentMode: "shell",
		ConsoleLog: consoleLog,
	}
	o.progressf("booting %s (%s) under %s; the shell runs on the console. Exit it to power off, or press Ctrl-A x to kill the VM.", k.Name, k.Version, verdict.Accel)
	m, err := vm.Start(ctx, cfg, vm.StartOptions{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		return nil, err
	}
	// Ctrl-C goes to the guest (the terminal is raw); a SIGTERM to klab
	// still ends the VM, and the session is then no success.
	var end consoleEnd
	select {
	case <-m.Exited():
	case <-ctx.Done():
		end.interrupted = ctx.Err()
		m.Kill()
	}
	end.shutdown, end.sawShutdown = m.ShutdownEvent(2 * time.Second)
	end.waitErr = m.Wait()
	select {
	case end.panicked = <-m.Panicked():
	default:
	}
	end.status, end.exited = shellExitStatus(consoleLog)
	outcome, code := end.outcome()
	man := newManifest(run, req.Command, k, ir, verdict)
	man.QEMU = results.QEMU{Binary: m.Argv()[0], Version: QEMUVersion(context.WithoutCancel(ctx), m.Argv()[0]), Argv: m.Argv()}
	man.Outcome = outcome
	man.Times.Start = start
	man.Times.End = time.Now()
	res := &ShellResult{RunDir: run.Dir, Outcome: outcome, ExitCode: code}
	if err := run.WriteManifest(man); err != nil {
		return res, fmt.Errorf("save manifest: %w", err)
	}
	return res, nil
}

// scriptShell runs req's script with the guest's sh, through the agent.
func (o *Options) scriptShell(ctx context.Context, req ShellRequest) (*ShellResult, error) {
	sh := "the guest's sh"
	if req.Userspace != nil {
		sh = "the userspace's bash"
	}
	o.progressf("standard input is not a terminal: %s runs it as a script, without a console", sh)
	breq := BootRequest{
		Kernel: req.Kernel, Resolved: req.Resolved, MemMB: req.MemMB, CPUs: req.CPUs, Cmdline: req.Cmdline, Command: req.Command,
		Argv: []string{"sh"}, Stdin: req.Script, Stdout: req.Stdout, Stderr: req.Stderr, RunKind: "shell",
	}
	if u := req.Userspace; u != nil {
		breq.QEMUArgs, breq.Modules, breq.Steps = u.QEMUArgs, u.Modules, []proto.Step{u.Step}
		breq.Argv, breq.Root = []string{"bash"}, u.Step.Userspace.Root
	}
	bres, err := o.Boot(ctx, breq)
	if bres == nil {
		return nil, err
	}
	res := &ShellResult{RunDir: bres.RunDir, ExitCode: bres.ExitCode, Boot: bres}
	if bres.Manifest != nil {
		res.Outcome = bres.Manifest.Outcome
	}
	return res, err
}

// consoleEnd is what klab knows of how a console session ended.
type consoleEnd struct {
	// interrupted is klab's context error when klab was stopped and
	// killed QEMU.
	interrupted error
	// panicked is QMP's GUEST_PANICKED data, "" without one.
	panicked string
	// shutdown is QEMU's SHUTDOWN event, when sawShutdown.
	shutdown    vm.Shutdown
	sawShutdown bool
	// waitErr is QEMU's exit error.
	waitErr error
	// status is the shell's exit status, when exited: the agent printed
	// it on the console before powering off.
	status int
	exited bool
}

// outcome is the session's outcome and klab's exit status for it. Only
// a shell that exited, or a guest that powered itself off, is ok: a
// session that klab's signal or a quit of QEMU (Ctrl-A x) killed is not,
// whatever the console shows.
func (e consoleEnd) outcome() (results.Outcome, int) {
	infra := func(code int, format string, args ...any) (results.Outcome, int) {
		return results.NewOutcome(results.StatusInfraError, fmt.Sprintf(format, args...), code), code
	}
	switch {
	case e.interrupted != nil:
		return infra(ExitInterrupted, "interrupted: klab was stopped (%v) and killed the VM before the shell exited", e.interrupted)
	case e.panicked != "":
		p := textsafe.OneLine(e.panicked)
		if len(p) > 256 {
			p = strings.ToValidUTF8(p[:256], "") + " [cut]"
		}
		return results.NewOutcome(results.StatusKernelPanic, "the kernel panicked: "+p, ExitKernel), ExitKernel
	case e.sawShutdown && !e.shutdown.Guest:
		how := "QEMU was told to quit (Ctrl-A x on the console, or its monitor)"
		if e.shutdown.Reason == "host-signal" {
			how = "QEMU was sent a signal"
		}
		return infra(ExitInterrupted, "killed: %s before the shell exited", how)
	case e.exited:
		return results.NewOutcome(results.StatusOK, "", e.status), e.status
	case e.sawShutdown:
		return results.NewOutcome(results.StatusOK, fmt.Sprintf("the guest powered off (%s) before the shell exited", e.shutdown.Reason), 0), 0
	case e.waitErr != nil:
		return infra(ExitInfra, "QEMU ended before the shell exited: %v", e.waitErr)
	}
	return infra(ExitInfra, "QEMU ended before the shell exited, without saying why")
}

// shellExitStatus reads the shell's exit status from the end of a
// console log: the last line the agent printed with proto.ShellExitPrefix.
func shellExitStatus(consoleLog string) (int, bool) {
	f, err := os.Open(consoleLog)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	const tail = 4 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > tail {
		_, _ = f.Seek(fi.Size()-tail, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, tail))
	return parseShellExit(b)
}

// parseShellExit finds the last line of b that is proto.ShellExitPrefix
// and a status 0..255.
func parseShellExit(b []byte) (int, bool) {
	lines := bytes.Split(b, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimRight(string(lines[i]), "\r")
		v, ok := strings.CutPrefix(l, proto.ShellExitPrefix)
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 255 && strconv.Itoa(n) == v {
			return n, true
		}
	}
	return 0, false
}
