package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/u-root/mkuimage/cpio"
)

func TestCheckTimes(t *testing.T) {
	out := `FSTYP         -- ext4
MKFS_OPTIONS  -- -F /dev/ram1

generic/020        42s
generic/184 9s ...  10s
generic/236       [not run] no such thing
generic/245       - output mismatch (see /r/generic/245.out.bad)
Ran: generic/020 generic/184 generic/236
Passed all 3 tests
`
	want := []testTime{{"generic/020", 42}, {"generic/184", 10}}
	if got := checkTimes(out); !reflect.DeepEqual(got, want) {
		t.Errorf("checkTimes = %v, want %v", got, want)
	}
}

func TestMarkerIntervals(t *testing.T) {
	con := "[   66.060550] run fstests generic/020 at 2026-12-03 17:59:31\r\n" +
		"[  105.124727] EXT4-fs (ram0): unmounting filesystem\n" +
		"[  128.289089] run fstests generic/184 at 2026-12-03 18:00:33\n" +
		"[  179.571109] run fstests generic/236 at 2026-12-03 18:01:24\n"
	got := markerIntervals(con)
	if len(got) != 2 || int(got["generic/020"]) != 62 || int(got["generic/184"]) != 51 {
		t.Errorf("markerIntervals = %v", got)
	}
}

func TestModuleRecords(t *testing.T) {
	// Two archives one after the other, as klab's initramfs is.
	path := filepath.Join(t.TempDir(), "i.cpio")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, recs := range [][]cpio.Record{
		{cpio.StaticFile("init", "agent", 0o755)},
		{cpio.Directory(modulesPrefix, 0o755), cpio.StaticFile(modulesPrefix+"/order", "virtio_blk virtio_blk.ko -\n", 0o644),
			cpio.StaticFile(modulesPrefix+"/virtio_blk.ko", "ELF", 0o644)},
	} {
		w := cpio.Newc.Writer(f)
		if err := cpio.WriteRecords(w, recs); err != nil {
			t.Fatal(err)
		}
		if err := cpio.WriteTrailer(w); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	recs, err := moduleRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
	}
	if want := []string{modulesPrefix + "/order", modulesPrefix + "/virtio_blk.ko"}; !reflect.DeepEqual(names, want) {
		t.Errorf("moduleRecords = %v, want %v", names, want)
	}
}
