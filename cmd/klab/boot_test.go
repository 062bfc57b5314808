package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/images"
	"klab/lab"
)

// bootFlags runs klab boot with args, with a run function that builds the
// boot request instead of booting, and returns what it built, or the
// error klab boot ends with.
func bootFlags(t *testing.T, args ...string) (lab.Options, lab.BootRequest, error) {
	t.Helper()
	g := &globalOptions{cacheDir: t.TempDir(), runsDir: t.TempDir()}
	var lo lab.Options
	var req lab.BootRequest
	cmd := newBootCommand(g, func(_ context.Context, o *bootOptions) error {
		var err error
		if req, err = o.request(); err != nil {
			return badInput(err)
		}
		lo = o.labOptions(g)
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader("stdin"))
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.ExecuteContext(context.Background())
	return lo, req, err
}

// TestBootFlagErrors: klab boot refuses missing, malformed and
// conflicting flags before it does any work, with the status of bad
// input (2) and an error naming the flag.
func TestBootFlagErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := []string{"--kernel", "debian:7.3"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--", "true"}, []string{"--kernel is required"}},
		{append(k, "--accel", "hvf"), []string{`--accel "hvf": want auto, kvm or tcg`}},
		{append(k, "--icount", "shift=0 -d int"), []string{`--icount "shift=0 -d int": want QEMU's -icount options`}},
		{append(k, "--icount", "shift=0", "--accel", "kvm"), []string{"--icount needs TCG", "drop --accel kvm"}},
		{append(k, "--icount", "shift=0", "--tcg-multithread"), []string{"--icount needs single-threaded TCG: drop --tcg-multithread"}},
		{append(k, "--icount", "shift=0", "--accel", "kvm", "--tcg-multithread"), []string{"drop --accel kvm", "drop --tcg-multithread"}},
		{append(k, "--run-dir", dir, "--run-id", "x"), []string{"give --run-dir or --run-id, not both"}},
		{append(k, "--config", "lab"), []string{"--config goes with --build"}},
		{append(k, "--max-output", "0"), []string{"--max-output 0: want at least 1M"}},
		{append(k, "--share", "nocolon"), []string{`--share "nocolon": want HOST:GUEST`}},
		{append(k, "--share", dir+":/proc/x"), []string{"cannot be under /proc"}},
		{append(k, "--share", dir+":rel"), []string{"is not absolute"}},
		{append(k, "--sysctl", "novalue"), []string{`--sysctl "novalue": want KEY=VALUE`}},
		{append(k, "--allow-warning", "/(/"), []string{"--allow-warning: "}},
		{append(k, "--file", filepath.Join(dir, "missing")), []string{"--file ", "no such file"}},
		{append(k, "--file", dir), []string{"--file ", "is not a regular file"}},
		{append(k, "--dir", file), []string{"--dir ", "is not a directory"}},
		{append(k, "--file", file+":/init"), []string{"klab's own in the guest"}},
		{append(k, "true"), []string{"the guest command goes after --"}},
		{append(k, "--userspace", "--file", file), []string{"--userspace runs the command chrooted", "--file, --dir and --share"}},
		{append(k, "--userspace", "trixie-0123456789abcdef"), []string{"the guest command goes after --"}},
		// Every conflict at once, not one per try.
		{[]string{"--accel", "hvf", "--config", "lab"}, []string{"--kernel is required", "--accel", "--config goes with --build"}},
	} {
		_, _, err := bootFlags(t, c.args...)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitBadInput {
			t.Errorf("klab boot %q: %v, want status %d", c.args, err, exitBadInput)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(ee.msg, w) {
				t.Errorf("klab boot %q: %q, want %q in it", c.args, ee.msg, w)
			}
		}
	}
}

// TestBootRequest: klab boot's flags become the lab options and the
// boot request.
func TestBootRequest(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runDir := filepath.Join(dir, "runs", "r1")
	k := []string{"--kernel", "debian:7.3"}
	for _, c := range []struct {
		args  []string
		check func(lab.Options, lab.BootRequest) string
	}{
		{append(k, "--", "uname", "-r"), func(lo lab.Options, r lab.BootRequest) string {
			switch {
			case r.Accel != "auto" || lo.Flavour != "cloud-amd64" || r.RunsDir != "":
				return "want accel auto, flavour cloud-amd64 and the runs directory of --runs-dir"
			case r.Kernel != "debian:7.3" || strings.Join(r.Argv, " ") != "uname -r" || r.MemMB != 1024 || r.CPUs != 2:
				return "want the kernel, the command, 1024 MiB and 2 CPUs"
			case r.Stdin == nil || r.Dir != "":
				return "want klab's stdin, and no work directory"
			case r.MaxOutput != 1<<30 || r.MaxConsole != 0:
				return "want 1GiB of output and the default console cap"
			case r.StepTimeout != 0 || r.BootTimeout != 0 || r.Policy != nil || r.Console != nil:
				return "want the default timeouts, policy and no console"
			}
			return ""
		}},
		{append(k, "--no-stdin", "--", "cat"), func(_ lab.Options, r lab.BootRequest) string {
			if r.Stdin != nil {
				return "--no-stdin: want no stdin"
			}
			return ""
		}},
		{k, func(_ lab.Options, r lab.BootRequest) string {
			if r.Stdin != nil || len(r.Argv) != 0 {
				return "no command: want no stdin"
			}
			return ""
		}},
		{append(k, "--run-dir", runDir), func(lo lab.Options, r lab.BootRequest) string {
			if r.RunsDir != filepath.Dir(runDir) || r.RunID != "r1" || lo.RunsDir == r.RunsDir {
				return "--run-dir: want its parent as the runs directory and its name as the run ID"
			}
			return ""
		}},
		{append(k, "--run-id", "ci-42"), func(_ lab.Options, r lab.BootRequest) string {
			if r.RunID != "ci-42" {
				return "want the run ID"
			}
			return ""
		}},
		{append(k, "--max-output", "2M"), func(_ lab.Options, r lab.BootRequest) string {
			if r.MaxOutput != 2<<20 || r.MaxConsole != 2<<20 {
				return "--max-output given: want it to cap the console too"
			}
			return ""
		}},
		{append(k, "--json", "--console", "--", "true"), func(_ lab.Options, r lab.BootRequest) string {
			if r.Stdout != r.Stderr || r.Console != r.Stderr {
				return "--json: want the guest's stdout on stderr, and the console there"
			}
			return ""
		}},
		{append(k, "--icount", "shift=0,sleep=off", "--accel", "tcg"), func(lo lab.Options, r lab.BootRequest) string {
			if r.Icount != "shift=0,sleep=off" || r.Accel != "tcg" || r.MultiThreadTCG {
				return "want icount under single-threaded TCG"
			}
			return ""
		}},
		{append(k, "--file", prog, "--", "./prog"), func(_ lab.Options, r lab.BootRequest) string {
			if len(r.Files) != 1 || r.Files[0].Dest != images.UserWorkDir+"/prog" || r.Dir != images.UserWorkDir {
				return "--file without a guest path: want it in the work directory, where the command runs"
			}
			return ""
		}},
		{append(k, "--file", prog+":/opt/prog", "--", "/opt/prog"), func(_ lab.Options, r lab.BootRequest) string {
			if len(r.Files) != 1 || r.Files[0].Dest != "/opt/prog" || r.Dir != "" {
				return "--file with a guest path: want it there, and the command in /"
			}
			return ""
		}},
		{append(k, "--flavour", "amd64", "--share", dir+":/src", "--share", dir+":/out:rw"), func(lo lab.Options, r lab.BootRequest) string {
			want := []lab.Share{{Host: dir, Guest: "/src"}, {Host: dir, Guest: "/out", Writable: true}}
			if lo.Flavour != "amd64" || len(r.Shares) != 2 || r.Shares[0] != want[0] || r.Shares[1] != want[1] {
				return "want the flavour and both shares"
			}
			return ""
		}},
		{append(k, "--sysctl", "a.b=1", "--sysctl", "c=", "--timeout", "5", "--boot-timeout", "7", "--no-splat-fail"), func(_ lab.Options, r lab.BootRequest) string {
			if len(r.Sysctls) != 2 || r.Sysctls[0] != (lab.Sysctl{Key: "a.b", Value: "1"}) || r.Sysctls[1] != (lab.Sysctl{Key: "c"}) {
				return "want both sysctls"
			}
			if r.StepTimeout != 5*time.Second || r.BootTimeout != 7*time.Second || !r.IgnoreSplats {
				return "want the timeouts and no splat failure"
			}
			return ""
		}},
		{append(k, "--allow-warning", "/foo.*/", "-m", "2G", "--cpus", "4", "--append", "quiet", "--module", "nbd"), func(_ lab.Options, r lab.BootRequest) string {
			if r.Policy == nil || r.MemMB != 2048 || r.CPUs != 4 || r.Cmdline != "quiet" || len(r.Modules) != 1 {
				return "want the policy, the guest's shape, the command line and the module"
			}
			return ""
		}},
	} {
		lo, req, err := bootFlags(t, c.args...)
		if err != nil {
			t.Errorf("klab boot %q: %v", c.args, err)
			continue
		}
		if msg := c.check(lo, req); msg != "" {
			t.Errorf("klab boot %q: %s; got %+v", c.args, msg, req)
		}
	}
}

func TestInWorkDir(t *testing.T) {
	for _, c := range []struct {
		dests []string
		want  bool
	}{
		{nil, false},
		{[]string{"/opt/t.sh"}, false},
		{[]string{"/opt/t.sh", "/work/t"}, true},
		{[]string{"work/t"}, true},
		{[]string{"/workdir/t"}, false},
		{[]string{"/work"}, false},
	} {
		var files []images.ExtraFile
		for _, d := range c.dests {
			files = append(files, images.ExtraFile{Source: "/x", Dest: d})
		}
		if got := inWorkDir(files); got != c.want {
			t.Errorf("inWorkDir(%v) = %v, want %v", c.dests, got, c.want)
		}
	}
}

// TestBootUserspaceFlag: --userspace alone names the default userspace,
// --userspace=ID a cached one, which must be in the cache.
func TestBootUserspaceFlag(t *testing.T) {
	g := &globalOptions{cacheDir: t.TempDir(), runsDir: t.TempDir()}
	for args, want := range map[string]string{
		"--userspace":                         defaultUserspace,
		"--userspace=trixie-0123456789abcdef": "trixie-0123456789abcdef",
		"--memory=1G":                         "",
	} {
		var got string
		cmd := newBootCommand(g, func(_ context.Context, o *bootOptions) error {
			got = o.userspace
			return nil
		})
		cmd.SetArgs([]string{"--kernel", "debian:7.3", args, "--", "true"})
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		if err := cmd.ExecuteContext(context.Background()); err != nil || got != want {
			t.Errorf("klab boot %s: userspace %q (%v), want %q", args, got, err, want)
		}
	}
	o := &bootOptions{userspace: "trixie-0123456789abcdef"}
	req := lab.BootRequest{Kernel: "debian:7.3"}
	err := o.attachUserspace(context.Background(), g, &lab.Options{CacheDir: g.cacheDir}, &req)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitBadInput || !strings.Contains(err.Error(), "klab userspace build") {
		t.Errorf("an image not in the cache: %v", err)
	}
}
