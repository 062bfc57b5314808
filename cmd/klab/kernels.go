package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"klab/images"
	"klab/images/buildstore"
	"klab/images/debian"
)

func newKernelsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kernels",
		Short: "Fetch, build, list and show kernels",
		Long: `Kernels are Debian packages (debian:<series> or debian:<package version>)
fetched through apt from the host's Debian mirror into klab's cache, local
bzImage files, or kernels built from a tree, a patch series and config
fragments (klab kernels build; build:<name>).`,
		Example: `  klab kernels fetch debian:7.3 debian:6.12
  klab kernels list
  klab kernels show debian:7.3 --json
  klab kernels build --source debian:7.3 --config lab --patches fix.patch --name fix
  klab kernels rm build:fix`,
	}
	cmd.AddCommand(newKernelsFetchCommand(g), newKernelsListCommand(g), newKernelsShowCommand(g),
		newKernelsBuildCommand(g), newKernelsRmCommand(g), newKernelsGCCommand(g))
	return cmd
}

type kernelsFetchOptions struct {
	flavour string
	refresh bool
}

func newKernelsFetchCommand(g *globalOptions) *cobra.Command {
	o := &kernelsFetchOptions{}
	cmd := &cobra.Command{
		Use:   "fetch REF...",
		Short: "Download Debian kernels into the cache",
		Long: `Resolve each debian:<series> to the newest linux-image-<version>-<flavour> in
bookworm, trixie, trixie-backports and sid, download it through apt with a
private configuration (the mirror comes from the host's apt sources, or
--debian-mirror / KLAB_DEBIAN_MIRROR), unpack the image, config and modules,
and cache them. A second fetch is a cache hit that uses no network; --refresh
looks for a newer package.`,
		Example: `  klab kernels fetch debian:7.3
  klab kernels fetch debian:6.1 debian:6.12 debian:7.2
  klab kernels fetch --flavour amd64 debian:7.3
  klab kernels fetch debian:7.3.4+deb13`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			errs := []error{checkFlavour(o.flavour)}
			flavour := o.flavour
			if errs[0] != nil {
				flavour = "" // said once
			}
			for _, ref := range args {
				errs = append(errs, debian.CheckRef(ref, flavour))
			}
			if err := errors.Join(errs...); err != nil {
				return badInput(err)
			}
			for _, ref := range args {
				k, err := debian.Fetch(cmd.Context(), ref, debian.Options{
					Mirror: g.mirror, CacheDir: g.cacheDir, Flavour: o.flavour, Refresh: o.refresh, Progress: os.Stderr,
				})
				if err != nil {
					return err
				}
				fmt.Printf("%s\t%s\t%s\t%s\n", shown(ref), shown(k.Version), shown(k.ID), shown(k.Image))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.flavour, "flavour", debian.DefaultFlavour, flavourUsage())
	cmd.Flags().BoolVar(&o.refresh, "refresh", false, "look for a newer package even when one is cached")
	return cmd
}

func newKernelsListCommand(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List cached kernels",
		Example: "  klab kernels list\n  klab kernels list --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ks, err := debian.CachedKernels(g.cacheDir)
			if err != nil {
				return err
			}
			built, err := buildstore.New(g.cacheDir).List()
			if err != nil {
				return err
			}
			ks = append(ks, built...)
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), ks)
			}
			if len(ks) == 0 {
				fmt.Fprintln(os.Stderr, "no kernels cached yet; try: klab kernels fetch debian:7.3")
				return nil
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tVERSION\tID\tSOURCE")
			for _, k := range ks {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", shown(k.Name), shown(k.Version), shown(k.ID), shown(kernelOrigin(k)))
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newKernelsShowCommand(g *globalOptions) *cobra.Command {
	var asJSON bool
	var flavour string
	cmd := &cobra.Command{
		Use:   "show REF",
		Short: "Show a kernel: version, ID, source package and paths",
		Long: `Show a kernel's version, ID, source package and the paths of its image,
config and modules. A Debian kernel that is not cached yet is fetched. With
--json, the field "image" is the bzImage path.`,
		Example: "  klab kernels show debian:7.3\n  klab kernels show debian:7.3 --json | jq -r .image\n  klab kernels show ./arch/x86/boot/bzImage",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := errors.Join(checkFlavour(flavour), checkKernelRef(g, args[0], flavour)); err != nil {
				return badInput(err)
			}
			k, err := images.ResolveKernel(cmd.Context(), args[0], images.ResolveOptions{
				Debian: debian.Options{Mirror: g.mirror, CacheDir: g.cacheDir, Flavour: flavour, Progress: os.Stderr},
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(k)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			row := func(k, v string) {
				if v != "" {
					fmt.Fprintf(w, "%s:\t%s\n", k, shown(v))
				}
			}
			row("name", k.Name)
			row("version", k.Version)
			row("id", k.ID)
			row("source", k.Source)
			if k.Package != "" {
				row("package", k.Package+" "+k.PackageVersion)
			}
			row("suite", k.Suite)
			row("image", k.Image)
			row("config", k.Config)
			row("modules", k.Modules)
			showBuild(row, k.Build)
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&flavour, "flavour", debian.DefaultFlavour, flavourUsage())
	return cmd
}

// printJSON prints v as indented JSON on stdout (see writeJSON).
func printJSON(v any) error { return writeJSON(os.Stdout, v) }

// writeJSON writes v as indented JSON. A nil slice is written as [], not
// null: a list with nothing in it is still a list.
func writeJSON(w io.Writer, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.IsNil() {
		v = []struct{}{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
