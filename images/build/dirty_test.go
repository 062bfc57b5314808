package build

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/internal/option"
	"klab/internal/testenv"
)

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=k", "GIT_AUTHOR_EMAIL=k@example.org", "GIT_COMMITTER_NAME=k", "GIT_COMMITTER_EMAIL=k@example.org")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestWorktreePatch: --dirty's patch holds the tracked changes and the
// untracked files .gitignore does not exclude, applies to the commit as
// the working tree is, and leaves the user's index untouched.
func TestWorktreePatch(t *testing.T) {
	testenv.RequiresCommand(t, "git")
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("fs/fuse/dev.c", "int a;\n")
	write(".gitignore", "*.o\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-qm", "base")
	base := strings.TrimSpace(gitT(t, dir, "rev-parse", "HEAD"))

	clean, err := worktreePatch(context.Background(), dir)
	if err != nil || len(clean.Data) != 0 {
		t.Fatalf("a clean tree gave a patch of %d bytes (%v)", len(clean.Data), err)
	}

	write("fs/fuse/dev.c", "int a;\nint b;\n")
	write("fs/fuse/new.c", "int c;\n")
	write("fs/fuse/dev.o", "\x7fELF object: ignored\n")
	index := filepath.Join(dir, ".git", "index")
	before, err := os.Stat(index)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	p, err := worktreePatch(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Files, " ") != "fs/fuse/dev.c fs/fuse/new.c" {
		t.Errorf("patch files %v, want dev.c and new.c (not the ignored dev.o)", p.Files)
	}
	if after, err := os.Stat(index); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the user's index was written (%v)", err)
	}
	if gitT(t, dir, "status", "--porcelain") == "" {
		t.Fatal("the working tree lost its changes")
	}
	again, err := worktreePatch(context.Background(), dir)
	if err != nil || again.SHA256 != p.SHA256 {
		t.Errorf("the same working tree gave another patch (%v): the cache key would change", err)
	}

	// The patch takes a clone at the base commit to the working tree.
	clone := filepath.Join(t.TempDir(), "c")
	gitT(t, dir, "clone", "-q", "--shared", dir, clone)
	gitT(t, clone, "checkout", "-q", "--detach", base)
	pf := filepath.Join(t.TempDir(), "p.diff")
	if err := os.WriteFile(pf, p.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	gitT(t, clone, "apply", "--index", pf)
	for _, f := range []string{"fs/fuse/dev.c", "fs/fuse/new.c"} {
		want, _ := os.ReadFile(filepath.Join(dir, f))
		got, err := os.ReadFile(filepath.Join(clone, f))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s in the clone: %q (%v), want %q", f, got, err, want)
		}
	}
}

// TestDirtyNeedsGitTree: --dirty with --rev or a tarball is refused.
func TestDirtyNeedsGitTree(t *testing.T) {
	tarball := filepath.Join(t.TempDir(), "linux.tar.xz")
	if err := os.WriteFile(tarball, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{
		{Source: t.TempDir(), Rev: "v7.3", Dirty: true},
		{Source: tarball, Dirty: true},
		{Source: "debian:7.3", Dirty: true},
	} {
		var oe *option.Error
		if err := o.Check(); !errors.As(err, &oe) || oe.Name != "dirty" {
			t.Errorf("check(%+v) = %v, want an error of the option dirty", o, err)
		}
	}
}

// TestFailedBuildLeavesNothing: a build whose source is not a tarball
// fails with tar's words and leaves no file in the cache (empty
// directories aside).
func TestFailedBuildLeavesNothing(t *testing.T) {
	for _, c := range []string{"make", "gcc", "ld", "flex", "bison", "bc", "perl", "tar", "git"} {
		testenv.RequiresCommand(t, c)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "linux.tar.gz")
	if err := os.WriteFile(bad, []byte("not a tarball\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	_, err := Build(context.Background(), Options{Source: bad, CacheDir: cache, NoCcache: true})
	if err == nil || !strings.Contains(err.Error(), "does not look like a tar archive") {
		t.Fatalf("Build of a file that is not a tarball: %v", err)
	}
	filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("left in the cache: %s", p)
		}
		return nil
	})
}
