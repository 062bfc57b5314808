package vm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeProber answers the KVM probe without booting anything.
type fakeProber struct {
	err error
	// hang makes the probe a KVM guest that never answers: it returns
	// only when its context ends, whatever timeout it was given.
	hang  bool
	calls int
	// timeout and deadline are what the last probe was given.
	timeout     time.Duration
	deadline    time.Time
	hasDeadline bool
	// tcgErr is what the TCG check of a failed KVM probe returns;
	// tcgCalls counts those checks.
	tcgErr   error
	tcgCalls int
}

func (f *fakeProber) ProbeTCG(ctx context.Context, timeout time.Duration) error {
	f.tcgCalls++
	return f.tcgErr
}

func (f *fakeProber) ProbeKVM(ctx context.Context, timeout time.Duration) error {
	f.calls++
	f.timeout = timeout
	f.deadline, f.hasDeadline = ctx.Deadline()
	if f.hang {
		if !f.hasDeadline {
			// It would hang for good; the test fails on the deadline.
			return errors.New("no agent, and no deadline")
		}
		<-ctx.Done()
		return errors.New("no agent: " + ctx.Err().Error())
	}
	return f.err
}

// checkProbeBounded checks that the last probe was told timeout and that
// its context ended timeout after the probe started, which was between
// called and returned.
func checkProbeBounded(t *testing.T, p *fakeProber, called, returned time.Time, timeout time.Duration) {
	t.Helper()
	if p.timeout != timeout {
		t.Errorf("probe timeout %v, want %v", p.timeout, timeout)
	}
	if !p.hasDeadline || p.deadline.Before(called.Add(timeout)) || p.deadline.After(returned.Add(timeout)) {
		t.Errorf("probe context deadline %v (set %v), want %v after a time in [%v, %v]", p.deadline, p.hasDeadline, timeout, called, returned)
	}
}

// fakeKVM makes a file that opens read-write, standing in for /dev/kvm.
func fakeKVM(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "kvm")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestChooseAccelExplicit(t *testing.T) {
	ctx := context.Background()
	v, err := ChooseAccel(ctx, AccelOptions{Want: "tcg", KVMDevice: "/nonexistent"})
	if err != nil || v.Accel != TCG {
		t.Fatalf("tcg: %v %v", v, err)
	}
	if _, err := ChooseAccel(ctx, AccelOptions{Want: "kvm", KVMDevice: "/nonexistent"}); err == nil {
		t.Fatal("kvm without a device: want error")
	}
	v, err = ChooseAccel(ctx, AccelOptions{Want: "kvm", KVMDevice: fakeKVM(t)})
	if err != nil || v.Accel != KVM {
		t.Fatalf("kvm: %v %v", v, err)
	}
	if _, err := ChooseAccel(ctx, AccelOptions{Want: "hvf"}); err == nil || !strings.Contains(err.Error(), "auto, kvm or tcg") {
		t.Fatalf("bad want: %v", err)
	}
}

func TestChooseAccelAutoNoDevice(t *testing.T) {
	p := &fakeProber{}
	v, err := ChooseAccel(context.Background(), AccelOptions{Want: "auto", KVMDevice: "/nonexistent", Prober: p})
	if err != nil || v.Accel != TCG || p.calls != 0 {
		t.Fatalf("got %v %v, %d probes", v, err, p.calls)
	}
	if !strings.Contains(v.Reason, "does not exist") {
		t.Errorf("reason %q", v.Reason)
	}
}

func TestChooseAccelAutoProves(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "verdict.json")
	p := &fakeProber{}
	o := AccelOptions{Want: "auto", KVMDevice: fakeKVM(t), Prober: p, CacheFile: cache, HostKey: "h1"}
	v, err := ChooseAccel(context.Background(), o)
	if err != nil || v.Accel != KVM {
		t.Fatalf("got %v %v", v, err)
	}
	// The verdict is cached per host: no second probe.
	v, err = ChooseAccel(context.Background(), o)
	if err != nil || v.Accel != KVM || p.calls != 1 || !strings.Contains(v.Reason, "cached") {
		t.Fatalf("second: %v %v, %d probes", v, err, p.calls)
	}
	// Another host key re-probes.
	o.HostKey = "h2"
	if _, err := ChooseAccel(context.Background(), o); err != nil || p.calls != 2 {
		t.Fatalf("other host: %v, %d probes", err, p.calls)
	}
}

// A KVM that hangs must fall back to TCG within the probe timeout, even
// when the probe ignores the timeout it is given (ChooseAccel ends its
// context), and the verdict is remembered.
func TestChooseAccelAutoHangFallsBack(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "verdict.json")
	p := &fakeProber{hang: true}
	o := AccelOptions{Want: "auto", KVMDevice: fakeKVM(t), Prober: p, CacheFile: cache, HostKey: "h", Timeout: 200 * time.Millisecond}
	called := time.Now()
	v, err := ChooseAccel(context.Background(), o)
	checkProbeBounded(t, p, called, time.Now(), o.Timeout)
	if err != nil || v.Accel != TCG {
		t.Fatalf("got %v %v", v, err)
	}
	if !strings.Contains(v.Reason, "using TCG") {
		t.Errorf("reason %q", v.Reason)
	}
	v, _ = ChooseAccel(context.Background(), o)
	if v.Accel != TCG || p.calls != 1 {
		t.Errorf("cached fallback: %v after %d probes", v, p.calls)
	}
}

func TestChooseAccelCorruptCache(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "verdict.json")
	os.WriteFile(cache, []byte("{not json"), 0o644)
	p := &fakeProber{err: errors.New("boom")}
	v, err := ChooseAccel(context.Background(), AccelOptions{Want: "auto", KVMDevice: fakeKVM(t), Prober: p, CacheFile: cache, HostKey: "h"})
	if err != nil || v.Accel != TCG || p.calls != 1 {
		t.Fatalf("got %v %v, %d probes", v, err, p.calls)
	}
}

// Without a timeout of its own, the probe gets ProbeTimeout, which is
// what README documents ("must reach the agent within 12 s"), so that auto
// falls back to TCG that soon on a host whose KVM hangs.
func TestChooseAccelDefaultProbeTimeout(t *testing.T) {
	p := &fakeProber{err: errors.New("no agent")}
	called := time.Now()
	v, err := ChooseAccel(context.Background(), AccelOptions{Want: "auto", KVMDevice: fakeKVM(t), Prober: p, HostKey: "h"})
	checkProbeBounded(t, p, called, time.Now(), 12*time.Second)
	if err != nil || v.Accel != TCG || p.calls != 1 {
		t.Fatalf("got %v %v after %d probes", v, err, p.calls)
	}
}

// A probe cut short because the caller gave up is no verdict: nothing is
// cached, and the caller's error comes back.
func TestChooseAccelCancelledProbe(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "verdict.json")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &fakeProber{hang: true}
	_, err := ChooseAccel(ctx, AccelOptions{Want: "auto", KVMDevice: fakeKVM(t), Prober: p, CacheFile: cache, HostKey: "h"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Error("a cancelled probe left a cached verdict")
	}
}

// TestHostChange: a cached verdict for another host says which part of
// the host key changed.
func TestHostChange(t *testing.T) {
	base := "6.1.0-18-amd64|AMD EPYC 7B13|/usr/bin/qemu-system-x86_64@1700000000"
	for now, want := range map[string]string{
		base: "",
		"6.12.43+deb13-amd64|AMD EPYC 7B13|/usr/bin/qemu-system-x86_64@1700000000": "host kernel (6.1.0-18-amd64, now 6.12.43+deb13-amd64)",
		"6.1.0-18-amd64|AMD EPYC 7B13|/usr/bin/qemu-system-x86_64@1800000000":      "QEMU binary",
		"6.1.0-18-amd64|Intel Xeon|/usr/local/bin/qemu-system-x86_64@1":            "CPU and QEMU binary",
		"garbled": "host kernel, CPU or QEMU binary",
	} {
		if got := HostChange(base, now); got != want {
			t.Errorf("HostChange(%q) = %q, want %q", now, got, want)
		}
	}
}
