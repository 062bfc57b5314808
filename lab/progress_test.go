package lab

import (
	"strings"
	"testing"
)

// TestProgressClean: progress lines quote the guest; no control
// characters and no extra lines reach the terminal.
func TestProgressClean(t *testing.T) {
	var b strings.Builder
	o := &Options{Progress: &b}
	o.progressf("agent %s ready (guest %s)", "v1\x1b[2J", "7.3\nfake: line\r")
	if got, want := b.String(), "agent v1[2J ready (guest 7.3 fake: line)\n"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
}
