package main

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeBzImage writes the smallest file klab takes for a bzImage, of the
// release version, and returns its path.
func writeBzImage(t *testing.T, version string) string {
	t.Helper()
	b := make([]byte, 4096)
	b[0x1FE], b[0x1FF] = 0x55, 0xAA
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(b[0x206:], 0x020F)
	b[0x211] = 1
	binary.LittleEndian.PutUint16(b[0x236:], 0x7F)
	const at = 0x3C0
	binary.LittleEndian.PutUint16(b[0x20E:], at-0x200)
	copy(b[at:], version+"\x00")
	img := filepath.Join(t.TempDir(), "bzImage")
	if err := os.WriteFile(img, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return img
}

// TestKernelsShowCraftedImage: a bzImage whose version string carries an
// escape sequence is shown without it.
func TestKernelsShowCraftedImage(t *testing.T) {
	img := writeBzImage(t, "7.3.0-evil\x1b]0;pwned\x07\x1b[2J (root@x) #1")
	bin := filepath.Join(t.TempDir(), "klab")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--cache-dir", t.TempDir(), "kernels", "show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("kernels show: %v\n%s", err, out)
	}
	if strings.ContainsAny(string(out), "\x1b\x07") || !strings.Contains(string(out), "7.3.0-evil]0;pwned[2J") {
		t.Errorf("kernels show printed %q", out)
	}
}

func TestShown(t *testing.T) {
	if got := shown("a\x1b[31mb\nc\u202ed\x00"); got != "a[31mb cd" {
		t.Errorf("shown = %q", got)
	}
}
