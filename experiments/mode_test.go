package experiments

import (
	"context"
	"errors"
	"strings"
	"testing"

	"klab/internal/specfile"
)

// TestRunModeOverride: --icount puts its mode in place of the spec's for
// every guest, the manifest keeps it, the report reads it back, and a
// rerun repeats it; a mode that cannot be is bad input before any boot.
func TestRunModeOverride(t *testing.T) {
	f := loadRunSpec(t, runSpec)
	fake := &fakeOpener{t: t}
	o := runOptions(t, fake)
	o.Icount = "shift=0,sleep=off"
	res, err := Run(context.Background(), f, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(fake.requests) == 0 {
		t.Fatal("no guest booted")
	}
	for _, req := range fake.requests {
		if req.Icount != o.Icount || req.MultiThreadTCG {
			t.Errorf("a guest booted with icount %q, multi-threaded %v", req.Icount, req.MultiThreadTCG)
		}
	}
	m := readManifest(t, res.Dir)
	if m.Icount != o.Icount || m.TCGMultithread {
		t.Errorf("manifest icount %q, multi-threaded %v", m.Icount, m.TCGMultithread)
	}
	saved, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	saved.Manifest.Accel = "tcg"
	if mode := saved.Mode(); mode.Icount != o.Icount {
		t.Errorf("the saved run's mode %+v, want icount %q", mode, o.Icount)
	}
	_, ro, err := RerunOptions(saved, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Icount != o.Icount || ro.TCGMultithread {
		t.Errorf("rerun options icount %q, multi-threaded %v", ro.Icount, ro.TCGMultithread)
	}

	for _, bad := range []struct {
		icount string
		mttcg  bool
		accel  string
		want   string
	}{
		{"shift=0,sleep=off", true, "", "give one"},
		{"shift=0 -d int", false, "", "want QEMU's -icount options"},
		{"", true, "kvm", "not with accel kvm"},
	} {
		fake := &fakeOpener{t: t}
		o := runOptions(t, fake)
		o.Icount, o.TCGMultithread, o.Accel = bad.icount, bad.mttcg, bad.accel
		_, err := Run(context.Background(), loadRunSpec(t, runSpec), o)
		var be *specfile.BadInputError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: %v, want bad input saying %q", bad, err, bad.want)
		}
		if len(fake.requests) != 0 {
			t.Errorf("%+v: %d guests booted", bad, len(fake.requests))
		}
	}
}
