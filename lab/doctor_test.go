package lab

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/vm"
)

// TestKVMCheck: guests that run under TCG are a warning, never "ok"
// without one, and never a failure; with --probe=false the cached verdict
// is shown; a multi-line QEMU error stays on one line.
func TestKVMCheck(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dev := filepath.Join(dir, "kvm") // present and openable, as /dev/kvm
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o := &Options{CacheDir: t.TempDir()}

	never := DoctorOptions{Probe: ProbeNever}
	c := o.kvmCheck(ctx, filepath.Join(dir, "absent"), "qemu-system-x86_64", DoctorOptions{Probe: ProbeAlways})
	if !c.OK || !c.Warn || !strings.Contains(c.Detail, "absent: guests run under TCG") || !strings.Contains(c.Detail, "TCG is several times slower") {
		t.Errorf("no KVM device: %+v", c)
	}

	c = o.kvmCheck(ctx, dev, "qemu-system-x86_64", never)
	if !c.OK || c.Warn || !strings.Contains(c.Detail, "not proved now") {
		t.Errorf("no probe, no cached verdict: %+v", c)
	}

	writeVerdict := func(v vm.Verdict) {
		t.Helper()
		v.Host, v.When = vm.HostKey(o.qemu()), time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		b, _ := json.Marshal(v)
		if err := os.WriteFile(o.verdictFile(), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeVerdict(vm.Verdict{Accel: vm.TCG, Reason: "/dev/kvm is present but a KVM guest failed: qemu-system-x86_64: -accel kvm: error:\n  failed to initialize kvm\n\nPermission denied; using TCG"})
	c = o.kvmCheck(ctx, dev, "qemu-system-x86_64", never)
	if !c.OK || !c.Warn || strings.Contains(c.Detail, "\n") || !strings.HasPrefix(c.Detail, "TCG is several times slower") ||
		!strings.Contains(c.Detail, "cached verdict from") ||
		!strings.HasSuffix(c.Detail, "error: failed to initialize kvm; Permission denied; using TCG → tcg") {
		t.Errorf("cached TCG verdict: %+v", c)
	}

	writeVerdict(vm.Verdict{Accel: vm.KVM, Reason: "KVM proved by a probe boot in 1.2s"})
	c = o.kvmCheck(ctx, dev, "qemu-system-x86_64", never)
	if !c.OK || c.Warn || !strings.HasSuffix(c.Detail, "KVM proved by a probe boot in 1.2s → kvm") {
		t.Errorf("cached KVM verdict: %+v", c)
	}
}

// fakeProber is a probe boot that records its calls and what Progress
// held when each began.
type fakeProber struct {
	progress *strings.Builder
	kvmErr   error
	// calls are "kvm" and "tcg", each with the progress printed before it.
	calls []string
}

func (p *fakeProber) ProbeKVM(ctx context.Context, timeout time.Duration) error {
	p.calls = append(p.calls, "kvm after: "+p.progress.String())
	return p.kvmErr
}

func (p *fakeProber) ProbeTCG(ctx context.Context, timeout time.Duration) error {
	p.calls = append(p.calls, "tcg after: "+p.progress.String())
	return nil
}

// TestKVMProbePolicy: klab doctor probes when no verdict is cached, when
// the cached one is older than VerdictMaxAge, when it is for another host
// key, and with --probe, each time saying why and for how long before the
// boot; a recent cached verdict is shown with its date and how to prove it
// afresh, and nothing boots.
func TestKVMProbePolicy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dev := filepath.Join(dir, "kvm")
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var progress strings.Builder
	o := &Options{CacheDir: t.TempDir(), Progress: &progress}
	now := time.Date(2026, 12, 10, 12, 0, 0, 0, time.UTC)
	// check runs the kvm check with policy and a fake probe, and returns
	// the check and the probe's calls.
	check := func(policy ProbePolicy, kvmErr error) (Check, []string) {
		t.Helper()
		progress.Reset()
		p := &fakeProber{progress: &progress, kvmErr: kvmErr}
		c := o.kvmCheck(ctx, dev, "qemu-system-x86_64", DoctorOptions{Probe: policy, Now: now,
			NewProber: func(ctx context.Context, announce func(string)) (vm.Prober, error) {
				announce("debian:7.3.4+deb13-cloud-amd64")
				return p, nil
			}})
		return c, p.calls
	}
	cache := func(v vm.Verdict) {
		t.Helper()
		b, _ := json.Marshal(v)
		if err := os.WriteFile(o.verdictFile(), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	host := vm.HostKey(o.qemu())

	// No cached verdict: a probe, announced first.
	c, calls := check(ProbeIfStale, nil)
	wantSaid := "kvm: no accelerator verdict cached; probing KVM with a test boot of debian:7.3.4+deb13-cloud-amd64 (at most 12s)...\n"
	if len(calls) != 1 || calls[0] != "kvm after: "+wantSaid {
		t.Errorf("no cache: probe calls %q, want one KVM probe after %q", calls, wantSaid)
	}
	if !c.OK || c.Warn || !strings.Contains(c.Detail, "probe boot of debian:7.3.4+deb13-cloud-amd64 took") || !strings.HasSuffix(c.Detail, "→ kvm") {
		t.Errorf("no cache: %+v", c)
	}
	if v, ok := o.CachedAccel(); !ok || v.Accel != vm.KVM {
		t.Errorf("the probe's verdict is not cached: %+v %v", v, ok)
	}

	// A recent cached verdict: no probe, and the check says it is cached,
	// from when, and how to prove it afresh.
	cache(vm.Verdict{Accel: vm.TCG, Reason: "KVM guest failed; using TCG", Host: host, When: now.Add(-50 * time.Hour)})
	c, calls = check(ProbeIfStale, nil)
	if len(calls) != 0 || progress.Len() != 0 {
		t.Errorf("recent cache: probe calls %q, progress %q; want neither", calls, progress.String())
	}
	if !c.OK || !c.Warn || !strings.Contains(c.Detail, "cached verdict from ") || !strings.Contains(c.Detail, "(2 days ago; `klab doctor --probe` proves it afresh)") ||
		!strings.HasSuffix(c.Detail, "KVM guest failed; using TCG → tcg") {
		t.Errorf("recent cache: %+v", c)
	}

	// --probe: a probe despite the cache; a failed KVM boot announces the
	// TCG boot before it.
	c, calls = check(ProbeAlways, errors.New("no agent after 12s"))
	said := "kvm: asked to prove KVM afresh; probing KVM with a test boot of debian:7.3.4+deb13-cloud-amd64 (at most 12s)...\n"
	if len(calls) != 2 || calls[0] != "kvm after: "+said ||
		calls[1] != "tcg after: "+said+"kvm: the KVM boot failed; booting the same kernel under TCG to tell a broken KVM from a broken kernel (at most 1m30s)...\n" {
		t.Errorf("--probe: probe calls %q", calls)
	}
	if !c.Warn || !strings.HasSuffix(c.Detail, "→ tcg") {
		t.Errorf("--probe with a failing KVM: %+v", c)
	}

	// --probe=false: the cached verdict, never a boot.
	c, calls = check(ProbeNever, nil)
	if len(calls) != 0 || !strings.Contains(c.Detail, "not proved now") || !strings.Contains(c.Detail, "cached verdict from") {
		t.Errorf("--probe=false: calls %q, %+v", calls, c)
	}

	// A verdict older than VerdictMaxAge: a probe, saying how old.
	cache(vm.Verdict{Accel: vm.TCG, Reason: "old", Host: host, When: now.Add(-VerdictMaxAge - 24*time.Hour)})
	_, calls = check(ProbeIfStale, nil)
	if len(calls) != 1 || !strings.Contains(calls[0], "kvm: the cached verdict is 8 days old (doctor proves it again after 7 days); probing KVM") {
		t.Errorf("old cache: probe calls %q", calls)
	}

	// A verdict for another host kernel: a probe, naming the change.
	cache(vm.Verdict{Accel: vm.KVM, Reason: "r", Host: "6.1.0-18-amd64|" + strings.SplitN(host, "|", 3)[1] + "|" + strings.SplitN(host, "|", 3)[2], When: now.Add(-time.Hour)})
	_, calls = check(ProbeIfStale, nil)
	if len(calls) != 1 || !strings.Contains(calls[0], "kvm: the cached verdict is for another host kernel (6.1.0-18-amd64, now ") {
		t.Errorf("another host kernel: probe calls %q", calls)
	}

	// No kernel to boot: nothing announced, nothing booted, and the check
	// says what to fetch.
	os.Remove(o.verdictFile())
	progress.Reset()
	c = o.kvmCheck(ctx, dev, "qemu-system-x86_64", DoctorOptions{Now: now, NewProber: func(context.Context, func(string)) (vm.Prober, error) {
		return nil, errNoProbeKernel
	}})
	if progress.Len() != 0 || !strings.Contains(c.Detail, "klab kernels fetch debian:7.3") {
		t.Errorf("no kernel: progress %q, %+v", progress.String(), c)
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second: "0 minutes", time.Minute: "1 minute", 90 * time.Minute: "90 minutes",
		5 * time.Hour: "5 hours", 47 * time.Hour: "47 hours", 50 * time.Hour: "2 days", 8 * 24 * time.Hour: "8 days",
	} {
		if got := age(d); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("qemu: error:\n\n  could not\tinitialize  kvm\r\nbye \n"); got != "qemu: error: could not initialize kvm; bye" {
		t.Errorf("oneLine = %q", got)
	}
}
