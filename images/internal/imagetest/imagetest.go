// Package imagetest makes the files that the tests of package images and
// its subpackages feed them: bzImage headers, kernel modules, compressed
// files. It is for tests only.
package imagetest

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/ulikunitz/xz"
)

// BzImage returns the first 4 KiB of an x86_64 bzImage whose setup header
// carries version (none when empty).
func BzImage(version string) []byte {
	b := make([]byte, 4096)
	b[0x1FE], b[0x1FF] = 0x55, 0xAA
	copy(b[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(b[0x206:], 0x020F) // protocol 2.15
	b[0x211] = 1                                     // LOADED_HIGH
	binary.LittleEndian.PutUint16(b[0x236:], 0x7F)   // XLF_KERNEL_64 and friends
	if version != "" {
		const at = 0x3C0
		binary.LittleEndian.PutUint16(b[0x20E:], at-0x200)
		copy(b[at:], version+"\x00")
	}
	return b
}

// Module returns a minimal x86_64 ELF64 relocatable object whose .modinfo
// section holds the given key=value strings, as a .ko has.
func Module(modinfo ...string) []byte {
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

// XZ compresses b as a .ko.xz is.
func XZ(t *testing.T, b []byte) []byte {
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

// WriteFile writes data to path, making its directories, and returns
// path.
func WriteFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
