package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runKlab runs klab with args and returns its status, standard output
// and standard error.
func runKlab(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	g := &globalOptions{}
	root := newRootCommandWith(g)
	var stdout, stderr strings.Builder
	root.SetOut(&stdout)
	code := runRoot(root, g, args, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestCacheCommands: klab cache list shows the cache by kind and by
// entry, in binary units; klab cache gc --dry-run says what would go and
// removes nothing; gc removes it; bad flags are bad input.
func TestCacheCommands(t *testing.T) {
	dir := t.TempDir()
	write := func(rel string, kib int, ago time.Duration) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(strings.Repeat("x", kib<<10)), 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-ago)
		os.Chtimes(p, at, at)
	}
	write("kernels/debian/linux-image-7.3_1/vmlinuz", 64, time.Hour)
	write("kernels/debian/aliases.json", 0, time.Hour)
	os.WriteFile(filepath.Join(dir, "kernels/debian/aliases.json"), []byte(`{"7.3/cloud-amd64": "linux-image-7.3_1"}`), 0o644)
	write("initramfs/base-old.cpio", 16, 48*time.Hour)
	write("initramfs/base-new.cpio", 16, 0)
	write("crash-1.log", 4, time.Hour)

	code, out, errOut := runKlab(t, "cache", "list", "--cache-dir", dir)
	if code != 0 {
		t.Fatalf("cache list: status %d: %s", code, errOut)
	}
	for _, s := range []string{"KIND", "debian-kernel", "initramfs-base  2", "crash-log", "KiB", "kernels/debian/linux-image-7.3_1", "debian:7.3 (pinned)"} {
		if !strings.Contains(out, s) {
			t.Errorf("cache list lacks %q:\n%s", s, out)
		}
	}
	code, out, _ = runKlab(t, "cache", "list", "--json", "--cache-dir", dir)
	var l struct {
		Size    int64
		Entries []struct{ Kind, Path string }
	}
	if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil || len(l.Entries) != 5 || l.Size < 100<<10 {
		t.Errorf("cache list --json: status %d, %v: %s", code, err, out)
	}

	code, out, errOut = runKlab(t, "cache", "gc", "--dry-run", "--cache-dir", dir)
	if code != 0 || !strings.Contains(out, "would remove") || !strings.Contains(out, "initramfs/base-old.cpio") ||
		!strings.Contains(out, "crash-1.log") || strings.Contains(out, "initramfs/base-new") || strings.Contains(out, "linux-image") {
		t.Errorf("gc --dry-run: status %d:\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "initramfs/base-old.cpio")); err != nil {
		t.Errorf("gc --dry-run removed: %v", err)
	}
	code, out, _ = runKlab(t, "cache", "gc", "--cache-dir", dir)
	if _, err := os.Stat(filepath.Join(dir, "initramfs/base-old.cpio")); code != 0 || err == nil {
		t.Errorf("gc: status %d, base-old still there:\n%s", code, out)
	}
	// The pinned kernel stays under a bound of 0, and gc says why.
	code, out, _ = runKlab(t, "cache", "gc", "--max-size", "0", "--cache-dir", dir)
	if _, err := os.Stat(filepath.Join(dir, "kernels/debian/linux-image-7.3_1")); code != 0 || err != nil || !strings.Contains(out, "--all removes it too") {
		t.Errorf("gc --max-size 0: status %d, %v:\n%s", code, err, out)
	}

	for _, args := range [][]string{{"--max-size", "lots"}, {"--all"}} {
		code, _, errOut := runKlab(t, append([]string{"cache", "gc", "--cache-dir", dir}, args...)...)
		if code != exitBadInput || errOut == "" {
			t.Errorf("gc %v: status %d, %q", args, code, errOut)
		}
	}
}
