package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"klab/guest/fuse/cli"
)

func newFuseCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fuse",
		Short: "Run klab's FUSE servers and kernel checks on this host",
		Long: `Run the FUSE servers the guest agent uses, on any Linux host with /dev/fuse
(as root, or with the fuse mount rights of your distribution), and the checks
of kernel FUSE behaviour that klab runs in guests. The same commands exist in
the guest as "klab-agent fuse ...".`,
		Example: `  klab fuse serve --backing /srv/data /mnt/fuse
  klab fuse serve --transport uring --threads 4 --backing /srv/data /mnt/fuse
  klab fuse check timeout
  klab fuse check interrupt --policy eagain --transport uring`,
	}
	cmd.AddCommand(newFuseServeCommand(g), newFuseCheckCommand(g))
	return cmd
}

func newFuseServeCommand(g *globalOptions) *cobra.Command {
	o := &cli.ServeOptions{}
	cmd := &cobra.Command{
		Use:   "serve [flags] --backing DIR MOUNTPOINT",
		Short: "Mount a FUSE server in the foreground until Ctrl-C",
		Long: `Mount one of klab's FUSE servers at MOUNTPOINT, mirroring --backing DIR, and
serve it in the foreground. Ctrl-C (or SIGTERM) unmounts it cleanly; if the
mount is busy, the connection is aborted and the mount detached. An umount
of MOUNTPOINT from elsewhere ends it too (exit status 0); an aborted
connection is an error. Either way, a file system that was mounted at
MOUNTPOINT before is left alone.

Servers:
  passthrough             loopback over DIR (passthrough_ll's knobs, plus --kernel-passthrough)
  stuck                   passthrough with --rule OP[:NAME]=never|after-abort|delay:DURATION
  interrupt               passthrough with --hold OP[:NAME]=DURATION and --interrupt-policy
  libfuse-passthrough_ll  libfuse's example server (--libfuse PATH), for comparison
  libfuse-passthrough_hp  libfuse 3.18's high-performance example (--libfuse PATH), over
                          either transport, for comparison

Transports (klab's servers):
  dev     read and write /dev/fuse (the default)
  uring   FUSE-over-io_uring (Linux 6.14+): one queue per possible CPU with
          --queue-depth entries, one ring thread per queue; klab sets the fuse
          module's enable_uring when it is off (as root); with --zero-copy
          (Linux 7.3+, root) READs of files opened read-only go from the
          backing file straight into the client's pages

Profiling (klab's servers): --cpuprofile FILE and --memprofile FILE write
pprof profiles of the server when it stops (unmount or exit); read them
with go tool pprof -top FILE.`,
		Example: `  klab fuse serve --backing /srv/data /mnt/fuse
  klab fuse serve --threads 4 --writeback --backing /tmp/b /tmp/m
  klab fuse serve --server stuck --rule lookup:stuck=never --request-timeout 20 --backing /tmp/b /tmp/m
  klab fuse serve --server interrupt --hold 'lookup:held*=5s' --interrupt-policy eagain:2 --backing /tmp/b /tmp/m
  klab fuse serve --transport uring --queue-depth 16 --backing /srv/data /mnt/fuse
  klab fuse serve --transport uring --zero-copy --backing /srv/data /mnt/fuse
  klab fuse serve --threads 4 --stats --cpuprofile cpu.pprof --memprofile mem.pprof --backing /tmp/b /tmp/m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Verbose = g.verbose
			if _, err := o.Config(args[0]); err != nil {
				return badInput(err)
			}
			return cli.Serve(cmd.Context(), o, args[0], os.Stdout, os.Stderr)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func newFuseCheckCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check timeout|interrupt|kill [flags]",
		Short: "Check the kernel's FUSE request timeouts, interrupts and server-death handling",
		Long: `Run a check of this kernel's FUSE behaviour against klab's servers (root and
/dev/fuse needed). Exit status 1 when the kernel does not behave as documented.

  timeout    a request the server never answers fails with ECONNABORTED after the
             timeout (at least 15 s) and within one 15 s check period; then ENOTCONN,
             and the server reads ENODEV. Set through INIT and through both sysctls.
  interrupt  a signalled thread blocked in FUSE: EINTR (cancel), EAGAIN requeues,
             ENOSYS stops further interrupts, ignore lets the request finish.
             With --transport uring: the kernel refuses every reply to an
             INTERRUPT (ENOENT), so EAGAIN does not requeue and ENOSYS does not
             stick; EINTR through the ring still works.
  kill       a server killed with requests in flight: clients return, the mount
             answers ENOTCONN, a lazy unmount and a new mount work.`,
		Example: `  klab fuse check timeout --timeout 1 --via all
  klab fuse check interrupt --policy all
  klab fuse check kill --transport uring`,
	}
	for _, what := range cli.Checks() {
		o := &cli.CheckOptions{}
		sub := &cobra.Command{
			Use:     what + " [flags]",
			Short:   "Run the " + what + " check",
			Example: checkExamples[what],
			Args:    cobra.NoArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				o.Verbose = g.verbose
				if err := o.Validate(what); err != nil {
					return badInput(err)
				}
				err := cli.Check(cmd.Context(), what, o, os.Stdout, os.Stderr)
				if errors.Is(err, cli.ErrFailed) {
					return &exitError{code: 1}
				}
				return err
			},
		}
		o.AddFlags(sub.Flags(), what)
		cmd.AddCommand(sub)
	}
	return cmd
}

// checkExamples are the --help examples of each FUSE check.
var checkExamples = map[string]string{
	"timeout":   "  klab fuse check timeout\n  klab fuse check timeout --timeout 1 --via init --json\n  klab fuse check timeout --transport uring",
	"interrupt": "  klab fuse check interrupt\n  klab fuse check interrupt --policy eagain:2 --hold 3s\n  klab fuse check interrupt --transport uring --json",
	"kill":      "  klab fuse check kill\n  klab fuse check kill --stuck 8 --writers 4 --bound 20s\n  klab fuse check kill --transport uring",
}
