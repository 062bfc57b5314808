package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/images/debian"
	"klab/images/internal/imagetest"
	"klab/images/kerneldir"
	"klab/results"
)

func TestResolveKernelLocal(t *testing.T) {
	ctx := context.Background()
	tree := t.TempDir()
	image := imagetest.WriteFile(t, filepath.Join(tree, "arch/x86/boot/bzImage"), imagetest.BzImage("7.3.0-rc1-klab #3 SMP"))
	imagetest.WriteFile(t, filepath.Join(tree, ".config"), []byte("CONFIG_FUSE_FS=y\n"))

	k, err := ResolveKernel(ctx, image, ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantID, _ := kerneldir.ID(image, filepath.Join(tree, ".config"))
	if k.Source != "local" || k.Name != image || k.Version != "7.3.0-rc1-klab" || k.Config != filepath.Join(tree, ".config") ||
		k.ID != wantID || k.Modules != "" || k.Image != image {
		t.Errorf("tree kernel = %+v", k)
	}

	// An explicit config wins and changes the ID.
	other := imagetest.WriteFile(t, filepath.Join(t.TempDir(), "config"), []byte("CONFIG_FUSE_FS=m\n"))
	k2, err := ResolveKernel(ctx, image, ResolveOptions{Config: other})
	if err != nil {
		t.Fatal(err)
	}
	if k2.Config != other || k2.ID == k.ID {
		t.Errorf("explicit config: %+v", k2)
	}

	// A bare file name in the working directory, with no config.
	dir := t.TempDir()
	imagetest.WriteFile(t, filepath.Join(dir, "vmlinuz"), imagetest.BzImage("6.1.0-50-cloud-amd64 #1"))
	t.Chdir(dir)
	k3, err := ResolveKernel(ctx, "vmlinuz", ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantID, _ = kerneldir.ID(filepath.Join(dir, "vmlinuz"), "")
	if k3.Name != "vmlinuz" || k3.Image != filepath.Join(dir, "vmlinuz") || k3.Config != "" || k3.ID != wantID {
		t.Errorf("bare file kernel = %+v", k3)
	}

	// Not a bzImage.
	imagetest.WriteFile(t, filepath.Join(dir, "foo"), []byte("hello"))
	if _, err := ResolveKernel(ctx, "./foo", ResolveOptions{}); err == nil || !strings.Contains(err.Error(), "./foo: not a bzImage") {
		t.Errorf("./foo: err = %v", err)
	}
	if _, err := ResolveKernel(ctx, "./missing/bzImage", ResolveOptions{}); err == nil {
		t.Error("missing path: no error")
	}
	if _, err := ResolveKernel(ctx, image, ResolveOptions{Config: filepath.Join(dir, "nope")}); err == nil {
		t.Error("missing config: no error")
	}
}

func TestResolveKernelBadRefs(t *testing.T) {
	ctx := context.Background()
	t.Chdir(t.TempDir())
	_, err := ResolveKernel(ctx, "foo", ResolveOptions{})
	if err == nil || !strings.Contains(err.Error(), `unknown kernel "foo": want debian:<series> (6.1, 6.12, 7.2, 7.3), debian:<exact package version>, build:<name>`) ||
		!strings.Contains(err.Error(), "tree:<dir>") || !strings.Contains(err.Error(), "path of a bzImage") {
		t.Errorf("foo: err = %v", err)
	}
	noBuilds := ResolveOptions{Debian: debian.Options{CacheDir: t.TempDir()}}
	if _, err := ResolveKernel(ctx, "build:abc123", noBuilds); err == nil || !strings.Contains(err.Error(), "no kernels built yet") {
		t.Errorf("build: err = %v", err)
	}
	if _, err := ResolveKernel(ctx, "debian:latest", ResolveOptions{}); err == nil || !strings.Contains(err.Error(), "debian:7.3") {
		t.Errorf("debian:latest: err = %v", err)
	}
}

// TestCheckKernelRef: a reference that names nothing usable is refused
// without a download, with ResolveKernel's own error; one that may
// resolve passes.
func TestCheckKernelRef(t *testing.T) {
	tree := t.TempDir()
	image := imagetest.WriteFile(t, filepath.Join(tree, "arch/x86/boot/bzImage"), imagetest.BzImage("7.3.0 #1"))
	notImage := imagetest.WriteFile(t, filepath.Join(t.TempDir(), "notakernel"), []byte("#!/bin/sh\n"))
	o := ResolveOptions{Debian: debian.Options{CacheDir: t.TempDir()}}
	for _, ref := range []string{"debian:7.3", "debian:7.3.4+deb13-cloud-amd64", image, tree, "tree:" + tree} {
		if err := CheckKernelRef(ref, o); err != nil {
			t.Errorf("CheckKernelRef(%q) = %v, want nil", ref, err)
		}
	}
	for ref, want := range map[string]string{
		"fedora:40":          `unknown kernel "fedora:40": want debian:<series>`,
		"debian:seven":       `bad Debian kernel "debian:seven"`,
		"build:nosuch":       "no kernels built yet",
		"tree:/no/such/tree": "kernel tree /no/such/tree: not a directory",
		"./no/such/bzImage":  "no such file",
		notImage:             "not a bzImage",
	} {
		err := CheckKernelRef(ref, o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckKernelRef(%q) = %v, want %q in it", ref, err, want)
		}
		if _, rerr := ResolveKernel(context.Background(), ref, o); rerr == nil || rerr.Error() != err.Error() {
			t.Errorf("ResolveKernel(%q) = %v; CheckKernelRef said %v", ref, rerr, err)
		}
	}
	o.Debian.Flavour = "nope"
	if err := CheckKernelRef("debian:7.3", o); err == nil || !strings.Contains(err.Error(), "flavour") {
		t.Errorf("a bad flavour: %v", err)
	}
}

// TestBundledKernel: bundle:<id> loads the kernel a bundle placed under
// <cache>/bundles/<id>/, and refuses one whose files no longer hash to
// its id, one that is not there, and an id of another form.
func TestBundledKernel(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "bundles", "x")
	image := imagetest.WriteFile(t, filepath.Join(dir, "vmlinuz"), imagetest.BzImage("7.3.4 #1"))
	imagetest.WriteFile(t, filepath.Join(dir, "config"), []byte("CONFIG_FUSE_FS=y\n"))
	id, err := kerneldir.ID(image, filepath.Join(dir, "config"))
	if err != nil {
		t.Fatal(err)
	}
	k := &results.Kernel{ID: id, Source: "debian", Version: "7.3.4", Name: "debian:7.3"}
	if err := kerneldir.Write(dir, k); err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(cache, "bundles", id)
	if err := os.Rename(dir, final); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := ResolveKernel(ctx, "bundle:"+id, ResolveOptions{Debian: debian.Options{CacheDir: cache}})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || got.Name != "bundle:"+id || got.Source != "debian" || got.Image != filepath.Join(final, "vmlinuz") {
		t.Errorf("resolved %+v", got)
	}
	if err := CheckKernelRef("bundle:"+id, ResolveOptions{Debian: debian.Options{CacheDir: cache}}); err != nil {
		t.Errorf("CheckKernelRef: %v", err)
	}
	for ref, want := range map[string]string{
		"bundle:k-0123456789abcdef": "klab runs unpack FILE places",
		"bundle:../x":               "want bundle:<kernel ID>",
	} {
		if _, err := ResolveKernel(ctx, ref, ResolveOptions{Debian: debian.Options{CacheDir: cache}}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", ref, err, want)
		}
	}
	// The same size, another byte: damaged.
	data, err := os.ReadFile(filepath.Join(final, "config"))
	if err != nil {
		t.Fatal(err)
	}
	data[0] ^= 1
	if err := os.WriteFile(filepath.Join(final, "config"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ResolveKernel(ctx, "bundle:"+id, ResolveOptions{Debian: debian.Options{CacheDir: cache}}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a changed config: %v, want damaged", err)
	}
}
