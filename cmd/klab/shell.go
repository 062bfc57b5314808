package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"klab/lab"
)

type shellOptions struct {
	kernel  string
	accel   string
	memMB   int
	cpus    int
	cmdline string
	flavour string
}

func newShellCommand(g *globalOptions) *cobra.Command {
	o := &shellOptions{}
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
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.kernel == "" {
				return fmt.Errorf("--kernel is required, e.g. --kernel debian:7.3")
			}
			if err := checkAccel(o.accel); err != nil {
				return err
			}
			lo := g.labOptions()
			lo.Accel = o.accel
			lo.Flavour = o.flavour
			dir, err := lo.Shell(cmd.Context(), lab.ShellRequest{Kernel: o.kernel, MemMB: o.memMB, CPUs: o.cpus, Cmdline: o.cmdline, Command: os.Args})
			if dir != "" {
				fmt.Fprintf(os.Stderr, "klab: run saved to %s\n", dir)
			}
			return err
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
