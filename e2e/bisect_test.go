package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"klab/bisect"
	"klab/images/debian"
	"klab/internal/testenv"
)

// bisectHistory is the history TestBisect makes on top of Debian's
// linux-source-7.3, oldest first: harmless notes, a commit that does
// not compile and the one that fixes it, a WARN on every FUSE request,
// a delay on every FUSE request, and a last note. git bisect's steps
// over it test the broken commit first (it is skipped), so both
// bisections meet it.
var bisectHistory = []struct {
	subject string
	edit    func(t *testing.T, tree string)
}{
	{"fuse: a note in cuse", appendTo("fs/fuse/cuse.c", "/* klab-e2e: a note in cuse */\n")},
	{"fuse: a note in ioctl", appendTo("fs/fuse/ioctl.c", "/* klab-e2e: a note in ioctl */\n")},
	{"fuse: another note in cuse", appendTo("fs/fuse/cuse.c", "/* klab-e2e: another note */\n")},
	{"fuse: a change that does not compile", appendTo("fs/fuse/readdir.c", "int klab_e2e_broken(void) { return 0 }\n")},
	{"fuse: fix the build", dropLine("fs/fuse/readdir.c", "int klab_e2e_broken(void) { return 0 }\n")},
	{"fuse: warn on every request", inRequest(`	WARN_ONCE(1, "klab-e2e: bisect target\n");` + "\n")},
	{"fuse: delay every request", func(t *testing.T, tree string) {
		inRequest("\tudelay(500);\n")(t, tree)
		replaceOnce(t, filepath.Join(tree, "fs/fuse/req.c"), `#include "fuse_i.h"`+"\n", `#include "fuse_i.h"`+"\n#include <linux/delay.h>\n")
	}},
	{"fuse: a last note", appendTo("fs/fuse/ioctl.c", "/* klab-e2e: a last note */\n")},
}

// Indexes in bisectHistory (commits[i+1]) of the commits the bisections
// must name or skip.
const (
	brokenCommit = 3
	warnCommit   = 5
	delayCommit  = 6
)

func appendTo(file, text string) func(*testing.T, string) {
	return func(t *testing.T, tree string) {
		t.Helper()
		p := filepath.Join(tree, file)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(data, text...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func dropLine(file, line string) func(*testing.T, string) {
	return func(t *testing.T, tree string) {
		t.Helper()
		replaceOnce(t, filepath.Join(tree, file), line, "")
	}
}

// replaceOnce replaces the one occurrence of old in the file p.
func replaceOnce(t *testing.T, p, old, new string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), old); n != 1 {
		t.Fatalf("%s has %q %d times, want once: the Debian source changed; update the test's history", p, old, n)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// requestStart is __fuse_simple_request's start in fs/fuse/req.c up to
// its first "if (err)", where inRequest inserts.
var requestStart = regexp.MustCompile(`(?s)\nssize_t __fuse_simple_request\([^{]*\{\n.*?\n(\tif \(err\)\n)`)

// inRequest inserts lines into __fuse_simple_request, which every
// synchronous FUSE request goes through, before its first error check.
func inRequest(lines string) func(*testing.T, string) {
	return func(t *testing.T, tree string) {
		t.Helper()
		p := filepath.Join(tree, "fs/fuse/req.c")
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m := requestStart.FindSubmatchIndex(data)
		if m == nil {
			t.Fatalf("%s: no __fuse_simple_request with an \"if (err)\": the Debian source changed; update the test's history", p)
		}
		out := append(append(append([]byte{}, data[:m[2]]...), lines...), data[m[2]:]...)
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// debianGitTree unpacks Debian's linux-source-7.3 (the source the kernel
// builds of TestKernelBuilds use, fetched once into klab's cache) into a
// new git tree under dir, committed as its one base commit with a fixed
// author and date, so that its hash, and so klab's build cache, stays
// the same from run to run. It returns the tree and a git runner in it.
func debianGitTree(t *testing.T, ctx context.Context, dir string) (string, func(args ...string) string) {
	t.Helper()
	src, err := debian.FetchSource(ctx, "debian:7.3", debian.Options{})
	if err != nil {
		t.Fatalf("Debian's linux-source-7.3: %v", err)
	}
	x := filepath.Join(dir, "x")
	if err := os.MkdirAll(x, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// At the lowest CPU priority and on one thread: the guests of other
	// tests run beside it, some with boot timeouts.
	if out, err := exec.CommandContext(ctx, "nice", "-n", "19", "tar", "-x", "-f", src.Tarball, "-C", x, "--use-compress-program=xz -T1").CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", src.Tarball, err, out)
	}
	ents, err := os.ReadDir(x)
	if err != nil || len(ents) != 1 {
		t.Fatalf("%s unpacked into %d entries, want one directory", src.Tarball, len(ents))
	}
	tree := filepath.Join(x, ents[0].Name())
	// Debian's linux-source ignores everything at its top level (its
	// .gitignore ends with a packaging block): drop that block, as a git
	// checkout of the kernel has none.
	gi := filepath.Join(tree, ".gitignore")
	if data, err := os.ReadFile(gi); err == nil {
		if i := strings.Index(string(data), "# Debian packaging"); i >= 0 {
			if err := os.WriteFile(gi, data[:i], 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := 0
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "nice", append([]string{"-n", "19", "git"}, args...)...)
		cmd.Dir = tree
		date := fmt.Sprintf("2026-01-01T00:%02d:00Z", n)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=klab e2e", "GIT_AUTHOR_EMAIL=e2e@example.org", "GIT_AUTHOR_DATE="+date,
			"GIT_COMMITTER_NAME=klab e2e", "GIT_COMMITTER_EMAIL=e2e@example.org", "GIT_COMMITTER_DATE="+date)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		if len(args) > 0 && args[0] == "commit" {
			n++
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "Linux "+src.Version+" (Debian's linux-source-7.3)")
	t.Logf("git tree of %s %s in %.0fs", src.Package, src.Version, time.Since(start).Seconds())
	return tree, git
}

// TestBisect: klab bisect on a git tree of Debian's 7.3 source with a
// history of eight commits (bisectHistory) names the commit that adds a
// WARN on a FUSE path (--splat), skipping the commit that does not build
// with the reason; the builds after the first are incremental; the
// user's tree is left as it was, and the WARN names its file as the
// kernel's tree does (fs/fuse/req.c), ccache or not.
//
// It makes a 1.5 GB git tree and builds its base: a cold build (8
// minutes on 2 cores) unless ccache holds TestKernelBuilds' compilations
// of the same source and config, which it starts and waits for first. The metric
// bisection of the same history (--row, FUSE creates/s, about 7 minutes
// of guests) names the commit that delays every FUSE request; it is
// opt-in: KLAB_E2E_BISECT=1.
func TestBisect(t *testing.T) {
	testenv.E2E(t)
	requiresBuildTools(t)
	ctx := testContext(t, 100*time.Minute)
	// Before this test waits for the package's serial tests to end, two
	// things start in the background, at the lowest CPU priority, on the
	// core those tests' guests leave idle: TestKernelBuilds' first build
	// of this source and config (the longest step of a cold make test;
	// TestKernelBuilds then finds it built, or waits for its work tree),
	// whose compilations ccache hands to the git tree's cold build below;
	// and the git tree itself.
	hello, helloDone := result{code: -1}, make(chan struct{})
	go func() {
		defer close(helloDone) // also when a t.Fatal ends the goroutine
		hello = runBuild(t, coldBuild, "kernels", "build", "--source", "debian:7.3", "--config", "lab", "--patches", helloPatch, "--name", "e2e-fuse-hello")
	}()
	var tree string
	var git func(args ...string) string
	treeDir, treeDone := t.TempDir(), make(chan struct{})
	go func() {
		defer close(treeDone)
		tree, git = debianGitTree(t, ctx, treeDir)
	}()
	t.Parallel()
	<-helloDone
	if hello.code != 0 {
		<-treeDone
		t.Fatalf("kernels build: exit %d", hello.code)
	}
	<-treeDone
	if git == nil {
		t.Fatal("the git tree was not made (see the log above)")
	}
	commits := []string{git("rev-parse", "HEAD")}
	// The base commit's build, the one cold build, before the guest
	// slot is taken: the bisection finds it in the cache.
	start := time.Now()
	if r := runBuild(t, coldBuild, "kernels", "build", "--source", tree, "--config", "lab", "--name", "e2e-bisect-base"); r.code != 0 {
		t.Fatalf("kernels build of the base commit: exit %d", r.code)
	}
	t.Logf("base commit's kernel ready in %s (ccache: %v)", time.Since(start).Round(time.Second), hasCommand("ccache"))
	holdGuestSlot(t)
	for _, c := range bisectHistory {
		c.edit(t, tree)
		git("commit", "-q", "-a", "-m", c.subject)
		commits = append(commits, git("rev-parse", "HEAD"))
	}
	t.Logf("history: base %.12s, then %d commits, head %.12s", commits[0], len(bisectHistory), commits[len(commits)-1])
	before := git("status", "--porcelain") + git("rev-parse", "HEAD") + git("for-each-ref")

	// The splat: one round of fuse-transport over /dev/fuse per step.
	runs := t.TempDir()
	start = time.Now()
	r := runKlab(t, runs, 90*time.Minute, buildNice, "bisect", "--tree", tree, "--good", commits[0], "--bad", "main",
		"--splat", "WARNING in __fuse_simple_request", "--rounds", "1", "fuse-transport", "--set", "transport=dev")
	t.Logf("splat bisection: exit %d in %s\n%s", r.code, time.Since(start).Round(time.Second), r.stdout)
	warn := commits[warnCommit+1]
	if r.code != 0 || !strings.HasPrefix(r.stdout, fmt.Sprintf("first bad commit: %.12s %s\n", warn, bisectHistory[warnCommit].subject)) {
		logWarnings(t, runs)
		t.Fatalf("splat bisection: exit %d, want 0 and the first bad commit %.12s", r.code, warn)
	}
	b := openBisection(t, runs)
	if e := b.Result.Evidence; e == nil || e.Splat == nil || !strings.Contains(e.Splat.Title, "__fuse_simple_request") {
		t.Errorf("evidence %+v, want the WARNING's report", e)
	} else {
		t.Logf("evidence: %s\n%s", e.Splat.Title, e.Splat.Text)
		if !strings.Contains(e.Splat.Text, " fs/fuse/req.c:") {
			t.Errorf("the WARNING does not name fs/fuse/req.c as the kernel tree does:\n%s", e.Splat.Text)
		}
	}
	checkSkippedBroken(t, b, commits[brokenCommit+1])
	checkIncremental(t, b)
	if after := git("status", "--porcelain") + git("rev-parse", "HEAD") + git("for-each-ref"); after != before {
		t.Errorf("the tree changed: %q, then %q", before, after)
	}
	if _, err := os.Stat(filepath.Join(tree, ".git", "BISECT_LOG")); err == nil {
		t.Error("the tree has a git bisection of its own")
	}
	if rep := run(t, runs, "report", b.Dir, "--format", "md"); rep.code != 0 || !strings.Contains(rep.stdout, "first bad commit") {
		t.Errorf("klab report --format md: exit %d\n%s", rep.code, rep.stdout)
	}

	// The metric: fuse-uring's creates over /dev/fuse at 1 job, all
	// rounds in one guest; the builds are the splat bisection's, from
	// the cache.
	t.Run("metric", func(t *testing.T) {
		testenv.OptIn(t, "KLAB_E2E_BISECT", "the metric bisection, about 7 minutes of guests")
		runs := t.TempDir()
		start := time.Now()
		r := runKlab(t, runs, 60*time.Minute, buildNice, "bisect", "--tree", tree, "--good", commits[0], "--bad", "main",
			"--row", "creates transport=dev jobs=1", "--rounds", "3", "--max-rounds", "3", "fuse-uring", "--set", "transport=dev", "--set", "jobs=1")
		t.Logf("metric bisection: exit %d in %s\n%s", r.code, time.Since(start).Round(time.Second), r.stdout)
		delay := commits[delayCommit+1]
		if r.code != 0 || !strings.HasPrefix(r.stdout, fmt.Sprintf("first bad commit: %.12s %s\n", delay, bisectHistory[delayCommit].subject)) {
			t.Fatalf("metric bisection: exit %d, want 0 and the first bad commit %.12s", r.code, delay)
		}
		if !strings.Contains(r.stderr, "klab: endpoints: row \"creates transport=dev jobs=1\"") {
			t.Error("stderr lacks the endpoints' separation")
		}
		b := openBisection(t, runs)
		if e := b.Result.Evidence; e == nil || e.Metric == nil || b.Result.Separation == nil || !b.Result.Separation.Separable() {
			t.Errorf("evidence %+v, separation %+v: want the metric against both endpoints", e, b.Result.Separation)
		} else {
			t.Logf("endpoints: %s", b.Result.Separation)
		}
		checkSkippedBroken(t, b, commits[brokenCommit+1])
	})
}

// openBisection opens the one bisection in runs and logs its steps.
func openBisection(t *testing.T, runs string) *bisect.Bisection {
	t.Helper()
	b, err := bisect.Open(onlyRun(t, runs))
	if err != nil {
		t.Fatal(err)
	}
	if b.Result == nil {
		t.Fatalf("%s has no result", b.Dir)
	}
	for _, s := range b.Steps {
		t.Logf("%-5s %.12s %-40s %-4s build %6.1fs %-11s %s", s.Role, s.Commit, s.Subject, s.Verdict, s.Build.TookSec, s.Build.Mode, s.Reason)
	}
	return b
}

// logWarnings logs the WARNING reports of the consoles under runs, with
// the lines around them, so that a failed splat bisection shows what the
// guests printed.
func logWarnings(t *testing.T, runs string) {
	t.Helper()
	_ = filepath.WalkDir(runs, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "console.log" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		lines := strings.Split(string(data), "\n")
		for i, l := range lines {
			if strings.Contains(l, "cut here") {
				t.Logf("%s:%d:\n%s", p, i+1, strings.Join(lines[i:min(i+30, len(lines))], "\n"))
				break
			}
		}
		return nil
	})
}

// checkSkippedBroken: the commit that does not compile was tested and
// skipped, with the build failure as the reason.
func checkSkippedBroken(t *testing.T, b *bisect.Bisection, broken string) {
	t.Helper()
	for _, s := range b.Steps {
		if s.Commit != broken {
			continue
		}
		if s.Verdict != bisect.Skip || !strings.HasPrefix(s.Reason, "does not build: make ") {
			t.Errorf("the commit that does not compile: %s (%s), want skip for its build", s.Verdict, s.Reason)
		}
		return
	}
	t.Errorf("the commit that does not compile (%.12s) was never tested", broken)
}

// checkIncremental: every build after the first that built is
// incremental (the work tree moved from commit to commit) or a cache
// hit, or took less than half the first (cold) one.
func checkIncremental(t *testing.T, b *bisect.Bisection) {
	t.Helper()
	var first *bisect.Step
	for i := range b.Steps {
		s := &b.Steps[i]
		if s.BuildError != "" {
			continue
		}
		if first == nil {
			first = s
			t.Logf("first build: %.12s, %s in %.0fs", s.Commit, s.Build.Mode, s.Build.TookSec)
			continue
		}
		switch {
		case s.Build.Mode == bisect.BuildIncremental || s.Build.Mode == bisect.BuildCached:
		case first.Build.Mode != bisect.BuildCold:
			t.Logf("%.12s: %s in %.0fs (the first build was %s: no cold build to hold it against)", s.Commit, s.Build.Mode, s.Build.TookSec, first.Build.Mode)
		case s.Build.TookSec > first.Build.TookSec/2:
			t.Errorf("%.12s: a %s build of %.0fs after a first build of %.0fs: want an incremental one", s.Commit, s.Build.Mode, s.Build.TookSec, first.Build.TookSec)
		}
	}
}

// hasCommand reports whether the program name is on PATH.
func hasCommand(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}
