package images

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"klab/images/internal/imagetest"
	"klab/internal/testenv"
)

func compressZstd(t *testing.T, b []byte) []byte {
	t.Helper()
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return w.EncodeAll(b, nil)
}

func compressGzip(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fakeModulesDir builds a modules directory:
//
//	a -> b, c, builtin_one; softdep pre: s missing_soft; post: t
//	b -> c
//	e (.xz) -> f (.zst) -> g (.gz)
//	x <-> y (a cycle)
//	h -> zzz (missing)
//	virtio_console (file virtio-console.ko) -> virtio_ring
func fakeModulesDir(t *testing.T) string {
	dir := t.TempDir()
	k := filepath.Join(dir, "kernel")
	mods := map[string][]byte{
		"drivers/a.ko":              imagetest.Module("license=GPL", "softdep=pre: s missing_soft post: t", "depends=b,c,builtin-one", "name=a"),
		"drivers/b.ko":              imagetest.Module("depends=c"),
		"fs/c.ko":                   imagetest.Module("depends="),
		"lib/s.ko":                  imagetest.Module("depends="),
		"lib/t.ko":                  imagetest.Module("depends="),
		"fs/e.ko.xz":                imagetest.XZ(t, imagetest.Module("depends=f")),
		"fs/f.ko.zst":               compressZstd(t, imagetest.Module("depends=g")),
		"fs/g.ko.gz":                compressGzip(t, imagetest.Module("depends=")),
		"x/x.ko":                    imagetest.Module("depends=y"),
		"x/y.ko":                    imagetest.Module("depends=x"),
		"x/h.ko":                    imagetest.Module("depends=zzz"),
		"drivers/virtio-console.ko": imagetest.Module("depends=virtio_ring"),
		"drivers/virtio_ring.ko":    imagetest.Module(),
		"fs/builtin_one.ko":         imagetest.Module(), // stale file of a built-in module
	}
	for p, data := range mods {
		imagetest.WriteFile(t, filepath.Join(k, p), data)
	}
	imagetest.WriteFile(t, filepath.Join(dir, "modules.builtin"), []byte("kernel/fs/builtin_one.ko\nkernel/fs/fuse/fuse.ko\n"))
	imagetest.WriteFile(t, filepath.Join(dir, "modules.order"), []byte("kernel/drivers/a.ko\n"))
	return dir
}

func names(ms []Module) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Name)
	}
	return strings.Join(s, " ")
}

func TestModuleClosure(t *testing.T) {
	dir := fakeModulesDir(t)
	tests := []struct {
		want []string
		got  string
	}{
		{[]string{"a"}, "c b s a"},
		{[]string{"c", "a"}, "c b s a"},
		{[]string{"e"}, "g f e"},
		{[]string{"fuse", "builtin_one", "builtin-one"}, ""},
		{[]string{"virtio-console"}, "virtio_ring virtio_console"},
		{[]string{"fuse", "virtio_console", "e"}, "virtio_ring virtio_console g f e"},
		{[]string{"x"}, "y x"},
		{[]string{"y", "x"}, "x y"},
	}
	for _, tc := range tests {
		ms, err := ModuleClosure(dir, tc.want)
		if err != nil {
			t.Errorf("ModuleClosure(%v): %v", tc.want, err)
			continue
		}
		if got := names(ms); got != tc.got {
			t.Errorf("ModuleClosure(%v) = %q, want %q", tc.want, got, tc.got)
		}
		for _, m := range ms {
			if !strings.HasPrefix(m.Path, filepath.Join(dir, "kernel")+"/") {
				t.Errorf("module %s has path %s", m.Name, m.Path)
			}
		}
	}

	_, err := ModuleClosure(dir, []string{"fuse", "nope"})
	if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), dir) {
		t.Errorf("missing module: err = %v", err)
	}
	_, err = ModuleClosure(dir, []string{"h"})
	if err == nil || !strings.Contains(err.Error(), `"zzz" (needed by h)`) {
		t.Errorf("missing dependency: err = %v", err)
	}
	if _, err := ModuleClosure("", []string{"brd"}); err == nil || !strings.Contains(err.Error(), "without a modules directory") {
		t.Errorf("no modules dir: err = %v", err)
	}
	if _, err := ModuleClosure(filepath.Join(dir, "missing"), []string{"a"}); err == nil {
		t.Error("missing modules dir: no error")
	}
}

func TestReadModule(t *testing.T) {
	dir := t.TempDir()
	plain := imagetest.Module("depends=a,b", "vermagic=7.3.4")
	for name, data := range map[string][]byte{
		"m.ko":     plain,
		"m.ko.xz":  imagetest.XZ(t, plain),
		"m.ko.zst": compressZstd(t, plain),
		"m.ko.gz":  compressGzip(t, plain),
	} {
		p := imagetest.WriteFile(t, filepath.Join(dir, name), data)
		got, err := ReadModule(p)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(got, plain) {
			t.Errorf("%s: decompressed bytes differ", name)
		}
		hard, _, err := moduleDeps(p)
		if err != nil || strings.Join(hard, ",") != "a,b" {
			t.Errorf("%s: depends = %v, %v", name, hard, err)
		}
	}
	bad := imagetest.WriteFile(t, filepath.Join(dir, "bad.ko.xz"), []byte("not xz"))
	if _, err := ReadModule(bad); err == nil {
		t.Error("corrupt .ko.xz: no error")
	}
}

func TestParseSoftdepPre(t *testing.T) {
	for in, want := range map[string]string{
		"pre: crc32c":              "crc32c",
		"pre: a b post: c":         "a b",
		"post: c pre: d":           "d",
		"post: c":                  "",
		"pre: platform:x86 post: ": "platform:x86",
	} {
		if got := strings.Join(parseSoftdepPre(in), " "); got != want {
			t.Errorf("parseSoftdepPre(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestModinfoFromGCC checks the .modinfo reader against an object file
// made by a real compiler, when there is one.
func TestModinfoFromGCC(t *testing.T) {
	testenv.RequiresCommand(t, "gcc")
	dir := t.TempDir()
	src := imagetest.WriteFile(t, filepath.Join(dir, "m.c"), []byte(
		`__attribute__((section(".modinfo"), used)) static const char a[] = "depends=b,c";`+"\n"+
			`__attribute__((section(".modinfo"), used)) static const char s[] = "softdep=pre: d";`+"\n"))
	obj := filepath.Join(dir, "kernel", "m.ko")
	imagetest.WriteFile(t, obj, nil)
	if out, err := exec.Command("gcc", "-c", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -c failed: %v\n%s", err, out)
	}
	hard, pre, err := moduleDeps(obj)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(hard, ",") != "b,c" || strings.Join(pre, ",") != "d" {
		t.Errorf("depends = %v, softdep pre = %v", hard, pre)
	}
}

func TestModuleAliases(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fuse.ko")
	if err := os.WriteFile(p, imagetest.Module("license=GPL", "alias=fs-fuse", "alias=devname:fuse", "alias=char-major-10-229", "alias=bad alias", "alias=", "depends="), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := moduleAliases(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "fs-fuse devname:fuse char-major-10-229" {
		t.Errorf("aliases = %q, want fs-fuse, devname:fuse and char-major-10-229 (none with a space, none empty)", got)
	}
}
