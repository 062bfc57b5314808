package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/guest/proto"
	"klab/results"
	"klab/vm"
)

// TestShellOutcome: a console session is ok only when its shell exited
// (with the shell's status) or the guest powered itself off; klab's
// signal, a quit of QEMU (Ctrl-A x) or a kill is never saved as ok, even
// when the console shows an exit status, and a panic is the kernel's.
func TestShellOutcome(t *testing.T) {
	reset := vm.Shutdown{Guest: true, Reason: "guest-reset"}
	quit := vm.Shutdown{Reason: "host-qmp-quit"}
	for _, c := range []struct {
		name   string
		end    consoleEnd
		status results.Status
		code   int
		msg    string
	}{
		{"exit", consoleEnd{shutdown: reset, sawShutdown: true, exited: true}, results.StatusOK, 0, ""},
		{"exit 3", consoleEnd{shutdown: reset, sawShutdown: true, exited: true, status: 3}, results.StatusOK, 3, ""},
		{"exit, no QMP event", consoleEnd{exited: true, status: 2}, results.StatusOK, 2, ""},
		{"poweroff", consoleEnd{shutdown: vm.Shutdown{Guest: true, Reason: "guest-shutdown"}, sawShutdown: true}, results.StatusOK, 0, "the guest powered off (guest-shutdown)"},
		{"ctrl-a x", consoleEnd{shutdown: quit, sawShutdown: true}, results.StatusInfraError, ExitInterrupted, "killed: QEMU was told to quit (Ctrl-A x"},
		{"ctrl-a x after a faked exit line", consoleEnd{shutdown: quit, sawShutdown: true, exited: true}, results.StatusInfraError, ExitInterrupted, "killed:"},
		{"SIGTERM to QEMU", consoleEnd{shutdown: vm.Shutdown{Reason: "host-signal"}, sawShutdown: true}, results.StatusInfraError, ExitInterrupted, "QEMU was sent a signal"},
		{"klab stopped", consoleEnd{interrupted: context.Canceled, waitErr: errors.New("signal: killed"), exited: true}, results.StatusInfraError, ExitInterrupted, "interrupted: klab was stopped (context canceled)"},
		{"panic", consoleEnd{panicked: `{"action":"pause"}`, shutdown: vm.Shutdown{Guest: true, Reason: "guest-panic"}, sawShutdown: true}, results.StatusKernelPanic, ExitKernel, `the kernel panicked: {"action":"pause"}`},
		{"killed from outside", consoleEnd{waitErr: errors.New("signal: killed")}, results.StatusInfraError, ExitInfra, "QEMU ended before the shell exited: signal: killed"},
		{"no reason", consoleEnd{}, results.StatusInfraError, ExitInfra, "without saying why"},
	} {
		o, code := c.end.outcome()
		if o.Status != c.status || code != c.code || o.ExitCode != code || !strings.Contains(o.Message, c.msg) || o.Class != c.status.Class() {
			t.Errorf("%s: %+v, status %d; want %s, %d, %q", c.name, o, code, c.status, c.code, c.msg)
		}
	}
}

// TestShellExitStatus: the shell's status is the last line the agent
// printed for it, at the end of the console log; a line that is not one
// (typed at the prompt, out of range) is not taken.
func TestShellExitStatus(t *testing.T) {
	for _, c := range []struct {
		log  string
		want int
		ok   bool
	}{
		{"$ exit 3\r\n\r\n" + proto.ShellExitPrefix + "3\r\n[    5.1] reboot: Restarting system\r\n", 3, true},
		{proto.ShellExitPrefix + "1\n" + proto.ShellExitPrefix + "0\n", 0, true},
		{"$ echo '" + proto.ShellExitPrefix + "0'\r\n", 0, false},
		{proto.ShellExitPrefix + "256\n", 0, false},
		{proto.ShellExitPrefix + "-1\n", 0, false},
		{proto.ShellExitPrefix + "07\n", 0, false},
		{"", 0, false},
	} {
		if got, ok := parseShellExit([]byte(c.log)); got != c.want || ok != c.ok {
			t.Errorf("parseShellExit(%q) = %d, %v; want %d, %v", c.log, got, ok, c.want, c.ok)
		}
	}
	// Only the end of a long log is read.
	p := filepath.Join(t.TempDir(), "console.log")
	long := proto.ShellExitPrefix + "9\n" + strings.Repeat("x", 64<<10) + "\n" + proto.ShellExitPrefix + "4\r\n"
	if err := os.WriteFile(p, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok := shellExitStatus(p); got != 4 || !ok {
		t.Errorf("a long log: %d, %v", got, ok)
	}
	if _, ok := shellExitStatus(filepath.Join(t.TempDir(), "none")); ok {
		t.Error("no log: a status")
	}
}
