package images

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"klab/internal/testenv"
)

// fakeModule returns a minimal x86_64 ELF64 relocatable object whose
// .modinfo section holds the given key=value strings, as a .ko has.
func fakeModule(modinfo ...string) []byte {
	var info []byte
	for _, kv := range modinfo {
		info = append(info, kv...)
		info = append(info, 0)
	}
	shstr := []byte("\x00.modinfo\x00.shstrtab\x00")
	const ehsize, shentsize = 64, 64
	infoOff := ehsize
	strOff := infoOff + len(info)
	shOff := (strOff + len(shstr) + 7) &^ 7
	b := make([]byte, shOff+3*shentsize)
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = 2, 1, 1 // ELFCLASS64, little endian, EV_CURRENT
	le := binary.LittleEndian
	le.PutUint16(b[16:], 1)  // ET_REL
	le.PutUint16(b[18:], 62) // EM_X86_64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[40:], uint64(shOff))
	le.PutUint16(b[52:], ehsize)
	le.PutUint16(b[58:], shentsize)
	le.PutUint16(b[60:], 3) // e_shnum
	le.PutUint16(b[62:], 2) // e_shstrndx
	copy(b[infoOff:], info)
	copy(b[strOff:], shstr)
	sh := func(i int, name, typ uint32, flags uint64, off, size int) {
		s := b[shOff+i*shentsize:]
		le.PutUint32(s[0:], name)
		le.PutUint32(s[4:], typ)
		le.PutUint64(s[8:], flags)
		le.PutUint64(s[24:], uint64(off))
		le.PutUint64(s[32:], uint64(size))
		le.PutUint64(s[48:], 1) // sh_addralign
	}
	sh(1, 1, 1 /* SHT_PROGBITS */, 2 /* SHF_ALLOC */, infoOff, len(info))
	sh(2, 10, 3 /* SHT_STRTAB */, 0, strOff, len(shstr))
	return b
}

func compressXZ(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

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
		"drivers/a.ko":              fakeModule("license=GPL", "softdep=pre: s missing_soft post: t", "depends=b,c,builtin-one", "name=a"),
		"drivers/b.ko":              fakeModule("depends=c"),
		"fs/c.ko":                   fakeModule("depends="),
		"lib/s.ko":                  fakeModule("depends="),
		"lib/t.ko":                  fakeModule("depends="),
		"fs/e.ko.xz":                compressXZ(t, fakeModule("depends=f")),
		"fs/f.ko.zst":               compressZstd(t, fakeModule("depends=g")),
		"fs/g.ko.gz":                compressGzip(t, fakeModule("depends=")),
		"x/x.ko":                    fakeModule("depends=y"),
		"x/y.ko":                    fakeModule("depends=x"),
		"x/h.ko":                    fakeModule("depends=zzz"),
		"drivers/virtio-console.ko": fakeModule("depends=virtio_ring"),
		"drivers/virtio_ring.ko":    fakeModule(),
		"fs/builtin_one.ko":         fakeModule(), // stale file of a built-in module
	}
	for p, data := range mods {
		writeFile(t, filepath.Join(k, p), data)
	}
	writeFile(t, filepath.Join(dir, "modules.builtin"), []byte("kernel/fs/builtin_one.ko\nkernel/fs/fuse/fuse.ko\n"))
	writeFile(t, filepath.Join(dir, "modules.order"), []byte("kernel/drivers/a.ko\n"))
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
	plain := fakeModule("depends=a,b", "vermagic=7.3.4")
	for name, data := range map[string][]byte{
		"m.ko":     plain,
		"m.ko.xz":  compressXZ(t, plain),
		"m.ko.zst": compressZstd(t, plain),
		"m.ko.gz":  compressGzip(t, plain),
	} {
		p := writeFile(t, filepath.Join(dir, name), data)
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
	bad := writeFile(t, filepath.Join(dir, "bad.ko.xz"), []byte("not xz"))
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
	src := writeFile(t, filepath.Join(dir, "m.c"), []byte(
		`__attribute__((section(".modinfo"), used)) static const char a[] = "depends=b,c";`+"\n"+
			`__attribute__((section(".modinfo"), used)) static const char s[] = "softdep=pre: d";`+"\n"))
	obj := filepath.Join(dir, "kernel", "m.ko")
	writeFile(t, obj, nil)
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
	if err := os.WriteFile(p, fakeModule("license=GPL", "alias=fs-fuse", "alias=devname:fuse", "alias=char-major-10-229", "alias=bad alias", "alias=", "depends="), 0o644); err != nil {
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
