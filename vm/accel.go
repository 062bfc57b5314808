package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"klab/internal/fileio"
)

// ProbeTimeout bounds the KVM probe boot: a guest that has not reached its
// agent by then under KVM is taken as a KVM that does not work.
const ProbeTimeout = 12 * time.Second

// Prober proves that KVM works by booting a guest under it.
type Prober interface {
	// ProbeKVM boots a short guest with KVM and returns nil once its agent
	// answers, or an error saying why not. It must return within timeout;
	// ChooseAccel also ends ctx then.
	ProbeKVM(ctx context.Context, timeout time.Duration) error
	// ProbeTCG boots the same guest under TCG, within timeout: after a
	// failed KVM probe it tells a KVM that does not work (the guest
	// boots under TCG) from a kernel that does not boot at all.
	ProbeTCG(ctx context.Context, timeout time.Duration) error
}

// TCGProbeTimeout bounds the TCG boot that checks a failed KVM probe's
// kernel.
const TCGProbeTimeout = 90 * time.Second

// Verdict is the outcome of an accelerator decision, cached per host.
type Verdict struct {
	// Accel is the accelerator to use.
	Accel Accel `json:"accel"`
	// Reason explains the choice, for the manifest and `klab doctor`.
	Reason string `json:"reason"`
	// Host identifies the host the verdict holds for.
	Host string `json:"host"`
	// When is the time of the probe.
	When time.Time `json:"when"`
}

// AccelOptions tunes ChooseAccel.
type AccelOptions struct {
	// Want is "auto", "kvm" or "tcg".
	Want string
	// CacheFile stores the auto verdict; empty means no caching.
	CacheFile string
	// HostKey identifies this host and QEMU; a cached verdict for another
	// key is ignored. Empty means HostKey().
	HostKey string
	// KVMDevice is the device to check; empty means /dev/kvm.
	KVMDevice string
	// Prober proves KVM works. Nil means KVM is never proved, so auto picks
	// TCG unless a cached verdict says otherwise.
	Prober Prober
	// Timeout bounds the probe; 0 means ProbeTimeout.
	Timeout time.Duration
}

// HostKey returns a string that changes when the host kernel release,
// the CPU model or the QEMU binary changes, so that a cached verdict is
// re-proved then. The QEMU binary counts by its path and modification
// time: installing another QEMU version replaces the file, so a version
// change always changes the key (and so does reinstalling the same one,
// which only costs one more probe). It needs no QEMU process, so that
// every run can check its cached verdict for free.
func HostKey(qemu string) string {
	var u unix.Utsname
	_ = unix.Uname(&u)
	rel := unix.ByteSliceToString(u.Release[:])
	cpu := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.IndexByte(l, ':'); i >= 0 {
					cpu = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	q := qemu
	if p, err := exec.LookPath(qemu); err == nil {
		q = p
	}
	if st, err := os.Stat(q); err == nil {
		q = fmt.Sprintf("%s@%d", q, st.ModTime().Unix())
	}
	return rel + "|" + cpu + "|" + q
}

// ChooseAccel decides the accelerator. "kvm" and "tcg" are taken as asked
// (kvm fails at once without a usable device). "auto" uses a cached verdict
// for this host when there is one; otherwise it picks TCG when the KVM device
// is missing or not openable, and else proves KVM with the prober, falling
// back to TCG within the probe timeout. The auto verdict is cached.
func ChooseAccel(ctx context.Context, o AccelOptions) (Verdict, error) {
	dev := o.KVMDevice
	if dev == "" {
		dev = "/dev/kvm"
	}
	switch o.Want {
	case "tcg":
		return Verdict{Accel: TCG, Reason: "asked for tcg"}, nil
	case "kvm":
		if err := kvmUsable(dev); err != nil {
			return Verdict{}, fmt.Errorf("accelerator kvm: %w", err)
		}
		return Verdict{Accel: KVM, Reason: "asked for kvm"}, nil
	case "", "auto":
	default:
		return Verdict{}, fmt.Errorf("accelerator %q: want auto, kvm or tcg", o.Want)
	}
	if err := kvmUsable(dev); err != nil {
		// No need to cache: this check is free.
		return Verdict{Accel: TCG, Reason: err.Error()}, nil
	}
	if v, ok := readVerdict(o.CacheFile, o.HostKey); ok {
		v.Reason += " (cached verdict from " + v.When.Format(time.DateTime) + ")"
		return v, nil
	}
	v := Verdict{Host: o.HostKey, When: time.Now().UTC()}
	if o.Prober == nil {
		v.Accel, v.Reason = TCG, "KVM not proved (no probe kernel)"
		return v, nil
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = ProbeTimeout
	}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := o.Prober.ProbeKVM(pctx, timeout)
	if ctx.Err() != nil {
		return Verdict{}, ctx.Err()
	}
	if err != nil {
		v.Accel = TCG
		v.Reason = fmt.Sprintf("%s is present but a KVM guest failed: %v; using TCG", dev, err)
		// Cache the verdict only if the guest boots under TCG: a kernel
		// that cannot boot at all must not lock the host into TCG.
		tctx, tcancel := context.WithTimeout(ctx, TCGProbeTimeout)
		terr := o.Prober.ProbeTCG(tctx, TCGProbeTimeout)
		tcancel()
		if ctx.Err() != nil {
			return Verdict{}, ctx.Err()
		}
		if terr != nil {
			v.Reason += fmt.Sprintf(" (not cached: the probe kernel does not boot under TCG either: %v)", terr)
			return v, nil
		}
	} else {
		v.Accel = KVM
		v.Reason = fmt.Sprintf("KVM proved by a probe boot in %.1fs", time.Since(start).Seconds())
	}
	writeVerdict(o.CacheFile, v)
	return v, nil
}

// kvmUsable checks that the KVM device exists and opens read-write.
func kvmUsable(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s does not exist", dev)
		}
		return fmt.Errorf("%s is not usable: %w", dev, err)
	}
	f.Close()
	return nil
}

// CachedVerdict returns the accelerator verdict cached in file for this
// host and QEMU, if there is one.
func CachedVerdict(file, qemu string) (Verdict, bool) { return readVerdict(file, HostKey(qemu)) }

// ReadVerdict returns the accelerator verdict cached in file, whatever
// host it holds for (see HostChange).
func ReadVerdict(file string) (Verdict, bool) {
	if file == "" {
		return Verdict{}, false
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return Verdict{}, false
	}
	var v Verdict
	if json.Unmarshal(b, &v) != nil || (v.Accel != KVM && v.Accel != TCG) {
		return Verdict{}, false
	}
	return v, true
}

func readVerdict(file, host string) (Verdict, bool) {
	v, ok := ReadVerdict(file)
	if !ok || v.Host != host {
		return Verdict{}, false
	}
	return v, true
}

// HostChange says what differs between two host keys (see HostKey):
// "host kernel (6.1.0-18-amd64, now 6.12.43+deb13-amd64)", "CPU", "QEMU
// binary", joined with " and "; "" when they are the same.
func HostChange(old, now string) string {
	o, n := strings.SplitN(old, "|", 3), strings.SplitN(now, "|", 3)
	if len(o) != 3 || len(n) != 3 {
		if old == now {
			return ""
		}
		return "host kernel, CPU or QEMU binary"
	}
	var what []string
	if o[0] != n[0] {
		what = append(what, fmt.Sprintf("host kernel (%s, now %s)", o[0], n[0]))
	}
	if o[1] != n[1] {
		what = append(what, "CPU")
	}
	if o[2] != n[2] {
		what = append(what, "QEMU binary")
	}
	return strings.Join(what, " and ")
}

func writeVerdict(file string, v Verdict) {
	if file == "" {
		return
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return
	}
	// A unique temporary name: two first runs at once never cache a
	// half-written verdict.
	_ = fileio.WriteJSON(file, v)
}
