package vm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestFailedProbeOfBadKernelNotCached: when the probe kernel fails under
// KVM and under TCG alike, the kernel is at fault, not KVM: the run gets
// TCG but no verdict is cached, and the next run probes again. When it
// boots under TCG, KVM is at fault and TCG is cached.
func TestFailedProbeOfBadKernelNotCached(t *testing.T) {
	dev := fakeKVM(t)
	cache := filepath.Join(t.TempDir(), "verdict.json")
	p := &fakeProber{err: errors.New("no agent"), tcgErr: errors.New("kernel panic")}
	o := AccelOptions{Want: "auto", CacheFile: cache, HostKey: "h", KVMDevice: dev, Prober: p}
	v, err := ChooseAccel(context.Background(), o)
	if err != nil || v.Accel != TCG || p.tcgCalls != 1 {
		t.Fatalf("verdict %+v, %v, %d TCG checks", v, err, p.tcgCalls)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Fatal("a verdict the bad kernel caused was cached")
	}
	// The next run, with a good kernel: KVM fails, TCG boots: cached.
	p.tcgErr = nil
	if v, err := ChooseAccel(context.Background(), o); err != nil || v.Accel != TCG || p.calls != 2 {
		t.Fatalf("second verdict %+v, %v, %d probes", v, err, p.calls)
	}
	if _, err := os.Stat(cache); err != nil {
		t.Fatalf("KVM's own failure was not cached: %v", err)
	}
	if v, _ := ChooseAccel(context.Background(), o); p.calls != 2 || v.Accel != TCG {
		t.Errorf("the cached verdict was not used: %d probes", p.calls)
	}
}
