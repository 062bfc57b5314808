package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The agent is the guest's init: the kernel starts it as /init, so a
// guest reaches the host with one Go program started, not two (u-root's
// init, then the agent). InitSystem does what the agent needs of an init
// before Setup; u-root's commands stay in PATH for shells and scripts.
// Orphaned processes are not reaped: a guest lives for one run.

// InitMounts are mounted by InitSystem before DefaultMounts: what u-root's
// init provided that programs in the guest expect (ptys, POSIX shared
// memory, cgroup v2, securityfs).
func InitMounts() []Mount {
	return []Mount{
		{Source: "devpts", Target: "/dev/pts", FSType: "devpts", Flags: unix.MS_NOSUID | unix.MS_NOEXEC, Data: "newinstance,ptmxmode=0666,gid=5,mode=0620"},
		{Source: "tmpfs", Target: "/dev/shm", FSType: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NODEV, Data: "mode=1777"},
		{Source: "cgroup2", Target: "/sys/fs/cgroup", FSType: "cgroup2", Optional: true},
		{Source: "securityfs", Target: "/sys/kernel/security", FSType: "securityfs", Optional: true},
	}
}

// InitPath is PATH in a guest whose init is the agent: u-root's commands
// (/bbin), then the usual directories, so that host programs copied in
// (/usr/bin/fio) and the user's own (/usr/local/bin) are found.
const InitPath = DefaultPath

// consoleLogLevel is the console log level the guest runs with: every
// message but debug ones reaches the console and klab's splat scanner.
// Some reports print their stacks at info level (a hung task's, through
// sched_show_task): at u-root init's level 5 they would have no frame to
// title them by.
const consoleLogLevel = 7

// InitSystem prepares the guest as init would: the base mounts, /dev's
// links, the console as controlling terminal on stdin, stdout and stderr,
// the environment and the console log level. Failures do not stop it; they
// come back joined.
func InitSystem(cmdline string) error {
	var errs []error
	if err := MountAll(DefaultMounts()[:3]); err != nil { // proc, sys, dev
		errs = append(errs, err)
	}
	if err := MountAll(InitMounts()); err != nil {
		errs = append(errs, err)
	}
	for link, target := range map[string]string{
		"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0", "/dev/stdout": "/proc/self/fd/1",
		"/dev/stderr": "/proc/self/fd/2", "/dev/ptmx": "pts/ptmx",
	} {
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(target, link); err != nil {
			errs = append(errs, err)
		}
	}
	if err := consoleTTY(cmdline); err != nil {
		errs = append(errs, err)
	}
	for k, v := range map[string]string{"PATH": InitPath, "HOME": "/root", "USER": "root", "TERM": "linux", "SHELL": "/bin/sh"} {
		if os.Getenv(k) == "" || k == "PATH" {
			os.Setenv(k, v)
		}
	}
	_ = os.MkdirAll("/root", 0o700)
	if _, _, e := unix.Syscall(unix.SYS_SYSLOG, unix.SYSLOG_ACTION_CONSOLE_LEVEL, 0, consoleLogLevel); e != 0 {
		errs = append(errs, fmt.Errorf("console log level: %w", e))
	}
	return errors.Join(errs...)
}

// ConsoleDevice returns the device of the last console= on the kernel
// command line ("console=ttyS0,115200" gives /dev/ttyS0), or "".
func ConsoleDevice(cmdline string) string {
	dev := ""
	for _, p := range CmdlineParams(cmdline) {
		if p.Name != "console" {
			continue
		}
		name, _, _ := strings.Cut(p.Value, ",")
		if name != "" && !strings.ContainsAny(name, "/.") {
			dev = "/dev/" + name
		}
	}
	return dev
}

// consoleTTY makes the console the agent's controlling terminal, on fds 0,
// 1 and 2, in a session of its own: the kernel gives init /dev/console,
// which cannot be one, and a shell (klab shell) needs one for Ctrl-C and
// job control.
func consoleTTY(cmdline string) error {
	dev := ConsoleDevice(cmdline)
	if dev == "" {
		return nil
	}
	fd, err := unix.Open(filepath.Clean(dev), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("console %s: %w", dev, err)
	}
	if _, err := unix.Setsid(); err != nil && !errors.Is(err, unix.EPERM) {
		unix.Close(fd)
		return fmt.Errorf("setsid: %w", err)
	}
	if err := unix.IoctlSetInt(fd, unix.TIOCSCTTY, 1); err != nil {
		unix.Close(fd)
		return fmt.Errorf("console %s as controlling terminal: %w", dev, err)
	}
	for _, to := range []int{0, 1, 2} {
		if err := unix.Dup3(fd, to, 0); err != nil {
			return fmt.Errorf("console %s on fd %d: %w", dev, to, err)
		}
	}
	return unix.Close(fd)
}
