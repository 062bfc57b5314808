package cache

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain doubles as the helper process that holds a lock for
// TestGCKeepsLockedEntries: with KLAB_TEST_HOLD_LOCK set it takes that
// flock, says "locked", and holds it until its standard input closes.
func TestMain(m *testing.M) {
	if p := os.Getenv("KLAB_TEST_HOLD_LOCK"); p != "" {
		for _, lock := range strings.Split(p, string(os.PathListSeparator)) {
			f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				fmt.Println(err)
				os.Exit(1)
			}
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
				fmt.Println(err)
				os.Exit(1)
			}
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeCache is a cache tree with one entry of every kind (and a few of
// some), its times set relative to now.
type fakeCache struct {
	dir     string
	outside string // a directory outside the cache that links point to
	now     time.Time
}

func (f *fakeCache) p(rel string) string { return filepath.Join(f.dir, rel) }

// file writes rel with n KiB, last used ago before now (a negative ago
// is in the future).
func (f *fakeCache) file(t *testing.T, rel string, kib int, ago time.Duration) {
	t.Helper()
	p := f.p(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Repeat("x", kib<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	f.age(t, rel, ago)
}

func (f *fakeCache) age(t *testing.T, rel string, ago time.Duration) {
	t.Helper()
	at := f.now.Add(-ago)
	if err := os.Chtimes(f.p(rel), at, at); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeCache) link(t *testing.T, rel, target string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(f.p(rel)), 0o755)
	if err := os.Symlink(target, f.p(rel)); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeCache) exists(rel string) bool {
	_, err := os.Lstat(f.p(rel))
	return err == nil
}

const day = 24 * time.Hour

func newFakeCache(t *testing.T) *fakeCache {
	t.Helper()
	f := &fakeCache{dir: filepath.Join(t.TempDir(), "klab"), outside: t.TempDir(), now: time.Now()}
	if err := os.WriteFile(filepath.Join(f.outside, "precious"), []byte("not the cache's"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Debian kernels: one named by aliases, one that no alias names, a
	// fetch's leftover, and a link out of the cache.
	f.file(t, "kernels/debian/linux-image-7.3_1/vmlinuz", 64, 3*day)
	f.age(t, "kernels/debian/linux-image-7.3_1", 3*day)
	f.file(t, "kernels/debian/linux-image-6.1_1/vmlinuz", 64, 30*day)
	f.age(t, "kernels/debian/linux-image-6.1_1", 30*day)
	f.file(t, "kernels/debian/aliases.json", 0, day)
	os.WriteFile(f.p("kernels/debian/aliases.json"), []byte(`{"7.3/cloud-amd64": "linux-image-7.3_1", "7.3.4+deb13-cloud-amd64": "linux-image-7.3_1"}`), 0o644)
	f.file(t, "kernels/debian/.lock", 0, day)
	f.file(t, "kernels/debian/.tmp-123/vmlinuz", 16, 0)
	f.link(t, "kernels/debian/linux-image-evil_1", f.outside)
	// Built kernels: a named one, an unnamed one, a work tree.
	f.file(t, "kernels/build/results/r1/vmlinuz", 32, 2*day)
	f.age(t, "kernels/build/results/r1", 2*day)
	f.file(t, "kernels/build/results/r2/vmlinuz", 32, 20*day)
	f.age(t, "kernels/build/results/r2", 20*day)
	f.link(t, "kernels/build/names/fix", "../results/r1")
	f.link(t, "kernels/build/inputs/i2", "../results/r2")
	f.file(t, "kernels/build/estimates.json", 0, day)
	f.file(t, "kernels/build/work/slot1/out/vmlinux", 128, 10*day)
	f.file(t, "kernels/build/work/slot1/.lock", 0, 10*day)
	f.age(t, "kernels/build/work/slot1", 10*day)
	// Kernels that klab runs unpack placed: one, an unpack that died, one
	// in progress, and a file klab does not know.
	f.file(t, "bundles/k-0123456789abcdef/vmlinuz", 32, 6*day)
	f.file(t, "bundles/k-0123456789abcdef/kernel.json", 0, 6*day)
	f.age(t, "bundles/k-0123456789abcdef", 6*day)
	f.file(t, "bundles/.k-fedcba9876543210.tmp-42/vmlinuz", 32, 2*time.Hour)
	f.age(t, "bundles/.k-fedcba9876543210.tmp-42", 2*time.Hour)
	f.file(t, "bundles/.k-1111111111111111.tmp-43/vmlinuz", 32, 0)
	f.file(t, "bundles/README", 0, day)
	f.file(t, "bundles/initramfs/"+strings.Repeat("ab", 32)+".cpio", 64, day)
	f.file(t, "bundles/initramfs/."+strings.Repeat("cd", 32)+".cpio.tmp-7", 64, 2*time.Hour)
	// Sources, apt, libfuse.
	f.file(t, "sources/debian/linux-source-7.3_1/linux-source-7.3.tar.xz", 96, 5*day)
	f.age(t, "sources/debian/linux-source-7.3_1", 5*day)
	os.WriteFile(f.p("sources/debian/aliases.json"), []byte(`{"7.3": "linux-source-7.3_1"}`), 0o644)
	f.file(t, "apt/lists/mirror_dists_sid_Packages", 48, day)
	f.file(t, "apt/.lock", 0, day)
	f.age(t, "apt", day)
	f.file(t, "libfuse/0123abcd/passthrough_ll", 8, 40*day)
	f.age(t, "libfuse/0123abcd", 40*day)
	f.file(t, "libfuse-hp/fuse3_3.18.3-1/passthrough_hp", 8, 4*day)
	f.age(t, "libfuse-hp/fuse3_3.18.3-1", 4*day)
	os.WriteFile(f.p("libfuse-hp/aliases.json"), []byte(`{"sid": "fuse3_3.18.3-1"}`), 0o644)
	f.file(t, "userspace/trixie-0123456789abcdef/rootfs.ext4", 64, 3*day)
	f.age(t, "userspace/trixie-0123456789abcdef", 3*day)
	f.file(t, "fstests/0123456789abcdef/tree/check", 8, 2*day)
	f.age(t, "fstests/0123456789abcdef", 2*day)
	f.file(t, "fstests/logs/fedcba9876543210.log", 8, 2*day)
	// Initramfs parts. The newest base and agent were made now (their
	// birth time); klab-new was used after that, klab-old before.
	f.file(t, "initramfs/base-old.cpio", 24, 2*day)
	f.file(t, "initramfs/base-new.cpio", 24, 0)
	f.file(t, "initramfs/klab-new.cpio", 40, -time.Minute)
	f.file(t, "initramfs/klab-old.cpio", 40, time.Hour)
	f.file(t, "initramfs/.klab-1234.cpio", 40, 2*time.Hour)    // an assembly that died
	f.file(t, "initramfs/.base-5678/base.cpio", 24, 0)         // a base being built now
	f.file(t, "agent/klab-agent-old", 16, 3*day)               //
	f.file(t, "agent/klab-agent-new", 16, 0)                   //
	f.file(t, "agent/.klab-agent-new.tmp-99", 16, 2*time.Hour) // a build that died
	// Loose files at the top.
	f.file(t, "crash-42.log", 4, day)
	f.file(t, "accel-verdict.json", 0, day)
	f.file(t, "notes.txt", 4, 90*day)
	f.link(t, "outside", f.outside)
	return f
}

func kindOf(l *Listing, path string) (Entry, bool) {
	for _, e := range l.Entries {
		if e.Path == path {
			return e, true
		}
	}
	return Entry{}, false
}

func TestList(t *testing.T) {
	f := newFakeCache(t)
	l, err := List(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]Kind{
		"kernels/debian/linux-image-7.3_1":                               DebianKernel,
		"kernels/debian/linux-image-6.1_1":                               DebianKernel,
		"kernels/debian/linux-image-evil_1":                              Other, // a link: never followed
		"kernels/debian/.tmp-123":                                        Temporary,
		"kernels/debian/aliases.json":                                    Index,
		"kernels/build/results/r1":                                       BuiltKernel,
		"kernels/build/results/r2":                                       BuiltKernel,
		"kernels/build/work/slot1":                                       WorkTree,
		"kernels/build/names":                                            Index,
		"bundles/k-0123456789abcdef":                                     BundleKernel,
		"bundles/.k-fedcba9876543210.tmp-42":                             Temporary,
		"bundles/.k-1111111111111111.tmp-43":                             Temporary,
		"bundles/README":                                                 Other,
		"bundles/initramfs/" + strings.Repeat("ab", 32) + ".cpio":        BundleInitramfs,
		"bundles/initramfs/." + strings.Repeat("cd", 32) + ".cpio.tmp-7": Temporary,
		"sources/debian/linux-source-7.3_1":                              Source,
		"apt":                                                            Apt,
		"libfuse/0123abcd":                                               Libfuse,
		"libfuse-hp/fuse3_3.18.3-1":                                      LibfuseHP,
		"userspace/trixie-0123456789abcdef":                              Userspace,
		"fstests/0123456789abcdef":                                       Fstests,
		"fstests/logs":                                                   CrashLog,
		"initramfs/base-new.cpio":                                        InitramfsBase,
		"initramfs/klab-old.cpio":                                        Initramfs,
		"initramfs/.klab-1234.cpio":                                      Temporary,
		"initramfs/.base-5678":                                           Temporary,
		"agent/klab-agent-old":                                           Agent,
		"agent/.klab-agent-new.tmp-99":                                   Temporary,
		"crash-42.log":                                                   CrashLog,
		"accel-verdict.json":                                             Index,
		"notes.txt":                                                      Other,
		"outside":                                                        Other,
	} {
		e, ok := kindOf(l, f.p(rel))
		if !ok || e.Kind != want {
			t.Errorf("%s: kind %q (listed %v), want %q", rel, e.Kind, ok, want)
		}
	}
	k73, _ := kindOf(l, f.p("kernels/debian/linux-image-7.3_1"))
	if !k73.Pinned || strings.Join(k73.Names, " ") != "debian:7.3 debian:7.3.4+deb13-cloud-amd64" || k73.Size < 64<<10 {
		t.Errorf("debian 7.3 entry = %+v", k73)
	}
	if k61, _ := kindOf(l, f.p("kernels/debian/linux-image-6.1_1")); k61.Pinned {
		t.Errorf("an unaliased kernel is pinned: %+v", k61)
	}
	if r1, _ := kindOf(l, f.p("kernels/build/results/r1")); !r1.Pinned || strings.Join(r1.Names, " ") != "build:fix" {
		t.Errorf("named build = %+v", r1)
	}
	if r2, _ := kindOf(l, f.p("kernels/build/results/r2")); r2.Pinned {
		t.Errorf("unnamed build pinned: %+v", r2)
	}
	// A bundle's kernel: no name, its size, last used when placed.
	if b, _ := kindOf(l, f.p("bundles/k-0123456789abcdef")); b.Pinned || len(b.Names) != 0 || b.Size < 32<<10 || !b.LastUsed.Equal(f.now.Add(-6*day)) {
		t.Errorf("bundle kernel = %+v", b)
	}
	// Sizes add up, per kind and in all; the link out of the cache
	// counts as the link alone.
	var sum int64
	for _, k := range l.Kinds {
		sum += k.Size
	}
	if sum != l.Size || l.Size < 700<<10 {
		t.Errorf("sizes: kinds sum to %d, total %d", sum, l.Size)
	}
	if e, _ := kindOf(l, f.p("outside")); e.Size > 4096 {
		t.Errorf("the link out of the cache counts %d bytes", e.Size)
	}
	// JSON: a list of entries with kinds and sizes.
	data, err := json.Marshal(l)
	if err != nil || !strings.Contains(string(data), `"kind":"debian-kernel"`) || !strings.Contains(string(data), `"pinned":true`) {
		t.Errorf("JSON: %s, %v", data, err)
	}
	// A cache that does not exist yet is empty.
	if l, err := List(filepath.Join(t.TempDir(), "none")); err != nil || len(l.Entries) != 0 || l.Size != 0 {
		t.Errorf("missing cache: %+v, %v", l, err)
	}
}

func removedPaths(f *fakeCache, res *GCResult) []string {
	var ps []string
	for _, r := range res.Removed {
		rel, _ := filepath.Rel(f.dir, r.Path)
		ps = append(ps, rel)
	}
	slices.Sort(ps)
	return ps
}

// TestGCStale: without a size bound, gc removes leftovers, crash logs and
// superseded or unused initramfs parts, and nothing else; --dry-run only
// says so.
func TestGCStale(t *testing.T) {
	f := newFakeCache(t)
	want := []string{
		"agent/.klab-agent-new.tmp-99",
		"agent/klab-agent-old",
		"bundles/.k-fedcba9876543210.tmp-42", // an unpack that died
		"bundles/initramfs/." + strings.Repeat("cd", 32) + ".cpio.tmp-7",
		"crash-42.log",
		"fstests/logs", // the logs of failed fstests builds
		"initramfs/.klab-1234.cpio",
		"initramfs/base-old.cpio",
		"initramfs/klab-old.cpio",
		"kernels/debian/.tmp-123",
	}
	if birthTime(f.p("initramfs/base-new.cpio")).IsZero() {
		// No birth times here: an initramfs is not known to hold an
		// older base until it goes unused for MaxAge.
		want = slices.DeleteFunc(want, func(s string) bool { return s == "initramfs/klab-old.cpio" })
	}
	dry, err := GC(GCOptions{Dir: f.dir, MaxSize: -1, DryRun: true, Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	if got := removedPaths(f, dry); !slices.Equal(got, want) {
		t.Errorf("dry run would remove\n%q\nwant\n%q", got, want)
	}
	for _, rel := range want {
		if !f.exists(rel) {
			t.Errorf("dry run removed %s", rel)
		}
	}
	res, err := GC(GCOptions{Dir: f.dir, MaxSize: -1, Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	if got := removedPaths(f, res); !slices.Equal(got, want) {
		t.Errorf("removed\n%q\nwant\n%q", got, want)
	}
	for _, rel := range want {
		if f.exists(rel) {
			t.Errorf("%s is still there", rel)
		}
	}
	for _, rel := range []string{"initramfs/base-new.cpio", "initramfs/klab-new.cpio", "initramfs/.base-5678", "agent/klab-agent-new",
		"kernels/debian/linux-image-6.1_1", "kernels/build/results/r2", "libfuse/0123abcd", "notes.txt",
		"bundles/k-0123456789abcdef", "bundles/.k-1111111111111111.tmp-43", "bundles/README"} {
		if !f.exists(rel) {
			t.Errorf("%s was removed", rel)
		}
	}
	if res.Before-res.After < 100<<10 || res.After <= 0 {
		t.Errorf("before %d, after %d", res.Before, res.After)
	}
	// The base in use goes too once unused for MaxAge.
	res, err = GC(GCOptions{Dir: f.dir, MaxSize: -1, Now: f.now.Add(10 * day)})
	if err != nil {
		t.Fatal(err)
	}
	if got := removedPaths(f, res); !slices.Contains(got, "initramfs/base-new.cpio") || !slices.Contains(got, "agent/klab-agent-new") {
		t.Errorf("ten days later: removed %q", got)
	}
}

// TestGCMaxSize: with a bound, the least recently used entries go first;
// kernels that a name refers to stay unless --all; indexes and unknown
// files always stay, and links out of the cache are never followed.
func TestGCMaxSize(t *testing.T) {
	f := newFakeCache(t)
	l, _ := List(f.dir)
	// Just below the total after the stale parts: one entry, the least
	// recently used (the 40-day-old passthrough_ll build), must go.
	stale, _ := GC(GCOptions{Dir: f.dir, MaxSize: -1, DryRun: true, Now: f.now})
	res, err := GC(GCOptions{Dir: f.dir, MaxSize: stale.After - 1, Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	lru := res.Removed[len(res.Removed)-1]
	if lru.Path != f.p("libfuse/0123abcd") || !strings.HasPrefix(lru.Reason, "least recently used") || len(res.Removed) != len(stale.Removed)+1 {
		t.Errorf("removed %q, last %+v", removedPaths(f, res), lru)
	}
	if res.After > stale.After-1 {
		t.Errorf("after %d > %d", res.After, stale.After-1)
	}

	// Bound 0: everything that may go goes, oldest first; pinned
	// kernels stay and are named.
	res, err = GC(GCOptions{Dir: f.dir, MaxSize: 0, Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"kernels/debian/linux-image-6.1_1", "kernels/build/results/r2", "kernels/build/work/slot1", "sources/debian/linux-source-7.3_1", "apt", "libfuse-hp/fuse3_3.18.3-1", "initramfs/klab-new.cpio", "agent/klab-agent-new", "bundles/k-0123456789abcdef"} {
		if f.exists(rel) {
			t.Errorf("bound 0: %s stays", rel)
		}
	}
	for _, rel := range []string{"kernels/debian/linux-image-7.3_1", "kernels/build/results/r1", "kernels/debian/aliases.json", "kernels/build/names/fix", "notes.txt", "accel-verdict.json", "outside", "kernels/debian/linux-image-evil_1", "bundles/README"} {
		if !f.exists(rel) {
			t.Errorf("bound 0: %s was removed", rel)
		}
	}
	var pinned []string
	for _, s := range res.Skipped {
		pinned = append(pinned, s.Reason)
	}
	if len(pinned) != 2 || !strings.Contains(strings.Join(pinned, "\n"), "named debian:7.3, debian:7.3.4+deb13-cloud-amd64 (--all removes it too)") {
		t.Errorf("skipped: %q", pinned)
	}
	// The unnamed build's input link went with it.
	if f.exists("kernels/build/inputs/i2") {
		t.Error("the input link of a removed build stays")
	}

	// --all: the named kernels go too, and their names with them.
	if _, err := GC(GCOptions{Dir: f.dir, MaxSize: 0, All: true, Now: f.now}); err != nil {
		t.Fatal(err)
	}
	if f.exists("kernels/debian/linux-image-7.3_1") || f.exists("kernels/build/results/r1") || f.exists("kernels/build/names/fix") {
		t.Error("--all left a named kernel")
	}
	if data, _ := os.ReadFile(f.p("kernels/debian/aliases.json")); strings.TrimSpace(string(data)) != "{}" {
		t.Errorf("aliases.json after --all: %s", data)
	}
	// Nothing outside the cache was touched.
	if data, err := os.ReadFile(filepath.Join(f.outside, "precious")); err != nil || string(data) != "not the cache's" {
		t.Errorf("outside the cache: %q, %v", data, err)
	}
	after, _ := List(f.dir)
	if after.Size >= l.Size/4 {
		t.Errorf("the cache went from %d to %d bytes only", l.Size, after.Size)
	}
}

// holdLocks starts a child process that holds the given flocks until the
// test ends.
func holdLocks(t *testing.T, locks ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KLAB_TEST_HOLD_LOCK="+strings.Join(locks, string(os.PathListSeparator)))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("the lock holder says %q", line)
	}
}

// TestGCKeepsLockedEntries: an entry whose lock another klab process
// holds survives gc, even at bound 0, and gc says why; once the lock is
// free, it goes.
func TestGCKeepsLockedEntries(t *testing.T) {
	f := newFakeCache(t)
	holdLocks(t, f.p("kernels/debian/.lock"), f.p("kernels/build/work/slot1/.lock"), f.p("apt/.lock"))
	res, err := GC(GCOptions{Dir: f.dir, MaxSize: 0, All: true, Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"kernels/debian/.tmp-123", "kernels/debian/linux-image-6.1_1", "kernels/debian/linux-image-7.3_1", "kernels/build/work/slot1", "apt"} {
		if !f.exists(rel) {
			t.Errorf("%s was removed while another process held its lock", rel)
		}
		found := false
		for _, s := range res.Skipped {
			if s.Path == f.p(rel) && strings.HasPrefix(s.Reason, "in use: another klab holds ") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s is not reported as in use: %+v", rel, res.Skipped)
		}
	}
	// Everything unlocked went.
	if f.exists("sources/debian/linux-source-7.3_1") || f.exists("kernels/build/results/r2") {
		t.Error("unlocked entries stayed")
	}
}

// TestGCSeparateLockFD: the same holds for a lock taken through another
// file descriptor of this process.
func TestGCSeparateLockFD(t *testing.T) {
	f := newFakeCache(t)
	fd, err := os.OpenFile(f.p("kernels/debian/.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	if err := syscall.Flock(int(fd.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := GC(GCOptions{Dir: f.dir, MaxSize: -1, Now: f.now}); err != nil {
		t.Fatal(err)
	}
	if !f.exists("kernels/debian/.tmp-123") {
		t.Error("a fetch's temporary directory went while the fetch held the lock")
	}
}

// TestGCBundleKernels: a kernel placed from a run bundle is never stale,
// however long unused; the size bound takes it by its last use, and with
// CheapFirst after what is not a kernel and before the kernels that a
// name refers to, as a kernel that no name refers to.
func TestGCBundleKernels(t *testing.T) {
	setup := func(t *testing.T) *fakeCache {
		f := &fakeCache{dir: t.TempDir(), now: time.Now()}
		f.file(t, "bundles/k-0123456789abcdef/vmlinuz", 32, 0)
		f.age(t, "bundles/k-0123456789abcdef", 400*day)
		f.file(t, "libfuse/0123abcd/passthrough_ll", 8, 0)
		f.age(t, "libfuse/0123abcd", 0)
		f.file(t, "kernels/debian/linux-image-7.3_1/vmlinuz", 32, 0)
		f.age(t, "kernels/debian/linux-image-7.3_1", 500*day)
		os.WriteFile(f.p("kernels/debian/aliases.json"), []byte(`{"7.3/cloud-amd64": "linux-image-7.3_1"}`), 0o644)
		f.file(t, "kernels/debian/linux-image-6.1_1/vmlinuz", 32, 0)
		f.age(t, "kernels/debian/linux-image-6.1_1", 300*day)
		return f
	}
	order := func(f *fakeCache, res *GCResult) string {
		var s []string
		for _, r := range res.Removed {
			rel, _ := filepath.Rel(f.dir, r.Path)
			s = append(s, string(r.Kind)+":"+rel)
		}
		return strings.Join(s, " ")
	}

	f := setup(t)
	if res, err := GC(GCOptions{Dir: f.dir, MaxSize: -1, Now: f.now}); err != nil || len(res.Removed) != 0 {
		t.Errorf("stale: removed %s, %v", order(f, res), err)
	}
	for _, tc := range []struct {
		cheapFirst, all bool
		want            string
	}{
		{false, true, "debian-kernel:kernels/debian/linux-image-7.3_1 bundle-kernel:bundles/k-0123456789abcdef debian-kernel:kernels/debian/linux-image-6.1_1 libfuse:libfuse/0123abcd"},
		{true, true, "libfuse:libfuse/0123abcd bundle-kernel:bundles/k-0123456789abcdef debian-kernel:kernels/debian/linux-image-6.1_1 debian-kernel:kernels/debian/linux-image-7.3_1"},
		{true, false, "libfuse:libfuse/0123abcd bundle-kernel:bundles/k-0123456789abcdef debian-kernel:kernels/debian/linux-image-6.1_1"},
	} {
		f := setup(t)
		res, err := GC(GCOptions{Dir: f.dir, MaxSize: 0, All: tc.all, CheapFirst: tc.cheapFirst, Now: f.now})
		if got := order(f, res); err != nil || got != tc.want {
			t.Errorf("CheapFirst %v, All %v: removed\n%s, %v\nwant\n%s", tc.cheapFirst, tc.all, got, err, tc.want)
		}
		if f.exists("bundles/k-0123456789abcdef") {
			t.Error("the bundle kernel stays")
		}
	}
}
