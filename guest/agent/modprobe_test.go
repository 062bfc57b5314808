package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseSpare(t *testing.T) {
	in := "# spare modules\nfuse fuse.ko fs-fuse,char-major-10-229,devname:fuse\n\nbrd brd.ko -\n"
	got, err := ParseSpare(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "fuse" || got[0].File != "fuse.ko" || len(got[0].Aliases) != 3 || got[1].Name != "brd" || got[1].Aliases != nil {
		t.Fatalf("ParseSpare = %+v", got)
	}
	if _, err := ParseSpare(strings.NewReader("fuse fuse.ko\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a line with two fields: err = %v, want one naming line 1", err)
	}
}

func TestFindSpare(t *testing.T) {
	spares := []SpareModule{
		{Name: "fuse", File: "fuse.ko", Aliases: []string{"fs-fuse", "char-major-10-229", "devname:fuse"}},
		{Name: "brd", File: "brd.ko", Aliases: []string{"rd", "block-major-1-*"}},
		{Name: "virtio_blk", File: "virtio_blk.ko"},
	}
	for name, want := range map[string]string{
		"fuse": "fuse", "char-major-10-229": "fuse", "fs-fuse": "fuse",
		"block-major-1-0": "brd", "rd": "brd", "virtio-blk": "virtio_blk",
		"fs-ext4": "", "char-major-10-2": "",
	} {
		m, ok := FindSpare(spares, name)
		if ok != (want != "") || m.Name != want {
			t.Errorf("FindSpare(%q) = %q, %v; want %q", name, m.Name, ok, want)
		}
	}
}

func TestStaticNode(t *testing.T) {
	node, typ, major, minor, ok := StaticNode([]string{"fs-fuse", "devname:fuse", "char-major-10-229"})
	if !ok || node != "fuse" || typ != unix.S_IFCHR || major != 10 || minor != 229 {
		t.Errorf("fuse: %q %o %d:%d %v", node, typ, major, minor, ok)
	}
	node, typ, major, minor, ok = StaticNode([]string{"devname:loop-control", "char-major-10-237", "block-major-7-*"})
	if !ok || node != "loop-control" || typ != unix.S_IFCHR || major != 10 || minor != 237 {
		t.Errorf("loop: %q %o %d:%d %v", node, typ, major, minor, ok)
	}
	for _, aliases := range [][]string{
		{"char-major-10-229"},                     // no devname
		{"devname:fuse"},                          // no numbers
		{"devname:../etc/x", "char-major-10-229"}, // outside /dev
		{"devname:/x", "char-major-10-229"},
		{"devname:fuse", "char-major-10-x"},
	} {
		if node, _, _, _, ok := StaticNode(aliases); ok {
			t.Errorf("StaticNode(%q) = %q, want none", aliases, node)
		}
	}
}

func TestModprobeMainErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "spare"), []byte("fuse fuse.ko fs-fuse\nbrd brd.ko -\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "usage: modprobe"},
		{[]string{"-r", "fuse"}, "-r: not supported"},
		{[]string{"ext4"}, "ext4: no such module in this guest (its spare modules: fuse, brd)"},
		{[]string{"-q", "--", "fs-ext4"}, ""}, // the kernel's call: quiet
		{[]string{"fuse"}, "fuse.ko"},         // in the spare list, but no file here
	} {
		var stderr bytes.Buffer
		if got := ModprobeMain(dir, c.args, &stderr); got != 1 {
			t.Errorf("ModprobeMain(%q) = %d, want 1", c.args, got)
		}
		if c.want == "" && stderr.Len() != 0 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("ModprobeMain(%q) said %q, want %q", c.args, stderr.String(), c.want)
		}
	}
}
