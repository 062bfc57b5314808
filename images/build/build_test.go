package build

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"klab/images/buildstore"
	"klab/internal/testenv"
)

// A fake kernel tree: its Makefile knows the targets klab runs (the config
// targets, olddefconfig, bzImage), "compiles" fs/*.c by copying it (a.c
// with the header fs/a.h it depends on) and logs each compilation to
// $(O)/compiled.log, so a test sees what make rebuilt.
const fakeMakefile = `O ?= .
SRCS := fs/a.c fs/b.c
OBJS := $(patsubst %.c,$(O)/%.o,$(SRCS))

tinyconfig defconfig allnoconfig:
	@mkdir -p $(O)
	@printf 'CONFIG_A=y\n# CONFIG_B is not set\n' > $(O)/.config

olddefconfig:
	@grep -v '^CONFIG_DROPME=' $(O)/.config | sort -u > $(O)/.config.new
	@mv $(O)/.config.new $(O)/.config

$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $*.o"
	@if grep -q '#error' $<; then echo "$(CURDIR)/$<:2:1: error: #error in the patch"; exit 1; fi
	@cat $^ > $@
	@echo $* >> $(O)/compiled.log

$(O)/fs/a.o: fs/a.h

bzImage: $(OBJS)
	@mkdir -p $(O)/arch/x86/boot
	@echo "  BUILD   arch/x86/boot/bzImage"
	@cat bzhdr $(OBJS) > $(O)/arch/x86/boot/bzImage
	@touch $(O)/vmlinux

modules:
	@echo "  LD [M]  fs/x.ko"

modules_install:
	@mkdir -p $(INSTALL_MOD_PATH)/lib/modules/7.3.0-fake/kernel/fs
	@echo x > $(INSTALL_MOD_PATH)/lib/modules/7.3.0-fake/kernel/fs/x.ko
	@echo kernel/fs/x.ko > $(INSTALL_MOD_PATH)/lib/modules/7.3.0-fake/modules.order
	@ln -s $(CURDIR) $(INSTALL_MOD_PATH)/lib/modules/7.3.0-fake/build

.PHONY: tinyconfig defconfig allnoconfig olddefconfig bzImage modules modules_install
`

const fakeMerge = `#!/bin/sh
# merge_config.sh -m -O OUT BASE FRAGMENT...: appends the fragments.
shift; shift; shift
base=$1; shift
cat "$@" >> "$base"
`

const fakeTreeKconfig = `config A
	bool "a"
config C
	bool "c"
config DROPME
	bool "dropme"
	depends on NOPE
`

func fakeHeader(version string) []byte {
	b := make([]byte, 4096)
	b[0x1FE], b[0x1FF] = 0x55, 0xAA
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(b[0x206:], 0x020F)
	b[0x211] = 1
	binary.LittleEndian.PutUint16(b[0x236:], 0x7F)
	binary.LittleEndian.PutUint16(b[0x20E:], 0x3C0-0x200)
	copy(b[0x3C0:], version+" (klab@test) #1\x00")
	return b
}

// fakeSource makes the fake tree in a new directory dir, as a git
// repository (kind "git") or a tarball, and returns dir, the tree and the
// source to build from.
func fakeSource(t *testing.T, kind string) (dir, tree, source string) {
	t.Helper()
	dir = t.TempDir()
	tree = filepath.Join(dir, "linux")
	makeFakeTree(t, tree)
	source = tree
	if kind == "git" {
		for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "base"}} {
			if _, err := git(context.Background(), tree, args...); err != nil {
				t.Fatal(err)
			}
		}
		return dir, tree, source
	}
	source = filepath.Join(dir, "linux.tar.gz")
	if out, err := runCmd(dir, "tar", "-czf", source, "linux"); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	return dir, tree, source
}

// makeFakeTree writes the fake tree at dir.
func makeFakeTree(t *testing.T, dir string) {
	t.Helper()
	writeTemp(t, dir, "Makefile", fakeMakefile)
	writeTemp(t, dir, "Kconfig", fakeTreeKconfig)
	writeTemp(t, dir, "scripts/kconfig/merge_config.sh", fakeMerge)
	if err := os.Chmod(filepath.Join(dir, "scripts/kconfig/merge_config.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTemp(t, dir, "bzhdr", string(fakeHeader("7.3.0-fake")))
	writeTemp(t, dir, "fs/a.c", "int a;\n/* a */\nint a2;\n")
	writeTemp(t, dir, "fs/a.h", "/* a.h */\n")
	writeTemp(t, dir, "fs/b.c", "int b;\n/* b */\nint b2;\n")
}

// fakePatch changes line 2 of fs/<f>.c from old to new.
func fakePatch(t *testing.T, dir, name, subject, f, old, new string) string {
	t.Helper()
	return writeTemp(t, dir, name, `From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: T <t@example.org>
Subject: [PATCH] `+subject+`

---
diff --git a/fs/`+f+`.c b/fs/`+f+`.c
--- a/fs/`+f+`.c
+++ b/fs/`+f+`.c
@@ -1,3 +1,3 @@
 int `+f+`;
-`+old+`
+`+new+`
 int `+f+`2;
`)
}

func compiled(t *testing.T, cache string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(cache, "kernels", "build", "work", "*", "out", "compiled.log"))
	if len(m) != 1 {
		t.Fatalf("%d work trees, want 1", len(m))
	}
	data, _ := os.ReadFile(m[0])
	return strings.Join(strings.Fields(string(data)), " ")
}

func countResults(cache string) int {
	des, _ := os.ReadDir(filepath.Join(cache, "kernels", "build", "results"))
	n := 0
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), ".") {
			n++
		}
	}
	return n
}

// TestBuildFakeTree runs whole builds of a fake tree, from a git tree and
// from a tarball: cache hits, incremental rebuilds that recompile only
// what changed, patch and compiler failures that cache nothing, dropped
// config options, and a baseline.
func TestBuildFakeTree(t *testing.T) {
	for _, c := range []string{"make", "git", "patch", "tar", "gcc", "ld", "flex", "bison", "bc", "perl"} {
		testenv.RequiresCommand(t, c)
	}
	for _, kind := range []string{"git", "tarball"} {
		t.Run(kind, func(t *testing.T) {
			testBuildFakeTree(t, kind)
		})
	}
}

func testBuildFakeTree(t *testing.T, kind string) {
	ctx := context.Background()
	dir, tree, source := fakeSource(t, kind)
	frag := writeTemp(t, dir, "my.config", "CONFIG_A=y\nCONFIG_C=y\n")
	p1 := fakePatch(t, dir, "p1.patch", "a: one", "a", "/* a */", "/* a1 */")
	p2 := fakePatch(t, dir, "p2.patch", "b: two", "b", "/* b */", "/* b2 */")
	broken := fakePatch(t, dir, "broken.patch", "a: broken", "a", "/* not there */", "/* x */")
	bad := fakePatch(t, dir, "bad.patch", "a: does not compile", "a", "/* a */", "#error")
	cache := filepath.Join(dir, "cache")
	build := func(name string, patches []string, mod func(*Options)) (*Result, error) {
		o := Options{Source: source, Patches: patches, Config: []string{frag}, Name: name, CacheDir: cache, Jobs: 1}
		if mod != nil {
			mod(&o)
		}
		return Build(ctx, o)
	}

	// A cold build of one patch.
	res, err := build("x", []string{p1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := res.Kernel
	if res.Hit || k.Name != "build:x" || k.Version != "7.3.0-fake" || k.Source != "build" || !strings.HasPrefix(k.ID, "k-") ||
		k.Modules != "" || len(k.Build.Patches) != 1 || k.Build.Patches[0].Subject != "[PATCH] a: one" ||
		k.Build.BaseConfig != "defconfig" || k.Build.ConfigSHA256 == "" || k.Build.Log == "" {
		t.Fatalf("first build: hit %v, kernel %+v, build %+v", res.Hit, k, k.Build)
	}
	if kind == "git" && (k.Build.BaseCommit == "" || k.Build.Tree != tree) || kind == "tarball" && k.Build.BaseSHA256 == "" {
		t.Errorf("base identity: %+v", k.Build)
	}
	if img, _ := os.ReadFile(k.Image); !strings.Contains(string(img), "/* a1 */") {
		t.Error("the image lacks the patched a.c")
	}
	if got := compiled(t, cache); got != "fs/a fs/b" {
		t.Errorf("cold build compiled %q", got)
	}

	// The same again: a hit, without make.
	res, err = build("x2", []string{p1}, nil)
	if err != nil || !res.Hit || res.Kernel.ID != k.ID || res.Kernel.Name != "build:x2" {
		t.Fatalf("repeat: %+v, %v", res, err)
	}
	if got := compiled(t, cache); got != "fs/a fs/b" {
		t.Errorf("a cache hit compiled: %q", got)
	}

	// A second patch on top: only b.c is compiled, although the series
	// was reverted and applied again.
	res, err = build("y", []string{p1, p2}, nil)
	if err != nil || res.Hit {
		t.Fatalf("series 1+2: %+v, %v", res, err)
	}
	if got := compiled(t, cache); got != "fs/a fs/b fs/b" {
		t.Errorf("adding a patch to b.c compiled %q, want only fs/b more", got)
	}

	// A patch that does not apply: an error naming it, nothing cached.
	n := countResults(cache)
	_, err = build("z", []string{p1, broken}, nil)
	var pe *PatchError
	if !errors.As(err, &pe) || pe.N != 2 || pe.Patch.File != broken || !strings.Contains(err.Error(), "fs/a.c: hunk #1 at line 1") {
		t.Fatalf("broken patch: %v", err)
	}
	if countResults(cache) != n || exists(filepath.Join(cache, "kernels", "build", "names", "z")) {
		t.Error("a failed patch left a result or a name")
	}

	// A patch that does not compile: the first error with file:line.
	_, err = build("z", []string{bad}, nil)
	var be *BuildError
	if !errors.As(err, &be) || len(be.Errors) != 1 || be.Errors[0].File != "fs/a.c" || be.Errors[0].Line != 2 ||
		!strings.Contains(err.Error(), "full log: ") {
		t.Fatalf("compile error: %v", err)
	}
	if countResults(cache) != n {
		t.Error("a failed build left a result")
	}

	// Back to 1+2 (forced past the cache): a.c has the content make saw
	// when it last compiled it successfully... but the failed build
	// compiled it since, so it is compiled again, as is b.c.
	before := compiled(t, cache)
	if _, err := build("y", []string{p1, p2}, func(o *Options) { o.Rebuild = true }); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimPrefix(compiled(t, cache), before+" "); got != "fs/a fs/b" {
		t.Errorf("rebuild after the failure compiled %q, want fs/a fs/b", got)
	}
	before = compiled(t, cache)
	if _, err := build("y", []string{p1, p2}, func(o *Options) { o.Rebuild = true }); err != nil {
		t.Fatal(err)
	}
	if got := compiled(t, cache); got != before {
		t.Errorf("an unchanged series compiled %q", strings.TrimPrefix(got, before))
	}

	// A make that was killed may have left half-written objects: what it
	// wrote last is made again.
	stateFile, _ := filepath.Glob(filepath.Join(cache, "kernels", "build", "work", "*", "state.json"))
	st, err := readState(stateFile[0])
	if err != nil {
		t.Fatal(err)
	}
	st.MakeStarted = 1
	if err := st.save(stateFile[0]); err != nil {
		t.Fatal(err)
	}
	before = compiled(t, cache)
	if _, err := build("y", []string{p1, p2}, func(o *Options) { o.Rebuild = true }); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimPrefix(compiled(t, cache), before+" "); got != "fs/a fs/b" {
		t.Errorf("after a killed make compiled %q, want fs/a fs/b", got)
	}

	// A requested option that Kconfig drops, with its unmet dependency.
	dropFrag := writeTemp(t, dir, "drop.config", "CONFIG_A=y\nCONFIG_DROPME=y\n")
	_, err = build("d", nil, func(o *Options) { o.Config = []string{dropFrag} })
	var de *DroppedError
	if !errors.As(err, &de) || len(de.Dropped) != 1 || !strings.Contains(err.Error(), "CONFIG_DROPME=y ("+dropFrag+":2): got not set: unmet dependency NOPE (NOPE=n) (Kconfig:5)") {
		t.Fatalf("dropped: %v", err)
	}
	res, err = build("d", nil, func(o *Options) { o.Config = []string{dropFrag}; o.AllowDropped = true })
	if err != nil || len(res.Dropped) != 1 {
		t.Fatalf("--allow-dropped: %+v, %v", res, err)
	}

	// With modules, they are installed next to the image.
	modFrag := writeTemp(t, dir, "mod.config", "CONFIG_A=y\nCONFIG_MODULES=y\n")
	res, err = build("m", nil, func(o *Options) { o.Config = []string{modFrag} })
	if err != nil || res.Kernel.Modules == "" {
		t.Fatalf("modules: %+v, %v", res, err)
	}
	if !exists(filepath.Join(res.Kernel.Modules, "kernel", "fs", "x.ko")) || !exists(filepath.Join(res.Kernel.Modules, "modules.order")) {
		t.Errorf("modules dir %s lacks x.ko or modules.order", res.Kernel.Modules)
	}
	if _, err := os.Lstat(filepath.Join(res.Kernel.Modules, "build")); err == nil {
		t.Error("the modules dir keeps the build symlink into the work tree")
	}

	// A baseline and the patched kernel, both named.
	res, err = build("w", []string{p2}, func(o *Options) { o.WithBaseline = true })
	if err != nil || res.Baseline == nil || res.Baseline.Name != "build:w-base" || len(res.Baseline.Build.Patches) != 0 ||
		res.Kernel.Name != "build:w" || res.Baseline.ID == res.Kernel.ID {
		t.Fatalf("baseline: %+v, %v", res, err)
	}

	if kind == "git" {
		// A new commit in the user's tree is a new base; --rev picks the
		// old one, which is cached.
		writeTemp(t, tree, "fs/b.c", "int b;\n/* b at HEAD */\nint b2;\n")
		if _, err := git(ctx, tree, "commit", "-q", "-am", "second"); err != nil {
			t.Fatal(err)
		}
		res, err := build("head", nil, nil)
		if err != nil || res.Hit {
			t.Fatalf("new HEAD: %+v, %v", res, err)
		}
		if img, _ := os.ReadFile(res.Kernel.Image); !strings.Contains(string(img), "b at HEAD") {
			t.Error("the image lacks the new commit")
		}
		res, err = build("old", nil, func(o *Options) { o.Rev = "HEAD~1" })
		if err != nil || !res.Hit || res.Kernel.ID != resBase(t, cache, "w-base") {
			t.Fatalf("--rev HEAD~1: %+v, %v", res, err)
		}
		// The user's tree was never touched.
		out, err := git(ctx, tree, "status", "--porcelain")
		if err != nil || len(out) != 0 {
			t.Errorf("the user's tree changed: %q %v", out, err)
		}
	}
}

func runCmd(dir string, argv ...string) ([]byte, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// resBase returns the ID of the built kernel called name.
func resBase(t *testing.T, cache, name string) string {
	t.Helper()
	k, err := buildstore.New(cache).Lookup("build:" + name)
	if err != nil {
		t.Fatal(err)
	}
	return k.ID
}

// TestBuildSameInputsAtOnce: two builds of the same inputs at once make
// the kernel once; the one that waited for the work tree's lock finds the
// other's result, as a cache hit, and names it too.
func TestBuildSameInputsAtOnce(t *testing.T) {
	for _, c := range []string{"make", "git", "patch", "tar", "gcc", "ld", "flex", "bison", "bc", "perl"} {
		testenv.RequiresCommand(t, c)
	}
	dir, _, source := fakeSource(t, "git")
	frag := writeTemp(t, dir, "my.config", "CONFIG_A=y\nCONFIG_C=y\n")
	p1 := fakePatch(t, dir, "p1.patch", "a: one", "a", "/* a */", "/* a1 */")
	cache := filepath.Join(dir, "cache")
	results := make([]*Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, name := range []string{"one", "two"} {
		wg.Go(func() {
			results[i], errs[i] = Build(t.Context(), Options{Source: source, Patches: []string{p1}, Config: []string{frag}, Name: name, CacheDir: cache, Jobs: 1})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if results[0].Hit == results[1].Hit || results[0].Kernel.ID != results[1].Kernel.ID {
		t.Errorf("hits %v and %v, IDs %s and %s: want one build and one hit of the same kernel",
			results[0].Hit, results[1].Hit, results[0].Kernel.ID, results[1].Kernel.ID)
	}
	if got := compiled(t, cache); got != "fs/a fs/b" {
		t.Errorf("compiled %q, want each file once", got)
	}
	for _, name := range []string{"one", "two"} {
		if k, err := buildstore.New(cache).Lookup("build:" + name); err != nil || k.ID != results[0].Kernel.ID {
			t.Errorf("build:%s = %+v, %v", name, k, err)
		}
	}
}
