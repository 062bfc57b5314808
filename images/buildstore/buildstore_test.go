package buildstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"klab/images/internal/imagetest"
	"klab/images/kerneldir"
	"klab/results"
)

// commit puts a kernel into s through Commit, as package images/build
// does: its files, a build log and kernel.json, whose paths name final.
func commit(t *testing.T, s *Store, key, inputKey, name string) *results.Kernel {
	t.Helper()
	k, err := s.Commit(t.Context(), key, inputKey, name, func(ctx context.Context, tmp, out string) error {
		return fillFake(s, key, out)
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fillFake writes a built kernel's files into out, which becomes
// results/<key>.
func fillFake(s *Store, key, out string) error {
	final := s.ResultDir(key)
	for name, data := range map[string][]byte{
		"vmlinuz":           imagetest.BzImage("7.3.4 (k@" + key + ") #1"),
		"config":            []byte("CONFIG_FUSE_FS=y\n"),
		"build.log":         []byte("make bzImage\n"),
		"modules/fuse.ko":   imagetest.Module("name=fuse"),
		"modules/modules.o": []byte("kernel/fs/fuse/fuse.ko\n"),
	} {
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	id, err := kerneldir.ID(filepath.Join(out, "vmlinuz"), filepath.Join(out, "config"))
	if err != nil {
		return err
	}
	return kerneldir.Write(out, &results.Kernel{
		ID: id, Version: "7.3.4", Source: "build",
		Image: filepath.Join(final, "vmlinuz"), Config: filepath.Join(final, "config"), Modules: filepath.Join(final, "modules"),
		Build: &results.KernelBuild{Tree: "debian:7.3=7.3.4-1", Key: key},
	})
}

// TestCommitThenRead: what Commit writes, Lookup (by name and by ID),
// List and LookupInput read back, with the paths in the store; the
// directory is whole (no temporary entry is left), and a second commit of
// the same result only adds its name.
func TestCommitThenRead(t *testing.T) {
	cache := t.TempDir()
	s := New(cache)
	// What an interrupted commit left an hour ago goes; what a running
	// one is making stays.
	stale, young := filepath.Join(s.Dir(), "results", ".tmp-1"), filepath.Join(s.Dir(), "results", ".tmp-2")
	imagetest.WriteFile(t, filepath.Join(stale, "vmlinuz"), nil)
	imagetest.WriteFile(t, filepath.Join(young, "vmlinuz"), nil)
	twoHoursAgo := time.Now().Add(-2 * time.Hour)
	os.Chtimes(stale, twoHoursAgo, twoHoursAgo)
	k := commit(t, s, "r1", "in1", "fix")
	if _, err := os.Stat(stale); err == nil {
		t.Error("a commit left an old temporary directory")
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("a commit removed a young temporary directory: %v", err)
	}
	os.RemoveAll(young)
	dir := s.ResultDir("r1")
	if k.Name != "build:fix" || k.Image != filepath.Join(dir, "vmlinuz") || k.Modules != filepath.Join(dir, "modules") ||
		k.Build.Log != filepath.Join(dir, "build.log") || k.ImageSize != 4096 || !strings.HasPrefix(k.ID, "k-") {
		t.Errorf("Commit = %+v", k)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("results/r1: %v, %v", fi, err)
	}
	des, _ := os.ReadDir(filepath.Join(s.Dir(), "results"))
	if len(des) != 1 {
		t.Errorf("results/ holds %v, want r1 alone", des)
	}

	got, err := s.Lookup("build:fix")
	if err != nil || got.ID != k.ID || got.Image != k.Image || got.Build.Log != k.Build.Log {
		t.Errorf("Lookup(build:fix) = %+v, %v", got, err)
	}
	if got, err := s.Lookup(k.ID); err != nil || got.Name != "build:fix" {
		t.Errorf("Lookup(%s) = %+v, %v", k.ID, got, err)
	}
	if got, ok := s.LookupInput("in1"); !ok || got.ID != k.ID || got.Name != "" {
		t.Errorf("LookupInput(in1) = %+v, %v", got, ok)
	}
	if _, ok := s.LookupInput("in2"); ok {
		t.Error("LookupInput of unknown inputs answered")
	}

	// The same result from other inputs under another name: nothing is
	// filled again.
	k2, err := s.Commit(t.Context(), "r1", "in2", "again", func(ctx context.Context, tmp, out string) error {
		return errors.New("filled a result that is there")
	})
	if err != nil || k2.Name != "build:again" || k2.ID != k.ID {
		t.Fatalf("second Commit = %+v, %v", k2, err)
	}
	ks, err := s.List()
	if err != nil || len(ks) != 2 || ks[0].Name != "build:again" || ks[1].Name != "build:fix" {
		t.Errorf("List = %+v, %v", ks, err)
	}
	if _, err := s.Lookup("build:nope"); err == nil || !strings.Contains(err.Error(), "built kernels: build:again build:fix") {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := New(t.TempDir()).Lookup("build:x"); err == nil || !strings.Contains(err.Error(), "no kernels built yet") {
		t.Errorf("empty store: %v", err)
	}

	// A lookup by name (a boot) marks the kernel used.
	old := time.Now().Add(-3 * time.Hour)
	os.Chtimes(dir, old, old)
	if _, err := s.Lookup("build:fix"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.ModTime().Before(old.Add(time.Hour)) {
		t.Errorf("looking build:fix up did not mark it used: %v", err)
	}
}

// TestCommitFailureLeavesNothing: a fill that fails leaves no result, no
// name and no temporary directory.
func TestCommitFailureLeavesNothing(t *testing.T) {
	s := New(t.TempDir())
	_, err := s.Commit(t.Context(), "r1", "in1", "fix", func(ctx context.Context, tmp, out string) error {
		os.WriteFile(filepath.Join(out, "vmlinuz"), []byte("half"), 0o644)
		return errors.New("modules_install failed")
	})
	if err == nil || !strings.Contains(err.Error(), "modules_install failed") {
		t.Fatalf("Commit: %v", err)
	}
	des, _ := os.ReadDir(filepath.Join(s.Dir(), "results"))
	if len(des) != 0 {
		t.Errorf("results/ holds %v", des)
	}
	if ks, _ := s.List(); len(ks) != 0 {
		t.Errorf("List = %+v", ks)
	}
}

// TestRemove: rm of one of two names keeps the kernel's files, rm of the
// last removes them and the input links; unknown and bad names are
// errors that name them.
func TestRemove(t *testing.T) {
	s := New(t.TempDir())
	commit(t, s, "r1", "in1", "fix")
	commit(t, s, "r1", "in1", "alias")
	commit(t, s, "r2", "in2", "other")
	if removed, err := s.Remove([]string{"build:fix"}); err != nil || len(removed) != 0 {
		t.Errorf("rm of one of two names: %q, %v", removed, err)
	}
	if _, err := os.Stat(s.ResultDir("r1")); err != nil {
		t.Errorf("the kernel went with one of its names: %v", err)
	}
	removed, err := s.Remove([]string{"build:alias", "build:nope", "build:../x"})
	if !slices.Equal(removed, []string{s.ResultDir("r1")}) || err == nil ||
		!strings.Contains(err.Error(), "build:nope: no built kernel by that name") || !strings.Contains(err.Error(), "bad build name") {
		t.Errorf("rm of the last name: %q, %v", removed, err)
	}
	for _, p := range []string{s.ResultDir("r1"), filepath.Join(s.Dir(), "inputs", "in1")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s stays", p)
		}
	}
	if ks, _ := s.List(); len(ks) != 1 || ks[0].Name != "build:other" {
		t.Errorf("List after rm = %+v", ks)
	}
}

// TestCheckRemove: every reference Remove cannot take is named at once,
// and nothing is removed.
func TestCheckRemove(t *testing.T) {
	s := New(t.TempDir())
	commit(t, s, "r1", "in1", "fix")
	if err := s.CheckRemove([]string{"build:fix"}); err != nil {
		t.Errorf("a built name: %v", err)
	}
	err := s.CheckRemove([]string{"debian:7.3", "build:nope", "build:../x", "build:fix"})
	for _, want := range []string{"debian:7.3: klab kernels rm removes kernels built from source", "build:nope: no built kernel by that name", "build:../x: bad build name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckRemove = %v, want %q in it", err, want)
		}
	}
	if _, err := os.Stat(s.ResultDir("r1")); err != nil {
		t.Errorf("CheckRemove removed a kernel: %v", err)
	}
}

// TestStoreOfEarlierKlab: a store as klab wrote it before the store was a
// package of its own (results directories of mode 0700, kernel.json naming
// the paths of the cache where it was built, links relative to the store)
// loads: Lookup, List and LookupInput point into this store, Entries sees
// every part, and a commit of the same result only adds its name.
func TestStoreOfEarlierKlab(t *testing.T) {
	const key, input = "e87f9d2835db99860088", "3a0c5f1e9d7b2c4a6e8f"
	data, err := os.ReadFile(filepath.Join("testdata", "kernel.json"))
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	s := New(cache)
	dir := filepath.Join(cache, "kernels", "build", "results", key)
	imagetest.WriteFile(t, filepath.Join(dir, "kernel.json"), data)
	imagetest.WriteFile(t, filepath.Join(dir, "vmlinuz"), imagetest.BzImage("7.3.4 (user@host) #1"))
	imagetest.WriteFile(t, filepath.Join(dir, "config"), []byte("CONFIG_FUSE_FS=y\n"))
	imagetest.WriteFile(t, filepath.Join(dir, "build.log"), []byte("make bzImage\n"))
	imagetest.WriteFile(t, filepath.Join(dir, "modules", "modules.order"), []byte("kernel/fs/fuse/fuse.ko\n"))
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"names/hand-fix", "inputs/" + input} {
		p := filepath.Join(cache, "kernels", "build", l)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink("../results/"+key, p); err != nil {
			t.Fatal(err)
		}
	}
	imagetest.WriteFile(t, filepath.Join(cache, "kernels", "build", "estimates.json"), []byte(`{"a1b2":2150}`))
	imagetest.WriteFile(t, filepath.Join(cache, "kernels", "build", "hashes.json"), []byte(`{}`))
	imagetest.WriteFile(t, filepath.Join(cache, "kernels", "build", "work", "63e683e2445fe73c21f6", ".lock"), nil)

	k, err := s.Lookup("build:hand-fix")
	if err != nil {
		t.Fatal(err)
	}
	if k.ID != "k-ab83327bfe4fe468" || k.Image != filepath.Join(dir, "vmlinuz") || k.Config != filepath.Join(dir, "config") ||
		k.Modules != filepath.Join(dir, "modules") || k.Build.Log != filepath.Join(dir, "build.log") || k.Build.Key != key ||
		len(k.Build.Patches) != 1 || k.Build.Patches[0].Subject != "fuse: fix the hand" {
		t.Errorf("Lookup = %+v, build %+v", k, k.Build)
	}
	// Only the paths, which name where the kernel is now, differ from
	// what was written.
	var want results.Kernel
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	want.Image, want.Config, want.Modules, want.Build.Log = k.Image, k.Config, k.Modules, k.Build.Log
	a, _ := json.Marshal(want)
	b, _ := json.Marshal(k)
	if !bytes.Equal(a, b) {
		t.Errorf("loaded\n%s\nwant\n%s", b, a)
	}
	if ks, err := s.List(); err != nil || len(ks) != 1 || ks[0].Name != "build:hand-fix" {
		t.Errorf("List = %+v, %v", ks, err)
	}
	if k, ok := s.LookupInput(input); !ok || k.ID != "k-ab83327bfe4fe468" {
		t.Errorf("LookupInput = %+v, %v", k, ok)
	}

	es, err := s.Entries()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]EntryKind{}
	for _, e := range es {
		rel, _ := filepath.Rel(s.Dir(), e.Path)
		kinds[rel] = e.Kind
		if e.Kind == Result && !slices.Equal(e.Names, []string{"build:hand-fix"}) {
			t.Errorf("the result's names are %q", e.Names)
		}
	}
	wantKinds := map[string]EntryKind{
		"results/" + key: Result, "work/63e683e2445fe73c21f6": WorkTree,
		"names": Index, "inputs": Index, "estimates.json": Index, "hashes.json": Index,
	}
	if len(kinds) != len(wantKinds) {
		t.Errorf("entries %v, want %v", kinds, wantKinds)
	}
	for rel, kind := range wantKinds {
		if kinds[rel] != kind {
			t.Errorf("%s is of kind %d, want %d", rel, kinds[rel], kind)
		}
	}

	k2, err := s.Commit(t.Context(), key, "fresh-input", "again", func(ctx context.Context, tmp, out string) error {
		return errors.New("filled a result that is there")
	})
	if err != nil || k2.ID != k.ID || k2.Name != "build:again" {
		t.Errorf("Commit of the same result = %+v, %v", k2, err)
	}
}

// TestEntries: every part of a store has its kind, leftovers are
// temporary and go through their Remove, a result's Remove takes its
// links, and nothing follows a link out of the store.
func TestEntries(t *testing.T) {
	cache := t.TempDir()
	s := New(cache)
	commit(t, s, "r1", "in1", "fix")
	outside := t.TempDir()
	imagetest.WriteFile(t, filepath.Join(outside, "precious"), []byte("x"))
	imagetest.WriteFile(t, filepath.Join(s.Dir(), "work", "slot", "src", "Makefile"), []byte("all:\n"))
	imagetest.WriteFile(t, filepath.Join(s.Dir(), "work", ".tmp-rm-old", "f"), nil)
	imagetest.WriteFile(t, filepath.Join(s.Dir(), "results", ".tmp-123", "vmlinuz"), nil)
	imagetest.WriteFile(t, filepath.Join(s.Dir(), ".estimates.json.tmp-42"), nil)
	imagetest.WriteFile(t, filepath.Join(s.Dir(), "notes"), nil)
	if err := os.Symlink(outside, filepath.Join(s.Dir(), "results", "evil")); err != nil {
		t.Fatal(err)
	}
	es, err := s.Entries()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]EntryKind{}
	for _, e := range es {
		rel, _ := filepath.Rel(s.Dir(), e.Path)
		got[rel] = e.Kind
		if (e.Remove == nil) != (e.Kind == Index || e.Kind == Other) {
			t.Errorf("%s (kind %d): Remove is nil: %v", rel, e.Kind, e.Remove == nil)
		}
		if e.Kind == WorkTree && e.Lock != filepath.Join(e.Path, ".lock") {
			t.Errorf("work tree lock %s", e.Lock)
		}
	}
	want := map[string]EntryKind{
		"results/r1": Result, "results/.tmp-123": Temporary, "results/evil": Other,
		"work/slot": WorkTree, "work/.tmp-rm-old": Temporary,
		"names": Index, "inputs": Index, ".estimates.json.tmp-42": Temporary, "notes": Other,
	}
	if len(got) != len(want) {
		t.Errorf("entries %v, want %v", got, want)
	}
	for rel, kind := range want {
		if k, ok := got[rel]; !ok || k != kind {
			t.Errorf("%s: kind %d (listed %v), want %d", rel, k, ok, kind)
		}
	}
	for _, e := range es {
		if e.Remove != nil {
			if err := e.Remove(); err != nil {
				t.Errorf("remove %s: %v", e.Path, err)
			}
		}
	}
	for _, rel := range []string{"results/r1", "names/fix", "inputs/in1", "work/slot", "results/.tmp-123"} {
		if _, err := os.Lstat(filepath.Join(s.Dir(), rel)); err == nil {
			t.Errorf("%s stays after its Remove", rel)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "precious")); err != nil {
		t.Errorf("outside the store: %v", err)
	}
}

// TestDamagedKernel: a built kernel whose image was changed on disk (same
// size) is an error naming the command that builds it again, not a
// kernel to boot; its input no longer hits, so a build makes it anew and
// Commit replaces it.
func TestDamagedKernel(t *testing.T) {
	s := New(t.TempDir())
	k := commit(t, s, "r1", "in1", "fix")
	f, err := os.OpenFile(k.Image, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{0xff, 0xfe}, 1000)
	f.Close()
	_, err = s.Lookup("build:fix")
	var de *kerneldir.DamagedError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "klab kernels build --source debian:7.3 --name fix --rebuild") {
		t.Errorf("Lookup of a damaged kernel: %v", err)
	}
	if _, ok := s.LookupInput("in1"); ok {
		t.Errorf("a damaged kernel's input hit")
	}
	k2 := commit(t, s, "r1", "in1", "fix")
	if _, err := s.Lookup("build:fix"); err != nil || k2.ID != k.ID {
		t.Errorf("rebuilt: %v, id %s want %s", err, k2.ID, k.ID)
	}
}

// TestRebuildCommand: the recipe's source, fragments and patches (an
// mbox once), or "..." when the kernel records none.
func TestRebuildCommand(t *testing.T) {
	b := &results.KernelBuild{Tree: "/src/linux", Fragments: []results.FileHash{{Path: "lab"}, {Path: "/f/x.config"}},
		Patches: []results.FileHash{{Path: "/p/s.mbox#1"}, {Path: "/p/s.mbox#2"}, {Path: "/p/fix.patch"}}}
	want := "klab kernels build --source /src/linux --config lab,/f/x.config --patches /p/s.mbox --patches /p/fix.patch --name n --rebuild"
	if got := RebuildCommand("n", b); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := RebuildCommand("n", nil); got != "klab kernels build ... --name n --rebuild" {
		t.Errorf("no recipe: %s", got)
	}
}
