package fstests

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"klab/internal/testenv"
)

// TestDiskMadeOnce makes the disk of a (fake) build, asks again, and
// checks the second answer is the same file, not made again.
func TestDiskMadeOnce(t *testing.T) {
	requiresCompiler(t)
	testenv.RequiresCommand(t, "mke2fs")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	writeTree(t, src, minimal)
	ctx := context.Background()
	b, err := Build(ctx, src, Options{CacheDir: filepath.Join(dir, "cache"), steps: fakeSteps(filepath.Join(dir, "counter"), false)})
	if err != nil {
		t.Fatal(err)
	}
	img, err := b.Disk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.Disk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := os.Stat(again)
	if err != nil || again != img || !os.SameFile(first, second) || !second.ModTime().Equal(first.ModTime()) {
		t.Fatalf("second Disk = %s (%v), want the first image %s unchanged", again, err, img)
	}
	if filepath.Dir(img) != filepath.Dir(b.Dir) {
		t.Errorf("image %s is not in the entry of %s", img, b.Dir)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(img), ".*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	args := DiskQEMUArgs("/c/a,b.ext4")
	if !slices.Equal(args, []string{"-drive", "file=/c/a,,b.ext4,if=none,id=klabfst,format=raw,readonly=on",
		"-device", "virtio-blk-pci,drive=klabfst,serial=klab-fstests"}) {
		t.Errorf("DiskQEMUArgs = %q", args)
	}
}
