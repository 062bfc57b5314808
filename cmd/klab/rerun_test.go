package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"klab/experiments"
	"klab/images/debian"
	"klab/results"
	"klab/results/bundle"
)

// TestUseBundledKernels: a manifest kernel that a bundle placed in the
// cache is rerun as bundle:<id> under the original run's label, even when
// its image file is there too; a kernel that no bundle placed keeps its
// reference.
func TestUseBundledKernels(t *testing.T) {
	g := &globalOptions{cacheDir: t.TempDir(), runsDir: t.TempDir()}
	placed := filepath.Join(bundlesDir(g), "k-00000000000000aa")
	if err := os.MkdirAll(placed, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(placed, bundle.KernelInfoFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "bzImage")
	m := &experiments.Manifest{Kernels: []experiments.ManifestKernel{
		{Ref: "debian:7.3", Kernel: results.Kernel{ID: "k-00000000000000aa"}},
		{Ref: "build:fix", Kernel: results.Kernel{ID: "k-00000000000000bb"}},
		{Ref: "/boot/vmlinuz", Kernel: results.Kernel{ID: "k-00000000000000aa", Image: img}},
	}}
	kernels := []string{"debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1", "build:fix", img}
	labels := useBundledKernels(g, m, kernels)
	if want := []string{"bundle:k-00000000000000aa", "build:fix", "bundle:k-00000000000000aa"}; !slices.Equal(kernels, want) {
		t.Errorf("kernels %q, want %q", kernels, want)
	}
	if want := []string{"debian:7.3", "", "/boot/vmlinuz"}; !slices.Equal(labels, want) {
		t.Errorf("labels %q, want %q", labels, want)
	}
	// Nothing bundled: no labels, no change.
	kernels = []string{"build:fix"}
	if labels := useBundledKernels(g, &experiments.Manifest{Kernels: m.Kernels[1:2]}, kernels); labels != nil || kernels[0] != "build:fix" {
		t.Errorf("labels %q, kernels %q", labels, kernels)
	}
}

// TestCannotRepeat: a pinned Debian kernel that cannot be had makes the
// rerun exit 2; other errors keep theirs.
func TestCannotRepeat(t *testing.T) {
	pinned := fmt.Errorf("kernel A: %w", &debian.PinnedUnavailableError{Package: "linux-image-7.3.4+deb13-cloud-amd64", Version: "7.3.4-1~bpo13+1", Err: errors.New("gone")})
	var ee *exitError
	if err := cannotRepeat(pinned); !errors.As(err, &ee) || ee.code != exitBadInput {
		t.Errorf("pinned: %v, want exit %d", err, exitBadInput)
	}
	other := errors.New("qemu died")
	if err := cannotRepeat(other); err != other {
		t.Errorf("other: %v", err)
	}
}
