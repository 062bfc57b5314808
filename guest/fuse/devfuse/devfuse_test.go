package devfuse

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"klab/internal/testenv"
)

func TestMountArgs(t *testing.T) {
	o := MountOptions{Subtype: "klab-x", Options: []string{"allow_other,default_permissions", "ro", "max_read=131072", "suid", "fsname=mine", "noatime"}}
	source, fstype, flags, data, err := o.mountArgs(7)
	if err != nil {
		t.Fatal(err)
	}
	if source != "mine" || fstype != "fuse.klab-x" {
		t.Errorf("source %q type %q", source, fstype)
	}
	if flags&unix.MS_RDONLY == 0 || flags&unix.MS_NOSUID != 0 || flags&unix.MS_NODEV == 0 || flags&unix.MS_NOATIME == 0 {
		t.Errorf("flags %#x", flags)
	}
	for _, want := range []string{"fd=7", "rootmode=40000", "allow_other", "default_permissions", "max_read=131072"} {
		if !strings.Contains(data, want) {
			t.Errorf("data %q lacks %q", data, want)
		}
	}
	_, _, _, _, err = MountOptions{Options: []string{"allow_other,bogus", "max_read=x", "context=foo"}}.mountArgs(3)
	if err == nil || !strings.Contains(err.Error(), "bogus, max_read=x, context=foo") {
		t.Errorf("bad options: %v", err)
	}
}

func TestFindMount(t *testing.T) {
	m, err := FindMount("/proc")
	if err != nil {
		testenv.Missingf(t, "no /proc mount here: %v", err)
	}
	if m.FSType != "proc" || m.Mountpoint != "/proc" {
		t.Errorf("FindMount(/proc) = %+v", m)
	}
	dir := t.TempDir()
	if _, err := FindMount(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("FindMount of a plain directory: %v", err)
	}
	if (MountInfo{Major: 0, Minor: 42}).ConnID() != 42 {
		t.Error("ConnID")
	}
}
