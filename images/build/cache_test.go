package build

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"klab/images"
	"klab/images/kerneldir"
	"klab/results"
)

func TestCacheKeys(t *testing.T) {
	base := Inputs{Arch: "x86_64", Base: "git:abc", BaseConfig: "tinyconfig",
		Fragments: []string{"f1"}, Patches: []string{"p1", "p2"}, Compiler: "gcc 12.2.0"}
	// The key is a function of the values alone: an Inputs built apart,
	// with slices of its own, has the same key.
	same := Inputs{Arch: "x86_64", Base: "git:" + "abc", BaseConfig: "tiny" + "config",
		Fragments: append([]string{}, "f1"), Patches: strings.Fields("p1 p2"), Compiler: "gcc 12.2.0"}
	if same.InputKey() != base.InputKey() {
		t.Errorf("equal inputs give keys %q and %q", same.InputKey(), base.InputKey())
	}
	// The keys, computed here apart from cache.go (keyOf), so that a
	// change of the encoding or of the fields it covers, which would
	// orphan every cached build, fails.
	if want := keyOf([]string{recipe, "input", "x86_64", "git:abc", "tinyconfig"}, []string{"f1"}, []string{"p1", "p2"}, []string{"gcc 12.2.0"}); base.InputKey() != want {
		t.Errorf("InputKey = %q, want %q", base.InputKey(), want)
	}
	if want := keyOf([]string{recipe, "slot", "x86_64", "git:abc", "tinyconfig"}, []string{"f1"}, []string{"gcc 12.2.0"}); base.SlotKey() != want {
		t.Errorf("SlotKey = %q, want %q", base.SlotKey(), want)
	}
	variants := map[string]func(*Inputs){
		"base tree":       func(in *Inputs) { in.Base = "git:abd" },
		"a patch":         func(in *Inputs) { in.Patches = []string{"p1", "p3"} },
		"patch order":     func(in *Inputs) { in.Patches = []string{"p2", "p1"} },
		"no patches":      func(in *Inputs) { in.Patches = nil },
		"a fragment":      func(in *Inputs) { in.Fragments = []string{"f2"} },
		"base config":     func(in *Inputs) { in.BaseConfig = "defconfig" },
		"compiler":        func(in *Inputs) { in.Compiler = "gcc 13.1.0" },
		"field splitting": func(in *Inputs) { in.Patches = []string{"p1,p2"} },
	}
	seen := map[string]string{base.InputKey(): "base"}
	for name, change := range variants {
		in := base
		change(&in)
		k := in.InputKey()
		if other, dup := seen[k]; dup {
			t.Errorf("changing %s gives the same input key as %s", name, other)
		}
		seen[k] = name
		// The work tree is shared by every patch series.
		patchesOnly := name == "a patch" || name == "patch order" || name == "no patches" || name == "field splitting"
		if sameSlot := in.SlotKey() == base.SlotKey(); sameSlot != patchesOnly {
			t.Errorf("changing %s: same work tree = %v, want %v", name, sameSlot, patchesOnly)
		}
	}
	// The result key is the tree, the patches, the merged config and the
	// compiler; fragments only count through the config they make.
	r := ResultKey("x86_64", "git:abc", []string{"p1"}, "cfg1", "gcc")
	for name, k := range map[string]string{
		"config":   ResultKey("x86_64", "git:abc", []string{"p1"}, "cfg2", "gcc"),
		"tree":     ResultKey("x86_64", "sha256:x", []string{"p1"}, "cfg1", "gcc"),
		"patch":    ResultKey("x86_64", "git:abc", []string{"p2"}, "cfg1", "gcc"),
		"compiler": ResultKey("x86_64", "git:abc", []string{"p1"}, "cfg1", "clang"),
	} {
		if k == r {
			t.Errorf("result key ignores the %s", name)
		}
	}
}

// keyOf is the cache key encoding, written out: the first 20 hex digits
// of SHA-256 over each list's count and then its fields, each count and
// field preceded by its length as 8 big-endian bytes.
func keyOf(lists ...[]string) string {
	var b []byte
	for _, l := range lists {
		for _, f := range append([]string{strconv.Itoa(len(l))}, l...) {
			b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
			b = append(b, f...)
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:20]
}

// fakeResult puts a built kernel into the cache under name.
func fakeResult(t *testing.T, s *store, key, name string, size int, used time.Time) string {
	t.Helper()
	dir := filepath.Join(s.results(), key)
	writeTemp(t, dir, "vmlinuz", strings.Repeat("x", size))
	if err := kerneldir.Write(dir, &results.Kernel{ID: "k-" + key, Source: "build", Build: &results.KernelBuild{Key: key}}); err != nil {
		t.Fatal(err)
	}
	if name != "" {
		if err := s.link(s.nameLink(name), key); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.link(s.inputLink("in-"+key), key); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(dir, used, used)
	return dir
}

func TestLookupAndRemove(t *testing.T) {
	cache := t.TempDir()
	s := &store{dir: images.BuiltKernelsDir(cache)}
	now := time.Now()
	old := fakeResult(t, s, "r-old", "old", 100<<10, now.Add(-3*time.Hour))
	newer := fakeResult(t, s, "r-new", "new", 100<<10, now.Add(-1*time.Hour))

	ks, err := images.CachedBuiltKernels(cache)
	if err != nil || len(ks) != 2 || ks[0].Name != "build:new" || ks[1].Name != "build:old" {
		t.Fatalf("CachedBuiltKernels = %+v, %v", ks, err)
	}
	if k, err := images.LookupBuiltKernel(cache, "build:old"); err != nil || k.ID != "k-r-old" || k.Image != filepath.Join(old, "vmlinuz") {
		t.Errorf("LookupBuiltKernel(build:old) = %+v, %v", k, err)
	}
	if k, err := images.LookupBuiltKernel(cache, "build:k-r-new"); err != nil || k.Name != "build:new" {
		t.Errorf("LookupBuiltKernel by ID = %+v, %v", k, err)
	}
	if _, err := images.LookupBuiltKernel(cache, "build:nope"); err == nil || !strings.Contains(err.Error(), "build:new build:old") {
		t.Errorf("unknown name: %v", err)
	}
	// A lookup (a boot) marks the kernel used: its time moves from 3
	// hours ago (set above) to the lookup's; any time after an hour ago
	// shows the mark, however coarse the file system's clock.
	if fi, err := os.Stat(old); err != nil || fi.ModTime().Before(now.Add(-time.Hour)) {
		t.Errorf("looking build:old up did not mark it used: %v", err)
	}
	os.Chtimes(old, now.Add(-3*time.Hour), now.Add(-3*time.Hour))

	// rm removes the name, and the files once no name is left.
	if err := s.link(s.nameLink("alias"), "r-new"); err != nil {
		t.Fatal(err)
	}
	if removed, err := Remove(cache, []string{"build:new"}); err != nil || len(removed) != 0 || !exists(newer) {
		t.Errorf("rm of one of two names: %q, %v", removed, err)
	}
	if removed, err := Remove(cache, []string{"build:alias", "build:nope"}); len(removed) != 1 || exists(newer) ||
		err == nil || !strings.Contains(err.Error(), "build:nope: no built kernel by that name") {
		t.Errorf("rm of the last name: %q, %v", removed, err)
	}
}
