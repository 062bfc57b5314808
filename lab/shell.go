package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"klab/results"
	"klab/vm"
)

// ShellRequest is one `klab shell`.
type ShellRequest struct {
	// Kernel is the kernel reference.
	Kernel string
	// MemMB and CPUs size the guest; 0 means the defaults.
	MemMB, CPUs int
	// Cmdline is extra kernel command line.
	Cmdline string
	// Command is klab's own argv, for the manifest.
	Command []string
}

// Shell boots a kernel with an interactive shell on the console, which is
// wired to this process's terminal. It returns when the guest powers off.
func (o *Options) Shell(ctx context.Context, req ShellRequest) (string, error) {
	opt := o.withDefaults()
	o = &opt
	start := time.Now()
	k, err := o.ResolveKernel(ctx, req.Kernel)
	if err != nil {
		return "", err
	}
	ir, err := o.Initramfs(ctx, k)
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath(o.qemu()); err != nil {
		return "", &vm.QEMUMissingError{Binary: o.qemu()}
	}
	verdict, err := o.ChooseAccel(ctx, k, ir.Path)
	if err != nil {
		return "", err
	}
	run, err := results.Store{Root: o.RunsDir}.Create("shell")
	if err != nil {
		return "", err
	}
	cfg := vm.Config{
		QEMU: o.QEMU, Kernel: k.Image, Initrd: ir.Path, Cmdline: req.Cmdline,
		Accel: verdict.Accel, MemMB: req.MemMB, CPUs: req.CPUs,
		Mode: vm.Interactive, AgentMode: "shell",
		ConsoleLog: filepath.Join(run.Dir, "console.log"),
	}
	o.progressf("booting %s (%s) under %s; the shell runs on the console. Exit it to power off, or press Ctrl-A x to kill the VM.", k.Name, k.Version, verdict.Accel)
	m, err := vm.Start(ctx, cfg, vm.StartOptions{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	if err != nil {
		return "", err
	}
	// Ctrl-C goes to the guest (the terminal is raw); a SIGTERM to klab
	// still ends the VM.
	go func() {
		select {
		case <-ctx.Done():
			m.Kill()
		case <-m.Exited():
		}
	}()
	_ = m.Wait()
	man := newManifest(run, req.Command, k, ir, verdict)
	man.QEMU = results.QEMU{Binary: m.Argv()[0], Version: QEMUVersion(ctx, m.Argv()[0]), Argv: m.Argv()}
	man.Outcome = results.NewOutcome(results.StatusOK, "", 0)
	man.Times.Start = start
	man.Times.End = time.Now()
	if err := run.WriteManifest(man); err != nil {
		return run.Dir, fmt.Errorf("save manifest: %w", err)
	}
	return run.Dir, nil
}
