// Command bareinit is the minimal static /init that klab-bench-fstests boots
// to run fstests without klab: it loads the modules it finds in its
// initramfs (the ones klab's initramfs had for the same kernel), mounts
// the test-suite userspace read-only with tmpfs on its writable
// directories, mounts the fstests disk read-only, makes the TEST file
// system and runs ./check chrooted, with the local.config and test list
// its initramfs carries. check's standard output goes to a file, printed
// on the console between two marker lines once check ends (so that kernel
// messages do not cut its lines); then it powers off.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Paths in the initramfs and in the guest.
const (
	modulesDir = "/lib/klab/modules"
	root       = "/u"
	tree       = "/var/lib/bare-fstests"
	benchDir   = "/bench"
)

func main() {
	if err := run(); err != nil {
		fmt.Println("bareinit:", err)
	}
	fmt.Println("bareinit: done")
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func run() error {
	for _, m := range []struct{ src, dst, fs string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"},
	} {
		_ = os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, 0, ""); err != nil {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	if err := loadModules(); err != nil {
		return err
	}
	us, err := disk("klab-userspace")
	if err != nil {
		return err
	}
	fst, err := disk("klab-fstests")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(us, root, "ext4", unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("mount the userspace: %w", err)
	}
	for _, w := range []string{"/tmp", "/var/tmp", "/run", "/mnt", "/root", "/var/log", "/var/lib"} {
		if err := writable(w); err != nil {
			return fmt.Errorf("writable %s: %w", w, err)
		}
	}
	for _, d := range []string{"/proc", "/sys", "/dev"} {
		if err := unix.Mount(d, root+d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", d, err)
		}
	}
	if err := loopbackUp(); err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	for _, d := range []string{tree, "/mnt/test", "/mnt/scratch"} {
		if err := os.MkdirAll(root+d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount(fst, root+tree, "ext4", unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("mount the fstests disk: %w", err)
	}
	cfg, err := os.ReadFile(benchDir + "/local.config")
	if err != nil {
		return err
	}
	if err := os.WriteFile(root+"/tmp/local.config", cfg, 0o644); err != nil {
		return err
	}
	if err := chroot("/", nil, os.Stdout, "mkfs.ext4", "-F", "-q", "/dev/ram0"); err != nil {
		return fmt.Errorf("mkfs.ext4: %w", err)
	}
	tests, err := os.ReadFile(benchDir + "/tests")
	if err != nil {
		return err
	}
	out, err := os.Create("/check.out")
	if err != nil {
		return err
	}
	defer out.Close()
	fmt.Println("bareinit: check starts")
	start := time.Now()
	env := []string{"HOST_OPTIONS=/tmp/local.config", "RESULT_BASE=/tmp/results", "DIFF_LENGTH=200"}
	err = chroot(tree, env, out, append([]string{"./check", "-R", "xunit-quiet"}, strings.Fields(string(tests))...)...)
	fmt.Printf("bareinit: check ran %.3fs\n", time.Since(start).Seconds())
	b, _ := os.ReadFile("/check.out")
	fmt.Printf("bareinit: check output begins\n%sbareinit: check output ends\n", b)
	return err
}

// loadModules loads the modules of modulesDir/order, then brd with the
// parameters in benchDir/brd when the kernel has no ram disk built in.
func loadModules() error {
	if b, err := os.ReadFile(modulesDir + "/order"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && !strings.HasPrefix(f[0], "#") {
				if err := load(f[1], ""); err != nil {
					return err
				}
			}
		}
	}
	if _, err := os.Stat("/dev/ram0"); err == nil {
		return nil
	}
	params, _ := os.ReadFile(benchDir + "/brd")
	b, err := os.ReadFile(modulesDir + "/spare")
	if err != nil {
		return fmt.Errorf("no /dev/ram0 and no spare modules: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "brd" {
			return load(f[1], strings.TrimSpace(string(params)))
		}
	}
	return fmt.Errorf("no /dev/ram0 and no brd module")
}

func load(file, params string) error {
	f, err := os.Open(filepath.Join(modulesDir, file))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), params, 0); err != nil && err != unix.EEXIST {
		return fmt.Errorf("load %s: %w", file, err)
	}
	return nil
}

// disk waits for the virtio disk with serial and returns its /dev path.
func disk(serial string) (string, error) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		des, _ := os.ReadDir("/sys/block")
		for _, de := range des {
			b, _ := os.ReadFile(filepath.Join("/sys/block", de.Name(), "serial"))
			if strings.TrimSpace(string(b)) == serial {
				return "/dev/" + de.Name(), nil
			}
		}
	}
	return "", fmt.Errorf("no disk with serial %s", serial)
}

// writable puts a tmpfs holding a copy of the image's content on the
// root's directory w.
func writable(w string) error {
	aside := "/aside" + strings.ReplaceAll(w, "/", "-")
	if err := os.MkdirAll(aside, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", aside, "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	src := root + w
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == src {
			return err
		}
		to := filepath.Join(aside, strings.TrimPrefix(p, src))
		switch {
		case fi.IsDir():
			err = os.Mkdir(to, fi.Mode().Perm())
		case fi.Mode()&os.ModeSymlink != 0:
			var t string
			if t, err = os.Readlink(p); err == nil {
				err = os.Symlink(t, to)
			}
		case fi.Mode().IsRegular():
			var b []byte
			if b, err = os.ReadFile(p); err == nil {
				err = os.WriteFile(to, b, fi.Mode().Perm())
			}
		default:
			return nil
		}
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		_ = os.Lchown(to, int(st.Uid), int(st.Gid))
		if fi.Mode()&os.ModeSymlink == 0 {
			return os.Chmod(to, fi.Mode()&(os.ModePerm|os.ModeSticky|os.ModeSetuid|os.ModeSetgid))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if fi, err := os.Stat(src); err == nil {
		_ = os.Chmod(aside, fi.Mode()&(os.ModePerm|os.ModeSticky))
	}
	return unix.Mount(aside, src, "", unix.MS_MOVE, "")
}

// chroot runs argv chrooted into the userspace, in dir, its standard
// output to stdout and its standard error on the console.
func chroot(dir string, env []string, stdout *os.File, argv ...string) error {
	// The path is the root's: the command is looked up after chroot.
	cmd := &exec.Cmd{Path: argv[0], Args: argv}
	if !strings.Contains(argv[0], "/") {
		cmd.Path = "/usr/sbin/" + argv[0]
	}
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, stdout, os.Stderr
	cmd.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "USER=root", "LOGNAME=root", "SHELL=/bin/bash"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Setsid: true}
	return cmd.Run()
}

// loopbackUp sets lo up.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
