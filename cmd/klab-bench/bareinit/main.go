// Command bareinit is the trivial static /init that klab-bench boots to
// time a bare QEMU boot: it prints one line and reboots at once.
package main

import (
	"os"

	"golang.org/x/sys/unix"
)

func main() {
	os.Stdout.WriteString("klab-bench: bare init reached\n")
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_RESTART)
	select {}
}
