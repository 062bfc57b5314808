package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"klab/images/fstests"
)

// newFstestsCommand returns klab fstests, the group of fstests commands.
func newFstestsCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fstests",
		Short: "Build fstests (xfstests) for guests",
		Long: `fstests (xfstests) is the file-system test suite. klab does not ship it: it
builds it on the host from a source you name, an fstests checkout or a
tarball of one, and caches the result by the source's content.`,
		Example: `  klab fstests build --src ~/src/xfstests-dev
  klab fstests build --src fstests.tar.gz --json`,
	}
	cmd.AddCommand(newFstestsBuildCommand(g, nil))
	return cmd
}

// fstestsBuildOptions are klab fstests build's flags, bound to its fields.
type fstestsBuildOptions struct {
	src    string
	jobs   int
	asJSON bool

	// out and errOut are klab's standard output and error.
	out, errOut io.Writer
}

// newFstestsBuildCommand returns klab fstests build. Once the flags are
// checked, the command calls runF, or runFstestsBuild when runF is nil.
func newFstestsBuildCommand(g *globalOptions, runF func(context.Context, *fstestsBuildOptions) error) *cobra.Command {
	o := &fstestsBuildOptions{}
	if runF == nil {
		runF = func(ctx context.Context, o *fstestsBuildOptions) error { return runFstestsBuild(ctx, g, o) }
	}
	cmd := &cobra.Command{
		Use:   "build --src DIR|TARBALL",
		Short: "Build fstests from a checkout or a tarball, into klab's cache",
		Long: `Build fstests on the host from --src: a checkout (a directory with the check
script at its top; in a git work tree, the files git tracks or would track,
uncommitted changes included) or a tarball of one (.tar, .tar.gz, .tar.xz,
.tar.bz2, .tar.zst; a single top directory such as git archive's --prefix is
fine). The source is never written to: it is copied or unpacked, then built
with autotools, configure, make -j and make install in a temporary directory.

The result is cached under --cache-dir's fstests/ by the source's content
(the tarball's bytes, or the directory's files), the C compiler's version and
the architecture: the same content builds once. It is a tree ready to copy
into a guest (check, common/, tests/generic and tests/ext4 with their .out
files, src/ and ltp/ programs) and fstests.json, which records the source,
the build time, the toolchain, and the shared libraries the programs need.

The build needs fstests' build dependencies (make fstests-deps in klab's
source tree installs them). A build that fails names its step and keeps its
log.`,
		Example: `  klab fstests build --src ~/src/xfstests-dev
  klab fstests build --src fstests-63a29724.tar.gz
  klab fstests build --src . --json | jq .descriptor.libs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.out, o.errOut = cmd.OutOrStdout(), cmd.ErrOrStderr()
			if err := o.check(); err != nil {
				return badInput(err)
			}
			return runF(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.src, "src", "", "the fstests source: a checkout directory or a tarball of one")
	f.IntVarP(&o.jobs, "jobs", "j", 0, "make -j jobs (default: the number of CPUs)")
	f.BoolVar(&o.asJSON, "json", false, "print the build (tree, log, descriptor, cache hit) as JSON")
	return cmd
}

// check reports every flag that klab fstests build refuses before it does
// any work.
func (o *fstestsBuildOptions) check() error {
	var errs []error
	if strings.TrimSpace(o.src) == "" {
		errs = append(errs, errors.New("--src is required: an fstests checkout (a directory with the check script at its top) or a tarball of one, e.g. --src ~/src/xfstests-dev"))
	}
	if o.jobs < 0 {
		errs = append(errs, fmt.Errorf("--jobs %d: want 1 or more (0 for the number of CPUs)", o.jobs))
	}
	return errors.Join(errs...)
}

// options returns the build options o describes.
func (o *fstestsBuildOptions) options(g *globalOptions) fstests.Options {
	return fstests.Options{CacheDir: g.cacheDir, Jobs: o.jobs, Progress: o.errOut}
}

// runFstestsBuild builds fstests from o.src and says where the tree is.
func runFstestsBuild(ctx context.Context, g *globalOptions, o *fstestsBuildOptions) error {
	start := time.Now()
	s, err := fstests.OpenSource(ctx, o.src)
	if err != nil {
		return badInput(fmt.Errorf("--src: %w", err))
	}
	b, err := fstests.BuildSource(ctx, s, o.options(g))
	if err != nil {
		return err
	}
	if o.asJSON {
		return writeJSON(o.out, b)
	}
	d := b.Descriptor
	var steps []string
	for _, st := range d.Steps {
		steps = append(steps, fmt.Sprintf("%s %.0fs", st.Name, st.Seconds))
	}
	how := fmt.Sprintf("built in %.0fs (%s)", d.BuildSeconds, strings.Join(steps, ", "))
	if b.Hit {
		how = fmt.Sprintf("cached (built %s in %.0fs), answered in %s", d.Built, d.BuildSeconds, time.Since(start).Round(time.Millisecond))
	}
	fmt.Fprintf(o.out, "fstests %s from %s (%s)\n", d.Key, s.Path, s.ID)
	fmt.Fprintf(o.out, "  %s\n", how)
	fmt.Fprintf(o.out, "  tree:      %s\n", b.Dir)
	fmt.Fprintf(o.out, "  log:       %s\n", b.Log)
	fmt.Fprintf(o.out, "  programs:  %d, needing %s\n", d.Programs, strings.Join(d.Libs, " "))
	fmt.Fprintf(o.out, "  compiler:  %s\n", d.Toolchain.Compiler)
	return nil
}
