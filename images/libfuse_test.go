package images

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"klab/guest/proto"
	"klab/internal/testenv"
)

// TestPassthroughLLFiles builds libfuse's passthrough_ll and checks the
// files that would go into the initramfs.
func TestPassthroughLLFiles(t *testing.T) {
	testenv.RequiresCommand(t, "gcc")
	testenv.RequiresCommand(t, "pkg-config")
	if _, err := os.Stat(filepath.Join(LibfuseExamplesDir, "passthrough_ll.c")); err != nil {
		testenv.Missing(t, "libfuse3-dev's example sources are not installed (apt-get install libfuse3-dev)")
	}
	cache := t.TempDir()
	files, err := PassthroughLLFiles(context.Background(), cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	var bin string
	dests := map[string]bool{}
	for _, f := range files {
		dests[f.Dest] = true
		if f.Dest == proto.LibfusePassthroughLLPath {
			bin = f.Source
		}
	}
	if bin == "" {
		t.Fatalf("no %s among %+v", proto.LibfusePassthroughLLPath, files)
	}
	var fuse3, libc bool
	for d := range dests {
		fuse3 = fuse3 || strings.Contains(d, "libfuse3.so")
		libc = libc || strings.Contains(d, "libc.so")
	}
	if !fuse3 || !libc {
		t.Errorf("closure lacks libfuse3 or libc: %v", dests)
	}
	out, _ := exec.Command(bin, "--help").CombinedOutput()
	if !bytes.Contains(out, []byte("max_threads")) {
		t.Errorf("passthrough_ll --help: %s", out)
	}
	// A second call uses the cache.
	again, err := BuildPassthroughLL(context.Background(), cache, nil)
	if err != nil || again != bin {
		t.Errorf("cached build: %s, %v; want %s", again, err, bin)
	}
}
