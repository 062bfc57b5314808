package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
)

func TestDiskBySerial(t *testing.T) {
	sys := t.TempDir()
	for dev, serial := range map[string]string{"vda": "other\n", "vdb": "klab-userspace\n"} {
		if err := os.MkdirAll(filepath.Join(sys, dev), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, dev, "serial"), []byte(serial), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(sys, "ram0"), 0o755); err != nil { // no serial at all
		t.Fatal(err)
	}
	if got, err := diskBySerial(sys, "klab-userspace", time.Second); err != nil || got != "/dev/vdb" {
		t.Errorf("got %q, %v", got, err)
	}
	_, err := diskBySerial(sys, "nosuch", 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "vda=other") || !strings.Contains(err.Error(), "virtio_blk") {
		t.Errorf("a missing disk: %v", err)
	}
}

func TestCheckGuestDir(t *testing.T) {
	for _, ok := range []string{"/klab/userspace", "/u"} {
		if err := checkGuestDir(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/", "rel", "/a/../b", "/proc", "/sys/x", "/dev/shm"} {
		if err := checkGuestDir(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestLookPathIn finds commands as a chrooted shell would: through links
// whose absolute targets are the root's own, not the host's.
func TestLookPathIn(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "etc/alternatives"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/gawk"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"bin": "/usr/bin", "etc/alternatives/awk": "/usr/bin/gawk", "usr/bin/awk": "/etc/alternatives/awk"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := lookPathIn(root, "awk", "/nosuch:/bin"); err != nil || got != "/bin/awk" {
		t.Errorf("awk: %q %v", got, err)
	}
	if got, err := lookPathIn(root, "./x", "/bin"); err != nil || got != "./x" {
		t.Errorf("a path: %q %v", got, err)
	}
	for _, missing := range []string{"data", "nosuch"} {
		if _, err := lookPathIn(root, missing, chrootPath); err == nil {
			t.Errorf("%s found", missing)
		}
	}
	if err := plainDir(root, "/etc/alternatives"); err != nil {
		t.Errorf("a plain directory: %v", err)
	}
	for _, bad := range []string{"/bin", "/usr/bin/gawk", "/nosuch", "/../etc"} {
		if err := plainDir(root, bad); err == nil {
			t.Errorf("%s is a plain directory", bad)
		}
	}
	for _, dir := range []string{"/", "/bin/../../etc/alternatives"} {
		if m, err := inRoot(root, dir); err != nil || m&0o170000 != 0o040000 {
			t.Errorf("directory %s in the root: %o %v", dir, m, err)
		}
	}
}

// TestExecRoot runs a command chrooted (into /, which needs root) with
// the userspace's environment and a working directory inside the root.
func TestExecRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root")
	}
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c", "echo $HOME $PATH; pwd"}, Root: "/", Dir: "/tmp"})
	before, d := h.until(1, 10*time.Second)
	checkDone(t, d, 1, 0, "")
	if got, want := stdout(before), "/root "+chrootPath+"\n/tmp\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	h.step(proto.Step{ID: 2, Kind: proto.StepExec, Argv: []string{"true"}, Root: "/", Dir: "/nosuch"})
	_, d = h.until(2, 10*time.Second)
	if d.ExitCode != -1 || !strings.Contains(d.Error, "working directory /nosuch") {
		t.Errorf("a missing directory: %+v", d)
	}
}

// TestCopyTree copies what a writable directory of the image holds into
// its tmpfs: directories, files and links, with modes and owners.
func TestCopyTree(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "lib/xfsprogs"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "spool"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "spool"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "lib/state"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "lib/state"), 0o666); err != nil { // past any umask
		t.Fatal(err)
	}
	if err := os.Symlink("/run/lock", filepath.Join(src, "lock")); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		"lib": os.ModeDir | 0o750, "lib/xfsprogs": os.ModeDir | 0o750, "spool": os.ModeDir | os.ModeSticky | 0o777, "lib/state": 0o666,
	} {
		if fi, err := os.Lstat(filepath.Join(dst, p)); err != nil || fi.Mode() != want {
			t.Errorf("%s: %v (%v), want %v", p, fi.Mode(), err, want)
		}
	}
	if got, err := os.Readlink(filepath.Join(dst, "lock")); err != nil || got != "/run/lock" {
		t.Errorf("link: %q %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "lib/state")); err != nil || string(got) != "s" {
		t.Errorf("file: %q %v", got, err)
	}
}
