package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
)

// diskWait bounds the wait for a userspace disk to show up under
// /sys/block once its step runs.
const diskWait = 10 * time.Second

// runUserspace mounts a userspace image (StepUserspace): the disk with the
// step's serial, read-only on the root, a tmpfs on each writable
// directory, /proc, /sys and /dev bound in, and lo up. Exec steps with
// Step.Root run chrooted into it.
func runUserspace(_ context.Context, a *Agent, s *proto.Step) proto.Done {
	if s.Userspace == nil {
		return proto.Done{ExitCode: -1, Error: "userspace step without its userspace field"}
	}
	if err := MountUserspace(s.Userspace, a.Logf); err != nil {
		return proto.Done{ExitCode: -1, Error: err.Error()}
	}
	return proto.Done{}
}

// MountUserspace mounts the userspace u describes (see runUserspace);
// logf receives what does not stop it.
func MountUserspace(u *proto.UserspaceStep, logf func(format string, args ...any)) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("userspace: "+format, args...)
	}
	if err := checkGuestDir(u.Root); err != nil {
		return fail("root: %v", err)
	}
	if u.Serial == "" || u.FSType == "" {
		return fail("no disk serial or file system type")
	}
	dev, err := diskBySerial("/sys/block", u.Serial, diskWait)
	if err != nil {
		return fail("%v", err)
	}
	if err := os.MkdirAll(u.Root, 0o755); err != nil {
		return fail("%v", err)
	}
	if err := unix.Mount(dev, u.Root, u.FSType, unix.MS_RDONLY, ""); err != nil {
		return fail("mount %s (%s) on %s: %v", dev, u.FSType, u.Root, err)
	}
	for _, w := range u.Writable {
		if !filepath.IsAbs(w) || filepath.Clean(w) != w || w == "/" {
			return fail("writable directory %q: want a clean absolute path inside the root", w)
		}
		if err := writableDir(u.Root, w); err != nil {
			return fail("writable %s: %v", w, err)
		}
	}
	for _, d := range []string{"/proc", "/sys", "/dev"} {
		if err := plainDir(u.Root, d); err != nil {
			return fail("bind %s into the root: %v", d, err)
		}
		if err := unix.Mount(d, filepath.Join(u.Root, d), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fail("bind %s into the root: %v", d, err)
		}
	}
	if err := loopbackUp(); err != nil {
		logf("userspace: lo stays down: %v", err)
	}
	return nil
}

// writableDir puts a tmpfs on the root's directory w that starts with
// what the image has there: the tmpfs is mounted aside, the directory's
// content copied into it, and the tmpfs moved over the directory.
func writableDir(root, w string) error {
	if err := plainDir(root, w); err != nil {
		return err
	}
	target := filepath.Join(root, w)
	fi, err := os.Lstat(target)
	if err != nil {
		return err
	}
	aside, err := os.MkdirTemp("", "klab-rw-")
	if err != nil {
		return err
	}
	defer os.Remove(aside)
	mode := fmt.Sprintf("mode=%04o", uint32(fi.Mode().Perm())|stickyBit(fi.Mode()))
	if err := unix.Mount("tmpfs", aside, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, mode); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	if err := copyTree(target, aside); err != nil {
		_ = unix.Unmount(aside, unix.MNT_DETACH)
		return fmt.Errorf("copy the image's %s: %w", w, err)
	}
	if err := unix.Mount(aside, target, "", unix.MS_MOVE, ""); err != nil {
		_ = unix.Unmount(aside, unix.MNT_DETACH)
		return fmt.Errorf("move the tmpfs over it: %w", err)
	}
	return nil
}

// plainDir checks that the root has the directory p with no link on the
// way, so that what the agent mounts there stays inside the root.
func plainDir(root, p string) error {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, strings.TrimLeft(p, "/"), &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS,
	})
	if err != nil {
		return fmt.Errorf("the image has no plain directory %s: %w", p, err)
	}
	return unix.Close(fd)
}

// stickyBit is the mode bit 01000 when m has it.
func stickyBit(m os.FileMode) uint32 {
	if m&os.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}

// copyTree copies the content of directory src into dst, an existing
// directory: subdirectories, regular files and links, with their modes
// and owners.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		to := filepath.Join(dst, rel)
		fi, err := de.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			err = os.Mkdir(to, fi.Mode().Perm())
		case fi.Mode()&os.ModeSymlink != 0:
			var target string
			if target, err = os.Readlink(p); err == nil {
				err = os.Symlink(target, to)
			}
		case fi.Mode().IsRegular():
			var data []byte
			if data, err = os.ReadFile(p); err == nil {
				err = os.WriteFile(to, data, fi.Mode().Perm())
			}
		default:
			return nil // no devices, sockets or pipes
		}
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			_ = os.Lchown(to, int(st.Uid), int(st.Gid))
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return nil
		}
		// After the owner, which clears set-id bits; whole, past umask.
		return os.Chmod(to, fi.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetuid|os.ModeSetgid))
	})
}

// checkGuestDir refuses a guest path that is not a clean absolute path,
// or that is / or under /proc, /sys or /dev.
func checkGuestDir(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
		return fmt.Errorf("%q: want a clean absolute path other than /", p)
	}
	for _, d := range []string{"/proc", "/sys", "/dev"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return fmt.Errorf("%s: not under %s", p, d)
		}
	}
	return nil
}

// diskBySerial returns the /dev path of the block device under sysBlock
// (/sys/block) whose serial is serial, waiting up to wait for it to
// appear: the virtio-blk driver may still be probing it.
func diskBySerial(sysBlock, serial string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		des, _ := os.ReadDir(sysBlock)
		var seen []string
		for _, de := range des {
			b, err := os.ReadFile(filepath.Join(sysBlock, de.Name(), "serial"))
			if err != nil {
				continue
			}
			got := strings.TrimSpace(string(b))
			if got == serial {
				return "/dev/" + de.Name(), nil
			}
			seen = append(seen, de.Name()+"="+got)
		}
		if time.Now().After(deadline) {
			list := "none"
			if len(seen) > 0 {
				list = strings.Join(seen, " ")
			}
			return "", fmt.Errorf("no disk with serial %q after %v (disks with serials: %s; is virtio_blk loaded?)", serial, wait, list)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// loopbackUp sets the lo interface up. The ioctl goes through a Unix
// socket, so that kernels without IPv4 can do it too.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("read flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set flags: %w", err)
	}
	return nil
}

// chrootPath is the PATH of commands run in a userspace, Debian's for
// root.
const chrootPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// chrootEnv is the environment of a command chrooted into a userspace:
// a login's basics for root (none of the agent's own, which names paths
// of the initramfs), then extra.
func chrootEnv(extra []string) []string {
	env := []string{"PATH=" + chrootPath, "HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/bash"}
	return append(env, extra...)
}

// inRoot opens p (absolute, or relative to the root's /) inside root as a
// chrooted process would see it: links, absolute ones included, resolve
// inside root. It returns the file's mode.
func inRoot(root, p string) (uint32, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(rfd)
	rel := strings.TrimLeft(p, "/")
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Mode, nil
}

// lookPathIn finds file in the directories of pathEnv inside root, as the
// root's shell would; the result is a path inside the root. A name with a
// slash is used as is.
func lookPathIn(root, file, pathEnv string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if m, err := inRoot(root, p); err == nil && m&unix.S_IFMT == unix.S_IFREG && m&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %q: executable file not found in PATH %s of %s", file, pathEnv, root)
}

// bindInto makes the mount at guest path p visible at the same path inside
// the userspace on root, for a step chrooted there (a check with
// userspace: true on a mounted server). The directory is made when
// missing; it must lie in one of the userspace's writable directories.
// The returned function undoes the bind.
func bindInto(root, p string) (func(), error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
		return nil, fmt.Errorf("userspace: %q: want a clean absolute path", p)
	}
	target := filepath.Join(root, p)
	if err := os.MkdirAll(target, 0o755); err != nil {
		return nil, fmt.Errorf("userspace: %s cannot be made in the userspace (only its writable directories can take it): %w", p, err)
	}
	if err := plainDir(root, p); err != nil {
		return nil, fmt.Errorf("userspace: %w", err)
	}
	if err := unix.Mount(p, target, "", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("userspace: bind %s into %s: %w", p, root, err)
	}
	return func() { unix.Unmount(target, unix.MNT_DETACH) }, nil
}
