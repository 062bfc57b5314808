package images

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"klab/guest/proto"
	"klab/images/apt"
	"klab/images/debian"
	"klab/images/internal/imagetest"
	"klab/images/keyed"
)

// TestPassthroughHPFilesCached puts a cached passthrough_hp (here a copy
// of a host program) into the initramfs files: the binary at
// proto.LibfusePassthroughHPPath, with its libraries, and no build.
func TestPassthroughHPFilesCached(t *testing.T) {
	host, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	hdir := filepath.Join(cache, "libfuse-hp")
	dir := filepath.Join(hdir, "fuse3_3.18.3-1")
	imagetest.WriteFile(t, filepath.Join(dir, "build.json"), []byte(`{"package":"fuse3","version":"3.18.3-1","suite":"sid","binary":"passthrough_hp"}`))
	imagetest.WriteFile(t, filepath.Join(dir, "passthrough_hp"), prog)
	if err := os.Chmod(filepath.Join(dir, "passthrough_hp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := keyed.AddAlias(hdir, "sid", filepath.Base(dir)); err != nil {
		t.Fatal(err)
	}
	t.Setenv(apt.MirrorEnv, "")
	files, err := PassthroughHPFiles(t.Context(), PassthroughHPOptions{DebianOptions: debian.Options{CacheDir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	var bin, libc bool
	for _, f := range files {
		switch {
		case f.Dest == proto.LibfusePassthroughHPPath:
			bin = f.Source == filepath.Join(dir, "passthrough_hp")
		case strings.Contains(f.Dest, "libc.so"):
			libc = true
		}
	}
	if !bin || !libc {
		t.Errorf("want the cached binary at %s and libc among %+v", proto.LibfusePassthroughHPPath, files)
	}
}

// TestPassthroughHPFilesMissingTools: without the build tools the error
// says what to install.
func TestPassthroughHPFilesMissingTools(t *testing.T) {
	t.Setenv(apt.MirrorEnv, "")
	t.Setenv("PATH", t.TempDir())
	_, err := PassthroughHPFiles(t.Context(), PassthroughHPOptions{DebianOptions: debian.Options{CacheDir: t.TempDir()}})
	if err == nil {
		t.Fatal("no error without build tools")
	}
	for _, w := range []string{proto.FUSELibfusePassthroughHP, "apt-get install meson ninja-build g++ pkg-config liburing-dev libnuma-dev"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
