package debian

import (
	"testing"
)

func TestParseDebianRef(t *testing.T) {
	tests := []struct {
		ref, flavour string
		want         debianRef
		err          bool
	}{
		{"debian:7.3", "", debianRef{Series: "7.3", Flavour: "cloud-amd64"}, false},
		{"debian:6.12", "amd64", debianRef{Series: "6.12", Flavour: "amd64"}, false},
		{"debian:7.3.4+deb13-cloud-amd64", "", debianRef{Release: "7.3.4+deb13-cloud-amd64", Flavour: "cloud-amd64"}, false},
		{"debian:6.1.0-37-cloud-amd64", "", debianRef{Release: "6.1.0-37-cloud-amd64", Flavour: "cloud-amd64"}, false},
		{"debian:6.1.0-37-amd64", "cloud-amd64", debianRef{Release: "6.1.0-37-amd64", Flavour: "amd64"}, false},
		{"debian:7.3.4+deb13", "amd64", debianRef{Release: "7.3.4+deb13-amd64", Flavour: "amd64"}, false},
		{"debian:linux-image-7.3.4+deb13-cloud-amd64", "", debianRef{Release: "7.3.4+deb13-cloud-amd64", Flavour: "cloud-amd64"}, false},
		{"debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1", "", debianRef{Release: "7.3.4+deb13-cloud-amd64", PkgVersion: "7.3.4-1~bpo13+1", Flavour: "cloud-amd64"}, false},
		{"debian:7.3=7.3.4-1", "", debianRef{}, true},
		{"debian:7.3.4+deb13-arm64", "", debianRef{}, true},
		{"debian:7.3", "s390x", debianRef{}, true},
		{"debian:latest", "", debianRef{}, true},
		{"debian:", "", debianRef{}, true},
	}
	for _, tc := range tests {
		got, err := parseDebianRef(tc.ref, tc.flavour)
		if (err != nil) != tc.err || (!tc.err && got != tc.want) {
			t.Errorf("parseDebianRef(%q, %q) = %+v, %v; want %+v, error %v", tc.ref, tc.flavour, got, err, tc.want, tc.err)
		}
	}
}

func TestMatchImageName(t *testing.T) {
	tests := []struct {
		name, flavour string
		ok            bool
		kver          string
		unsigned      bool
	}{
		{"linux-image-7.3.4+deb13-cloud-amd64", "cloud-amd64", true, "7.3.4+deb13", false},
		{"linux-image-7.3.4+deb13-cloud-amd64-dbg", "cloud-amd64", false, "", false},
		{"linux-image-6.1.0-50-cloud-amd64-unsigned", "cloud-amd64", true, "6.1.0-50", true},
		{"linux-image-6.1.0-50-cloud-amd64", "amd64", false, "", false},
		{"linux-image-6.1.0-50-rt-amd64", "amd64", false, "", false},
		{"linux-image-6.1.0-50-amd64", "amd64", true, "6.1.0-50", false},
		{"linux-image-cloud-amd64", "cloud-amd64", false, "", false},
		{"linux-image-amd64-signed-template", "amd64", false, "", false},
	}
	for _, tc := range tests {
		c, ok := matchImageName(tc.name, tc.flavour)
		if ok != tc.ok || c.kver != tc.kver || c.unsigned != tc.unsigned {
			t.Errorf("matchImageName(%q, %q) = %+v, %v", tc.name, tc.flavour, c, ok)
		}
	}
	for kver, series := range map[string]string{"6.1.0-50": "6.1", "6.12.117+deb13": "6.12", "7.3.4+deb13": "7.3", "7.0": "7.0"} {
		if got := seriesOf(kver); got != series {
			t.Errorf("seriesOf(%q) = %q, want %q", kver, got, series)
		}
		if !inSeries(kver, series) {
			t.Errorf("inSeries(%q, %q) = false", kver, series)
		}
	}
	if inSeries("6.12.117+deb13", "6.1") || inSeries("7.30.1", "7.3") {
		t.Error("inSeries matches a longer minor number")
	}
}

func TestShortRef(t *testing.T) {
	for ref, want := range map[string][2]string{
		"debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1": {"debian:7.3", "debian:7.3.4+deb13-cloud-amd64"},
		"debian:6.1.0-18-amd64":                          {"debian:6.1", "debian:6.1.0-18-amd64"},
		"debian:6.12.43+deb13":                           {"debian:6.12", "debian:6.12.43+deb13-cloud-amd64"},
	} {
		series, release, ok := ShortRef(ref)
		if !ok || series != want[0] || release != want[1] {
			t.Errorf("ShortRef(%q) = %q, %q, %v; want %q, %q", ref, series, release, ok, want[0], want[1])
		}
	}
	for _, ref := range []string{"debian:7.3", "build:fix", "./bzImage", "debian:nonsense"} {
		if s, r, ok := ShortRef(ref); ok {
			t.Errorf("ShortRef(%q) = %q, %q, true; want not ok", ref, s, r)
		}
	}
}
