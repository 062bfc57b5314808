package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"klab/lab"
)

// shellOptions are klab shell's flags, bound to its fields.
type shellOptions struct {
	guestOptions
	// errOut is klab's standard error; command is klab's own argv, for
	// the manifest.
	errOut  io.Writer
	command []string
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
console is saved in the run directory.`,
		Example: `  klab shell --kernel debian:7.3
  klab shell --kernel ./arch/x86/boot/bzImage --memory 2048`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.errOut, o.command = cmd.ErrOrStderr(), os.Args
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
	return cmd
}

// request returns the lab options and the shell request that o
// describes.
func (o *shellOptions) request(g *globalOptions) (lab.Options, lab.ShellRequest) {
	return o.labOptions(g), lab.ShellRequest{Kernel: o.kernel, MemMB: o.memMB, CPUs: o.cpus, Cmdline: o.cmdline, Command: o.command}
}

// runShell boots the kernel of o with the terminal on its console.
func runShell(ctx context.Context, g *globalOptions, o *shellOptions) error {
	lo, req := o.request(g)
	dir, err := lo.Shell(ctx, req)
	if dir != "" {
		fmt.Fprintf(o.errOut, "klab: run saved to %s\n", dir)
	}
	return err
}
