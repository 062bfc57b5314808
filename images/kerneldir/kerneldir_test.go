package kerneldir

import (
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
	k := &results.Kernel{Name: "debian:7.3.0", ID: "k-1", Source: "debian", Image: filepath.Join(dir, "vmlinuz")}
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
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("a cut image was a hit: %v", err)
	}
}
