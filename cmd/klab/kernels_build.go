package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"klab/images/build"
	"klab/images/buildstore"
	"klab/images/cache"
	"klab/images/debian"
	"klab/internal/option"
	"klab/results"
)

type kernelsBuildOptions struct {
	tree, tarball, source string
	rev                   string
	dirty                 bool
	patches               []string
	config                []string
	baseConfig            string
	name                  string
	withBaseline          bool
	jobs                  int
	arch                  string
	allowDropped          bool
	noCcache              bool
	rebuild               bool
	refresh               bool
	asJSON                bool
}

func newKernelsBuildCommand(g *globalOptions) *cobra.Command {
	o := &kernelsBuildOptions{}
	cmd := &cobra.Command{
		Use:   "build {--tree DIR [--rev REV] | --tarball FILE | --source debian:SERIES} [--patches P]... [PATCH...]",
		Short: "Build a kernel from a tree, a patch series and config fragments",
		Long: `Build a kernel from source and cache it as build:<name>, bootable with
klab boot --kernel build:<name>.

The source is a local git tree (--tree, at --rev or HEAD; it is cloned with
--shared, so your checkout is never touched; uncommitted changes are built
only with --dirty, which adds them as a first patch), a kernel tarball (--tarball), or Debian's linux-source-<series>
fetched through apt (--source debian:6.1, 6.12, 7.2 or 7.3).

Patches (--patches, repeatable, and any further arguments, in that order)
are git format-patch files, an mbox holding a series as b4 writes it (the
cover letter is skipped), plain .patch/.diff files, or a directory of them
(its quilt "series" file, else *.patch, *.diff, *.mbox in name order). They
go in with git am in git trees, and with git apply, else patch -p1, in
tarballs. A patch that does not apply fails the build with its file,
subject and the hunk that failed; nothing is built or cached.

Config fragments (--config, comma-separated, merged in order) are "lab" (the
small config klab's experiments need) and "debug" (lockdep, KASAN, hung
task and lockup detectors), shipped with klab, or your own fragment files.
They are merged onto tinyconfig when "lab" is among them, else onto
defconfig (--base-config to choose), with the kernel's merge_config.sh.
After olddefconfig every requested option is checked; the ones Kconfig
dropped are reported with the unmet dependency, and fail the build unless
--allow-dropped.

Results are cached by the tree's identity (the commit, or the tarball's
hash), the patch contents, the merged config and the compiler version, so a
repeated build is instant. Work trees (make O=) are kept per source and
config, and builds are incremental: changing one patch recompiles only what
it touches, and for a git tree one work tree serves every commit, moved by
git checkout in its own clone, so building another --rev recompiles only
what the commits' differing files touch. ccache is used when installed. The full log is kept with
the kernel (klab kernels show build:<name>); a failed build prints the first
compiler errors and the log's path. --arch is x86_64 only for now.`,
		Example: `  klab kernels build --source debian:7.3 --config lab --name plain
  klab kernels build --tree ~/linux --rev v7.3 --patches series.mbox --config lab --name fuse-fix
  klab kernels build --tree . --dirty --name wip
  klab kernels build --source debian:7.3 --config lab,debug --patches 0001-x.patch 0002-y.patch --name x
  klab kernels build --tree ~/linux --patches ./patches/ --config lab,./extra.config --name x --with-baseline
  klab boot --kernel build:fuse-fix -- uname -a`,
		RunE: func(cmd *cobra.Command, args []string) error {
			srcs := 0
			for _, s := range []string{o.tree, o.tarball, o.source} {
				if s != "" {
					srcs++
				}
			}
			if srcs != 1 {
				return badInput(errors.New("give exactly one of --tree DIR, --tarball FILE and --source debian:<series>"))
			}
			src := o.tree + o.tarball + o.source
			var config []string
			for _, c := range o.config {
				config = append(config, strings.Split(c, ",")...)
			}
			bo := build.Options{
				Source: src, Rev: o.rev, Dirty: o.dirty,
				Patches:      append(append([]string{}, o.patches...), args...),
				Config:       config,
				BaseConfig:   o.baseConfig,
				Name:         o.name,
				WithBaseline: o.withBaseline,
				Jobs:         o.jobs,
				Arch:         o.arch,
				AllowDropped: o.allowDropped,
				NoCcache:     o.noCcache,
				Rebuild:      o.rebuild,
				CacheDir:     g.cacheDir,
				Debian: debian.Options{
					Mirror: g.mirror, CacheDir: g.cacheDir, Refresh: o.refresh, Progress: os.Stderr,
				},
				Progress: os.Stderr,
				Terminal: build.IsTerminal(os.Stderr),
			}
			// Every problem of the flags at once, before any work.
			if err := errors.Join(o.checkSource(), flagNames(bo.Check())); err != nil {
				return badInput(err)
			}
			res, err := build.Build(cmd.Context(), bo)
			if err != nil {
				var de *build.DroppedError
				if errors.As(err, &de) {
					err = fmt.Errorf("%w\n  fix the fragment, or pass --allow-dropped to build anyway", err)
				}
				return buildExit(err)
			}
			if o.asJSON {
				return printJSON(res)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			row := func(k *results.Kernel, hit bool, what string) {
				how := "built"
				if hit {
					how = "cached"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", k.Name, k.Version, k.ID, how, what)
			}
			if res.Baseline != nil {
				row(res.Baseline, res.BaselineHit, "baseline (no patches)")
			}
			what := "no patches"
			if n := len(res.Kernel.Build.Patches); n > 0 {
				what = fmt.Sprintf("%d patch(es)", n)
			}
			row(res.Kernel, res.Hit, what)
			return w.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tree, "tree", "", "a local git tree with the kernel source")
	f.StringVar(&o.rev, "rev", "", "the commit of --tree to build (default HEAD)")
	f.BoolVar(&o.dirty, "dirty", false, "build --tree's working tree as it is: HEAD plus uncommitted changes (the tree is still never written to)")
	f.StringVar(&o.tarball, "tarball", "", "a kernel source tarball (.tar, .tar.gz, .tar.xz, ...)")
	f.StringVar(&o.source, "source", "", "debian:<series> (Debian's linux-source-<series>: 6.1, 6.12, 7.2, 7.3), or a tree or tarball")
	f.StringArrayVar(&o.patches, "patches", nil, "a patch file, mbox or directory of patches (repeatable)")
	f.StringSliceVar(&o.config, "config", []string{"lab"}, "config fragments, merged in order: lab, debug or fragment files")
	f.StringVar(&o.baseConfig, "base-config", "", "what the fragments are merged onto: tinyconfig, defconfig or allnoconfig (default: tinyconfig with lab, else defconfig)")
	f.StringVar(&o.name, "name", "", "name of the build, booted as build:<name> (default: derived from the source)")
	f.BoolVar(&o.withBaseline, "with-baseline", false, "also build the tree without the patches, as <name>-base")
	f.IntVarP(&o.jobs, "jobs", "j", 0, "parallel make jobs (default: the number of CPUs)")
	f.StringVar(&o.arch, "arch", "x86_64", "kernel architecture; only x86_64 for now")
	f.BoolVar(&o.allowDropped, "allow-dropped", false, "build even when requested config options did not land")
	f.BoolVar(&o.noCcache, "no-ccache", false, "do not use ccache even when it is installed")
	f.BoolVar(&o.rebuild, "rebuild", false, "ignore the cached result and run make again (incrementally)")
	f.BoolVar(&o.refresh, "refresh", false, "look for a newer Debian linux-source package")
	f.BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	return cmd
}

// checkSource refuses a source that names nothing to build, before any
// work: a --tree that is not a directory, a --tarball that is not a file,
// a --source that is neither a debian:<series> reference nor either of
// them.
func (o *kernelsBuildOptions) checkSource() error {
	isDir := func(p string) bool { fi, err := os.Stat(p); return err == nil && fi.IsDir() }
	isFile := func(p string) bool { fi, err := os.Stat(p); return err == nil && fi.Mode().IsRegular() }
	switch {
	case strings.HasPrefix(o.tree, "debian:"):
		return fmt.Errorf("--tree %s: for Debian's kernel source use --source %s", o.tree, o.tree)
	case o.tree != "" && !isDir(o.tree):
		return fmt.Errorf("--tree %s: not a directory; want a git tree with the kernel source", o.tree)
	case o.tarball != "" && !isFile(o.tarball):
		return fmt.Errorf("--tarball %s: not a file; want a kernel source tarball (.tar, .tar.gz, .tar.xz, ...)", o.tarball)
	case strings.HasPrefix(o.source, "debian:"):
		if err := debian.CheckSourceRef(o.source); err != nil {
			return fmt.Errorf("--source: %w", err)
		}
	case o.source != "" && !isDir(o.source) && !isFile(o.source):
		return fmt.Errorf("--source %s: no such tree or tarball; want debian:<series> (%s), a git tree or a kernel tarball", o.source, strings.Join(debian.Series(), ", "))
	}
	return nil
}

func newKernelsRmCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rm build:NAME...",
		Short: "Remove built kernels",
		Long: `Remove kernels built from source by name. A kernel's files are deleted when
no other name refers to them; work trees stay (klab cache gc --builds bounds them).
Debian kernels are not removed by this command.`,
		Example: "  klab kernels rm build:fuse-fix\n  klab kernels rm build:x build:x-base",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store := buildstore.New(g.cacheDir)
			if err := store.CheckRemove(args); err != nil {
				return badInput(err)
			}
			removed, err := store.Remove(args)
			for _, p := range removed {
				fmt.Fprintf(os.Stderr, "removed %s\n", p)
			}
			return err
		},
	}
	return cmd
}

func newKernelsGCCommand(g *globalOptions) *cobra.Command {
	o := &cacheGCOptions{builds: true, all: true, maxAge: cache.DefaultMaxAge}
	cmd := &cobra.Command{
		Use:   "gc [--max-size SIZE] [--dry-run]",
		Short: "Bound the space used by kernel builds (klab cache gc --builds)",
		Long: `Shrink what kernel builds keep in the cache (work trees, Debian kernel sources
and built kernels) to --max-size, the cheapest to make again first: work
trees and sources, then kernels no name refers to, then named kernels. Work
trees in use by a running build are skipped. Debian kernel images and
initramfs images are not touched.

This is klab cache gc --builds --all --max-size 20G: the same removal and
the same list, an entry per line with its size and why, then the total.
klab cache gc bounds the whole cache.`,
		Example: "  klab kernels gc\n  klab kernels gc --max-size 5G --dry-run\n  klab kernels gc --max-size 0",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCacheGC(cmd.OutOrStdout(), g, o)
		},
	}
	cmd.Flags().StringVar(&o.maxSize, "max-size", "20G", "the most space kernel builds may use (K, M, G, T are powers of 1024)")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "only list what would be removed")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	return cmd
}

// kernelOrigin says where a kernel came from, for klab kernels list.
func kernelOrigin(k *results.Kernel) string {
	if k.Build == nil {
		return strings.TrimSpace(k.Package + " " + k.PackageVersion)
	}
	s := k.Build.Tree
	if k.Build.BaseCommit != "" {
		s += "@" + k.Build.BaseCommit[:min(12, len(k.Build.BaseCommit))]
	}
	if n := len(k.Build.Patches); n > 0 {
		s += fmt.Sprintf(" + %d patch(es)", n)
	}
	var frags []string
	for _, f := range k.Build.Fragments {
		frags = append(frags, f.Path)
	}
	return s + ", " + k.Build.BaseConfig + "+" + strings.Join(frags, ",")
}

// showBuild adds how a built kernel was made to klab kernels show.
func showBuild(row func(k, v string), b *results.KernelBuild) {
	if b == nil {
		return
	}
	row("tree", b.Tree)
	row("base commit", b.BaseCommit)
	row("base sha256", b.BaseSHA256)
	for i, p := range b.Patches {
		row(fmt.Sprintf("patch %d", i+1), fmt.Sprintf("%s (%s) sha256:%.12s", p.Path, p.Subject, p.SHA256))
	}
	var frags []string
	for _, f := range b.Fragments {
		frags = append(frags, f.Path)
	}
	row("fragments", b.BaseConfig+" + "+strings.Join(frags, ", ")+" (config sha256:"+b.ConfigSHA256[:min(12, len(b.ConfigSHA256))]+")")
	row("compiler", b.Compiler)
	row("build log", b.Log)
}

// buildExit gives failures caused by the inputs (a patch that does not
// apply, a config option that does not land, code that does not compile)
// exit status 1, apart from klab's own failures, and options that cannot
// be used the status of bad input, naming their flags.
func buildExit(err error) error {
	var pe *build.PatchError
	var de *build.DroppedError
	var be *build.BuildError
	if errors.As(err, &pe) || errors.As(err, &de) || errors.As(err, &be) {
		return &exitError{code: 1, msg: err.Error()}
	}
	var oe *option.Error
	if errors.As(err, &oe) {
		return badInput(flagNames(err))
	}
	return err
}

// buildTree builds the kernel tree ref names (a directory or tree:DIR) as
// it is, uncommitted changes included, for klab boot --build: in klab's
// cache, incrementally, named build:tree-<directory name>. config are
// --config values: fragments, or "tree" for the tree's own .config.
func buildTree(ctx context.Context, g *globalOptions, ref string, config []string) (*results.Kernel, error) {
	dir := strings.TrimPrefix(ref, "tree:")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, badInput(fmt.Errorf("--build needs a kernel tree as --kernel (. or tree:DIR), and %s is not a directory", ref))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, badInput(err)
	}
	o := build.Options{Source: abs, Dirty: true, CacheDir: g.cacheDir,
		Debian:   debian.Options{Mirror: g.mirror, CacheDir: g.cacheDir, Progress: os.Stderr},
		Progress: os.Stderr, Terminal: build.IsTerminal(os.Stderr)}
	for _, c := range config {
		for _, f := range strings.Split(c, ",") {
			if f == "tree" {
				cfg := filepath.Join(abs, ".config")
				if _, err := os.Stat(cfg); err != nil {
					return nil, badInput(fmt.Errorf("--config tree: %s has no .config to build with (make defconfig there, or use --config lab)", dir))
				}
				// The tree's whole .config, on defconfig: options this
				// tree no longer knows are reported, not fatal.
				f, o.BaseConfig, o.AllowDropped = cfg, "defconfig", true
			}
			o.Config = append(o.Config, f)
		}
	}
	name := "tree-" + strings.Trim(treeNameRe.ReplaceAllString(filepath.Base(abs), "-"), "-.")
	if len(name) > 60 {
		name = name[:60]
	}
	if buildstore.CheckName(name) == nil {
		o.Name = name
	}
	res, err := build.Build(ctx, o)
	if err != nil {
		return nil, buildExit(err)
	}
	how := "built"
	if res.Hit {
		how = "cached"
	}
	fmt.Fprintf(os.Stderr, "klab: %s %s (%s, %s)\n", res.Kernel.Name, how, res.Kernel.Version, res.Kernel.ID)
	return res.Kernel, nil
}

var treeNameRe = regexp.MustCompile(`[^A-Za-z0-9._+-]+`)
