package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"klab/internal/testenv"
)

// TestCLIRunsRmGC: runs saved by real boots are listed, shown with their
// guest output, removed by name
// (`last` too), and collected with gc --keep and --older-than; a run that
// does not exist is bad input naming it.
func TestCLIRunsRmGC(t *testing.T) {
	testenv.E2E(t)
	runs := t.TempDir()
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		if r := run(t, runs, "boot", "--kernel", "debian:7.3", "--run-id", id, "--", "echo", "output of "+id); r.code != 0 {
			t.Fatalf("boot %s: exit %d", id, r.code)
		}
	}
	ids := func() []string {
		t.Helper()
		r := run(t, runs, "runs", "list", "--json")
		var list []struct {
			ID string `json:"id"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil {
			t.Fatalf("runs list --json: exit %d, %q", r.code, r.stdout)
		}
		var out []string
		for _, l := range list {
			out = append(out, l.ID)
		}
		return out
	}
	if got := ids(); !slices.Equal(got, []string{"r1", "r2", "r3", "r4"}) {
		t.Fatalf("runs list: %q, want r1..r4 oldest first", got)
	}
	if r := run(t, runs, "runs", "show", "r2"); r.code != 0 || !strings.Contains(r.stdout, "guest output:\noutput of r2\n") {
		t.Errorf("runs show r2: exit %d, want its guest output:\n%s", r.code, r.stdout)
	}
	if r := run(t, runs, "runs", "rm", "r2"); r.code != 0 {
		t.Fatalf("runs rm r2: exit %d", r.code)
	}
	if r := run(t, runs, "runs", "rm", "last"); r.code != 0 {
		t.Fatalf("runs rm last: exit %d", r.code)
	}
	if got := ids(); !slices.Equal(got, []string{"r1", "r3"}) {
		t.Fatalf("after rm r2 and rm last: %q, want r1 r3", got)
	}
	if r := run(t, runs, "runs", "gc", "--older-than", "24h"); r.code != 0 || !slices.Equal(ids(), []string{"r1", "r3"}) {
		t.Errorf("gc --older-than 24h removed fresh runs (exit %d)", r.code)
	}
	if r := run(t, runs, "runs", "gc", "--keep", "1"); r.code != 0 || !slices.Equal(ids(), []string{"r3"}) {
		t.Errorf("gc --keep 1: exit %d, left %q, want r3", r.code, ids())
	}
	if _, err := os.Stat(filepath.Join(runs, "r1")); !os.IsNotExist(err) {
		t.Errorf("r1's directory is still there (%v)", err)
	}
	r := run(t, runs, "runs", "rm", "nope")
	if r.code != 2 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("runs rm nope: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestCLIFuseCheckHost runs klab's FUSE checks on the host kernel through
// the binary, as the README's `klab fuse check` does: a kernel that
// behaves as documented passes with status 0.
func TestCLIFuseCheckHost(t *testing.T) {
	testenv.RequiresFUSE(t)
	for _, check := range []string{"interrupt", "kill"} {
		t.Run(check, func(t *testing.T) {
			r := cliRun(t, cliOpts{}, "fuse", "check", check)
			if r.code != 0 {
				t.Fatalf("klab fuse check %s on the host: exit %d\n%s%s", check, r.code, r.stdout, r.stderr)
			}
			if strings.TrimSpace(r.stdout+r.stderr) == "" {
				t.Errorf("klab fuse check %s said nothing", check)
			}
		})
	}
}
