package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	experimentsfstests "klab/experiments/fstests"
	"klab/guest/proto"
	"klab/images/fstests"
	"klab/results"
	"klab/results/suite"
)

// newFstestsCommand returns klab fstests: a run of fstests on one kernel
// or an A/B of two, and the group's build command.
func newFstestsCommand(g *globalOptions, runF func(context.Context, *fstestsRunOptions) error) *cobra.Command {
	o := &fstestsRunOptions{}
	if runF == nil {
		runF = func(ctx context.Context, o *fstestsRunOptions) error { return runFstests(ctx, g, o) }
	}
	cmd := &cobra.Command{
		Use:   "fstests --kernel A [--kernel B] [--config NAME] [TEST|GROUP...] [flags]",
		Short: "Run fstests (xfstests) in guests; with two kernels, say what B broke",
		Long: `Run fstests, the file-system test suite, in guests of one kernel, or of two
(A, then B) to say what B changed: tests newly failing in B, tests fixed in B,
tests that ran on one side only, and new kernel splats per test.

klab does not ship fstests: it builds it on the host from your checkout or a
tarball of one (--fstests-src, or $KLAB_FSTESTS_SRC), cached by content, and
runs it in a Debian userspace klab builds (klab userspace build). Each guest
runs ./check on its share of the tests; a test that runs past --test-timeout
is marked hang, one during which the kernel crashes is marked crash, and a
fresh guest goes on with the next test. Splats on the console are charged to
the test that was running (fstests marks each test in the kernel log).

Tests are chosen as check chooses them: names (generic/013, globs such as
generic/0??), groups (-g quick), excluded groups (-x) and tests (-e). klab's
expunge files (experiments/fstests/expunge, one line and a reason per test)
leave out what a configuration cannot pass; --no-expunge runs them too.

A test that newly fails in B is rerun --reruns times on both sides: it is a
regression only when B fails repeatedly and A never does, otherwise flaky,
with its failures per runs on each side.

Configurations:
` + experimentsfstests.ConfigHelp() + `
Results are saved in a run directory (a.json, b.json, verdict.json and the
reports report.txt, report.md, report.html, junit.xml with one testcase per
test); the text report is printed. Exit status: 0, or 1 when B has a
regression (or, with one kernel, when a test failed, hung or crashed); 2 for
bad input; 125 when klab or the host failed; 130 when interrupted.`,
		Example: `  klab fstests --kernel debian:7.3 --config ext4 -g quick --fstests-src ~/src/xfstests-dev
  klab fstests --kernel build:base --kernel build:fix --config fuse-klab-uring generic/013 generic/184
  klab fstests --kernel debian:7.3 --config fuse-hp-uring -g quick -x dangerous --jobs 2
  klab fstests build --src ~/src/xfstests-dev`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			changed := false
			cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) { changed = changed || f.Changed })
			if len(args) == 0 && !changed {
				return cmd.Help()
			}
			// Tests are named with their directory (generic/013): a bare
			// word is a command of the group, mistyped.
			for _, a := range args {
				if !strings.Contains(a, "/") {
					return badInput(fmt.Errorf("%w (tests are named with their directory: generic/013)", unknownCommand(cmd, a)))
				}
			}
			o.out, o.errOut, o.tests = cmd.OutOrStdout(), cmd.ErrOrStderr(), args
			if err := o.check(); err != nil {
				return badInput(err)
			}
			return runF(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.kernels, "kernel", nil, "kernel to test: once, or twice to compare A and B (debian:7.3, build:NAME, a bzImage)")
	f.StringVar(&o.config, "config", "ext4", "configuration: "+strings.Join(experimentsfstests.Configs(), ", "))
	f.StringArrayVarP(&o.groups, "group", "g", nil, "run the tests of this group (repeatable)")
	f.StringArrayVarP(&o.xgroups, "exclude-group", "x", nil, "leave out the tests of this group (repeatable)")
	f.StringArrayVarP(&o.exclude, "exclude", "e", nil, "leave out this test (repeatable)")
	f.StringVar(&o.src, "fstests-src", "", "fstests source: a checkout or a tarball (default $"+experimentsfstests.SrcEnv+")")
	f.IntVar(&o.jobs, "jobs", 1, "guests per kernel, each running a share of the tests")
	f.DurationVar(&o.timeout, "test-timeout", experimentsfstests.DefaultTestTimeout, "a test running longer is marked hang, and a fresh guest goes on")
	f.IntVar(&o.reruns, "reruns", suite.DefaultReruns, "reruns on each side of a test that newly fails in B (0: none)")
	f.BoolVar(&o.noExpunge, "no-expunge", false, "run the tests klab's expunge files leave out")
	f.StringVar(&o.mountOptions, "mount-options", "", "mount options: ext4's (e.g. lazytime), or the FUSE mount's")
	f.StringVar(&o.mkfsOptions, "mkfs-options", "", "mkfs.ext4 options (ext4 only)")
	f.StringVar(&o.format, "format", "text", "report printed: "+strings.Join(suite.Formats, ", "))
	cmd.AddCommand(newFstestsBuildCommand(g, nil))
	return cmd
}

// fstestsRunOptions are klab fstests' flags.
type fstestsRunOptions struct {
	kernels         []string
	config          string
	groups, xgroups []string
	exclude, tests  []string
	src             string
	jobs, reruns    int
	timeout         time.Duration
	noExpunge       bool
	mountOptions    string
	mkfsOptions     string
	format          string
	cfg             proto.FstestsConfig
	out, errOut     io.Writer
}

// check reports every flag that klab fstests refuses before it does any
// work.
func (o *fstestsRunOptions) check() error {
	var errs []error
	switch len(o.kernels) {
	case 1, 2:
	case 0:
		errs = append(errs, errors.New("--kernel is required: once to run fstests on a kernel, twice to compare A and B (debian:7.3, build:NAME)"))
	default:
		errs = append(errs, fmt.Errorf("--kernel given %d times: once, or twice to compare A and B", len(o.kernels)))
	}
	cfg, err := experimentsfstests.Config(o.config, o.mountOptions, o.mkfsOptions)
	if err != nil {
		errs = append(errs, fmt.Errorf("--config: %w", err))
	}
	o.cfg = cfg
	if err == nil {
		if err := experimentsfstests.CheckTests(cfg, o.tests); err != nil {
			errs = append(errs, err)
		}
	}
	if len(o.tests) == 0 && len(o.groups) == 0 {
		errs = append(errs, errors.New("no tests: name tests (generic/013) or groups (-g quick)"))
	}
	if o.jobs < 1 {
		errs = append(errs, fmt.Errorf("--jobs %d: want 1 or more", o.jobs))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--test-timeout %s: want a positive duration, e.g. 10m", o.timeout))
	}
	if o.reruns < 0 {
		errs = append(errs, fmt.Errorf("--reruns %d: want 0 or more", o.reruns))
	}
	if !slices.Contains(suite.Formats, o.format) {
		errs = append(errs, fmt.Errorf("--format %q: one of %s", o.format, strings.Join(suite.Formats, ", ")))
	}
	return errors.Join(errs...)
}

// runFstests runs klab fstests.
func runFstests(ctx context.Context, g *globalOptions, o *fstestsRunOptions) error {
	lo := g.labOptions()
	env, err := experimentsfstests.NewEnv(ctx, experimentsfstests.HostOptions{Lab: &lo, Src: o.src, Progress: o.errOut, Command: os.Args})
	var se *experimentsfstests.SourceError
	if errors.As(err, &se) {
		return badInput(fmt.Errorf("--fstests-src: %w", se.Err))
	}
	if err != nil {
		return err
	}
	run, err := results.Store{Root: g.runsDir}.Create("fstests-" + o.config)
	if err != nil {
		return err
	}
	reruns := o.reruns
	if reruns == 0 {
		reruns = -1
	}
	res, err := experimentsfstests.Run(ctx, env, experimentsfstests.Request{
		Kernels: o.kernels, Config: o.cfg, Jobs: o.jobs, TestTimeout: o.timeout, Reruns: reruns, NoExpunge: o.noExpunge,
		Select: suite.SelectArgs{Tests: o.tests, Groups: o.groups, ExcludeGroups: o.xgroups, Exclude: o.exclude},
		Dir:    run.Dir, Progress: o.errOut, TimesFile: filepath.Join(g.runsDir, experimentsfstests.TimesFileName(o.cfg.Name)),
	})
	if res != nil && len(res.Runs) > 0 && (err == nil || res.Reported > 0) {
		if res.Verdict != nil {
			_ = suite.WriteVerdict(o.out, res.Verdict, o.format)
		} else {
			_ = suite.WriteRun(o.out, res.Runs[0], o.format)
		}
		fmt.Fprintf(o.errOut, "fstests: results in %s\n", run.Dir)
	}
	var ie *experimentsfstests.InputError
	if errors.As(err, &ie) {
		return badInput(err)
	}
	if err != nil && ctx.Err() != nil {
		fmt.Fprintf(o.errOut, "klab: interrupted; what finished is in %s\n", run.Dir)
		return &exitError{code: exitInterrupted}
	}
	if err != nil {
		return err
	}
	switch {
	case res.Regressed():
		return &exitError{code: 1, msg: "fstests: B has a regression"}
	case res.Failed():
		return &exitError{code: 1}
	}
	return nil
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
