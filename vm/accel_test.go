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
	err   error
	delay time.Duration
	calls int
}

func (f *fakeProber) ProbeKVM(ctx context.Context, timeout time.Duration) error {
	f.calls++
	select {
	case <-time.After(min(f.delay, timeout)):
	case <-ctx.Done():
		return ctx.Err()
	}
	if f.delay > timeout {
		return errors.New("no agent after " + timeout.String())
	}
	return f.err
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

// A KVM that hangs must fall back to TCG within the probe timeout, and the
// verdict is remembered.
func TestChooseAccelAutoHangFallsBack(t *testing.T) {
	cache := filepath.Join(t.TempDir(), "verdict.json")
	p := &fakeProber{delay: time.Hour}
	o := AccelOptions{Want: "auto", KVMDevice: fakeKVM(t), Prober: p, CacheFile: cache, HostKey: "h", Timeout: 200 * time.Millisecond}
	start := time.Now()
	v, err := ChooseAccel(context.Background(), o)
	if err != nil || v.Accel != TCG {
		t.Fatalf("got %v %v", v, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("fallback took %v", d)
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

func TestProbeTimeoutBound(t *testing.T) {
	if ProbeTimeout > 15*time.Second {
		t.Fatalf("ProbeTimeout %v: auto must fall back to TCG within 15 s", ProbeTimeout)
	}
}
