package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"klab/lab"
)

// TestPanicBecomesError: a panic in a command reaches the user as one
// line naming it and status 125; the stack goes to a file, or to stderr
// with --verbose.
func TestPanicBecomesError(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		cache := t.TempDir()
		g := &globalOptions{}
		root := newRootCommandWith(g)
		root.AddCommand(&cobra.Command{Use: "boom", RunE: func(*cobra.Command, []string) error {
			var m map[string]int
			m["x"] = 1
			return nil
		}})
		args := []string{"boom", "--cache-dir", cache}
		if verbose {
			args = append(args, "--verbose")
		}
		var stderr strings.Builder
		code := runRoot(root, g, args, &stderr)
		out := stderr.String()
		if code != lab.ExitInfra || !strings.HasPrefix(out, "klab: internal error: assignment to entry in nil map\n") {
			t.Fatalf("verbose=%v: status %d, stderr %q", verbose, code, out)
		}
		crashes, _ := filepath.Glob(filepath.Join(cache, "crash-*.log"))
		if verbose {
			if !strings.Contains(out, "goroutine ") || len(crashes) != 0 {
				t.Errorf("--verbose: want the stack on stderr and no crash file: %q, %v", out, crashes)
			}
			continue
		}
		if len(crashes) != 1 || !strings.Contains(out, crashes[0]) || strings.Contains(out, "goroutine ") {
			t.Fatalf("want one crash file named on stderr and no stack there: %q, %v", out, crashes)
		}
		if data, _ := os.ReadFile(crashes[0]); !strings.Contains(string(data), "goroutine ") {
			t.Errorf("the crash file lacks the stack: %q", data)
		}
	}
}

// TestSharedDirsRefused: a world-writable cache or runs directory is bad
// input before any command runs; listing experiments needs neither.
func TestSharedDirsRefused(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"kernels", "list", "--cache-dir", shared},
		{"runs", "list", "--runs-dir", shared},
	} {
		g := &globalOptions{}
		var stderr strings.Builder
		code := runRoot(newRootCommandWith(g), g, args, &stderr)
		if code != exitBadInput || !strings.Contains(stderr.String(), "is writable by every user") {
			t.Errorf("%v: status %d, stderr %q", args, code, stderr.String())
		}
	}
	g := &globalOptions{}
	var stderr strings.Builder
	if code := runRoot(newRootCommandWith(g), g, []string{"experiments", "list", "--cache-dir", shared}, &stderr); code != 0 {
		t.Errorf("experiments list: status %d, %q", code, stderr.String())
	}
}
