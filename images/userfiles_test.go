package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/images/internal/imagetest"
)

func TestParseUserPath(t *testing.T) {
	dir := t.TempDir()
	file := imagetest.WriteFile(t, filepath.Join(dir, "t.sh"), []byte("#!/bin/sh\necho ok\n"))
	for _, c := range []struct {
		v     string
		isDir bool
		guest string
		err   string
	}{
		{v: file, guest: "/work/t.sh"},
		{v: file + ":/root/x", guest: "/root/x"},
		{v: file + ":/root/../opt/x", guest: "/opt/x"},
		{v: dir + ":/srv/d", isDir: true, guest: "/srv/d"},
		{v: file + ":rel/x", err: "must be absolute"},
		{v: file + ":/bin/klab-agent", err: "klab's own"},
		{v: file + ":/init", err: "klab's own"},
		{v: file + ":/", err: "klab's own"},
		{v: ":/x", err: "want HOST or HOST:GUEST"},
		{v: filepath.Join(dir, "nope"), err: "no such file"},
		{v: dir, err: "not a regular file but a directory"},
		{v: file, isDir: true, err: "not a directory but a file"},
	} {
		p, err := ParseUserPath(c.v, c.isDir)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.v, err, c.err)
			}
			continue
		}
		if err != nil || p.Guest != c.guest {
			t.Errorf("%s: %+v, %v; want guest %s", c.v, p, err, c.guest)
		}
	}
}

// TestUserFiles: a dynamically linked program brings its loader and
// libraries, a script comes as it is with its mode, and a tree keeps its
// layout; the last flag for one guest path wins.
func TestUserFiles(t *testing.T) {
	prog, err := filepath.EvalSymlinks("/bin/sh") // a dynamically linked program on Debian and Ubuntu
	if err != nil {
		t.Fatal(err)
	}
	dynamic, err := isDynamicELF(prog)
	if err != nil {
		t.Fatal(err)
	}
	if !dynamic {
		t.Fatalf("%s is not a dynamically linked program here: the test needs one", prog)
	}
	dir := t.TempDir()
	script := imagetest.WriteFile(t, filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n"))
	if err := os.Chmod(script, 0o750); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(dir, "tree")
	imagetest.WriteFile(t, filepath.Join(tree, "a", "b.txt"), []byte("b"))
	imagetest.WriteFile(t, filepath.Join(tree, "c.txt"), []byte("c"))
	if err := os.Symlink("/etc", filepath.Join(tree, "etc-link")); err != nil {
		t.Fatal(err)
	}
	files, err := UserFiles([]UserPath{
		{Host: prog, Guest: "/work/prog"},
		{Host: script, Guest: "/work/run.sh"},
		{Host: tree, Guest: "/srv/tree", Dir: true},
		{Host: script, Guest: "/srv/tree/c.txt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	byDest := map[string]ExtraFile{}
	for _, f := range files {
		if _, dup := byDest[f.Dest]; dup {
			t.Errorf("two files at %s", f.Dest)
		}
		byDest[f.Dest] = f
	}
	if f := byDest["/work/prog"]; f.Source != prog {
		t.Errorf("the program is not at its guest path: %+v", files)
	}
	if _, ok := byDest["/usr/bin/"+filepath.Base(prog)]; ok {
		t.Error("the program also went to /usr/bin")
	}
	if len(files) < 5 {
		t.Errorf("a dynamic program brought no libraries: %+v", files)
	}
	if f := byDest["/work/run.sh"]; f.Source != script || f.Mode != 0o750 {
		t.Errorf("script: %+v", f)
	}
	if f := byDest["/srv/tree/a/b.txt"]; f.Source != filepath.Join(tree, "a", "b.txt") {
		t.Errorf("tree file: %+v", f)
	}
	if f := byDest["/srv/tree/c.txt"]; f.Source != script {
		t.Errorf("the later --file did not win at /srv/tree/c.txt: %+v", f)
	}
	for d := range byDest {
		if strings.HasPrefix(d, "/srv/tree/etc-link") {
			t.Errorf("a link to a directory was followed: %s", d)
		}
	}
}
