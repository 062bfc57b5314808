package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
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
	write("bundles/k-0123456789abcdef/vmlinuz", 32, 30*24*time.Hour)

	code, out, errOut := runKlab(t, "cache", "list", "--cache-dir", dir)
	if code != 0 {
		t.Fatalf("cache list: status %d: %s", code, errOut)
	}
	for _, s := range []string{"KIND", "debian-kernel", "initramfs-base  2", "crash-log", "KiB", "kernels/debian/linux-image-7.3_1", "debian:7.3 (pinned)", "bundle-kernel", "bundles/k-0123456789abcdef"} {
		if !strings.Contains(out, s) {
			t.Errorf("cache list lacks %q:\n%s", s, out)
		}
	}
	code, out, _ = runKlab(t, "cache", "list", "--json", "--cache-dir", dir)
	var l struct {
		Size    int64
		Entries []struct{ Kind, Path string }
	}
	if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil || len(l.Entries) != 6 || l.Size < 100<<10 {
		t.Errorf("cache list --json: status %d, %v: %s", code, err, out)
	}

	code, out, errOut = runKlab(t, "cache", "gc", "--dry-run", "--cache-dir", dir)
	if code != 0 || !strings.Contains(out, "would remove") || !strings.Contains(out, "initramfs/base-old.cpio") ||
		!strings.Contains(out, "crash-1.log") || strings.Contains(out, "initramfs/base-new") || strings.Contains(out, "linux-image") || strings.Contains(out, "bundles") {
		t.Errorf("gc --dry-run: status %d:\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "initramfs/base-old.cpio")); err != nil {
		t.Errorf("gc --dry-run removed: %v", err)
	}
	code, out, _ = runKlab(t, "cache", "gc", "--cache-dir", dir)
	if _, err := os.Stat(filepath.Join(dir, "initramfs/base-old.cpio")); code != 0 || err == nil {
		t.Errorf("gc: status %d, base-old still there:\n%s", code, out)
	}
	// The pinned kernel stays under a bound of 0, and gc says why; the
	// bundle's kernel, which no name refers to, goes.
	code, out, _ = runKlab(t, "cache", "gc", "--max-size", "0", "--cache-dir", dir)
	if _, err := os.Stat(filepath.Join(dir, "kernels/debian/linux-image-7.3_1")); code != 0 || err != nil || !strings.Contains(out, "--all removes it too") {
		t.Errorf("gc --max-size 0: status %d, %v:\n%s", code, err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "bundles/k-0123456789abcdef")); err == nil || !regexp.MustCompile(`removed +bundle-kernel .* bundles/k-0123456789abcdef +least recently used`).MatchString(out) {
		t.Errorf("gc --max-size 0 left the bundle kernel:\n%s", out)
	}

	for _, args := range [][]string{{"--max-size", "lots"}, {"--all"}} {
		code, _, errOut := runKlab(t, append([]string{"cache", "gc", "--cache-dir", dir}, args...)...)
		if code != exitBadInput || errOut == "" {
			t.Errorf("gc %v: status %d, %q", args, code, errOut)
		}
	}
}

// TestCacheGCList: gc --dry-run lists every entry it would remove with its
// kind, size, path, names and why, then a total, and removes nothing; gc
// prints the same list, "removed", as it removes; klab kernels gc is
// klab cache gc --builds --all with its own default bound, and prints the
// same list.
func TestCacheGCList(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	write := func(rel string, kib int, ago time.Duration) {
		t.Helper()
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(strings.Repeat("x", kib<<10)), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, now.Add(-ago), now.Add(-ago))
	}
	write("initramfs/base-old.cpio", 16, 48*time.Hour)
	write("initramfs/base-new.cpio", 16, 0)
	write("crash-1.log", 4, time.Hour)
	write("agent/klab-agent-1111", 8, 9*24*time.Hour)
	write("kernels/build/work/slot1/src/Makefile", 200, 3*time.Hour)
	write("sources/debian/linux-source-7.3/linux.tar.xz", 300, 2*time.Hour)
	for _, d := range []string{"kernels/build/work/slot1", "sources/debian/linux-source-7.3"} {
		os.Chtimes(filepath.Join(dir, d), now.Add(-2*time.Hour), now.Add(-2*time.Hour))
	}
	entry := regexp.MustCompile(`^(would remove|removed|kept) +(\S+) +([0-9.]+ [KMG]?i?B) +(\S+( \([^)]*\))?) +(\S.*)$`)
	// list parses gc's lines: verb, kind, size, path and why by path,
	// and the total line.
	list := func(out string) (map[string][]string, string) {
		t.Helper()
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		got := map[string][]string{}
		for _, l := range lines[:len(lines)-1] {
			m := entry.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("gc line %q: want a verb, kind, size, path and why", l)
				continue
			}
			got[m[4]] = []string{m[1], m[2], m[3], m[6]}
		}
		return got, lines[len(lines)-1]
	}

	code, out, errOut := runKlab(t, "cache", "gc", "--dry-run", "--cache-dir", dir)
	got, total := list(out)
	want := map[string][]string{
		"initramfs/base-old.cpio": {"would remove", "initramfs-base", "16.0 KiB", "superseded by base-new.cpio"},
		"crash-1.log":             {"would remove", "crash-log", "4.0 KiB", "crash log"},
		"agent/klab-agent-1111":   {"would remove", "agent", "8.0 KiB", "unused for 9 days"},
	}
	if code != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("gc --dry-run: status %d, entries %q, want %q\n%s%s", code, got, want, out, errOut)
	}
	if !regexp.MustCompile(`^would remove 3 entries, 28\.0 KiB: the cache at \S+ would go from [0-9.]+ KiB to [0-9.]+ KiB \(no limit\)$`).MatchString(total) {
		t.Errorf("gc --dry-run total %q", total)
	}
	if _, err := os.Stat(filepath.Join(dir, "initramfs/base-old.cpio")); err != nil {
		t.Errorf("gc --dry-run removed: %v", err)
	}

	// kernels gc lists what cache gc --builds --all lists.
	_, kout, _ := runKlab(t, "kernels", "gc", "--max-size", "100K", "--dry-run", "--cache-dir", dir)
	_, cout, _ := runKlab(t, "cache", "gc", "--builds", "--all", "--max-size", "100K", "--dry-run", "--cache-dir", dir)
	got, total = list(kout)
	if kout != cout || len(got) != 2 || got["kernels/build/work/slot1"][0] != "would remove" || got["sources/debian/linux-source-7.3"][1] != "kernel-source" ||
		!strings.HasPrefix(got["kernels/build/work/slot1"][3], "least recently used (last used ") ||
		!strings.Contains(total, "the kernel builds in the cache at ") || !strings.HasSuffix(total, "to 0 B (limit 100.0 KiB)") {
		t.Errorf("kernels gc --dry-run:\n%s\ncache gc --builds --all --dry-run:\n%s", kout, cout)
	}

	code, out, _ = runKlab(t, "cache", "gc", "--cache-dir", dir)
	got, total = list(out)
	for p, w := range want {
		w[0] = "removed"
		if !reflect.DeepEqual(got[p], w) {
			t.Errorf("gc: %s: %q, want %q", p, got[p], w)
		}
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("gc kept %s", p)
		}
	}
	if code != 0 || len(got) != 3 || !regexp.MustCompile(`^removed 3 entries, 28\.0 KiB: the cache at \S+ went from [0-9.]+ KiB to [0-9.]+ KiB \(no limit\)$`).MatchString(total) {
		t.Errorf("gc: status %d:\n%s", code, out)
	}
	code, out, _ = runKlab(t, "cache", "gc", "--cache-dir", dir)
	if code != 0 || !regexp.MustCompile(`^nothing to remove: the cache at \S+ takes [0-9.]+ KiB \(no limit\)\n$`).MatchString(out) {
		t.Errorf("a second gc: status %d: %q", code, out)
	}
}
