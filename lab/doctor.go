package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"klab/images"
	"klab/images/debian"
	"klab/vm"
)

// Check is one line of `klab doctor`.
type Check struct {
	// Name is what was checked.
	Name string `json:"name"`
	// OK is false when klab cannot work as it should.
	OK bool `json:"ok"`
	// Warn is set on a check that passed (OK) with a caveat: klab works,
	// but not as well as it could, e.g. guests run under TCG.
	Warn bool `json:"warn,omitempty"`
	// Detail says what was found, or what to do, on one line.
	Detail string `json:"detail"`
}

// oneLine joins text's lines with "; " (with a space after a line that
// ends in ':', ';' or ',') and collapses runs of white space, so that a
// multi-line QEMU error stays on its check's line.
func oneLine(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(text, "\n") {
		l = strings.Join(strings.Fields(l), " ")
		switch {
		case l == "":
			continue
		case b.Len() == 0:
		case strings.ContainsAny(b.String()[b.Len()-1:], ":;,"):
			b.WriteByte(' ')
		default:
			b.WriteString("; ")
		}
		b.WriteString(l)
	}
	return b.String()
}

// Doctor checks the host: QEMU, whether KVM really works, the Debian
// suites, where the guest agent and initramfs base come from (and whether
// that needs Go), and the cache directory. With probe set it
// proves KVM with a fresh probe boot of a cached kernel.
func (o *Options) Doctor(ctx context.Context, probe bool) []Check {
	var checks []Check
	add := func(name string, ok bool, format string, args ...any) {
		checks = append(checks, Check{Name: name, OK: ok, Detail: oneLine(fmt.Sprintf(format, args...))})
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

	kvm := o.kvmCheck(ctx, "/dev/kvm", qpath, probe)
	kvm.Detail = oneLine(kvm.Detail)
	checks = append(checks, kvm)

	if origin, _, err := images.GuestPartsOrigin(); err != nil {
		add("guest parts", false, "%v", err)
	} else {
		add("guest parts", true, "%s", origin)
	}

	for _, s := range debian.CheckSuites(ctx, debian.Options{Mirror: o.Mirror, CacheDir: o.CacheDir}) {
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

// slowTCG is the caveat of a kvm check whose guests run under TCG.
func slowTCG() string {
	return fmt.Sprintf("TCG is several times slower than KVM (timeouts scaled ×%g)", vm.TCG.Factor())
}

// kvmCheck reports whether the KVM device dev is there and whether it
// actually runs a guest to its agent. With probe it proves KVM afresh with
// a probe boot of the newest cached kernel; without, it shows the cached
// verdict, if any. The check warns whenever guests would run under TCG.
func (o *Options) kvmCheck(ctx context.Context, dev, qemu string, probe bool) Check {
	c := Check{Name: "kvm", OK: true} // TCG works without KVM: the check only warns.
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		c.Warn = true
		if errors.Is(err, os.ErrNotExist) {
			c.Detail = fmt.Sprintf("%s absent: guests run under TCG; %s", dev, slowTCG())
		} else {
			c.Detail = fmt.Sprintf("%s not usable (%v): guests run under TCG; %s", dev, err, slowTCG())
		}
		return c
	}
	f.Close()
	if !probe || qemu == "" {
		why := "not proved now (run `klab doctor --probe`)"
		if qemu == "" {
			why = "not proved: no QEMU"
		}
		return o.cachedAccelCheck(c, dev, why)
	}
	ks, _ := debian.CachedKernels(o.CacheDir)
	if len(ks) == 0 {
		return o.cachedAccelCheck(c, dev, "cannot prove it without a kernel: run `klab kernels fetch debian:7.3` first")
	}
	k := ks[len(ks)-1]
	ir, err := o.Initramfs(ctx, k)
	if err != nil {
		c.OK = false
		c.Detail = fmt.Sprintf("%s present; probe not run: %v", dev, err)
		return c
	}
	cacheFile := o.verdictFile()
	os.Remove(cacheFile) // doctor proves afresh
	start := time.Now()
	v, err := vm.ChooseAccel(ctx, vm.AccelOptions{
		Want: "auto", CacheFile: cacheFile, HostKey: vm.HostKey(qemu), KVMDevice: dev,
		Prober: &kvmProber{qemu: o.QEMU, kernel: k.Image, initrd: ir.Path},
	})
	if err != nil {
		c.Warn = true
		c.Detail = fmt.Sprintf("%s present; probe failed: %v", dev, err)
		return c
	}
	return verdictCheck(c, fmt.Sprintf("%s present; probe boot of %s took %.1fs", dev, k.Name, time.Since(start).Seconds()), v)
}

// cachedAccelCheck completes c, for a present but unproved KVM device,
// with the accelerator verdict cached for this host, if any.
func (o *Options) cachedAccelCheck(c Check, dev, why string) Check {
	v, ok := o.CachedAccel()
	if !ok {
		c.Detail = fmt.Sprintf("%s present; %s", dev, why)
		return c
	}
	return verdictCheck(c, fmt.Sprintf("%s present; %s; cached verdict from %s", dev, why, v.When.Local().Format(time.DateTime)), v)
}

// verdictCheck completes c with what led to verdict v and v's
// accelerator, last: "...: <reason> → kvm". A TCG verdict is a warning
// that says so first.
func verdictCheck(c Check, what string, v vm.Verdict) Check {
	c.Detail = fmt.Sprintf("%s: %s → %s", what, oneLine(v.Reason), v.Accel)
	if v.Accel != vm.KVM {
		c.Warn = true
		c.Detail = slowTCG() + "; " + c.Detail
	}
	return c
}
