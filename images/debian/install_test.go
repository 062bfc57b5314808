package debian

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/images/apt"
	"klab/images/internal/imagetest"
)

func TestLayoutKernelMerge(t *testing.T) {
	root, out := t.TempDir(), t.TempDir()
	rel := "7.3.4+deb13-cloud-amd64"
	imagetest.WriteFile(t, filepath.Join(root, "usr/lib/modules", rel, "vmlinuz"), imagetest.BzImage(rel))
	imagetest.WriteFile(t, filepath.Join(root, "usr/lib/modules", rel, "kernel/a.ko"), imagetest.Module())
	imagetest.WriteFile(t, filepath.Join(root, "lib/modules", rel, "kernel/b.ko"), imagetest.Module())
	imagetest.WriteFile(t, filepath.Join(root, "lib/modules", rel, "modules.builtin"), []byte("kernel/fs/fuse/fuse.ko\n"))
	if err := layoutKernel(root, out, rel); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"vmlinuz", "modules/kernel/a.ko", "modules/kernel/b.ko", "modules/modules.builtin"} {
		if _, err := os.Stat(filepath.Join(out, p)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "modules", "vmlinuz")); err == nil {
		t.Error("vmlinuz left in modules/")
	}
	if err := layoutKernel(t.TempDir(), t.TempDir(), rel); err == nil || !strings.Contains(err.Error(), "no kernel image") {
		t.Errorf("empty tree: err = %v", err)
	}
}

func TestFetchDebianNoMirror(t *testing.T) {
	// No cache entry and no mirror: the error says how to configure one.
	// The apt sources are a fake root's, which name only archives that
	// are not Debian's (the host's own may name a mirror).
	t.Setenv(apt.MirrorEnv, "")
	for name, files := range map[string]map[string]string{
		"no sources": nil,
		"no Debian suite": {
			"sources.list":                "deb http://ubuntu.example/ubuntu jammy main\n",
			"sources.list.d/node.sources": "Types: deb\nURIs: http://node.example/node\nSuites: nodistro\nComponents: main\n",
			"sources.list.d/sec.list":     "deb http://mirror.example/debian-security bookworm-security main\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range files {
				imagetest.WriteFile(t, filepath.Join(root, "etc", "apt", name), []byte(content))
			}
			_, err := Fetch(context.Background(), "debian:7.3", Options{CacheDir: t.TempDir(), AptRoot: root, aptStage: t.TempDir()})
			if !errors.Is(err, apt.ErrNoMirror) || !strings.Contains(err.Error(), apt.MirrorEnv) {
				t.Errorf("err = %v", err)
			}
		})
	}
	// The same fake root with a Debian entry does name a mirror: the
	// error above comes from the sources, not from a root that is never
	// read.
	root := t.TempDir()
	imagetest.WriteFile(t, filepath.Join(root, "etc/apt/sources.list.d/debian.sources"), []byte("Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\nComponents: main\n"))
	if m, err := (&Options{AptRoot: root}).mirror(); err != nil || m != "http://mirror.example/debian" {
		t.Errorf("mirror from the fake root = %q, %v", m, err)
	}
}
