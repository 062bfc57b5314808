package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"klab/lab"
	"klab/results/splat"
)

type bootOptions struct {
	kernel      string
	accel       string
	memMB       int
	cpus        int
	console     bool
	cmdline     string
	sysctls     []string
	timeout     int
	bootTimeout int
	flavour     string
	allow       []string
	noFail      bool
	mttcg       bool
}

func newBootCommand(g *globalOptions) *cobra.Command {
	o := &bootOptions{}
	cmd := &cobra.Command{
		Use:   "boot --kernel REF [flags] [-- COMMAND [ARG...]]",
		Short: "Boot a kernel and run one command in the guest",
		Long: `Boot a kernel in a QEMU guest with klab's initramfs, run one command in the
guest through the agent, stream its output, and exit with its status.

The kernel is debian:<series> (6.1, 6.12, 7.2, 7.3), an exact Debian package
version (debian:7.3.4+deb13), or the path of a bzImage. Every run is saved
under --runs-dir with manifest.json, console.log, events.jsonl and
splats.json.

A kernel report on the console (BUG, KASAN, lockdep, panic, or a WARNING not
allowed with --allow-warning) fails the run even when the command succeeded.

Exit status: the command's own status; 124 when it ran past --timeout; 125
when klab failed or the input was bad; 126 when the kernel failed (panic,
hang, or it never reached the agent); 127 when the command could not be
started in the guest; 1 when another step failed.`,
		Example: `  klab boot --kernel debian:7.3 -- uname -r
  klab boot --kernel debian:7.3 --console -- true
  klab boot --kernel ./arch/x86/boot/bzImage -- cat /proc/version
  klab boot --kernel debian:7.3 --sysctl fs.fuse.default_request_timeout=30 -- cat /proc/sys/fs/fuse/default_request_timeout`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.kernel == "" {
				return fmt.Errorf("--kernel is required, e.g. --kernel debian:7.3 or --kernel ./arch/x86/boot/bzImage")
			}
			if err := checkAccel(o.accel); err != nil {
				return err
			}
			lo := g.labOptions()
			lo.Accel = o.accel
			lo.Flavour = o.flavour
			req := lab.BootRequest{
				Kernel: o.kernel, Argv: args, MemMB: o.memMB, CPUs: o.cpus, Cmdline: o.cmdline,
				Stdout: os.Stdout, Stderr: os.Stderr, Command: os.Args,
			}
			for _, s := range o.sysctls {
				k, v, ok := strings.Cut(s, "=")
				if !ok || k == "" {
					return fmt.Errorf("--sysctl %q: want KEY=VALUE, e.g. fs.fuse.default_request_timeout=30", s)
				}
				req.Sysctls = append(req.Sysctls, lab.Sysctl{Key: k, Value: v})
			}
			if o.timeout > 0 {
				req.StepTimeout = secs(o.timeout)
			}
			if o.bootTimeout > 0 {
				req.BootTimeout = secs(o.bootTimeout)
			}
			req.IgnoreSplats = o.noFail
			req.MultiThreadTCG = o.mttcg
			if len(o.allow) > 0 {
				p, err := splat.NewPolicy(splat.PolicyConfig{Fail: splat.DefaultFail(), Allow: o.allow})
				if err != nil {
					return fmt.Errorf("--allow-warning: %w", err)
				}
				req.Policy = p
			}
			if o.console {
				req.Console = os.Stderr
			}
			res, err := lo.Boot(cmd.Context(), req)
			if err != nil {
				return err
			}
			summary(res)
			if res.ExitCode != 0 {
				return &exitError{code: res.ExitCode}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.kernel, "kernel", "k", "", "kernel: debian:<series>, debian:<package version>, or a bzImage path")
	f.StringVar(&o.accel, "accel", "auto", "accelerator: auto (prove KVM, else TCG), kvm or tcg")
	f.IntVarP(&o.memMB, "memory", "m", 1024, "guest memory in MiB")
	f.IntVar(&o.cpus, "cpus", 2, "guest vCPUs")
	f.BoolVar(&o.console, "console", false, "also print the guest console to stderr")
	f.StringVar(&o.cmdline, "append", "", "extra kernel command line")
	f.StringArrayVar(&o.sysctls, "sysctl", nil, "write KEY=VALUE under /proc/sys before the command (repeatable)")
	f.IntVar(&o.timeout, "timeout", 0, "command timeout in seconds under KVM, scaled under TCG (default 600)")
	f.IntVar(&o.bootTimeout, "boot-timeout", 0, "seconds from QEMU start to the agent under KVM, scaled under TCG (default 30)")
	f.StringArrayVar(&o.allow, "allow-warning", nil, "a WARNING title substring (or /regexp/) that does not fail the run (repeatable)")
	f.BoolVar(&o.mttcg, "tcg-multithread", false, "under TCG, one host thread per vCPU (faster for parallel work; QEMU 7.2 then sometimes shows a false \"Oops: int3\")")
	f.BoolVar(&o.noFail, "no-splat-fail", false, "report kernel splats but never fail the run because of them")
	f.StringVar(&o.flavour, "flavour", "cloud-amd64", "Debian kernel flavour: cloud-amd64 or amd64")
	return cmd
}

func summary(res *lab.BootResult) {
	m := res.Manifest
	fmt.Fprintf(os.Stderr, "klab: %s %s under %s: boot-to-agent %.2fs, wall %.2fs, exit %d, %d splat(s); run saved to %s\n",
		shown(m.Kernel.Name), shown(m.Kernel.Version), m.Accel, res.BootToAgent.Seconds(), res.Wall.Seconds(), res.ExitCode, len(res.Splats), res.RunDir)
	for _, s := range res.Splats {
		fmt.Fprintf(os.Stderr, "klab:   splat: %s\n", shown(s.Title))
	}
}
