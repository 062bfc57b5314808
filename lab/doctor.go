package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"klab/images"
	"klab/vm"
)

// Check is one line of `klab doctor`.
type Check struct {
	// Name is what was checked.
	Name string `json:"name"`
	// OK is false when klab cannot work as it should.
	OK bool `json:"ok"`
	// Detail says what was found, or what to do.
	Detail string `json:"detail"`
}

// Doctor checks the host: QEMU, whether KVM really works, the Debian
// suites, the Go toolchain, and the cache directory. With probe set it
// proves KVM with a fresh probe boot of a cached kernel.
func (o *Options) Doctor(ctx context.Context, probe bool) []Check {
	var checks []Check
	add := func(name string, ok bool, format string, args ...any) {
		checks = append(checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	qemu := o.QEMU
	if qemu == "" {
		qemu = "qemu-system-x86_64"
	}
	qpath, err := exec.LookPath(qemu)
	if err != nil {
		add("qemu", false, "%v", &vm.QEMUMissingError{Binary: qemu})
	} else {
		add("qemu", true, "%s: %s", qpath, QEMUVersion(ctx, qpath))
	}

	checks = append(checks, o.kvmCheck(ctx, qpath, probe))

	if goBin, err := exec.LookPath("go"); err != nil {
		add("go", false, "not found: the Go toolchain builds the guest agent; install Go 1.26")
	} else {
		add("go", true, "%s", goBin)
	}
	if src, err := images.FindSource(); err != nil {
		add("source", false, "%v", err)
	} else {
		add("source", true, "%s", src)
	}

	for _, s := range images.CheckDebianSuites(ctx, images.DebianOptions{Mirror: o.Mirror, CacheDir: o.CacheDir}) {
		add("debian "+s.Suite, s.Err == nil, "%s", s.Detail())
	}

	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		add("cache", false, "%s: %v", o.CacheDir, err)
	} else {
		var st unix.Statfs_t
		if err := unix.Statfs(o.CacheDir, &st); err != nil {
			add("cache", false, "%s: %v", o.CacheDir, err)
		} else {
			free := st.Bavail * uint64(st.Bsize)
			add("cache", free > 2<<30, "%s: %.1f GiB free%s", o.CacheDir, float64(free)/(1<<30), map[bool]string{true: "", false: " (kernels and builds need a few GiB)"}[free > 2<<30])
		}
	}
	add("runs", true, "%s", o.RunsDir)
	return checks
}

// kvmCheck reports whether /dev/kvm is there and whether it actually runs
// a guest to its agent.
func (o *Options) kvmCheck(ctx context.Context, qemu string, probe bool) Check {
	c := Check{Name: "kvm"}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		c.OK = true // TCG works without it; this is information.
		if errors.Is(err, os.ErrNotExist) {
			c.Detail = "/dev/kvm absent: guests run under TCG (slower, timeouts scaled ×4)"
		} else {
			c.Detail = fmt.Sprintf("/dev/kvm not usable (%v): guests run under TCG", err)
		}
		return c
	}
	f.Close()
	cacheFile := filepath.Join(o.CacheDir, "accel-verdict.json")
	if !probe || qemu == "" {
		c.OK = true
		c.Detail = "/dev/kvm present; not proved (run `klab doctor --probe`)"
		return c
	}
	ks, _ := images.CachedKernels(o.CacheDir)
	if len(ks) == 0 {
		c.OK = true
		c.Detail = "/dev/kvm present; cannot prove it without a kernel: run `klab kernels fetch debian:7.3` first"
		return c
	}
	k := ks[len(ks)-1]
	ir, err := o.Initramfs(ctx, k)
	if err != nil {
		c.Detail = fmt.Sprintf("/dev/kvm present; probe not run: %v", err)
		return c
	}
	os.Remove(cacheFile) // doctor proves afresh
	start := time.Now()
	v, err := vm.ChooseAccel(ctx, vm.AccelOptions{
		Want: "auto", CacheFile: cacheFile, HostKey: vm.HostKey(qemu),
		Prober: &kvmProber{qemu: o.QEMU, kernel: k.Image, initrd: ir.Path},
	})
	c.OK = true
	if err != nil {
		c.Detail = fmt.Sprintf("/dev/kvm present; probe failed: %v", err)
		return c
	}
	c.Detail = fmt.Sprintf("/dev/kvm present; probe boot of %s took %.1fs: %s → %s", k.Name, time.Since(start).Seconds(), v.Reason, v.Accel)
	return c
}
