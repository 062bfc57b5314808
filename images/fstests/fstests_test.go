package fstests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/internal/testenv"
)

var testTime = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeSteps stands for fstests' build: it counts its runs in counter and
// installs a tree with a check script, tests of two file systems and a
// copy of /bin/true as a program; with fail set, its make step fails.
func fakeSteps(counter string, fail bool) func(int, string, string) []step {
	return func(jobs int, src, d string) []step {
		makeCmd := "echo compiling; echo run >> " + counter
		if fail {
			makeCmd += "; echo 'src/foo.c:1: error: no' >&2; exit 2"
		}
		return []step{
			{"configure", []string{"sh", "-c", "test -x check"}},
			{"make", []string{"sh", "-c", makeCmd}},
			{"install", []string{"sh", "-c", "mkdir -p " + d + "/tests/generic " + d + "/tests/xfs " + d + "/src && " +
				"cp check " + d + "/ && cp tests/generic/001 " + d + "/tests/generic/ && echo x > " + d + "/tests/xfs/001 && " +
				"cp /bin/true " + d + "/src/true"}},
		}
	}
}

func runs(t *testing.T, counter string) int {
	t.Helper()
	data, err := os.ReadFile(counter)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "run")
}

func TestBuildCachesByContent(t *testing.T) {
	requiresCompiler(t)
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	counter := filepath.Join(dir, "counter")
	src := filepath.Join(dir, "src")
	writeTree(t, src, minimal)
	o := Options{CacheDir: cache, steps: fakeSteps(counter, false)}
	ctx := context.Background()

	b, err := Build(ctx, src, o)
	if err != nil {
		t.Fatal(err)
	}
	if b.Hit || runs(t, counter) != 1 {
		t.Fatalf("first build: hit %v, %d runs; want a miss and one run", b.Hit, runs(t, counter))
	}
	if b.Dir != filepath.Join(Dir(cache), b.Descriptor.Key, "tree") {
		t.Errorf("Dir = %s", b.Dir)
	}
	for _, p := range []string{"check", "tests/generic/001", "src/true"} {
		if _, err := os.Stat(filepath.Join(b.Dir, p)); err != nil {
			t.Errorf("the tree lacks %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "tests/xfs")); err == nil {
		t.Errorf("tests/xfs was kept; the tree keeps only %v", TestDirs())
	}
	d := b.Descriptor
	if d.Source.Path != src || d.Source.Kind != KindDir || d.Programs != 1 || d.Toolchain.Compiler == "" || d.Built == "" {
		t.Errorf("descriptor = %+v", d)
	}
	if len(d.Steps) != 4 || d.Steps[0].Name != "prepare" || d.Steps[2].Name != "make" {
		t.Errorf("steps = %+v, want prepare and the three fake ones", d.Steps)
	}
	if !contains(d.Libs, "libc.so.6") {
		t.Errorf("libs = %v, want libc.so.6 (src/true's)", d.Libs)
	}
	if log, err := os.ReadFile(b.Log); err != nil || !strings.Contains(string(log), "compiling") {
		t.Errorf("build.log: %v\n%s", err, log)
	}

	// The same content again, and elsewhere: hits, no build.
	again, err := Build(ctx, src, o)
	if err != nil {
		t.Fatal(err)
	}
	copyDir := filepath.Join(dir, "copy")
	writeTree(t, copyDir, minimal)
	elsewhere, err := Build(ctx, copyDir, o)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Hit || !elsewhere.Hit || runs(t, counter) != 1 || elsewhere.Dir != b.Dir {
		t.Fatalf("same content: hits %v %v, %d runs; want hits and no new run", again.Hit, elsewhere.Hit, runs(t, counter))
	}

	// Changed content: a miss, a second entry.
	writeTree(t, src, map[string]string{"common/rc": "changed\n"})
	changed, err := Build(ctx, src, o)
	if err != nil {
		t.Fatal(err)
	}
	if changed.Hit || runs(t, counter) != 2 || changed.Dir == b.Dir {
		t.Fatalf("changed content: hit %v, %d runs, dir %s", changed.Hit, runs(t, counter), changed.Dir)
	}
}

func TestBuildFromTarball(t *testing.T) {
	requiresCompiler(t)
	testenv.RequiresCommand(t, "tar")
	dir := t.TempDir()
	counter := filepath.Join(dir, "counter")
	tarball := filepath.Join(dir, "fstests.tar.gz")
	writeTarball(t, tarball, "fstests/", minimal)
	o := Options{CacheDir: filepath.Join(dir, "cache"), steps: fakeSteps(counter, false)}
	b, err := Build(context.Background(), tarball, o)
	if err != nil {
		t.Fatal(err)
	}
	if b.Descriptor.Source.Kind != KindTarball || runs(t, counter) != 1 {
		t.Fatalf("descriptor %+v, %d runs", b.Descriptor, runs(t, counter))
	}
	if b, err = Build(context.Background(), tarball, o); err != nil || !b.Hit {
		t.Fatalf("second build: %v, hit %v", err, b != nil && b.Hit)
	}
}

func TestBuildErrors(t *testing.T) {
	requiresCompiler(t)
	testenv.RequiresCommand(t, "tar")
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	counter := filepath.Join(dir, "counter")
	ctx := context.Background()

	// A tarball without fstests in it.
	notFstests := filepath.Join(dir, "other.tar.gz")
	writeTarball(t, notFstests, "other/", map[string]string{"README": "x"})
	_, err := Build(ctx, notFstests, Options{CacheDir: cache, steps: fakeSteps(counter, false)})
	if err == nil || !strings.Contains(err.Error(), "has no check script at its top") {
		t.Errorf("a tarball of something else: %v", err)
	}
	// A truncated tarball.
	data, _ := os.ReadFile(notFstests)
	broken := filepath.Join(dir, "broken.tar.gz")
	if err := os.WriteFile(broken, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Build(ctx, broken, Options{CacheDir: cache, steps: fakeSteps(counter, false)}); err == nil || !strings.Contains(err.Error(), "cannot be unpacked") {
		t.Errorf("a truncated tarball: %v", err)
	}

	// A step that fails: named, its log kept, nothing cached.
	src := filepath.Join(dir, "src")
	writeTree(t, src, minimal)
	_, err = Build(ctx, src, Options{CacheDir: cache, steps: fakeSteps(counter, true)})
	if err == nil || !strings.Contains(err.Error(), "step make failed") || !strings.Contains(err.Error(), "src/foo.c:1: error: no") {
		t.Fatalf("a failing make: %v", err)
	}
	logs, _ := filepath.Glob(filepath.Join(Dir(cache), "logs", "*.log"))
	if len(logs) != 1 || !strings.Contains(err.Error(), logs[0]) {
		t.Fatalf("logs %v; the error should name the one log: %v", logs, err)
	}
	if log, _ := os.ReadFile(logs[0]); !strings.Contains(string(log), "compiling") {
		t.Errorf("the kept log lacks make's output:\n%s", log)
	}
	des, _ := os.ReadDir(Dir(cache))
	for _, de := range des {
		if de.Name() != "logs" && de.Name() != ".lock" {
			t.Errorf("a failed build left %s in the cache", de.Name())
		}
	}

	// An install that leaves no check script.
	noCheck := func(jobs int, src, tree string) []step {
		return []step{{"install", []string{"mkdir", "-p", filepath.Join(tree, "tests")}}}
	}
	if _, err := Build(ctx, src, Options{CacheDir: cache, steps: noCheck}); err == nil || !strings.Contains(err.Error(), "step install left no check script") {
		t.Errorf("an install without check: %v", err)
	}

	// Fixed, the same source builds, and the failed log goes.
	b, err := Build(ctx, src, Options{CacheDir: cache, steps: fakeSteps(counter, false)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(logs[0]); !os.IsNotExist(err) {
		t.Errorf("the log of a build that succeeded stays in logs/: %v", err)
	}
	if _, err := os.Stat(b.Log); err != nil {
		t.Errorf("build.log: %v", err)
	}
}

func TestKeyFollowsSourceAndCompiler(t *testing.T) {
	tc := Toolchain{Arch: "x86_64", Compiler: "cc (Debian 12.2.0-14) 12.2.0", Make: "GNU Make 4.3"}
	k := Key("sha256:aa", tc)
	other := tc
	other.Make = "GNU Make 4.4"
	if Key("sha256:aa", other) != k {
		t.Errorf("make's version changed the key")
	}
	other.Compiler = "cc (Debian 14.2.0-19) 14.2.0"
	if Key("sha256:aa", other) == k || Key("sha256:ab", tc) == k {
		t.Errorf("the key ignores the compiler or the source")
	}
}

// requiresCompiler needs the C compiler the toolchain's version comes
// from.
func requiresCompiler(t *testing.T) {
	t.Helper()
	testenv.RequiresCommand(t, compiler())
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
