// Command inject is the /init of the test initramfs that captured the real
// logs in results/splat/testdata: it loads splatgen.ko once per
// splat.what= entry on the kernel command line (each in a child process,
// since some of them kill the task that loads the module), writes
// splat.sysctl= settings and sysrq keys, then powers the guest off. It is
// not part of klab; see ../README.md.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// sysFinitModule is finit_module(2) on x86-64.
const sysFinitModule = 313

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, "inject: "+format+"\n", a...) }

func write(path, val string) {
	if err := os.WriteFile(path, []byte(val), 0o644); err != nil {
		logf("write %s: %v", path, err)
	}
}

func child(what string) {
	f, err := os.Open("/splatgen.ko")
	if err != nil {
		logf("%v", err)
		os.Exit(1)
	}
	params := append([]byte("what="+what), 0)
	_, _, errno := syscall.Syscall(sysFinitModule, f.Fd(), uintptr(unsafe.Pointer(&params[0])), 0)
	logf("finit_module %s: %v", what, errno)
	os.Exit(0)
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "child" {
		child(os.Args[2])
	}
	syscall.Mount("proc", "/proc", "proc", 0, "")
	syscall.Mount("sysfs", "/sys", "sysfs", 0, "")
	syscall.Mount("debugfs", "/sys/kernel/debug", "debugfs", 0, "")
	syscall.Mount("devtmpfs", "/dev", "devtmpfs", 0, "")
	cmdline, _ := os.ReadFile("/proc/cmdline")
	var whats []string
	wait := 20 * time.Second
	for _, w := range strings.Fields(string(cmdline)) {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "splat.what":
			whats = strings.Split(v, ",")
		case "splat.sysctl":
			for _, kv := range strings.Split(v, ",") {
				key, val, _ := strings.Cut(kv, ":")
				write("/proc/sys/"+strings.ReplaceAll(key, ".", "/"), val)
			}
		case "splat.wait":
			d, _ := time.ParseDuration(v)
			wait = d
		}
	}
	for _, what := range whats {
		if strings.HasPrefix(what, "sysrq-") {
			for _, c := range what[len("sysrq-"):] {
				write("/proc/sysrq-trigger", string(c))
				time.Sleep(500 * time.Millisecond)
			}
			continue
		}
		if strings.HasPrefix(what, "sleep-") {
			d, _ := time.ParseDuration(what[len("sleep-"):])
			time.Sleep(d)
			continue
		}
		cmd := exec.Command("/init", "child", what)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			logf("start: %v", err)
			continue
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			logf("%s done: %v", what, err)
		case <-time.After(wait):
			logf("%s still running after %s", what, wait)
		}
		time.Sleep(time.Second)
	}
	logf("all done")
	syscall.Sync()
	syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF)
}
