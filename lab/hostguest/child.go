package hostguest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"klab/guest/agent"
)

// Hidden first arguments with which klab's executable runs as the host
// guest's processes (Main).
const (
	// confineArg: klab CONFINE ROOT [KIND=PATH...] sets up the private
	// root in the new mount namespace it was started in, chroots into
	// it and runs the agent there (serveArg).
	confineArg = "__klab-host-confine"
	// serveArg: klab-agent SERVE [KIND=PATH...] is the agent serving the
	// host on stdin and stdout, in the private root.
	serveArg = "__klab-host-agent"
)

// Paths inside the private root.
const (
	// binDir holds the agent (as klab-agent, so that a check's
	// "klab-agent fuse check" finds it) and the libfuse servers.
	binDir = "/klab/bin"
	// agentName is the agent's file name in binDir.
	agentName = "klab-agent"
	// childPath is the agent's PATH.
	childPath = binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// Main runs klab's executable as one of the host guest's processes when
// args (os.Args) asks for one, and returns its exit status and true; it
// returns false for any other command line. klab's main calls it first.
func Main(args []string) (int, bool) {
	if len(args) < 2 {
		return 0, false
	}
	switch args[1] {
	case agent.WorkloadChildArg:
		// The agent runs each workload in a child process of its own
		// executable.
		return agent.WorkloadChildMain(os.Stdin, os.Stdout), true
	case confineArg:
		if len(args) < 3 {
			fmt.Fprintln(os.Stderr, "klab: host agent: no root directory")
			return 2, true
		}
		err := confine(args[2], args[3:])
		fmt.Fprintf(os.Stderr, "klab: host agent: %v\n", err)
		return 1, true
	case serveArg:
		if err := serve(args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "klab: host agent: %v\n", err)
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// serve is the agent in the private root: it greets the host and runs its
// steps until the host shuts it down or closes the channel.
func serve(libfuse []string) error {
	// The host ends the agent with a shutdown message, or kills it.
	signal.Ignore(syscall.SIGINT, syscall.SIGQUIT, syscall.SIGHUP, syscall.SIGTSTP)
	a := &agent.Agent{In: os.Stdin, Out: os.Stdout, Handlers: agent.DefaultHandlers(), Path: childPath,
		Console: os.Stderr, Libfuse: map[string]string{}}
	for _, kv := range libfuse {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("libfuse server %q: want KIND=PATH", kv)
		}
		a.Libfuse[k] = v
	}
	if err := a.SendHello(agent.NewHello(channelName, nil)); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	return a.Serve(context.Background())
}

// channelName names the agent's channel in its Hello and in messages.
const channelName = "host"

// systemDirs are the host directories bound read-only into the private
// root, when they exist: the programs and libraries the steps run, and
// their configuration.
var systemDirs = []string{"usr", "etc", "opt", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// droppedCaps are the capabilities the agent and its steps run without:
// loading modules, making device nodes, raw I/O, rebooting, setting the
// clock, leaving the chroot, and reaching other processes (ptrace, and
// so /proc/PID/root of the host's processes).
var droppedCaps = []int{unix.CAP_SYS_MODULE, unix.CAP_MKNOD, unix.CAP_SYS_RAWIO, unix.CAP_SYS_BOOT,
	unix.CAP_SYS_TIME, unix.CAP_SYS_CHROOT, unix.CAP_SYS_PTRACE, unix.CAP_MAC_ADMIN, unix.CAP_MAC_OVERRIDE}

// devNodes are the character devices of the private /dev.
var devNodes = []string{"fuse", "null", "zero", "full", "random", "urandom"}

// confine builds the private root in the mount namespace the child was
// started in (see Opener), chroots into it and executes the agent there.
// libfuse are KIND=PATH pairs of host binaries, bound into the root's
// binDir. It returns only on failure.
func confine(root string, libfuse []string) error {
	// Mounts, chroot and exec must happen on one thread: the exec'd
	// program inherits that thread's credentials.
	runtime.LockOSThread()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := unix.Mount("none", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mounts: %w", err)
	}
	if err := unix.Mount("klab-host", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", root, err)
	}
	at := func(p string) string { return filepath.Join(root, p) }
	ents, err := os.ReadDir("/")
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case e.Type()&os.ModeSymlink != 0:
			// /bin -> usr/bin on a merged /usr.
			if t, err := os.Readlink("/" + name); err == nil && slices.Contains(systemDirs, name) {
				if err := os.Symlink(t, at(name)); err != nil {
					return err
				}
			}
		case e.IsDir() && slices.Contains(systemDirs, name):
			if err := bindRO("/"+name, at(name), true); err != nil {
				return err
			}
		}
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{"tmp", 0o1777}, {"var/tmp", 0o1777}, {"root", 0o700}, {"mnt", 0o755}, {"run", 0o755}, {"proc", 0o555}, {"sys", 0o555}, {"dev", 0o755}, {binDir, 0o755}} {
		if err := os.MkdirAll(at(d.path), d.mode); err != nil {
			return err
		}
		if err := os.Chmod(at(d.path), d.mode); err != nil {
			return err
		}
	}
	if err := mountProc(at("proc")); err != nil {
		return err
	}
	if err := mountSys(at("sys")); err != nil {
		return err
	}
	if err := mountDev(at("dev")); err != nil {
		return err
	}
	if err := bindFile(exe, at(filepath.Join(binDir, agentName)), true); err != nil {
		return err
	}
	var served []string
	for _, kv := range libfuse {
		kind, path, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("libfuse server %q: want KIND=PATH", kv)
		}
		in := filepath.Join(binDir, filepath.Base(path))
		if err := bindFile(path, at(in), true); err != nil {
			return err
		}
		served = append(served, kind+"="+in)
	}
	if err := unix.Chroot(root); err != nil {
		return fmt.Errorf("chroot %s: %w", root, err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	for _, c := range droppedCaps {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	argv := append([]string{agentName, serveArg}, served...)
	env := []string{"PATH=" + childPath, "HOME=/root", "LC_ALL=C"}
	return syscall.Exec(filepath.Join(binDir, agentName), argv, env)
}

// mountProc mounts a proc file system on dir with /proc/sys read-only
// but for vm/drop_caches, and /proc/sysrq-trigger read-only.
func mountProc(dir string) error {
	if err := unix.Mount("proc", dir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	if err := bindRO(filepath.Join(dir, "sys"), filepath.Join(dir, "sys"), false); err != nil {
		return err
	}
	if err := bindFile(filepath.Join(dir, "sys/vm/drop_caches"), filepath.Join(dir, "sys/vm/drop_caches"), false); err != nil {
		return err
	}
	trigger := filepath.Join(dir, "sysrq-trigger")
	if _, err := os.Stat(trigger); err != nil {
		return nil // a kernel without magic sysrq
	}
	return bindFile(trigger, trigger, true)
}

// mountSys mounts sysfs read-only on dir, and the FUSE control file
// system (read-write: it aborts connections) in it.
func mountSys(dir string) error {
	if err := unix.Mount("sysfs", dir, "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount sysfs: %w", err)
	}
	ctl := filepath.Join(dir, "fs/fuse/connections")
	if _, err := os.Stat(ctl); err != nil {
		return nil // no fusectl: aborts fall back to killing the server
	}
	if err := unix.Mount("fusectl", ctl, "fusectl", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount fusectl: %w", err)
	}
	return nil
}

// mountDev makes dir a small /dev: a tmpfs with devNodes bound from the
// host's /dev, /dev/shm and the /dev/fd links. No block device is there.
func mountDev(dir string) error {
	if err := unix.Mount("klab-dev", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on /dev: %w", err)
	}
	for _, n := range devNodes {
		if _, err := os.Stat("/dev/" + n); err != nil {
			continue
		}
		if err := bindFile("/dev/"+n, filepath.Join(dir, n), false); err != nil {
			return err
		}
	}
	shm := filepath.Join(dir, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("klab-shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
		return fmt.Errorf("tmpfs on /dev/shm: %w", err)
	}
	for i, n := range []string{"stdin", "stdout", "stderr"} {
		if err := os.Symlink(fmt.Sprintf("/proc/self/fd/%d", i), filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return os.Symlink("/proc/self/fd", filepath.Join(dir, "fd"))
}

// bindRO binds src on dst (made when missing), read-only; rec binds the
// mounts under src too.
func bindRO(src, dst string, rec bool) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	return bind(src, dst, rec, true)
}

// bindFile binds the file src on dst, made as an empty file when missing.
func bindFile(src, dst string, ro bool) error {
	if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	return bind(src, dst, false, ro)
}

func bind(src, dst string, rec, ro bool) error {
	flags := uintptr(unix.MS_BIND)
	if rec {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(src, dst, "", flags, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, dst, err)
	}
	// A bind keeps its source mount's read-only flag: set it either
	// way (drop_caches is bound writable out of a read-only /proc/sys).
	remount := flags | unix.MS_REMOUNT
	if ro {
		remount |= unix.MS_RDONLY
	}
	if err := unix.Mount("", dst, "", remount, ""); err != nil {
		return fmt.Errorf("remount %s: %w", dst, err)
	}
	return nil
}
