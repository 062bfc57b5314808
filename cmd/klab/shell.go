package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"klab/lab"
	"klab/results"
)

// shellOptions are klab shell's flags, bound to its fields.
type shellOptions struct {
	guestOptions
	// in, out and errOut are klab's standard streams; command is klab's
	// own argv, for the manifest.
	in          io.Reader
	out, errOut io.Writer
	command     []string
	// userspace names the userspace the shell runs chrooted into
	// (--userspace): defaultUserspace or an image id.
	userspace string
}

// newShellCommand returns klab shell. Once the flags are checked, the
// command calls runF, or runShell when runF is nil.
func newShellCommand(g *globalOptions, runF func(context.Context, *shellOptions) error) *cobra.Command {
	o := &shellOptions{}
	if runF == nil {
		runF = func(ctx context.Context, o *shellOptions) error { return runShell(ctx, g, o) }
	}
	cmd := &cobra.Command{
		Use:   "shell --kernel REF",
		Short: "Boot a kernel with an interactive shell on the console",
		Long: `Boot a kernel in a QEMU guest and attach your terminal to its console, where
u-root's gosh runs after the agent has mounted the file systems and loaded the
modules. Exit the shell to power the guest off; Ctrl-A x kills QEMU. The
console is saved in the run directory.

When klab's standard input is not a terminal (a pipe, a file), there is no
console to type at: the guest's sh reads the input as a script and runs it
through the agent, without a line editor, its output on klab's stdout and
stderr, as klab boot -- sh does.

Exit status: the shell's own when it exits; 2 for bad flags; 125 when klab
or QEMU failed; 126 when the kernel panicked; 130 when the session was
killed before the shell exited (Ctrl-A x, or klab was interrupted). A
killed session is saved as such, never as a success.

The guest's own tools are u-root's (see the README for the list). With
--userspace the shell is Debian's bash, chrooted into the userspace disk
that klab builds for fstests (bash, coreutils, sed, awk, xfsprogs, fio and
the rest), so that stat, which, tr or head -20 work as on a workstation;
the agent's mounts (/proc, /sys, /dev) are bound in, the disk is read-only
with a tmpfs on /tmp, /var/tmp and /run.`,
		Example: `  klab shell --kernel debian:7.3
  klab shell --kernel ./arch/x86/boot/bzImage --memory 2048
  echo 'uname -r; cat /proc/cmdline' | klab shell --kernel debian:7.3
  klab shell --kernel debian:7.3 --userspace
  echo 'stat -c %s /etc/os-release; which awk' | klab shell --kernel debian:7.3 --userspace`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.in, o.out, o.errOut, o.command = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), os.Args
			if err := errors.Join(o.checkGuest(g, "--kernel debian:7.3")...); err != nil {
				return badInput(err)
			}
			return runF(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.kernel, "kernel", "k", "", "kernel: debian:<series>, debian:<package version>, or a bzImage path")
	f.StringVar(&o.accel, "accel", "auto", "accelerator: auto, kvm or tcg")
	f.VarP(newMiBValue(1024, &o.memMB), "memory", "m", "guest memory: MiB, or a size with a unit K, M, G or T (512M, 2G, 1.5GiB)")
	f.IntVar(&o.cpus, "cpus", 2, "guest vCPUs")
	f.StringVar(&o.cmdline, "append", "", "extra kernel command line")
	f.StringVar(&o.flavour, "flavour", "cloud-amd64", "Debian kernel flavour: cloud-amd64 or amd64")
	f.StringVar(&o.userspace, "userspace", "", "run Debian's bash chrooted into a userspace disk: --userspace alone for the default one (built when missing), --userspace=ID for one klab userspace build made")
	f.Lookup("userspace").NoOptDefVal = defaultUserspace
	return cmd
}

// request returns the lab options and the shell request that o
// describes: on the console when klab's standard input is a terminal,
// else a script read from it.
func (o *shellOptions) request(g *globalOptions) (lab.Options, lab.ShellRequest) {
	req := lab.ShellRequest{Kernel: o.kernel, MemMB: o.memMB, CPUs: o.cpus, Cmdline: o.cmdline, Command: o.command}
	if o.in != nil && !isTerminalReader(o.in) {
		req.Script, req.Stdout, req.Stderr = o.in, o.out, o.errOut
	}
	return o.labOptions(g), req
}

// isTerminalReader reports whether r is a terminal.
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && isTerminal(f)
}

// runShell boots the kernel of o with the terminal on its console, or
// runs its standard input as a script, and ends klab with the session's
// status.
func runShell(ctx context.Context, g *globalOptions, o *shellOptions) error {
	lo, req := o.request(g)
	if o.userspace != "" {
		att, k, err := userspaceAttachment(ctx, g, &lo, o.userspace, req.Kernel, nil, o.errOut)
		if err != nil {
			return err
		}
		req.Userspace, req.Resolved = att, k
	}
	res, err := lo.Shell(ctx, req)
	return shellExit(ctx, o.errOut, res, err)
}

// shellExit says how a shell session ended and returns klab's exit for
// it: the shell's own status, or what ended the session first.
func shellExit(ctx context.Context, w io.Writer, res *lab.ShellResult, err error) error {
	if err != nil {
		if ctx.Err() != nil {
			if res != nil && res.RunDir != "" {
				fmt.Fprintf(w, "klab: interrupted; the session is saved in %s\n", res.RunDir)
			}
			return &exitError{code: exitInterrupted}
		}
		return err
	}
	if res.Boot != nil {
		summary(w, res.Boot)
	} else {
		if res.Outcome.Status != results.StatusOK || res.Outcome.Message != "" {
			fmt.Fprintf(w, "klab: %s: %s\n", res.Outcome.Status, shown(res.Outcome.Message))
		}
		fmt.Fprintf(w, "klab: run saved to %s\n", res.RunDir)
	}
	if res.ExitCode != 0 {
		return &exitError{code: res.ExitCode}
	}
	return nil
}
