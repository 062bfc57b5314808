package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"klab/bisect"
	"klab/experiments"
	"klab/internal/testenv"
)

// bisectTree makes a git tree with a commit per state, oldest first,
// each writing its state into the file "state".
func bisectTree(t *testing.T, states ...string) (string, []string) {
	t.Helper()
	testenv.RequiresCommand(t, "git")
	dir := filepath.Join(t.TempDir(), "linux")
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=A U Thor", "GIT_AUTHOR_EMAIL=a@example.org",
			"GIT_COMMITTER_NAME=A U Thor", "GIT_COMMITTER_EMAIL=a@example.org")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	var commits []string
	for i, s := range states {
		if err := os.WriteFile(filepath.Join(dir, "state"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "state")
		git("commit", "-q", "--allow-empty", "-m", fmt.Sprintf("fuse: change %d (%s)", i, s))
		commits = append(commits, git("rev-parse", "HEAD"))
	}
	return dir, commits
}

// stateRunner reads a commit's state: "bad" prints the WARNING,
// "broken" does not build, "stop" is interrupted (Ctrl-C).
type stateRunner struct {
	tree  string
	stop  bool
	calls *[]string
}

func (r stateRunner) Run(ctx context.Context, commit string, rounds int) (*bisect.StepOutcome, error) {
	out, err := exec.Command("git", "-C", r.tree, "show", commit+":state").Output()
	if err != nil {
		return nil, err
	}
	if r.calls != nil {
		*r.calls = append(*r.calls, commit)
	}
	o := &bisect.StepOutcome{Rounds: rounds, Build: bisect.Build{Mode: bisect.BuildIncremental, TookSec: 30}}
	switch string(out) {
	case "bad":
		o.Splats = []bisect.Splat{{Type: "warning", Title: "WARNING in fuse_open", Text: "WARNING: CPU: 0 PID: 1 at fs/fuse/file.c:1 fuse_open+0x1/0x2"}}
	case "broken":
		o.BuildError = "make bzImage failed; first errors:\n  fs/fuse/file.c:1:1: error: expected ';'"
	case "stop":
		if r.stop {
			return nil, context.Canceled
		}
	}
	return o, nil
}

// bisectCLI runs klab with args, its bisect command's runner r, in the
// runs directory runs.
func bisectCLI(t *testing.T, runs string, r bisect.Runner, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	g := &globalOptions{}
	root := newRootCommandWith(g)
	for _, c := range root.Commands() {
		if c.Name() == "bisect" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newBisectCommand(g, func(context.Context, *globalOptions, *bisect.Bisection, *experiments.File, io.Writer) (bisect.Runner, error) {
		return r, nil
	}))
	var out, errb strings.Builder
	root.SetOut(&out)
	root.SetErr(&errb)
	code = runRoot(root, g, append([]string{"--cache-dir", t.TempDir(), "--runs-dir", runs}, args...), &errb)
	return code, out.String(), errb.String()
}

// onlyDir is the one run directory in runs.
func onlyDir(t *testing.T, runs string) string {
	t.Helper()
	ents, err := os.ReadDir(runs)
	if err != nil || len(ents) != 1 {
		t.Fatalf("runs: %v, %v; want one", ents, err)
	}
	return filepath.Join(runs, ents[0].Name())
}

// TestBisectCommand: klab bisect names the first bad commit on stdout
// (exit 0) with progress on stderr, skipping a commit that does not
// build; klab runs list shows the bisection, klab report prints it in
// every format.
func TestBisectCommand(t *testing.T) {
	tree, commits := bisectTree(t, "good", "good", "broken", "good", "bad", "bad", "bad")
	runs := t.TempDir()
	r := stateRunner{tree: tree}
	code, stdout, stderr := bisectCLI(t, runs, r, "bisect", "--tree", tree, "--good", "main~6", "--bad", "main", "--splat", "fuse_open",
		"fuse-transport", "--set", "transport=dev", "--rounds", "1")
	if code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	want := fmt.Sprintf("first bad commit: %.12s fuse: change 4 (bad)\nAuthor: A U Thor <a@example.org>\n", commits[4])
	if !strings.HasPrefix(stdout, want) || !strings.Contains(stdout, "evidence (step ") {
		t.Errorf("stdout\n%s\nwant it to start\n%s", stdout, want)
	}
	for _, w := range []string{"good endpoint: " + commits[0][:12] + " fuse: change 0 (good): building...", "step 1/~", "built in 30s (incremental)",
		": bad (WARNING in fuse_open)", "klab: first bad commit: " + commits[4][:12], "klab: bisection saved to "} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	dir := onlyDir(t, runs)
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Error(err)
	}

	code, stdout, _ = bisectCLI(t, runs, r, "runs", "list", "--json")
	var list []runEntry
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil || len(list) != 1 || list[0].Kind != "bisect" || list[0].Status != "found" ||
		!strings.Contains(list[0].Message, commits[4][:12]) || list[0].Experiment != "fuse-transport" {
		t.Errorf("runs list: exit %d, %v, %+v", code, err, list)
	}
	code, text, _ := bisectCLI(t, runs, r, "report", "last")
	if code != 0 || !strings.HasPrefix(text, want) {
		t.Errorf("report last: exit %d\n%s", code, text)
	}
	for _, f := range []string{"md", "json", "junit", "html"} {
		code, out, stderr := bisectCLI(t, runs, r, "report", dir, "--format", f)
		if code != 0 || len(out) == 0 {
			t.Errorf("report --format %s: exit %d, %s", f, code, stderr)
		}
	}
	var show strings.Builder
	if err := showRun(&show, dir); err != nil || !strings.Contains(show.String(), "bisection of fuse-transport, complete") || !strings.Contains(show.String(), want) {
		t.Errorf("runs show: %v\n%s", err, show.String())
	}
	// Resuming an ended bisection prints its report again.
	code, out, _ := bisectCLI(t, runs, r, "bisect", "--resume", "last")
	if code != 0 || !strings.HasPrefix(out, want) {
		t.Errorf("resume of an ended bisection: exit %d\n%s", code, out)
	}
}

// TestBisectWithoutFirstBad: a bisection that ends without a first bad
// commit (the bad commit is not bad) exits 1 and says why.
func TestBisectWithoutFirstBad(t *testing.T) {
	tree, _ := bisectTree(t, "good", "good", "good")
	code, stdout, stderr := bisectCLI(t, t.TempDir(), stateRunner{tree: tree}, "bisect", "--tree", tree, "--good", "main~2", "--bad", "main", "fuse-transport")
	if code != 1 || !strings.HasPrefix(stdout, "no first bad commit: the bad commit ") || !strings.Contains(stdout, "is not bad (no kernel splat)") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
}

// TestBisectInterruptResume: an interrupted bisection exits 130 naming
// the command that continues it; that command finishes it, testing
// nothing twice.
func TestBisectInterruptResume(t *testing.T) {
	tree, commits := bisectTree(t, "good", "good", "good", "stop", "bad", "bad", "bad", "bad")
	runs := t.TempDir()
	var first []string
	code, stdout, stderr := bisectCLI(t, runs, stateRunner{tree: tree, stop: true, calls: &first}, "bisect", "--tree", tree, "--good", commits[0], "--bad", "main", "--splat", "fuse_open", "fuse-transport", "-q")
	dir := onlyDir(t, runs)
	if code != exitInterrupted || !strings.Contains(stderr, "continue with: klab bisect --resume "+dir) || stdout != "" {
		t.Fatalf("interrupted: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, extra := range [][]string{{"fuse-transport"}, {"--splat", "x"}, {"--rounds", "2"}} {
		code, _, stderr = bisectCLI(t, runs, stateRunner{tree: tree}, append([]string{"bisect", "--resume", dir}, extra...)...)
		if code != exitBadInput || !strings.Contains(stderr, "--resume continues a bisection as it was started") {
			t.Errorf("--resume with %v: exit %d, %s", extra, code, stderr)
		}
	}
	var second []string
	code, stdout, stderr = bisectCLI(t, runs, stateRunner{tree: tree, calls: &second}, "bisect", "--resume", dir)
	if code != 0 || !strings.HasPrefix(stdout, fmt.Sprintf("first bad commit: %.12s", commits[4])) || !strings.Contains(stderr, "klab: resuming "+dir) {
		t.Fatalf("resumed: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	for _, c := range second[1:] {
		for _, f := range first[:len(first)-1] {
			if c == f {
				t.Errorf("the resumed bisection tested %.12s again", c)
			}
		}
	}
	if second[0] != first[len(first)-1] {
		t.Errorf("the resumed bisection began with %.12s, want the step in progress %.12s", second[0], first[len(first)-1])
	}
}

// TestBisectBadInput: bad input exits 2 with the reason, before any
// build, and leaves no run behind.
func TestBisectBadInput(t *testing.T) {
	tree, _ := bisectTree(t, "a", "b", "c")
	other, _ := bisectTree(t, "x")
	runs := t.TempDir()
	r := stateRunner{tree: tree}
	base := []string{"bisect", "--tree", tree, "--good", "main~2", "--bad", "main"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(base, "--splat", "x", "--check", "y", "fuse-timeout"), "give one of them"},
		{append(base, "--check", "nosuch", "fuse-timeout"), "--check nosuch: "},
		{append(base, "--row", "nosuch", "fuse-transport"), `--row nosuch: no such row in experiments/fuse-transport.yaml; its rows (give the number or the name): 1 "create transport=dev"`},
		{append(base, "--test", "generic/013", "fuse-transport"), "--test generic/013: "},
		{append(base, "nosuch-experiment"), `no experiment "nosuch-experiment"`},
		{append(base, "--format", "pdf", "fuse-transport"), `--format "pdf"`},
		{append(base, "--set", "transport", "fuse-transport"), `--set "transport"`},
		{[]string{"bisect", "--tree", t.TempDir(), "--good", "a", "--bad", "b", "fuse-transport"}, "not a git tree"},
		{[]string{"bisect", "--tree", tree, "--good", "main", "--bad", "main~1", "fuse-transport"}, "is not an ancestor of --bad main~1"},
		{[]string{"bisect", "--tree", tree, "--good", "nosuch", "--bad", "main", "fuse-transport"}, "--good nosuch: no such commit"},
		{[]string{"bisect", "--tree", other, "--good", "main", "--bad", "main", "fuse-transport"}, "the same commit"},
		{[]string{"bisect", "--resume", "nosuch"}, "--resume: "},
		{[]string{"bisect", "--tree", tree}, "give the experiment to run at each step"},
	} {
		code, stdout, stderr := bisectCLI(t, runs, r, c.args...)
		if code != exitBadInput || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("klab %s: exit %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), code, stderr, c.want)
		}
	}
	if ents, _ := os.ReadDir(runs); len(ents) != 0 {
		t.Errorf("bad input left %d run(s)", len(ents))
	}
}
