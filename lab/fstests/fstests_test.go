package fstests

import (
	"testing"
)

func TestConsoleMarker(t *testing.T) {
	for line, want := range map[string]string{
		"[   12.345678] run fstests generic/013 at 2024-01-02 03:04:05": "generic/013",
		"run fstests ext4/001 at 2024-01-02 03:04:05":                   "ext4/001",
		"[    1.0] run fstests generic/013":                             "",
		"[    1.0] run fstests ../x/y at now":                           "",
		"[    1.0] EXT4-fs (ram0): mounted":                             "",
	} {
		got, ok := ConsoleMarker(line)
		if got != want || ok != (want != "") {
			t.Errorf("ConsoleMarker(%q) = %q, %v; want %q", line, got, ok, want)
		}
	}
}

// TestRunningTest checks which test a dead guest's run is charged to: the
// last marked test without a result, written across console chunks.
func TestRunningTest(t *testing.T) {
	tests := []string{"generic/001", "generic/002", "generic/003"}
	w := &markerWatch{}
	for _, chunk := range []string{"[ 1.0] run fstests generic/001 at x\n[ 2.0] run fst", "ests generic/002 at y\n", "[ 3.0] BUG: oops\n"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.running(tests, map[string]bool{"generic/001": true}); got != "generic/002" {
		t.Errorf("running = %q, want generic/002", got)
	}
	if got := w.running(tests, map[string]bool{"generic/001": true, "generic/002": true}); got != "" {
		t.Errorf("running after all marked ended = %q, want none", got)
	}
	quiet := &markerWatch{}
	if got := quiet.running(tests, map[string]bool{}); got != "" {
		t.Errorf("running before any test = %q, want none", got)
	}
	if got := quiet.running(tests, map[string]bool{"generic/001": true}); got != "generic/002" {
		t.Errorf("running without markers = %q, want the first test without a result", got)
	}
	if Cmdline(2, 512) != "brd.rd_nr=2 brd.rd_size=524288" {
		t.Errorf("Cmdline = %q", Cmdline(2, 512))
	}
}
