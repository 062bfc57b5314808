package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"klab/lab"
	"klab/results"
)

// TestShellFlags: klab shell refuses a missing kernel and an unknown
// accelerator before it boots, and turns its flags into the request.
func TestShellFlags(t *testing.T) {
	image := writeBzImage(t, "7.3.0 #1")
	for _, c := range []struct {
		args []string
		want []string // in the error; none for a request
		lo   lab.Options
		req  lab.ShellRequest
	}{
		{args: nil, want: []string{"--kernel is required, e.g. --kernel debian:7.3"}},
		{args: []string{"-k", "debian:7.3", "--accel", "hvf"}, want: []string{`--accel "hvf": want auto, kvm or tcg`}},
		{args: []string{"--accel", "hvf"}, want: []string{"--kernel is required", "--accel"}},
		{args: []string{"-k", "debian:7.3"},
			lo: lab.Options{Accel: "auto", Flavour: "cloud-amd64"}, req: lab.ShellRequest{Kernel: "debian:7.3", MemMB: 1024, CPUs: 2}},
		{args: []string{"-k", image, "--accel", "tcg", "--flavour", "amd64", "-m", "2G", "--cpus", "1", "--append", "quiet"},
			lo: lab.Options{Accel: "tcg", Flavour: "amd64"}, req: lab.ShellRequest{Kernel: image, MemMB: 2048, CPUs: 1, Cmdline: "quiet"}},
		{args: []string{"-k", "./no/such/bzImage"}, want: []string{"./no/such/bzImage", "no such file"}},
		{args: []string{"-k", "fedora:40", "--flavour", "rt"}, want: []string{`unknown kernel "fedora:40"`, `--flavour "rt": want cloud-amd64, amd64 or rt-amd64`}},
	} {
		g := &globalOptions{}
		var lo lab.Options
		var req lab.ShellRequest
		cmd := newShellCommand(g, func(_ context.Context, o *shellOptions) error {
			lo, req = o.request(g)
			return nil
		})
		cmd.SetArgs(c.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.ExecuteContext(context.Background())
		if len(c.want) > 0 {
			wantBadInput(t, "shell", c.args, err, c.want)
			continue
		}
		req.Command = nil
		if err != nil || lo.Accel != c.lo.Accel || lo.Flavour != c.lo.Flavour || req.Kernel != c.req.Kernel ||
			req.MemMB != c.req.MemMB || req.CPUs != c.req.CPUs || req.Cmdline != c.req.Cmdline {
			t.Errorf("klab shell %q: %v, %+v, %+v; want %+v, %+v", c.args, err, lo, req, c.lo, c.req)
		}
	}
}

// wantBadInput checks that err is klab's bad-input exit with every string of
// want in its message; name is the command as the user typed it.
func wantBadInput(t *testing.T, name string, args []string, err error, want []string) {
	t.Helper()
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitBadInput {
		t.Errorf("klab %s %q: %v, want status %d", name, args, err, exitBadInput)
		return
	}
	for _, w := range want {
		if !strings.Contains(ee.msg, w) {
			t.Errorf("klab %s %q: %q, want %q in it", name, args, ee.msg, w)
		}
	}
}

// TestShellInput: on a terminal, klab shell puts the shell on the
// console; from a pipe or a file it runs the input as a script, with the
// shell's output on klab's stdout and stderr.
func TestShellInput(t *testing.T) {
	g := &globalOptions{}
	o := &shellOptions{guestOptions: guestOptions{kernel: "debian:7.3"}, out: &strings.Builder{}, errOut: &strings.Builder{}}
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipeR.Close()
	defer pipeW.Close()
	for name, in := range map[string]io.Reader{"a reader": strings.NewReader("exit 3\n"), "a pipe": pipeR} {
		o.in = in
		_, req := o.request(g)
		if req.Script != in || req.Stdout != o.out || req.Stderr != o.errOut || req.Kernel != "debian:7.3" {
			t.Errorf("%s: %+v, want a script session", name, req)
		}
	}
	if _, tty := openPTY(t); tty != nil {
		o.in = tty
		if _, req := o.request(g); req.Script != nil || req.Stdout != nil {
			t.Errorf("a terminal: %+v, want a console session", req)
		}
	}
}

// openPTY opens a pseudo-terminal pair, or returns nils when the host
// has none.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Logf("no pseudo-terminals: %v", err)
		return nil, nil
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestShellExit: klab shell exits with the shell's status, says how a
// session that did not end with the shell ended, and an interrupted one
// is 130.
func TestShellExit(t *testing.T) {
	ctx := context.Background()
	ok := results.NewOutcome(results.StatusOK, "", 3)
	killed := results.NewOutcome(results.StatusInfraError, "killed: QEMU was told to quit (Ctrl-A x on the console, or its monitor) before the shell exited", lab.ExitInterrupted)
	for _, c := range []struct {
		name string
		res  *lab.ShellResult
		err  error
		code int
		want string
	}{
		{"exit 3", &lab.ShellResult{RunDir: "/r/1", Outcome: ok, ExitCode: 3}, nil, 3, "klab: run saved to /r/1\n"},
		{"exit 0", &lab.ShellResult{RunDir: "/r/1", Outcome: results.NewOutcome(results.StatusOK, "", 0)}, nil, 0, "klab: run saved to /r/1\n"},
		{"ctrl-a x", &lab.ShellResult{RunDir: "/r/1", Outcome: killed, ExitCode: lab.ExitInterrupted}, nil, lab.ExitInterrupted,
			"klab: infra-error: killed: QEMU was told to quit (Ctrl-A x on the console, or its monitor) before the shell exited\nklab: run saved to /r/1\n"},
		{"kernel", nil, &lab.KernelError{Status: "boot-timeout", Msg: "no agent"}, lab.ExitKernel, ""},
	} {
		var w strings.Builder
		err := shellExit(ctx, &w, c.res, c.err)
		code := 0
		var ee *exitError
		switch {
		case errors.As(err, &ee):
			code = ee.code
		case err != nil:
			code = lab.ExitCode(err)
		}
		if code != c.code || w.String() != c.want {
			t.Errorf("%s: status %d, printed %q; want %d, %q", c.name, code, w.String(), c.code, c.want)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	var w strings.Builder
	err := shellExit(cctx, &w, &lab.ShellResult{RunDir: "/r/2"}, context.Canceled)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitInterrupted || !strings.Contains(w.String(), "interrupted; the session is saved in /r/2") {
		t.Errorf("interrupted: %v, %q", err, w.String())
	}
}
