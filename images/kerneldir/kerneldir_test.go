package kerneldir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/images/internal/imagetest"
	"klab/results"
)

// TestCacheHitChecked: kernel.json records the image's size, and a cached
// image of another size (cut by a crash, replaced) is not a hit.
func TestCacheHitChecked(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vmlinuz"), imagetest.BzImage("7.3.0 (x@y) #1"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &results.Kernel{Name: "debian:7.3.0", Source: "debian", Image: filepath.Join(dir, "vmlinuz")}
	if err := Write(dir, k); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil || got.ImageSize != 4096 {
		t.Fatalf("hit: %+v, %v", got, err)
	}
	if err := os.Truncate(filepath.Join(dir, "vmlinuz"), 1000); err != nil {
		t.Fatal(err)
	}
	var de *DamagedError
	if _, err := Load(dir); !errors.As(err, &de) || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a cut image was a hit: %v", err)
	}
}

// TestSameSizeCorruption: an image changed in place, its size kept, no
// longer hashes to the kernel's ID and is no cache hit; nor is a changed
// config.
func TestSameSizeCorruption(t *testing.T) {
	dir := t.TempDir()
	img, cfg := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "config")
	if err := os.WriteFile(img, imagetest.BzImage("7.3.0 (x@y) #1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("CONFIG_FUSE_FS=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := ID(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, &results.Kernel{Name: "debian:7.3.0", ID: id, Source: "debian"}); err != nil {
		t.Fatal(err)
	}
	if k, err := Load(dir); err != nil || k.ID != id || k.Config != cfg {
		t.Fatalf("intact: %+v, %v", k, err)
	}
	flip := func(p string, at int64) {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		f.ReadAt(b, at)
		b[0] ^= 0xff
		f.WriteAt(b, at)
		f.Close()
	}
	flip(img, 2000)
	var de *DamagedError
	_, err = Load(dir)
	if !errors.As(err, &de) || de.Dir != dir || de.Kernel.ID != id || !strings.Contains(err.Error(), "hash to k-") {
		t.Errorf("a same-size corruption: %v", err)
	}
	flip(img, 2000)
	if _, err := Load(dir); err != nil {
		t.Fatalf("restored: %v", err)
	}
	flip(cfg, 3)
	if _, err := Load(dir); !errors.As(err, &de) {
		t.Errorf("a changed config: %v", err)
	}
}

// BenchmarkLoad: Load of a kernel directory with a 14 MiB image (the size
// of Debian's cloud kernels), hash check included.
func BenchmarkLoad(b *testing.B) {
	dir := b.TempDir()
	img := make([]byte, 14<<20)
	for i := range img {
		img[i] = byte(i * 7)
	}
	copy(img, imagetest.BzImage("7.3.0 (x@y) #1"))
	p := filepath.Join(dir, "vmlinuz")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		b.Fatal(err)
	}
	id, err := ID(p, "")
	if err != nil {
		b.Fatal(err)
	}
	if err := Write(dir, &results.Kernel{ID: id}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(img)))
	b.ResetTimer()
	for range b.N {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}
