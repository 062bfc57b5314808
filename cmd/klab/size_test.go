package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"klab/internal/units"
)

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
	if back, err := units.ParseMiB(fs.Lookup("memory").DefValue); err != nil || back != 1024 {
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
