package debian

import (
	"os/exec"
	"testing"
)

func TestCompareDebianVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1.0", "1.0", 0},
		{"1.0", "1.1", -1},
		{"1.0~rc1", "1.0", -1},
		{"1.0", "1.0+b1", -1},
		{"7.3.4-1~bpo13+1", "7.3.4-1", -1},
		{"6.1.0-50", "6.1.0-47", 1},
		{"6.1.0-9", "6.1.0-10", -1},
		{"7.2.13+deb14", "7.2.12+deb13", 1},
		{"7.2.13+deb13", "7.2.13+deb14", -1},
		{"6.12", "6.1", 1},
		{"1:0.1", "2.0", 1},
		{"1.0a", "1.0", 1},
		{"1.0-1", "1.0-1.1", -1},
		{"0001", "1", 0},
		{"a", "b", -1},
		{"1.0.", "1.0", 1},
		{"~~", "~", -1},
		{"", "~", 1},
	}
	for _, tc := range tests {
		if got := compareDebianVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("compare(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := compareDebianVersions(tc.b, tc.a); got != -tc.want {
			t.Errorf("compare(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
	// Agree with dpkg itself, when it is here.
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		return
	}
	vs := []string{"6.1.176-1", "6.1.170-3", "6.12.117-1", "7.3.4-1~bpo13+1", "7.3.4-1", "7.2.13-1", "1:1.0", "1.0+dfsg-2", "1.0~beta", "1.0b"}
	for _, a := range vs {
		for _, b := range vs {
			lt := exec.Command(dpkg, "--compare-versions", a, "lt", b).Run() == nil
			if got := compareDebianVersions(a, b) < 0; got != lt {
				t.Errorf("%s < %s: we say %v, dpkg says %v", a, b, got, lt)
			}
		}
	}
}
