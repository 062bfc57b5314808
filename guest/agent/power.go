package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

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
// DefaultPath. It returns when the shell exits.
func RunShell(stdin io.Reader, stdout, stderr io.Writer) error {
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
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return nil // the user's last command failed; that is fine
			}
			return fmt.Errorf("shell %s: %w", sh, err)
		}
		return nil
	}
	return fmt.Errorf("no shell found: %w", errors.Join(errs...))
}
