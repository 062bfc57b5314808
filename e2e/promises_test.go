package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"klab/internal/testenv"
)

// TestCLIRunsRmGC: runs saved by real boots are listed, shown with their
// guest output, removed by name
// (`last` too), and collected with gc --keep and --older-than; a run that
// does not exist is bad input naming it.
func TestCLIRunsRmGC(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
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

// TestMakeRun is the README's first command: make run installs what is
// missing, builds klab, fetches debian:7.3, boots it and runs the A/B demo
// (here with 2 rounds, through RUN_FLAGS, to keep the suite short), then
// prints the report and where the run is.
func TestMakeRun(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	testenv.RequiresCommand(t, "make")
	runs := t.TempDir()
	ctx := testContext(t, 15*time.Minute)
	makeInTree.Lock()
	defer makeInTree.Unlock()
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "run", "RUN_FLAGS=--rounds 2")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "KLAB_RUNS_DIR="+runs)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("make run took %s", time.Since(start).Round(time.Second))
	out := stdout.String() + stderr.String()
	if err != nil {
		t.Fatalf("make run: %v\n%s", err, cliTail(out, 40))
	}
	for _, want := range []string{
		"Linux version 7.3", // the boot's /proc/version
		"tainted: 0",
		"A: transport=dev (debian:7.3)   B: transport=uring (debian:7.3)",
		"create ", "randread-4k ",
		"result: PASS",
		"HTML report: " + runs + "/",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("make run's output lacks %q:\n%s", want, cliTail(out, 40))
		}
	}
	reports, _ := filepath.Glob(filepath.Join(runs, "*-exp-fuse-transport-*", "report.html"))
	if len(reports) != 1 {
		t.Fatalf("%d fuse-transport runs with a report.html in KLAB_RUNS_DIR, want 1", len(reports))
	}
	// Every demo row carries the seed's figure, and none contradicts it:
	// a row the emulator cannot show is "not comparable here", and the
	// report says so before its table.
	var rep struct {
		Rows []struct {
			Name      string `json:"name"`
			Reference *struct {
				Verdict string `json:"verdict"`
				Reason  string `json:"reason"`
			} `json:"reference"`
		} `json:"rows"`
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(reports[0]), "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	notComparable := false
	for _, row := range rep.Rows {
		switch {
		case row.Reference == nil:
			t.Errorf("demo row %s has no reference", row.Name)
		case row.Reference.Verdict == "contradicted":
			t.Errorf("demo row %s contradicts its seed (%s)", row.Name, row.Reference.Reason)
		case row.Reference.Verdict == "not comparable here":
			notComparable = true
		}
	}
	if notComparable && !strings.Contains(out, "not comparable here: ") {
		t.Errorf("rows are not comparable here, but make run's report does not say so:\n%s", cliTail(out, 40))
	}
}
