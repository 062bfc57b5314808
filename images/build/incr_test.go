package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"klab/internal/testenv"
)

func requireBuildTools(t *testing.T) {
	t.Helper()
	for _, c := range []string{"make", "git", "patch", "tar", "gcc", "ld", "flex", "bison", "bc", "perl"} {
		testenv.RequiresCommand(t, c)
	}
}

// commitHistory makes three more commits in the fake git tree and returns
// the four: c[0] is the fake tree, c[1] adds a line to fs/b.c, c[2]
// changes the header fs/a.h (which only fs/a.c depends on), c[3] changes
// fs/b.c back and fs/a.c.
func commitHistory(t *testing.T, tree string) [4]string {
	t.Helper()
	var c [4]string
	head := func() string { return strings.TrimSpace(gitT(t, tree, "rev-parse", "HEAD")) }
	c[0] = head()
	writeTemp(t, tree, "fs/b.c", "int b;\n/* b */\nint b2;\nint b3; /* c1 */\n")
	gitT(t, tree, "commit", "-qam", "b: b3")
	c[1] = head()
	writeTemp(t, tree, "fs/a.h", "/* a.h at c2 */\n")
	gitT(t, tree, "commit", "-qam", "a.h: c2")
	c[2] = head()
	writeTemp(t, tree, "fs/b.c", "int b;\n/* b */\nint b2;\n")
	writeTemp(t, tree, "fs/a.c", "int a;\n/* a */\nint a2;\nint a3; /* c3 */\n")
	gitT(t, tree, "commit", "-qam", "a: a3, b: no b3")
	c[3] = head()
	return c
}

// snapshotTree records every file and directory under dir (its .git too):
// mode, size, mtime and content hash, so that a test sees any write.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			v += " " + hex.EncodeToString(sum[:8])
		}
		m[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func checkUntouched(t *testing.T, dir string, before map[string]string, head, status string) {
	t.Helper()
	after := snapshotTree(t, dir)
	for p, v := range before {
		if after[p] != v {
			t.Errorf("the user's tree changed: %s was %q, is %q", p, v, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("the user's tree changed: %s is new", p)
		}
	}
	if got := gitT(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("the user's HEAD moved from %s to %s", head, got)
	}
	if got := gitT(t, dir, "status", "--porcelain"); got != status {
		t.Errorf("the user's status was %q, is %q", status, got)
	}
}

func hasPhase(res *Result, name string) bool {
	return slices.ContainsFunc(res.Phases, func(p Phase) bool { return p.Name == name })
}

func imageOf(t *testing.T, res *Result) string {
	t.Helper()
	data, err := os.ReadFile(res.Kernel.Image)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestBuildMovesAcrossCommits builds one commit of a git tree after
// another, as a bisection does: every commit after the first reuses the
// first one's work tree (no new clone, a "checkout" phase), make
// recompiles only what the commits changed (a header change recompiles
// the file that includes it), each commit's result is cached on its own
// (going back to a commit is a cache hit, and a forced rebuild there
// gives the same image again), and the user's repository is not written
// to at all.
func TestBuildMovesAcrossCommits(t *testing.T) {
	requireBuildTools(t)
	ctx := context.Background()
	dir, tree, source := fakeSource(t, "git")
	c := commitHistory(t, tree)
	frag := writeTemp(t, dir, "my.config", "CONFIG_A=y\n")
	cache := filepath.Join(dir, "cache")
	head, status := gitT(t, tree, "rev-parse", "HEAD"), gitT(t, tree, "status", "--porcelain")
	before := snapshotTree(t, tree)

	var log bytes.Buffer
	build := func(rev string, rebuild bool) *Result {
		t.Helper()
		log.Reset()
		res, err := Build(ctx, Options{Source: source, Rev: rev, Config: []string{frag}, CacheDir: cache, Jobs: 1,
			Rebuild: rebuild, Progress: &log})
		if err != nil {
			t.Fatalf("build %.12s: %v\n%s", rev, err, log.String())
		}
		return res
	}
	newCompiled := func(was string) string { return strings.TrimSpace(strings.TrimPrefix(compiled(t, cache), was)) }

	r0 := build(c[0], false)
	if r0.Hit || !r0.Cold || hasPhase(r0, "checkout") || r0.Compiled != 2 || r0.WorkTree == "" {
		t.Fatalf("first commit: %+v", r0)
	}
	if got := compiled(t, cache); got != "fs/a fs/b" {
		t.Fatalf("cold build compiled %q", got)
	}
	// A file in the clone's .git that a new clone would not have.
	marker := filepath.Join(r0.WorkTree, "src", ".git", "klab-test-marker")
	writeTemp(t, filepath.Dir(marker), filepath.Base(marker), "x")

	steps := []struct {
		rev, want   string // want: what make compiles
		differ      int
		has, hasNot string
	}{
		{c[1], "fs/b", 1, "int b3; /* c1 */", ""},
		{c[2], "fs/a", 1, "/* a.h at c2 */", ""},
		{c[3], "fs/a fs/b", 2, "int a3; /* c3 */", "int b3"},
	}
	from := c[0]
	results := map[string]*Result{c[0]: r0}
	for _, s := range steps {
		was := compiled(t, cache)
		res := build(s.rev, false)
		if res.Hit || res.Cold || res.WorkTree != r0.WorkTree || !hasPhase(res, "checkout") {
			t.Errorf("%.12s: hit %v, cold %v, work tree %s (first %s), phases %v: want an incremental build in the first commit's work tree",
				s.rev, res.Hit, res.Cold, res.WorkTree, r0.WorkTree, res.Phases)
		}
		if l := log.String(); strings.Contains(l, "new work tree") ||
			!strings.Contains(l, fmt.Sprintf("moving the work tree from %.12s to %.12s (%d file(s) differ)", from, s.rev, s.differ)) {
			t.Errorf("%.12s: log\n%s\nwant a move of %d file(s) and no new work tree", s.rev, l, s.differ)
		}
		if got := newCompiled(was); got != s.want {
			t.Errorf("%.12s compiled %q, want %q", s.rev, got, s.want)
		}
		if res.Compiled != len(strings.Fields(s.want)) {
			t.Errorf("%.12s: Result.Compiled %d, want %d", s.rev, res.Compiled, len(strings.Fields(s.want)))
		}
		img := imageOf(t, res)
		if !strings.Contains(img, s.has) || s.hasNot != "" && strings.Contains(img, s.hasNot) {
			t.Errorf("%.12s: the image lacks %q or has %q", s.rev, s.has, s.hasNot)
		}
		for rev, other := range results {
			if other.Kernel.ID == res.Kernel.ID {
				t.Errorf("%.12s has the kernel ID of %.12s", s.rev, rev)
			}
		}
		results[s.rev] = res
		from = s.rev
	}
	if !exists(marker) {
		t.Error("the work tree was cloned again")
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "kernels", "build", "work", "*")); len(m) != 1 {
		t.Errorf("work trees %v, want one", m)
	}

	// Back to the first commit: a cache hit without touching the tree.
	was := compiled(t, cache)
	again := build(c[0], false)
	if !again.Hit || again.Kernel.ID != r0.Kernel.ID || compiled(t, cache) != was {
		t.Errorf("the first commit again: hit %v, ID %s (was %s): want a cache hit", again.Hit, again.Kernel.ID, r0.Kernel.ID)
	}
	// Forced through make: the file that differs from c3 (a.c, and a.h
	// which it includes; b.c is c0's again since c3) is compiled again,
	// with c0's content, and the image is c0's to the byte.
	again = build(c[0], true)
	if got := newCompiled(was); got != "fs/a" {
		t.Errorf("back to the first commit compiled %q, want fs/a", got)
	}
	if imageOf(t, again) != imageOf(t, r0) || again.Kernel.ID != r0.Kernel.ID {
		t.Errorf("back to the first commit: kernel %s, want %s with the same image", again.Kernel.ID, r0.Kernel.ID)
	}
	// And a build of the tree's HEAD (no --rev) is c3's, cached.
	if res := build("", false); !res.Hit || res.Kernel.ID != results[c[3]].Kernel.ID {
		t.Errorf("HEAD: hit %v, ID %s, want c3's %s", res.Hit, res.Kernel.ID, results[c[3]].Kernel.ID)
	}
	checkUntouched(t, tree, before, head, status)
}

// TestBuildAcrossCommitsWithPatches: a patch series goes along with the
// work tree from commit to commit. A patched file that the move leaves as
// make last saw it keeps its mtime (it is not compiled again), and one
// whose content make saw only before the last build gets a new mtime:
// going back to the first commit compiles it again and gives the first
// image, not an object of the commit in between.
func TestBuildAcrossCommitsWithPatches(t *testing.T) {
	requireBuildTools(t)
	ctx := context.Background()
	dir, tree, source := fakeSource(t, "git")
	c := commitHistory(t, tree)
	frag := writeTemp(t, dir, "my.config", "CONFIG_A=y\n")
	p := fakePatch(t, dir, "b.patch", "b: patched", "b", "/* b */", "/* b patched */")
	cache := filepath.Join(dir, "cache")
	var log bytes.Buffer
	build := func(rev string, rebuild bool) *Result {
		t.Helper()
		log.Reset()
		res, err := Build(ctx, Options{Source: source, Rev: rev, Patches: []string{p}, Config: []string{frag}, CacheDir: cache,
			Jobs: 1, Rebuild: rebuild, Progress: &log})
		if err != nil {
			t.Fatalf("build %.12s: %v\n%s", rev, err, log.String())
		}
		return res
	}

	first := build(c[0], false)
	for _, s := range []struct {
		rev, want   string
		has, hasNot string
	}{
		// b.c: c1's line, patched.
		{c[1], "fs/b", "int b3; /* c1 */", "/* a.h at c2 */"},
		// b.c: reverted by the move, patched again, as make saw it:
		// not compiled.
		{c[2], "fs/a", "/* a.h at c2 */", "/* a.h */"},
		// b.c back to what make saw two builds ago, a.h to c0's: both
		// compiled again, and the image is the first one.
		{c[0], "fs/a fs/b", "/* a.h */", "int b3"},
		// b.c as at c0, a.c and a.h changed.
		{c[3], "fs/a", "int a3; /* c3 */", "int b3"},
	} {
		was := compiled(t, cache)
		res := build(s.rev, true)
		if got := strings.TrimSpace(strings.TrimPrefix(compiled(t, cache), was)); got != s.want {
			t.Errorf("%.12s with the patch compiled %q, want %q", s.rev, got, s.want)
		}
		img := imageOf(t, res)
		if !strings.Contains(img, s.has) || strings.Contains(img, s.hasNot) || !strings.Contains(img, "/* b patched */") {
			t.Errorf("%.12s with the patch: the image lacks %q or the patch, or has %q", s.rev, s.has, s.hasNot)
		}
		if s.rev == c[0] && (res.Kernel.ID != first.Kernel.ID || img != imageOf(t, first)) {
			t.Errorf("back to the first commit: kernel %s, want %s and its image", res.Kernel.ID, first.Kernel.ID)
		}
	}
	// The same commit without the patch: no move, and the revert
	// recompiles b.c alone.
	was := compiled(t, cache)
	res, err := Build(ctx, Options{Source: source, Rev: c[3], Config: []string{frag}, CacheDir: cache, Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(strings.TrimPrefix(compiled(t, cache), was)); got != "fs/b" || hasPhase(res, "checkout") {
		t.Errorf("c3 without the patch compiled %q (phases %v), want fs/b and no checkout", got, res.Phases)
	}
	if img := imageOf(t, res); strings.Contains(img, "patched") || !strings.Contains(img, "int a3") {
		t.Error("c3 without the patch: wrong image")
	}
}

// TestBuildFetchesUnseenCommit: a commit that the work tree's clone
// cannot see through the objects it borrows is fetched into the clone,
// and the user's repository is still not written to.
func TestBuildFetchesUnseenCommit(t *testing.T) {
	requireBuildTools(t)
	ctx := context.Background()
	dir, tree, source := fakeSource(t, "git")
	frag := writeTemp(t, dir, "my.config", "CONFIG_A=y\n")
	cache := filepath.Join(dir, "cache")
	r0, err := Build(ctx, Options{Source: source, Config: []string{frag}, CacheDir: cache, Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The clone borrows a copy of the objects as they are now.
	objects := filepath.Join(dir, "objects-copy")
	if out, err := runCmd(dir, "cp", "-a", filepath.Join(tree, ".git", "objects"), objects); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	writeTemp(t, filepath.Join(r0.WorkTree, "src", ".git", "objects", "info"), "alternates", objects+"\n")
	c := commitHistory(t, tree)
	head, status := gitT(t, tree, "rev-parse", "HEAD"), gitT(t, tree, "status", "--porcelain")
	before := snapshotTree(t, tree)
	var log bytes.Buffer
	res, err := Build(ctx, Options{Source: source, Rev: c[1], Config: []string{frag}, CacheDir: cache, Jobs: 1, Progress: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), fmt.Sprintf("fetching %.12s from %s", c[1], tree)) || !hasPhase(res, "checkout") ||
		!strings.Contains(imageOf(t, res), "int b3") {
		t.Errorf("phases %v, log\n%s\nwant a fetch and a move to c1", res.Phases, log.String())
	}
	checkUntouched(t, tree, before, head, status)
}

// TestBuildTwoCommitsAtOnce: two builds of different commits of one
// repository share its work tree one after the other, and each gets its
// own commit's kernel.
func TestBuildTwoCommitsAtOnce(t *testing.T) {
	requireBuildTools(t)
	dir, tree, source := fakeSource(t, "git")
	c := commitHistory(t, tree)
	frag := writeTemp(t, dir, "my.config", "CONFIG_A=y\n")
	cache := filepath.Join(dir, "cache")
	revs := []string{c[1], c[2]}
	res := make([]*Result, len(revs))
	errs := make([]error, len(revs))
	var wg sync.WaitGroup
	for i, rev := range revs {
		wg.Go(func() {
			res[i], errs[i] = Build(t.Context(), Options{Source: source, Rev: rev, Config: []string{frag}, CacheDir: cache, Jobs: 1})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if res[0].WorkTree != res[1].WorkTree || res[0].Kernel.ID == res[1].Kernel.ID {
		t.Errorf("work trees %s and %s, kernels %s and %s: want one work tree, two kernels",
			res[0].WorkTree, res[1].WorkTree, res[0].Kernel.ID, res[1].Kernel.ID)
	}
	if img := imageOf(t, res[0]); !strings.Contains(img, "int b3") || strings.Contains(img, "a.h at c2") {
		t.Error("c1's image is wrong")
	}
	if img := imageOf(t, res[1]); !strings.Contains(img, "int b3") || !strings.Contains(img, "a.h at c2") {
		t.Error("c2's image is wrong")
	}
}

// fakeGitEnv tells the fake git on PATH (fakeGit) what to do to the
// checkout --force of a move.
const fakeGitEnv = "KLAB_TEST_FAKE_GIT"

// fakeGit is a git that runs the real one ($KLAB_TEST_REAL_GIT), except for
// a checkout --force. When $KLAB_TEST_FAKE_GIT is "kill", it does a part
// of the checkout's work (one file written with half its new content,
// git's index lock taken) and kills klab, its parent, as a SIGKILL or a
// power cut would; when it is "fail", it fails without doing anything.
const fakeGit = `#!/bin/sh
if [ "$1" = checkout ]; then
	for a in "$@"; do
		[ "$a" = --force ] || continue
		case "$KLAB_TEST_FAKE_GIT" in
		kill)
			printf 'int b;\n/* half written' > fs/b.c
			: > .git/index.lock
			kill -KILL $PPID
			sleep 1
			exit 1;;
		fail)
			echo "fatal: the test's git does not check out" >&2
			exit 128;;
		esac
	done
fi
exec "$KLAB_TEST_REAL_GIT" "$@"
`

// fakeGitPath returns a PATH whose git is fakeGit, and the environment
// variable that names the real one.
func fakeGitPath(t *testing.T) (path, realGit string) {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	writeTemp(t, bin, "git", fakeGit)
	if err := os.Chmod(filepath.Join(bin, "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin + string(os.PathListSeparator) + os.Getenv("PATH"), "KLAB_TEST_REAL_GIT=" + real
}

// buildKilled runs one build in a new process whose git kills it during
// the move; it fails the test unless the process died of SIGKILL.
func buildKilled(t *testing.T, o Options) {
	t.Helper()
	path, realGit := fakeGitPath(t)
	js, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+string(js), fakeGitEnv+"=kill", realGit, "PATH="+path)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("the build that git kills: %v, want killed by a signal\n%s", err, out)
	}
}

// TestBuildMoveKilledAcrossProcesses: a build killed half-way through
// moving the work tree to another commit (a file half-written, git's
// index locked) leaves the move recorded in state.json; the next build,
// in a new process, resets the tree to the commit the move was going to,
// keeps the clone and the objects, and gives the right kernel, whether it
// asks for that commit or for another one.
func TestBuildMoveKilledAcrossProcesses(t *testing.T) {
	requireBuildTools(t)
	dir, tree, source := fakeSource(t, "git")
	c := commitHistory(t, tree)
	frag := writeTemp(t, dir, "my.config", "CONFIG_A=y\n")
	cache := filepath.Join(dir, "cache")
	opts := func(rev string) Options {
		return Options{Source: source, Rev: rev, Config: []string{frag}, CacheDir: cache, Jobs: 1, Rebuild: true}
	}
	r0, err := buildInProcess(t, opts(c[0]))
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(r0.WorkTree, "src", ".git", "klab-test-marker")
	writeTemp(t, filepath.Dir(marker), filepath.Base(marker), "x")
	statePath := filepath.Join(r0.WorkTree, "state.json")

	for _, s := range []struct {
		killedOn, then string
		want           string // what make compiles after the recovery
		has, hasNot    string
	}{
		// Killed on the way to c1, then c1: b.c is reset (it was
		// half-written) and compiled, a.c is not.
		{c[1], c[1], "fs/b", "int b3; /* c1 */", "half written"},
		// Killed on the way to c2, then c0: the tree is reset to c2,
		// then moved to c0 (a.h and b.c differ).
		{c[2], c[0], "fs/a fs/b", "/* a.h */", "int b3"},
	} {
		buildKilled(t, opts(s.killedOn))
		st, err := readState(statePath)
		if err != nil || !st.Busy || st.MovingTo != "git:"+s.killedOn {
			t.Fatalf("state after the killed move to %.12s: %+v, %v", s.killedOn, st, err)
		}
		was := compiled(t, cache)
		res, err := buildInProcess(t, opts(s.then))
		if err != nil {
			t.Fatalf("the build after the killed move: %v", err)
		}
		if got := strings.TrimSpace(strings.TrimPrefix(compiled(t, cache), was)); !strings.HasPrefix(compiled(t, cache), was) || got != s.want {
			t.Errorf("after the killed move to %.12s, %.12s compiled %q (log was %q), want %q", s.killedOn, s.then, got, was, s.want)
		}
		img := imageOf(t, res)
		if !strings.Contains(img, s.has) || strings.Contains(img, s.hasNot) {
			t.Errorf("after the killed move to %.12s, %.12s's image lacks %q or has %q", s.killedOn, s.then, s.has, s.hasNot)
		}
		if s.then == c[0] && img != imageOf(t, r0) {
			t.Errorf("after the killed move to %.12s, c0's image differs from its first build", s.killedOn)
		}
		if !exists(marker) {
			t.Fatal("the work tree was cloned again, want it reset")
		}
		st, err = readState(statePath)
		if err != nil || st.Busy || st.MovingTo != "" || st.Base != "git:"+s.then {
			t.Fatalf("state after the recovery: %+v, %v", st, err)
		}
		if out := gitT(t, filepath.Join(r0.WorkTree, "src"), "status", "--porcelain"); out != "" {
			t.Errorf("the work tree is not clean after the recovery: %q", out)
		}
	}
}

// TestBuildConfigFollowsCommit: a commit that changes what the config
// targets make gets its own config after a move, as a cold build of it
// would, and the commit before it gets its own back.
func TestBuildConfigFollowsCommit(t *testing.T) {
	requireBuildTools(t)
	ctx := context.Background()
	dir, tree, source := fakeSource(t, "git")
	frag := writeTemp(t, dir, "my.config", "CONFIG_A=y\n")
	cache := filepath.Join(dir, "cache")
	c0 := strings.TrimSpace(gitT(t, tree, "rev-parse", "HEAD"))
	writeTemp(t, tree, "Makefile", strings.Replace(fakeMakefile, `CONFIG_A=y\n`, `CONFIG_A=y\nCONFIG_NEW=y\n`, 1))
	gitT(t, tree, "commit", "-qam", "a new option, on by default")
	c1 := strings.TrimSpace(gitT(t, tree, "rev-parse", "HEAD"))
	for _, s := range []struct {
		rev  string
		want bool
	}{{c0, false}, {c1, true}, {c0, false}} {
		res, err := Build(ctx, Options{Source: source, Rev: s.rev, Config: []string{frag}, CacheDir: cache, Jobs: 1, Rebuild: true})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(res.Kernel.Config)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(string(cfg), "CONFIG_NEW=y"); got != s.want {
			t.Errorf("%.12s: CONFIG_NEW=y in the config is %v, want %v:\n%s", s.rev, got, s.want, cfg)
		}
	}
}

// TestBuildMoveCheckoutFails: when git checkout fails in a move (as it
// would if the commit the clone was at were gone from the user's
// repository), the build resets the work tree to the new commit instead,
// rewriting only the files that differ.
func TestBuildMoveCheckoutFails(t *testing.T) {
	requireBuildTools(t)
	ctx := context.Background()
	dir, tree, source := fakeSource(t, "git")
	c := commitHistory(t, tree)
	frag := writeTemp(t, dir, "my.config", "CONFIG_A=y\n")
	cache := filepath.Join(dir, "cache")
	if _, err := Build(ctx, Options{Source: source, Rev: c[0], Config: []string{frag}, CacheDir: cache, Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	path, realGit := fakeGitPath(t)
	name, value, _ := strings.Cut(realGit, "=")
	t.Setenv(name, value)
	t.Setenv(fakeGitEnv, "fail")
	t.Setenv("PATH", path)
	was := compiled(t, cache)
	res, err := Build(ctx, Options{Source: source, Rev: c[1], Config: []string{frag}, CacheDir: cache, Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(strings.TrimPrefix(compiled(t, cache), was)); got != "fs/b" || !strings.Contains(imageOf(t, res), "int b3") {
		t.Errorf("after a failed checkout compiled %q, want fs/b, and c1's image", got)
	}
}
