package lab

import (
	"strings"
	"testing"

	"klab/vm"
)

func TestCheckIcount(t *testing.T) {
	for _, ok := range []string{"shift=0,sleep=off", "shift=auto", "shift=7,align=on,sleep=on", "auto"} {
		if err := CheckIcount(ok); err != nil {
			t.Errorf("CheckIcount(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "shift=0 -d int", "shift=0,,sleep=off", "shift=0,", "-icount", "shift==0", "shift=0;reboot", "SHIFT=0"} {
		err := CheckIcount(bad)
		if err == nil || !strings.Contains(err.Error(), "want QEMU's -icount options") {
			t.Errorf("CheckIcount(%q) = %v, want an error naming what is allowed", bad, err)
		}
	}
}

// TestIcountVerdict: an instruction-counted boot runs under
// single-threaded TCG, without a KVM probe, whatever auto would pick.
func TestIcountVerdict(t *testing.T) {
	for _, accel := range []string{"", "auto", "tcg"} {
		v, err := icountVerdict(accel, "shift=0,sleep=off", false)
		if err != nil || v.Accel != vm.TCG || !strings.Contains(v.Reason, "icount shift=0,sleep=off") {
			t.Errorf("accel %q: %+v, %v; want TCG because of icount", accel, v, err)
		}
	}
	for _, tc := range []struct {
		accel  string
		icount string
		mttcg  bool
		want   string
	}{
		{"kvm", "shift=0", false, "not kvm"},
		{"hvf", "shift=0", false, "want auto, kvm or tcg"},
		{"auto", "shift=0", true, "multi-threaded TCG"},
		{"tcg", "shift=0 -S", false, "want QEMU's -icount options"},
	} {
		if _, err := icountVerdict(tc.accel, tc.icount, tc.mttcg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("icountVerdict(%q, %q, %v) = %v, want an error with %q", tc.accel, tc.icount, tc.mttcg, err, tc.want)
		}
	}
}

func TestIcountArgs(t *testing.T) {
	if a := (&BootRequest{}).icountArgs(); a != nil {
		t.Errorf("no icount: %q", a)
	}
	if a := (&BootRequest{Icount: "shift=0"}).icountArgs(); len(a) != 2 || a[0] != "-icount" || a[1] != "shift=0" {
		t.Errorf("icount shift=0: %q", a)
	}
}
