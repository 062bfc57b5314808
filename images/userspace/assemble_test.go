package userspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"klab/internal/testenv"
)

// fakeDeb builds a .deb of name in dir with files (path -> content; a
// content starting with "->" makes a link) and, when set, a postinst.
func fakeDeb(t *testing.T, dir, name string, files map[string]string, postinst string) string {
	t.Helper()
	root := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755); err != nil {
		t.Fatal(err)
	}
	control := "Package: " + name + "\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: klab <klab@example.org>\nDescription: test\n"
	if err := os.WriteFile(filepath.Join(root, "DEBIAN/control"), []byte(control), 0o644); err != nil {
		t.Fatal(err)
	}
	if postinst != "" {
		if err := os.WriteFile(filepath.Join(root, "DEBIAN/postinst"), []byte(postinst), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range files {
		host := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, host)
		} else {
			err = os.WriteFile(host, []byte(content), 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, name+"_1.0-1_amd64.deb")
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "-b", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -b: %v\n%s", err, out)
	}
	return deb
}

// TestAssemble unpacks two packages into an image and reads it back with
// debugfs: the files, the alternatives link, /bin/sh, the accounts, no
// control files and no documentation.
func TestAssemble(t *testing.T) {
	for _, c := range []string{"dpkg-deb", "mke2fs", "debugfs"} {
		testenv.RequiresCommand(t, c)
	}
	dir := t.TempDir()
	debs := []string{
		fakeDeb(t, dir, "base", map[string]string{"bin": "->usr/bin", "usr/bin/bash": "#!bash", "usr/share/doc/base/README": "doc"}, ""),
		fakeDeb(t, dir, "gawk", map[string]string{"usr/bin/gawk": "#!gawk"},
			"#!/bin/sh\nupdate-alternatives --install /usr/bin/awk awk /usr/bin/gawk 10 \\\n  --slave /usr/bin/nawk nawk /usr/bin/gawk\n"),
	}
	tree, out := filepath.Join(dir, "tree"), filepath.Join(dir, "out")
	for _, d := range []string{tree, out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := Descriptor{ID: "trixie-0000000000000000", Recipe: Recipe, Suite: "trixie", Format: Format,
		Packages: []Package{{"base", "1.0-1", "amd64"}, {"gawk", "1.0-1", "amd64"}}}
	if err := assemble(context.Background(), debs, tree, out, d, &Options{}); err != nil {
		t.Fatal(err)
	}
	img, err := loadEntry(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Descriptor; got.Files == 0 || got.TreeBytes == 0 || len(got.Users) != 3 || got.Built.IsZero() {
		t.Errorf("descriptor %+v", got)
	}
	cat := func(p string) string {
		b, err := exec.Command("debugfs", "-R", "cat "+p, img.Path).Output()
		if err != nil {
			t.Fatalf("debugfs cat %s: %v", p, err)
		}
		return string(b)
	}
	ls := func(p string) string {
		b, err := exec.Command("debugfs", "-R", "ls -l "+p, img.Path).Output()
		if err != nil {
			t.Fatalf("debugfs ls %s: %v", p, err)
		}
		return string(b)
	}
	if got := cat("/usr/bin/gawk"); got != "#!gawk" {
		t.Errorf("gawk holds %q", got)
	}
	if got := cat("/etc/passwd"); !strings.Contains(got, "\nfsgqa:x:1000:1000:") {
		t.Errorf("passwd:\n%s", got)
	}
	bin := ls("/usr/bin")
	for _, name := range []string{"awk", "nawk", "sh", "bash", "gawk"} {
		if !strings.Contains(bin, " "+name+"\n") && !strings.Contains(bin, " "+name+" ") {
			t.Errorf("/usr/bin lacks %s:\n%s", name, bin)
		}
	}
	root := ls("/")
	if strings.Contains(root, "DEBIAN") {
		t.Errorf("control files left in the root:\n%s", root)
	}
	for _, m := range []string{"proc", "tmp", "run", "mnt"} {
		if !strings.Contains(root, " "+m) {
			t.Errorf("the root lacks %s:\n%s", m, root)
		}
	}
	if share := ls("/usr/share"); strings.Contains(share, " doc") {
		t.Errorf("documentation kept:\n%s", share)
	}
}
