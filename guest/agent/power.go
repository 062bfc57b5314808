package agent

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// ShellBanner is what RunShell prints before it starts the shell.
const ShellBanner = "klab shell: exit the shell to power off the VM"

// Shells are the shells RunShell tries, in order.
func Shells() []string { return []string{"/bbin/gosh", "/bin/gosh", "/bin/sh", "/bbin/sh"} }

// PowerOff syncs the filesystems and restarts the machine with reboot(2).
// QEMU runs with -no-reboot, so a restart ends the VM; unlike a power-off
// this also works on kernels without ACPI. It returns only when reboot(2)
// fails.
func PowerOff() error {
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART); err != nil {
		return fmt.Errorf("reboot: %w", err)
	}
	return nil
}

// RunShell prints ShellBanner to stdout and runs the first shell of Shells
// that exists, attached to stdin, stdout and stderr, with PATH set to
// DefaultPath. It returns when the shell exits, with its exit status (128
// plus the signal for a shell killed by one).
func RunShell(stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	fmt.Fprintln(stdout, ShellBanner)
	var errs []error
	for _, sh := range Shells() {
		if _, err := os.Stat(sh); err != nil {
			errs = append(errs, err)
			continue
		}
		cmd := exec.Command(sh)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
		cmd.Env = append(os.Environ(), "PATH="+DefaultPath)
		return ShellStatus(cmd.Run())
	}
	return 0, fmt.Errorf("no shell found: %w", errors.Join(errs...))
}

// ShellStatus is the exit status of a shell that ended with err (from
// exec.Cmd.Run): 0, its own status, or 128 plus the signal that killed it;
// an error when it did not run at all.
func ShellStatus(err error) (int, error) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, fmt.Errorf("shell: %w", err)
}

// RunShellIn is RunShell for a shell chrooted into the userspace mounted
// on root (see MountUserspace): Debian's bash, else its sh, with the
// userspace's environment. The shell gets the console as its controlling
// terminal when it can, for job control and Ctrl-C.
func RunShellIn(root string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	fmt.Fprintln(stdout, ShellBanner)
	var errs []error
	for _, sh := range []string{"/bin/bash", "/bin/sh"} {
		if m, err := inRoot(root, sh); err != nil || m&unix.S_IFMT != unix.S_IFREG {
			errs = append(errs, fmt.Errorf("%s in %s: not a program (%v)", sh, root, err))
			continue
		}
		env := chrootEnv([]string{"TERM=" + cmp.Or(os.Getenv("TERM"), "linux"), "PS1=klab-userspace# "})
		for _, ctty := range []bool{true, false} {
			cmd := &exec.Cmd{Path: sh, Args: []string{sh}, Dir: "/", Env: env, Stdin: stdin, Stdout: stdout, Stderr: stderr,
				SysProcAttr: &syscall.SysProcAttr{Chroot: root, Setsid: ctty, Setctty: ctty}}
			err := cmd.Start()
			if err != nil && ctty {
				continue
			}
			if err == nil {
				err = cmd.Wait()
			}
			return ShellStatus(err)
		}
	}
	return 0, fmt.Errorf("no shell in the userspace: %w", errors.Join(errs...))
}
