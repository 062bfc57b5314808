package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"klab/images/debian"
	"klab/images/userspace"
)

func newUserspaceCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "userspace",
		Short: "Build the guest userspace that test suites run in",
		Long: `A userspace is a Debian root tree made from binary packages and their
dependencies, packed into an ext4 image that guests attach read-only; the agent
mounts it and runs commands chrooted into it, with a tmpfs on /tmp, /var/tmp,
/run and the other directories tests write to.`,
		Example: `  klab userspace build
  klab userspace build --add-packages fio,quota
  klab userspace build --suite sid --packages bash,coreutils --json`,
	}
	cmd.AddCommand(newUserspaceBuildCommand(g))
	return cmd
}

type userspaceBuildOptions struct {
	suite    string
	packages []string
	add      []string
	refresh  bool
	asJSON   bool
}

func newUserspaceBuildCommand(g *globalOptions) *cobra.Command {
	o := &userspaceBuildOptions{}
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build (or find in the cache) a userspace image",
		Long: `Resolve the packages (by default what fstests needs: bash, perl-base, gawk,
coreutils, util-linux, xfsprogs, e2fsprogs, attr, acl, psmisc, kmod, ...) and
their Depends and Pre-Depends in a Debian suite through klab's private apt
configuration, download and unpack them (no maintainer script runs), add the
users fstests expects (fsgqa, fsgqa2, 123456-fsgqa), and pack the tree into an
ext4 image. The image is cached by the suite, the package list and the
versions apt resolved; a second build of the same list is a cache hit with no
network, until --refresh. Prints the image's path; --json prints its
descriptor (the package list and versions that manifests record).`,
		Example: `  klab userspace build
  klab userspace build --add-packages fio,quota
  klab userspace build --suite sid --packages bash,coreutils --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			spec := userspace.Spec{Suite: o.suite, Packages: o.packages}
			if len(o.add) > 0 {
				if len(spec.Packages) == 0 {
					spec.Packages = userspace.DefaultPackages()
				}
				spec.Packages = append(spec.Packages, o.add...)
			}
			if _, err := spec.Normalize(); err != nil {
				return badInput(err)
			}
			img, err := userspace.Build(cmd.Context(), spec, userspace.Options{
				Debian:   debian.Options{Mirror: g.mirror, CacheDir: g.cacheDir, Refresh: o.refresh},
				Progress: os.Stderr,
			})
			if err != nil {
				return err
			}
			if o.asJSON {
				return printJSON(struct {
					Path string `json:"path"`
					userspace.Descriptor
				}{img.Path, img.Descriptor})
			}
			d := img.Descriptor
			fmt.Println(img.Path)
			fmt.Fprintf(os.Stderr, "klab: userspace %s: %d packages from %s (%s), %d MiB image\n",
				d.ID, len(d.Packages), d.Suite, strings.Join(d.Requested, " "), d.ImageBytes>>20)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.suite, "suite", userspace.DefaultSuite, "Debian suite the packages come from: "+strings.Join(userspace.Suites(), ", "))
	f.StringSliceVar(&o.packages, "packages", nil, "packages to install instead of the default list (comma-separated)")
	f.StringSliceVar(&o.add, "add-packages", nil, "packages to install besides the list (comma-separated)")
	f.BoolVar(&o.refresh, "refresh", false, "resolve the packages again instead of using the cached image")
	f.BoolVar(&o.asJSON, "json", false, "print the image's path and descriptor as JSON")
	return cmd
}
