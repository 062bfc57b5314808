package paths

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoHomeNoTmp: without $HOME the directories come from the passwd
// entry, never from a shared directory such as /tmp.
func TestNoHomeNoTmp(t *testing.T) {
	for _, k := range []string{"KLAB_CACHE_DIR", "XDG_CACHE_HOME", "KLAB_RUNS_DIR", "XDG_DATA_HOME"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", "")
	c, r := CacheDir(), RunsDir()
	for _, d := range []string{c, r} {
		if strings.HasPrefix(d, os.TempDir()) {
			t.Errorf("%q is under the shared %s", d, os.TempDir())
		}
	}
	if u, err := user.Current(); err == nil && u.HomeDir != "" && u.HomeDir != "/" {
		if c != filepath.Join(u.HomeDir, ".cache", "klab") || r != filepath.Join(u.HomeDir, ".local", "share", "klab", "runs") {
			t.Errorf("without $HOME: %q, %q, want under the passwd home %s", c, r, u.HomeDir)
		}
	} else if c != "" || r != "" {
		t.Errorf("no home at all: %q, %q, want none", c, r)
	}
	t.Setenv("HOME", "/home/x")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if c := CacheDir(); c != "/xdg/klab" {
		t.Errorf("XDG_CACHE_HOME: %q", c)
	}
	t.Setenv("KLAB_RUNS_DIR", "/r")
	if r := RunsDir(); r != "/r" {
		t.Errorf("KLAB_RUNS_DIR: %q", r)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	if err := Check("cache directory", filepath.Join(dir, "new"), "--cache-dir", "KLAB_CACHE_DIR"); err != nil {
		t.Errorf("a directory still to make: %v", err)
	}
	if err := Check("cache directory", dir, "--cache-dir", "KLAB_CACHE_DIR"); err != nil {
		t.Errorf("the user's own directory: %v", err)
	}
	if err := Check("cache directory", "", "--cache-dir", "KLAB_CACHE_DIR"); !errors.Is(err, ErrNoDir) || !strings.Contains(err.Error(), "set KLAB_CACHE_DIR or give --cache-dir") {
		t.Errorf("no directory: %v", err)
	}
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := Check("runs directory", shared, "--runs-dir", "KLAB_RUNS_DIR"); err == nil || !strings.Contains(err.Error(), "writable by every user (mode 0777)") {
		t.Errorf("a world-writable directory: %v", err)
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	if err := Check("runs directory", file, "--runs-dir", "KLAB_RUNS_DIR"); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a file: %v", err)
	}
	// Another user's directory: only root can make one.
	if os.Geteuid() == 0 {
		planted := filepath.Join(dir, "planted")
		os.Mkdir(planted, 0o755)
		if err := os.Chown(planted, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := Check("cache directory", planted, "--cache-dir", "KLAB_CACHE_DIR"); err == nil || !strings.Contains(err.Error(), "belongs to user 65534") {
			t.Errorf("another user's directory: %v", err)
		}
		// A symbolic link to it is judged by where it leads.
		link := filepath.Join(dir, "link")
		os.Symlink(planted, link)
		if err := Check("cache directory", link, "--cache-dir", "KLAB_CACHE_DIR"); err == nil {
			t.Errorf("a link to another user's directory passed")
		}
	}
}
