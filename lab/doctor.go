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

// ProbePolicy says when klab doctor proves KVM with a probe boot.
type ProbePolicy int

const (
	// ProbeIfStale shows the verdict cached for this host kernel, CPU and
	// QEMU binary when it is younger than VerdictMaxAge, and proves KVM
	// afresh otherwise.
	ProbeIfStale ProbePolicy = iota
	// ProbeAlways proves KVM afresh.
	ProbeAlways
	// ProbeNever shows the cached verdict, if any, and never boots.
	ProbeNever
)

// VerdictMaxAge is how old a cached accelerator verdict may be before
// klab doctor proves KVM again. Runs use a cached verdict whatever its
// age: only a new host kernel, CPU or QEMU binary makes them probe.
const VerdictMaxAge = 7 * 24 * time.Hour

// DoctorOptions tunes Doctor.
type DoctorOptions struct {
	// Probe says when the kvm check proves KVM with a probe boot.
	Probe ProbePolicy
	// NewProber readies what the probe boots and returns its prober; it
	// calls announce with the kernel's name once it has found one, before
	// any slow step. Nil means a probe boot of the newest cached Debian
	// kernel with its initramfs. Tests pass a fake.
	NewProber func(ctx context.Context, announce func(kernel string)) (vm.Prober, error)
	// Now is the time a cached verdict's age is taken at; zero means
	// time.Now().
	Now time.Time
}

// errNoProbeKernel is NewProber's error when there is no kernel to boot.
var errNoProbeKernel = errors.New("no cached kernel to boot")

// Doctor checks the host: QEMU, whether KVM really works, the Debian
// suites, where the guest agent and initramfs base come from (and whether
// that needs Go), and the cache directory. The kvm check proves KVM with
// a probe boot as d.Probe says; before the probe, and before any other
// step that may take seconds, Doctor says on o.Progress what it does.
func (o *Options) Doctor(ctx context.Context, d DoctorOptions) []Check {
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

	kvm := o.kvmCheck(ctx, "/dev/kvm", qpath, d)
	kvm.Detail = oneLine(kvm.Detail)
	checks = append(checks, kvm)

	if origin, _, err := images.GuestPartsOrigin(); err != nil {
		add("guest parts", false, "%v", err)
	} else {
		add("guest parts", true, "%s", origin)
	}

	o.progressf("debian: checking the suites on the Debian mirror (at most 15s each)...")
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
// actually runs a guest to its agent. As d.Probe says, it shows the
// verdict cached for this host or proves KVM afresh with a probe boot
// (see DoctorOptions.NewProber), saying first on o.Progress why it
// probes and for how long it may take. The check warns whenever guests
// would run under TCG.
func (o *Options) kvmCheck(ctx context.Context, dev, qemu string, d DoctorOptions) Check {
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
	if qemu == "" {
		return o.cachedAccelCheck(c, dev, "not proved: no QEMU")
	}
	now := d.Now
	if now.IsZero() {
		now = time.Now()
	}
	var why string
	v, cached := o.CachedAccel()
	switch {
	case d.Probe == ProbeNever:
		return o.cachedAccelCheck(c, dev, "not proved now (`klab doctor --probe` proves it)")
	case d.Probe == ProbeAlways:
		why = "asked to prove KVM afresh"
	case !cached:
		why = o.noVerdictReason()
	case now.Sub(v.When) > VerdictMaxAge:
		why = fmt.Sprintf("the cached verdict is %s old (doctor proves it again after %s)", age(now.Sub(v.When)), age(VerdictMaxAge))
	default:
		return verdictCheck(c, fmt.Sprintf("%s present; cached verdict from %s (%s ago; `klab doctor --probe` proves it afresh)",
			dev, v.When.Local().Format("2006-01-02 15:04"), age(now.Sub(v.When))), v)
	}
	newProber := d.NewProber
	if newProber == nil {
		newProber = o.probeBoot
	}
	kernel := ""
	p, err := newProber(ctx, func(k string) {
		kernel = k
		o.progressf("kvm: %s; probing KVM with a test boot of %s (at most %s)...", why, k, vm.ProbeTimeout)
	})
	switch {
	case errors.Is(err, errNoProbeKernel):
		return o.cachedAccelCheck(c, dev, "cannot prove it without a kernel: run `klab kernels fetch debian:7.3` first")
	case err != nil:
		c.OK = false
		c.Detail = fmt.Sprintf("%s present; probe not run: %v", dev, err)
		return c
	}
	cacheFile := o.verdictFile()
	os.Remove(cacheFile) // doctor proves afresh
	start := time.Now()
	v, err = vm.ChooseAccel(ctx, vm.AccelOptions{
		Want: "auto", CacheFile: cacheFile, HostKey: vm.HostKey(qemu), KVMDevice: dev,
		Prober: announcedProber{Prober: p, o: o},
	})
	if err != nil {
		c.Warn = true
		c.Detail = fmt.Sprintf("%s present; probe failed: %v", dev, err)
		return c
	}
	return verdictCheck(c, fmt.Sprintf("%s present; probe boot of %s took %.1fs", dev, kernel, time.Since(start).Seconds()), v)
}

// noVerdictReason says why no accelerator verdict is cached for this
// host: none was, or the one cached holds for another host kernel, CPU
// or QEMU binary.
func (o *Options) noVerdictReason() string {
	old, ok := vm.ReadVerdict(o.verdictFile())
	if !ok {
		return "no accelerator verdict cached"
	}
	if change := vm.HostChange(old.Host, vm.HostKey(o.qemu())); change != "" {
		return "the cached verdict is for another " + change
	}
	return "no accelerator verdict cached for this host"
}

// probeBoot readies a probe boot of the newest cached Debian kernel
// (DoctorOptions.NewProber's default): it announces the kernel, then
// assembles its initramfs.
func (o *Options) probeBoot(ctx context.Context, announce func(kernel string)) (vm.Prober, error) {
	ks, _ := debian.CachedKernels(o.CacheDir)
	if len(ks) == 0 {
		return nil, errNoProbeKernel
	}
	k := ks[len(ks)-1]
	announce(k.Name)
	ir, err := o.Initramfs(ctx, k)
	if err != nil {
		return nil, err
	}
	return &kvmProber{qemu: o.QEMU, kernel: k.Image, initrd: ir.Path}, nil
}

// announcedProber says on its Options' Progress before the TCG boot that
// follows a failed KVM probe, the step that may take longest.
type announcedProber struct {
	vm.Prober
	o *Options
}

// ProbeTCG says what it does and why, then boots the kernel under TCG.
func (p announcedProber) ProbeTCG(ctx context.Context, timeout time.Duration) error {
	p.o.progressf("kvm: the KVM boot failed; booting the same kernel under TCG to tell a broken KVM from a broken kernel (at most %s)...", timeout)
	return p.Prober.ProbeTCG(ctx, timeout)
}

// age is d in whole days, hours or minutes: "3 days", "5 hours", "1 minute".
func age(d time.Duration) string {
	n, unit := int(d/time.Minute), "minute"
	switch {
	case d >= 48*time.Hour:
		n, unit = int(d/(24*time.Hour)), "day"
	case d >= 2*time.Hour:
		n, unit = int(d/time.Hour), "hour"
	}
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
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
