package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestParseMiB(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"1024", 1024}, {"0", 0}, {"512M", 512}, {"512m", 512}, {"512MiB", 512}, {"512mib", 512}, {"512MB", 512},
		{"2G", 2048}, {"2g", 2048}, {"2GiB", 2048}, {"2GB", 2048}, {"1.5G", 1536}, {"1.5GiB", 1536}, {".5G", 512},
		{"4096K", 4}, {"4096KiB", 4}, {"1T", 1 << 20}, {" 2G ", 2048}, {"2 G", 2048},
	} {
		got, err := parseMiB(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseMiB(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
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
		{"2048B", "bytes are too fine"},
		{"2000000T", "too large"},
		{"1e9", "want MiB"},
	} {
		if got, err := parseMiB(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseMiB(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.want)
		}
	}
}

// TestMemoryFlag: --memory takes units, keeps MiB, shows its default in
// a form it reads back, and its error names the flag, the value and what
// is allowed.
func TestMemoryFlag(t *testing.T) {
	var mib int
	fs := pflag.NewFlagSet("boot", pflag.ContinueOnError)
	fs.VarP(newMiBValue(1024, &mib), "memory", "m", "guest memory")
	if mib != 1024 || fs.Lookup("memory").DefValue != "1GiB" {
		t.Errorf("default %d MiB shown as %q", mib, fs.Lookup("memory").DefValue)
	}
	if back, err := parseMiB(fs.Lookup("memory").DefValue); err != nil || back != 1024 {
		t.Errorf("the default does not read back: %d, %v", back, err)
	}
	if err := fs.Parse([]string{"-m", "1.5G"}); err != nil || mib != 1536 {
		t.Errorf("-m 1.5G: %d MiB, %v", mib, err)
	}
	err := fs.Parse([]string{"--memory", "2X"})
	for _, want := range []string{"--memory", `"2X"`, "512M, 2G"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--memory 2X: error %v lacks %q", err, want)
		}
	}
	for n, want := range map[int]string{0: "0", 512: "512MiB", 1536: "1536MiB", 2048: "2GiB", 1 << 20: "1TiB"} {
		if got := fmtMiB(n); got != want {
			t.Errorf("fmtMiB(%d) = %q, want %q", n, got, want)
		}
	}
	// Every command's --memory is a size.
	root := newRootCommand()
	found := 0
	for _, c := range allCommands(root) {
		if f := c.Flags().Lookup("memory"); f != nil {
			found++
			if f.Value.Type() != "size" {
				t.Errorf("%s --memory is a %s, want a size", c.CommandPath(), f.Value.Type())
			}
		}
	}
	if found < 4 {
		t.Errorf("%d commands with --memory, want boot, shell, run and matrix run", found)
	}
}
