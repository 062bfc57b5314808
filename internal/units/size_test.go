package units

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"20G": 20 << 30, "500M": 500 << 20, "1.5T": 3 << 39, "1024": 1024, "0": 0, "64KiB": 64 << 10, "2gb": 2 << 30,
		"1024B": 1024, " 2 G ": 2 << 30, ".5K": 512, "0.3K": 307, "9223372036854775807": 1<<63 - 1,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "-1G", "ten", "1e9", "1P", "2GiBs"} {
		if _, err := ParseSize(bad); err == nil || !strings.Contains(err.Error(), "e.g. 20G") {
			t.Errorf("ParseSize(%q): err = %v", bad, err)
		}
	}
	for _, big := range []string{"9223372036854775808", "8388608T"} {
		if _, err := ParseSize(big); err == nil || !strings.Contains(err.Error(), "too large") {
			t.Errorf("ParseSize(%q): err = %v, want too large", big, err)
		}
	}
}

func TestParseMiB(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"1024", 1024}, {"0", 0}, {"512M", 512}, {"512m", 512}, {"512MiB", 512}, {"512mib", 512}, {"512MB", 512},
		{"2G", 2048}, {"2g", 2048}, {"2GiB", 2048}, {"2GB", 2048}, {"1.5G", 1536}, {"1.5GiB", 1536}, {".5G", 512},
		{"4096K", 4}, {"4096KiB", 4}, {"1T", 1 << 20}, {" 2G ", 2048}, {"2 G", 2048}, {"1024TiB", MaxMiB},
	} {
		got, err := ParseMiB(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseMiB(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "want MiB, or a number with a unit K, M, G or T"},
		{"2X", "want MiB, or a number with a unit K, M, G or T"},
		{"-1G", "want MiB"},
		{"2GiBs", "want MiB"},
		{"1.5", "a plain number is a whole number of MiB"},
		{"1000K", "not a whole number of MiB"},
		{"0.1G", "not a whole number of MiB"},
		{"1.0000000001G", "not a whole number of MiB"},
		{"2048B", "bytes are too fine"},
		{"2000000T", "too large: at most 1024TiB"},
		{"99999999999999999999", "too large"},
		{"1e9", "want MiB"},
	} {
		if got, err := ParseMiB(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMiB(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.want)
		}
	}
}

func TestFormatMiB(t *testing.T) {
	for n, want := range map[int]string{0: "0", 512: "512MiB", 1536: "1536MiB", 2048: "2GiB", 1 << 20: "1TiB"} {
		if got := FormatMiB(n); got != want {
			t.Errorf("FormatMiB(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseMiB(FormatMiB(n)); err != nil || back != n {
			t.Errorf("ParseMiB(FormatMiB(%d)) = %d, %v", n, back, err)
		}
	}
}
