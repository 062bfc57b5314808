package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"klab/images"
)

func newInitramfsCommand(g *globalOptions) *cobra.Command {
	var kernel, flavour string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "initramfs --kernel REF",
		Short: "Build (or find in the cache) the initramfs for a kernel",
		Long: `Assemble the initramfs that klab boots a kernel with: the static klab-agent
as /init, u-root's core commands (and its init, at /bbin/init), and the
kernel modules the agent loads at boot (virtio_pci, virtio_console, fuse and
their dependencies) when the kernel has them as modules. brd is there too,
unloaded: experiments load it with their own parameters
(insmod /lib/klab/modules/brd.ko rd_nr=1 rd_size=65536). The parts are
cached by a hash of their content; a cache hit builds nothing.`,
		Example: "  klab initramfs --kernel debian:7.3\n  klab initramfs --kernel debian:6.1 --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o := guestOptions{kernel: kernel, flavour: flavour, accel: "auto"}
			if err := errors.Join(o.checkGuest(g, "--kernel debian:7.3")...); err != nil {
				return badInput(err)
			}
			lo := g.labOptions()
			lo.Flavour = flavour
			k, err := lo.ResolveKernel(cmd.Context(), kernel)
			if err != nil {
				return err
			}
			start := time.Now()
			ir, err := lo.Initramfs(cmd.Context(), k)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(ir)
			}
			fmt.Printf("%s\n", ir.Path)
			fmt.Fprintf(os.Stderr, "klab: initramfs %s for %s (agent %s, modules %v, cached %v) in %.3fs\n",
				ir.SHA256[:16], k.Name, ir.AgentVersion, ir.Modules, ir.Cached, time.Since(start).Seconds())
			return nil
		},
	}
	cmd.Flags().StringVarP(&kernel, "kernel", "k", "", "kernel: debian:<series>, debian:<package version>, or a bzImage path")
	cmd.Flags().StringVar(&flavour, "flavour", "cloud-amd64", "Debian kernel flavour: cloud-amd64 or amd64")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(newInitramfsPartsCommand(g))
	return cmd
}

// newInitramfsPartsCommand writes the guest parts (the static agent and
// the u-root base) built from the source tree into a directory, for `make
// build` to embed into the klab binary.
func newInitramfsPartsCommand(g *globalOptions) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:    "parts --out DIR",
		Short:  "Build the agent and the u-root base from the source tree into DIR (for make build)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return badInput(fmt.Errorf("--out is required, e.g. --out images/embedded"))
			}
			if fi, err := os.Stat(out); err == nil && !fi.IsDir() {
				return badInput(fmt.Errorf("--out %s: not a directory", out))
			}
			p, err := images.ExportGuestParts(cmd.Context(), images.InitramfsOptions{CacheDir: g.cacheDir, Log: os.Stderr}, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "klab: guest parts in %s: agent %s, u-root base %s (%s)\n", out, p.AgentKey[:12], p.BaseKey[:12], p.GoVersion)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write klab-agent, base.cpio and parts.json into")
	return cmd
}
