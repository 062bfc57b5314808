package lab

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/vm"
)

// TestKVMCheck: guests that run under TCG are a warning, never "ok"
// without one, and never a failure; without --probe the cached verdict is
// shown; a multi-line QEMU error stays on one line.
func TestKVMCheck(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dev := filepath.Join(dir, "kvm") // present and openable, as /dev/kvm
	if err := os.WriteFile(dev, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o := &Options{CacheDir: t.TempDir()}

	c := o.kvmCheck(ctx, filepath.Join(dir, "absent"), "qemu-system-x86_64", true)
	if !c.OK || !c.Warn || !strings.Contains(c.Detail, "absent: guests run under TCG") || !strings.Contains(c.Detail, "TCG is several times slower") {
		t.Errorf("no KVM device: %+v", c)
	}

	c = o.kvmCheck(ctx, dev, "qemu-system-x86_64", false)
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
	c = o.kvmCheck(ctx, dev, "qemu-system-x86_64", false)
	if !c.OK || !c.Warn || strings.Contains(c.Detail, "\n") || !strings.HasPrefix(c.Detail, "TCG is several times slower") ||
		!strings.Contains(c.Detail, "cached verdict from") ||
		!strings.HasSuffix(c.Detail, "error: failed to initialize kvm; Permission denied; using TCG → tcg") {
		t.Errorf("cached TCG verdict: %+v", c)
	}

	writeVerdict(vm.Verdict{Accel: vm.KVM, Reason: "KVM proved by a probe boot in 1.2s"})
	c = o.kvmCheck(ctx, dev, "qemu-system-x86_64", false)
	if !c.OK || c.Warn || !strings.HasSuffix(c.Detail, "KVM proved by a probe boot in 1.2s → kvm") {
		t.Errorf("cached KVM verdict: %+v", c)
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("qemu: error:\n\n  could not\tinitialize  kvm\r\nbye \n"); got != "qemu: error: could not initialize kvm; bye" {
		t.Errorf("oneLine = %q", got)
	}
}
