package fstests

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"klab/internal/filehash"
	"klab/internal/testenv"
)

// writeTree writes files (path -> content; a path ending in "*" is
// executable, without the star) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, "*") {
			name, mode = strings.TrimSuffix(name, "*"), 0o755
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// minimal is the smallest tree OpenSource takes for fstests.
var minimal = map[string]string{"check*": "#!/bin/bash\n", "common/rc": "rc\n", "tests/generic/001*": "#!/bin/bash\n"}

// writeTarball writes a gzipped tarball of files under prefix.
func writeTarball(t *testing.T, path, prefix string, files map[string]string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	for name, content := range files {
		mode := int64(0o644)
		if strings.HasSuffix(name, "*") {
			name, mode = strings.TrimSuffix(name, "*"), 0o755
		}
		hdr := &tar.Header{Name: prefix + name, Mode: mode, Size: int64(len(content)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []interface{ Close() error }{tw, zw, f} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func open(t *testing.T, path string) *Source {
	t.Helper()
	s, err := OpenSource(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTarballIDIsItsBytes(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.tar.gz")
	writeTarball(t, a, "fstests/", minimal)
	s := open(t, a)
	sum, err := filehash.SHA256(a)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != KindTarball || s.ID != "sha256:"+sum || s.Path != a {
		t.Fatalf("source = %+v, want a tarball with ID sha256:%s", s, sum)
	}
	data, _ := os.ReadFile(a)
	b := filepath.Join(dir, "elsewhere.tgz")
	if err := os.WriteFile(b, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := open(t, b).ID; got != s.ID {
		t.Fatalf("the same bytes elsewhere: ID %s, want %s", got, s.ID)
	}
}

func TestDirIDFollowsContentNotTimes(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, minimal)
	id := open(t, dir).ID
	if !strings.HasPrefix(id, "files-sha256:") {
		t.Fatalf("ID = %s", id)
	}
	if err := os.Chtimes(filepath.Join(dir, "common/rc"), testTime, testTime); err != nil {
		t.Fatal(err)
	}
	if got := open(t, dir).ID; got != id {
		t.Fatalf("a new mtime changed the ID: %s -> %s", id, got)
	}
	for _, change := range []struct {
		what string
		do   func() error
	}{
		{"content", func() error { return os.WriteFile(filepath.Join(dir, "common/rc"), []byte("rc2\n"), 0o644) }},
		{"mode", func() error { return os.Chmod(filepath.Join(dir, "common/rc"), 0o755) }},
		{"name", func() error { return os.Rename(filepath.Join(dir, "common/rc"), filepath.Join(dir, "common/rd")) }},
		{"new file", func() error { return os.WriteFile(filepath.Join(dir, "tests/generic/001.out"), nil, 0o644) }},
		{"symlink", func() error { return os.Symlink("rd", filepath.Join(dir, "common/link")) }},
	} {
		if err := change.do(); err != nil {
			t.Fatal(err)
		}
		got := open(t, dir).ID
		if got == id {
			t.Errorf("a changed %s kept the ID", change.what)
		}
		id = got
	}
	// .git is not content.
	writeTree(t, dir, map[string]string{".git/HEAD": "x"})
	if got := open(t, dir).ID; got != id {
		t.Errorf(".git changed the ID")
	}
}

func TestGitDirIDIgnoresBuildProducts(t *testing.T) {
	testenv.RequiresCommand(t, "git")
	dir := t.TempDir()
	writeTree(t, dir, minimal)
	writeTree(t, dir, map[string]string{".gitignore": "*.o\n"})
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "x")
	s := open(t, dir)
	if s.Kind != KindGit || len(s.Commit) != 40 || s.Dirty {
		t.Fatalf("source = %+v, want a clean git tree", s)
	}
	writeTree(t, dir, map[string]string{"src/a.o": "obj"})
	if got := open(t, dir); got.ID != s.ID || got.Dirty {
		t.Fatalf("an ignored build product changed the source: %+v", got)
	}
	writeTree(t, dir, map[string]string{"tests/generic/002": "new"})
	got := open(t, dir)
	if got.ID == s.ID || !got.Dirty {
		t.Fatalf("an untracked new test left the source as it was: %+v", got)
	}
	if err := os.Remove(filepath.Join(dir, "tests/generic/002")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "common/rc")); err != nil {
		t.Fatal(err)
	}
	if got := open(t, dir); got.ID == s.ID || !got.Dirty {
		t.Fatalf("a deleted tracked file left the source as it was: %+v", got)
	}
}

func TestBadSources(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	writeTree(t, dir, map[string]string{"notes.txt": "hello"})
	empty := filepath.Join(dir, "empty")
	parent := filepath.Join(dir, "parent")
	writeTree(t, filepath.Join(parent, "fstests"), minimal)
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"", []string{"no fstests source", "check script at its top"}},
		{filepath.Join(dir, "missing"), []string{"does not exist", "or a tarball of one"}},
		{text, []string{"is not a tarball", "check script at its top"}},
		{empty, []string{"has no check script at its top"}},
		{parent, []string{"has no check script at its top", "did you mean " + filepath.Join(parent, "fstests") + "?"}},
		{"/dev/null", []string{"not a file or a directory"}},
	} {
		_, err := OpenSource(context.Background(), tc.path)
		if err == nil {
			t.Errorf("%q: no error", tc.path)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not say %q", tc.path, err, w)
			}
		}
	}
}
