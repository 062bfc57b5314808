// Package lab ties klab's parts into one run: it resolves the kernel,
// assembles the initramfs, decides the accelerator, boots the guest, runs
// steps through the agent, watches the console for splats, and saves the run
// with its manifest. Commands in cmd/klab are thin wrappers around it.
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"klab/images"
	"klab/images/debian"
	"klab/internal/textsafe"
	"klab/results"
	"klab/vm"
)

// Options are the settings shared by every run.
type Options struct {
	// CacheDir holds kernels, initramfs images and the accelerator verdict.
	CacheDir string
	// RunsDir is where runs are saved.
	RunsDir string
	// Mirror overrides the Debian mirror.
	Mirror string
	// Flavour is the Debian kernel flavour, "cloud-amd64" by default.
	Flavour string
	// Accel is "auto", "kvm" or "tcg".
	Accel string
	// QEMU is the qemu-system-x86_64 binary; empty means PATH.
	QEMU string
	// Progress receives the few lines a user should see on long work.
	Progress io.Writer
	// Log receives verbose lines.
	Log io.Writer
}

// Exit statuses of klab itself. A guest command's own status is passed
// through when the run worked.
const (
	// ExitTimeout means the guest command ran past its timeout and was
	// killed, as timeout(1) reports it.
	ExitTimeout = 124
	// ExitInfra means klab or its host failed, or the input was bad.
	ExitInfra = 125
	// ExitKernel means the kernel failed: it panicked, hung, or never
	// reached the agent. That is a result about the kernel.
	ExitKernel = 126
	// ExitNotRun means the guest command could not be started.
	ExitNotRun = 127
)

// KernelError is a result about the kernel: it did not boot, panicked or
// hung. It is not a failure of klab.
type KernelError struct {
	// Status is "kernel-panic", "kernel-hang" or "boot-timeout".
	Status string
	// Msg says what happened.
	Msg string
	// Console is the console excerpt that shows it.
	Console []string
	// RunDir is where the run was saved.
	RunDir string
}

func (e *KernelError) Error() string {
	s := e.Msg
	if len(e.Console) > 0 {
		s += "\nlast console lines:"
		for _, l := range e.Console {
			s += "\n  | " + l
		}
	}
	if e.RunDir != "" {
		s += "\nrun saved to " + e.RunDir
	}
	return s
}

// ExitCode maps an error to klab's exit status.
func ExitCode(err error) int {
	var ke *KernelError
	if errors.As(err, &ke) {
		return ExitKernel
	}
	var se *StepError
	if errors.As(err, &se) {
		return 1
	}
	return ExitInfra
}

func (o *Options) progressf(format string, args ...any) {
	if o.Progress != nil {
		// Progress quotes the guest (its agent version and release) and
		// kernel images: no control characters reach the terminal.
		fmt.Fprintln(o.Progress, textsafe.Clean(strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")))
	}
}

func (o *Options) withDefaults() Options {
	c := *o
	if c.Flavour == "" {
		c.Flavour = "cloud-amd64"
	}
	if c.Accel == "" {
		c.Accel = "auto"
	}
	return c
}

// CachedAccel returns the accelerator verdict cached for this host, if
// any: what an auto run would use without probing.
func (o *Options) CachedAccel() (vm.Verdict, bool) {
	return vm.CachedVerdict(o.verdictFile(), o.qemu())
}

func (o *Options) verdictFile() string { return filepath.Join(o.CacheDir, "accel-verdict.json") }

func (o *Options) qemu() string {
	if o.QEMU != "" {
		return o.QEMU
	}
	return "qemu-system-x86_64"
}

// ResolveKernel turns a kernel reference into a Kernel, fetching it when
// needed.
func (o *Options) ResolveKernel(ctx context.Context, ref string) (*results.Kernel, error) {
	return images.ResolveKernel(ctx, ref, images.ResolveOptions{
		Debian: debian.Options{
			Mirror:   o.Mirror,
			CacheDir: o.CacheDir,
			Flavour:  o.Flavour,
			Progress: o.Progress,
		},
	})
}

// Initramfs assembles the initramfs for k.
func (o *Options) Initramfs(ctx context.Context, k *results.Kernel) (*images.Initramfs, error) {
	return o.InitramfsWith(ctx, k, nil)
}

// InitramfsWith assembles the initramfs for k with extra host files (see
// images.HostProgram).
func (o *Options) InitramfsWith(ctx context.Context, k *results.Kernel, extra []images.ExtraFile) (*images.Initramfs, error) {
	return o.initramfs(ctx, k, extra, nil)
}

// initramfs is InitramfsWith loading more kernel modules (--module).
func (o *Options) initramfs(ctx context.Context, k *results.Kernel, extra []images.ExtraFile, modules []string) (*images.Initramfs, error) {
	return images.BuildInitramfs(ctx, images.InitramfsOptions{
		CacheDir:     o.CacheDir,
		Kernel:       k,
		Log:          o.Progress,
		Extra:        extra,
		ExtraModules: modules,
	})
}

// ChooseAccel decides the accelerator, proving KVM with a probe boot of k
// when it has to.
func (o *Options) ChooseAccel(ctx context.Context, k *results.Kernel, initrd string) (vm.Verdict, error) {
	qemu := o.qemu()
	return vm.ChooseAccel(ctx, vm.AccelOptions{
		Want:      o.Accel,
		CacheFile: o.verdictFile(),
		HostKey:   vm.HostKey(qemu),
		Prober:    &kvmProber{qemu: o.QEMU, kernel: k.Image, initrd: initrd, progress: o.Progress},
	})
}

// kvmProber proves KVM by booting the run's own kernel and initramfs
// under KVM and waiting for the agent's Hello.
type kvmProber struct {
	qemu, kernel, initrd string
	progress             io.Writer
}

func (p *kvmProber) ProbeKVM(ctx context.Context, timeout time.Duration) error {
	if p.progress != nil {
		fmt.Fprintf(p.progress, "probing KVM with a short boot (at most %s)...\n", timeout)
	}
	return p.probe(ctx, vm.KVM, timeout)
}

// ProbeTCG boots the probe's kernel under TCG: after a failed KVM probe,
// it tells a broken KVM from a kernel that does not boot.
func (p *kvmProber) ProbeTCG(ctx context.Context, timeout time.Duration) error {
	if p.progress != nil {
		fmt.Fprintf(p.progress, "KVM failed; checking the kernel boots under TCG (at most %s)...\n", timeout)
	}
	return p.probe(ctx, vm.TCG, timeout)
}

func (p *kvmProber) probe(ctx context.Context, accel vm.Accel, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := vm.Start(ctx, vm.Config{QEMU: p.qemu, Kernel: p.kernel, Initrd: p.initrd, Accel: accel, MemMB: 512, CPUs: 1}, vm.StartOptions{})
	if err != nil {
		return err
	}
	defer func() {
		m.Kill()
		_ = m.Wait()
	}()
	select {
	case a := <-m.AgentReady():
		_ = a.Shutdown(time.Second)
		return nil
	case <-m.Exited():
		return fmt.Errorf("qemu exited: %s", lastLine(m.QEMUOutput()))
	case <-ctx.Done():
		return fmt.Errorf("no agent after %s", timeout)
	}
}

func lastLine(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}
