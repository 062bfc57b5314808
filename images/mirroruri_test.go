package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckMirrorURI: only known schemes, and nothing that could end the
// URI where klab writes it, from every source.
func TestCheckMirrorURI(t *testing.T) {
	for _, ok := range []string{
		"http://mirror.example/debian", "https://mirror.example/debian/", "file:/srv/debian", "file:///srv/debian",
		"mirror+file:/etc/apt/mirrors/debian.list", "mirror+https://mirror.example/list",
	} {
		if _, err := checkMirrorURI(ok, "--debian-mirror"); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{
		"mirror.example/debian", "ftp://mirror.example/debian", "http:/x", "http://", "file:", "javascript:x",
		"http://mirror.example/debian stable main", "http://m.example/d\vx", "http://m.example/d\fx", "http://m.example/d\rx",
		"http://m.example/debian#comment", "http://m.example/[x]", "http://m.example/\"x", "http://m.example/\x1b[2J",
	} {
		if _, err := checkMirrorURI(bad, "--debian-mirror"); err == nil || !strings.Contains(err.Error(), "not a usable mirror URI") {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
	// From the host's sources too.
	root := t.TempDir()
	list := filepath.Join(root, "etc/apt/sources.list")
	os.MkdirAll(filepath.Dir(list), 0o755)
	os.WriteFile(list, []byte("deb http://mirror.example/deb\x1bian bookworm main\n"), 0o644)
	if _, err := DebianMirror(root); err == nil || !strings.Contains(err.Error(), "not a usable mirror URI") {
		t.Errorf("a host source with a control character: %v", err)
	}
}
