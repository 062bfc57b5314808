package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"klab/lab"
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
