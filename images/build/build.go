// Package build turns a kernel tree, a patch series and config fragments
// into a bootable kernel (an results.Kernel with Source "build"), with a
// content-addressed cache of results and incremental work trees.
//
// A build names its inputs first (the tree's commit or tarball hash, the
// patches' and fragments' contents, the compiler version) and answers a
// repeated build from the cache without touching the tree. Otherwise it
// works in a work tree ("slot") kept per source and config: a tarball's
// base tree, or a git repository, whatever the commit. It reverts the
// patches applied last time, moves a git clone to the commit asked for
// (git checkout --force, which rewrites only the files that differ
// between the two commits), applies the new series (git am in git trees;
// git apply, then patch -p1, in others), merges the fragments onto
// tinyconfig or defconfig with the kernel's merge_config.sh, checks that
// every requested option landed, and runs make with O= in the same
// output directory as before, so that changing a patch, or building
// another commit of the same repository, recompiles only what changed,
// as the developer's own make would. Files whose content comes back to
// what make last saw get their old mtime back, so reverting and
// re-applying a series costs nothing; a file with other content always
// keeps the new mtime its rewrite gave it.
//
// A work tree's state.json records every change to src (a series being
// applied or reverted, a move from one commit to another) before it
// starts, so that a build that was killed leaves a tree the next build
// resets to a known commit (or reverts) rather than trusts.
//
// The user's tree is never touched: git trees are cloned with --shared
// (borrowing their objects; a commit the clone cannot see is fetched
// into the clone), tarballs are unpacked. Only complete builds enter the
// cache, the store of package images/buildstore, keyed by commit or
// tarball, patches and config.
package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"klab/images"
	"klab/images/buildstore"
	"klab/images/debian"
	"klab/images/kerneldir"
	"klab/images/keyed"
	"klab/internal/fileio"
	"klab/internal/flock"
	"klab/internal/option"
	"klab/internal/paths"
	"klab/internal/proc"
	"klab/results"
)

// Options says what to build.
type Options struct {
	// Source is the base tree: a git tree (a directory), a kernel tarball
	// (.tar, .tar.gz, .tar.xz, ...) or "debian:<series>" for Debian's
	// linux-source-<series> (optionally "debian:7.3=<package version>").
	Source string
	// Rev is the commit of a git Source to build; empty means HEAD.
	// Uncommitted changes are built only with Dirty.
	Rev string
	// Dirty builds a git Source's working tree as it is: HEAD plus its
	// uncommitted changes (tracked files' changes and untracked files
	// that .gitignore does not exclude), which go in as a first patch, so
	// that the cache key is the base commit plus the diff's hash. The
	// user's checkout is still never written to.
	Dirty bool
	// Patches are patch files, mboxes and directories, applied in order
	// (see LoadPatches).
	Patches []string
	// Config are the config fragments, merged in order: "lab" and "debug"
	// are shipped with klab, anything else is a fragment file. Empty
	// means "lab".
	Config []string
	// BaseConfig is the make target the fragments are merged onto:
	// "tinyconfig", "defconfig" or "allnoconfig". Empty means tinyconfig
	// when Config holds "lab", else defconfig.
	BaseConfig string
	// Name is the build's name ("build:<name>"); empty derives one.
	Name string
	// WithBaseline also builds the tree without the patches, with the same
	// config, as "<name>-base".
	WithBaseline bool
	// Jobs is make's -j; 0 means the number of CPUs.
	Jobs int
	// Arch is the kernel architecture; only "x86_64" (the default) for
	// now.
	Arch string
	// AllowDropped builds even when requested config options did not land
	// (they are still reported).
	AllowDropped bool
	// NoCcache turns off ccache, which is used when it is installed.
	NoCcache bool
	// Rebuild ignores cached results and runs make (incrementally).
	Rebuild bool
	// CacheDir is klab's cache directory; empty means paths.CacheDir().
	CacheDir string
	// Debian tunes the fetching of Debian's kernel sources.
	Debian debian.Options
	// Progress receives progress lines and, when Terminal, a progress bar;
	// nil discards them.
	Progress io.Writer
	// Terminal says Progress is a terminal.
	Terminal bool
}

// Result is what Build produced.
type Result struct {
	// Kernel is the patched kernel (or the only one, without patches).
	Kernel *results.Kernel `json:"kernel"`
	// Hit is true when Kernel came from the cache.
	Hit bool `json:"hit"`
	// Baseline is the unpatched kernel, with WithBaseline.
	Baseline *results.Kernel `json:"baseline,omitempty"`
	// BaselineHit is true when Baseline came from the cache.
	BaselineHit bool `json:"baseline_hit,omitempty"`
	// Dropped are requested config options that did not land (only with
	// AllowDropped; otherwise they fail the build).
	Dropped []Dropped `json:"dropped,omitempty"`
	// Phases are the durations of each step of the last build that ran.
	Phases []Phase `json:"phases,omitempty"`
	// WorkTree is the work tree ("slot") of the source and config: where
	// make ran, or would have run for a cache hit. Builds of any commit of
	// one git repository with one config share it, one at a time.
	WorkTree string `json:"work_tree,omitempty"`
	// Cold is true when the last make started from an empty output
	// directory.
	Cold bool `json:"cold,omitempty"`
	// Steps is how many kbuild steps (compilations, links, generated
	// files) the last make ran, and Compiled how many of them compiled a
	// C or assembly file; both 0 for a cache hit.
	Steps    int `json:"steps,omitempty"`
	Compiled int `json:"compiled,omitempty"`
}

// Phase is one timed step of a build.
type Phase struct {
	// Name is the step: "source", "checkout" (moving a git work tree to
	// another commit), "patches", "config", "make", "install".
	Name string `json:"name"`
	// Took is how long it took.
	Took time.Duration `json:"took_ns"`
}

// builder carries one Build call's state.
type builder struct {
	o        *Options
	s        *buildstore.Store
	b        *base
	frags    []Fragment
	fragHash []results.FileHash
	reqs     []Request
	baseCfg  string
	compiler string
	ccache   bool
	prog     *progress
	res      *Result
}

func (bd *builder) logf(format string, args ...any) {
	if bd.o.Progress != nil {
		fmt.Fprintf(bd.o.Progress, format+"\n", args...)
	}
}

// CcacheDir is where klab's builds keep ccache's objects when CCACHE_DIR
// is not set: cache/ccache under klab's cache directory (cacheDir, or
// paths.CacheDir() when empty).
func CcacheDir(cacheDir string) string {
	if cacheDir == "" {
		cacheDir = paths.CacheDir()
	}
	return filepath.Join(cacheDir, "ccache")
}

// Build builds what o describes, or finds it in the cache.
func Build(ctx context.Context, o Options) (*Result, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	bd := &builder{o: &o, s: buildstore.New(o.CacheDir), res: &Result{}}
	if o.Progress != nil {
		bd.prog = newProgress(o.Progress, o.Terminal)
	}
	if o.Debian.CacheDir == "" {
		o.Debian.CacheDir = o.CacheDir
	}
	// Check the fragments and the patches together, to report every
	// problem at once.
	var err, ferr, perr error
	bd.frags, bd.baseCfg, ferr = loadFragments(o.Config, o.BaseConfig)
	if ferr == nil {
		bd.reqs, ferr = MergeRequests(bd.frags)
	}
	series := &Series{}
	if len(o.Patches) > 0 {
		series, perr = LoadPatches(o.Patches)
	}
	if err := errors.Join(ferr, perr); err != nil {
		return nil, err
	}
	for _, sk := range series.Skipped {
		bd.logf("skipping %s (no diff: a cover letter or reply)", sk)
	}
	if err := checkTools(); err != nil {
		return nil, err
	}
	if bd.compiler, err = compilerVersion(ctx); err != nil {
		return nil, err
	}
	if !o.NoCcache {
		_, err := exec.LookPath("ccache")
		bd.ccache = err == nil
	}
	if err := os.MkdirAll(bd.s.Dir(), 0o755); err != nil {
		return nil, fmt.Errorf("build cache: %w", err)
	}
	memo := newHashMemo(bd.s.HashesFile())
	if bd.b, err = resolveBase(ctx, &o, memo); err != nil {
		return nil, err
	}
	var dirty Patch
	if bd.b.Dirty && o.Dirty {
		if dirty, err = worktreePatch(ctx, bd.b.GitDir); err != nil {
			return nil, err
		}
		bd.b.Dirty = len(dirty.Data) > 0 // else only stat changes: the content is HEAD's
	}
	if bd.b.Dirty && o.Dirty {
		bd.logf("building %s as it is: commit %.12s plus its uncommitted changes (%d file(s), diff %.12s)",
			bd.b.GitDir, bd.b.Commit, len(dirty.Files), dirty.SHA256)
		series.Patches = append([]Patch{dirty}, series.Patches...)
	} else if bd.b.Dirty {
		bd.logf("note: %s has uncommitted changes; klab builds the commit %.12s only (add --dirty to build them too, or commit them)",
			bd.b.GitDir, bd.b.Commit)
	}
	for _, f := range bd.frags {
		bd.fragHash = append(bd.fragHash, results.FileHash{Path: f.Name, SHA256: sha256Hex(f.Data)})
	}
	name := o.Name
	if name == "" {
		name = defaultName(bd.b, bd.inputs(series.Patches).InputKey())
	}
	if o.WithBaseline {
		k, hit, err := bd.one(ctx, name+"-base", nil)
		if err != nil {
			return nil, fmt.Errorf("baseline %s-base: %w", name, err)
		}
		bd.res.Baseline, bd.res.BaselineHit = k, hit
	}
	k, hit, err := bd.one(ctx, name, series.Patches)
	if err != nil {
		return nil, err
	}
	bd.res.Kernel, bd.res.Hit = k, hit
	memo.save()
	return bd.res, nil
}

// Check returns every problem of o that Build finds before any work
// (options out of range or that do not go together, as *option.Error
// where one option is to blame), and fills in the defaults it checks
// against. Build calls it first.
func (o *Options) Check() error {
	var errs []error
	if o.Arch == "" {
		o.Arch = "x86_64"
	}
	if o.Arch != "x86_64" {
		errs = append(errs, option.Errorf("arch", "%s: only x86_64 is supported for now", o.Arch))
	}
	if o.Jobs == 0 {
		o.Jobs = runtime.NumCPU()
	}
	if o.Jobs < 0 || o.Jobs > 1024 {
		errs = append(errs, option.Errorf("jobs", "%d is out of range, want 1..1024", o.Jobs))
	}
	if o.Dirty && o.Rev != "" {
		errs = append(errs, option.Errorf("dirty", "builds the working tree as it is; it does not go with a revision (%s)", o.Rev))
	}
	if o.Dirty && o.Source != "" && !isDirPath(o.Source) {
		errs = append(errs, option.Errorf("dirty", "needs a git tree, not %s", o.Source))
	}
	if o.Source == "" {
		errs = append(errs, errors.New("no source: give a git tree, a kernel tarball or debian:<series>"))
	}
	if o.Name != "" {
		if err := buildstore.CheckName(o.Name); err != nil {
			errs = append(errs, err)
		} else if o.WithBaseline && buildstore.CheckName(o.Name+"-base") != nil {
			errs = append(errs, option.Errorf("name", "%s: too long for the baseline's name %s-base", o.Name, o.Name))
		}
	}
	switch o.BaseConfig {
	case "", "tinyconfig", "defconfig", "allnoconfig":
	default:
		errs = append(errs, option.Errorf("base-config", "%s: want tinyconfig, defconfig or allnoconfig", o.BaseConfig))
	}
	if len(o.Config) == 0 {
		o.Config = []string{"lab"}
	}
	return errors.Join(errs...)
}

func isDirPath(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// loadFragments reads the fragments and picks the base config.
func loadFragments(names []string, baseCfg string) ([]Fragment, string, error) {
	var frags []Fragment
	var errs []error
	lab := false
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		// A shipped fragment's name wins; "./lab" names a file.
		if !strings.ContainsRune(n, '/') && slices.Contains(images.ConfigFragmentNames(), n) {
			data, err := images.ConfigFragment(n)
			if err != nil {
				errs = append(errs, option.Errorf("config", "%s: %w", n, err))
				continue
			}
			frags = append(frags, Fragment{Name: n, Data: data})
			lab = lab || n == "lab"
			continue
		}
		abs, err := filepath.Abs(n)
		if err != nil {
			errs = append(errs, option.Errorf("config", "%s: %w", n, err))
			continue
		}
		data, err := os.ReadFile(abs)
		if err != nil {
			errs = append(errs, option.Errorf("config", "%s: %w; want a fragment file or one of: %s", n, err,
				strings.Join(images.ConfigFragmentNames(), ", ")))
			continue
		}
		frags = append(frags, Fragment{Name: abs, Data: data})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, "", err
	}
	if baseCfg == "" {
		baseCfg = "defconfig"
		if lab {
			baseCfg = "tinyconfig"
		}
	}
	return frags, baseCfg, nil
}

// checkTools makes sure the build tools are installed.
func checkTools() error {
	var missing []string
	for _, c := range []string{"make", "gcc", "ld", "flex", "bison", "bc", "perl", "tar", "git"} {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("building kernels needs %s, which are not installed; install them with: "+
			"apt-get install build-essential flex bison bc libelf-dev libssl-dev cpio kmod git xz-utils (or: make deps)",
			strings.Join(missing, ", "))
	}
	return nil
}

// compilerVersion is the first line of gcc's and ld's --version.
func compilerVersion(ctx context.Context) (string, error) {
	var parts []string
	for _, c := range []string{"gcc", "ld"} {
		out, err := proc.Run(ctx, proc.Opts{Timeout: 30 * time.Second}, c, "--version")
		if err != nil {
			return "", fmt.Errorf("compiler version: %w", err)
		}
		first, _, _ := strings.Cut(string(out), "\n")
		parts = append(parts, strings.TrimSpace(first))
	}
	return strings.Join(parts, "; "), nil
}

func (bd *builder) inputs(patches []Patch) Inputs {
	in := Inputs{Arch: bd.o.Arch, BaseConfig: bd.baseCfg, Compiler: bd.compiler}
	if bd.b != nil {
		in.Base = bd.b.ID
		if bd.b.Kind == "git" {
			in.Line = "repo:" + bd.b.GitDir
		}
	}
	for _, f := range bd.fragHash {
		in.Fragments = append(in.Fragments, f.SHA256)
	}
	for _, p := range patches {
		in.Patches = append(in.Patches, p.SHA256)
	}
	return in
}

var nameUnsafeRe = regexp.MustCompile(`[^A-Za-z0-9._+-]+`)

// defaultName derives a build name from the source and the input key.
func defaultName(b *base, inKey string) string {
	var stem string
	switch b.Kind {
	case "debian":
		stem = strings.TrimPrefix(strings.SplitN(b.Tree, "=", 2)[0], "debian:")
	case "git":
		stem = filepath.Base(b.GitDir) + "-" + b.Commit[:8]
	default:
		stem = filepath.Base(b.Tarball)
		if i := strings.Index(stem, ".tar"); i > 0 {
			stem = stem[:i]
		}
	}
	stem = strings.Trim(nameUnsafeRe.ReplaceAllString(stem, "-"), "-.")
	if stem == "" {
		stem = "kernel"
	}
	if len(stem) > 60 {
		stem = stem[:60]
	}
	return stem + "-" + inKey[:8]
}

// one builds (or finds) one kernel: the base tree with patches, named
// name. The work tree's lock is the build's: a build of the same inputs
// that finished while this one waited for it is a cache hit.
func (bd *builder) one(ctx context.Context, name string, patches []Patch) (*results.Kernel, bool, error) {
	in := bd.inputs(patches)
	var look func() (*results.Kernel, bool)
	if !bd.o.Rebuild {
		look = func() (*results.Kernel, bool) { return bd.s.LookupInput(in.InputKey()) }
	}
	slot := bd.s.WorkDir(in.SlotKey())
	bd.res.WorkTree = slot
	fresh := false
	lock := func(ctx context.Context) (func(), error) {
		_, serr := os.Stat(slot)
		fresh = serr != nil
		if err := os.MkdirAll(slot, 0o755); err != nil {
			return nil, fmt.Errorf("work tree: %w", err)
		}
		return flock.Lock(ctx, filepath.Join(slot, ".lock"), func() {
			bd.logf("waiting for another klab that is building in %s...", slot)
		})
	}
	k, hit, err := keyed.Locked(ctx, look, lock, func(ctx context.Context) (*results.Kernel, error) {
		touch(slot)
		w := &work{bd: bd, dir: slot, src: filepath.Join(slot, "src"), out: filepath.Join(slot, "out"), name: name}
		k, err := w.safeBuild(ctx, in, patches)
		if err != nil && fresh {
			if _, serr := os.Stat(w.src); serr != nil {
				// The source never made it into this new work tree (a
				// file that is not a tarball, an interrupted fetch):
				// nothing in it is worth keeping.
				os.RemoveAll(slot)
			}
		}
		return k, err
	})
	if err != nil {
		return nil, false, err
	}
	if hit {
		if err := bd.s.Name(name, k); err != nil {
			return nil, false, fmt.Errorf("naming build:%s: %w", name, err)
		}
		bd.logf("build:%s is cached (%s, %s)", name, k.Version, k.ID)
	}
	return k, hit, nil
}

// safeBuild runs w.build and turns a panic into an error: the stack goes
// to the build log, and the work tree stays marked busy, so that the next
// build recovers it.
func (w *work) safeBuild(ctx context.Context, in Inputs, patches []Patch) (k *results.Kernel, err error) {
	defer func() {
		if r := recover(); r != nil {
			stack := debug.Stack()
			where := w.dir
			if w.log != nil {
				fmt.Fprintf(w.log, "klab: internal error: %v\n%s", r, stack)
				where = w.logPath()
			}
			k, err = nil, fmt.Errorf("internal error while building %s: %v (the stack is in %s)", w.name, r, where)
		}
	}()
	return w.build(ctx, in, patches)
}

// work is one build in a work tree; the caller holds the tree's lock.
type work struct {
	bd            *builder
	dir, src, out string
	name          string
	st            *slotState
	log           *os.File
	phases        []Phase
}

func (w *work) statePath() string { return filepath.Join(w.dir, "state.json") }
func (w *work) logPath() string   { return filepath.Join(w.dir, "build.log") }

func (w *work) timed(name string, f func() error) error {
	start := time.Now()
	err := f()
	w.phases = append(w.phases, Phase{Name: name, Took: time.Since(start)})
	return err
}

func (w *work) build(ctx context.Context, in Inputs, patches []Patch) (*results.Kernel, error) {
	bd := w.bd
	w.recoverKilledMake()
	log, err := os.Create(w.logPath())
	if err != nil {
		return nil, fmt.Errorf("build log: %w", err)
	}
	defer log.Close()
	w.log = log
	fmt.Fprintf(log, "klab kernels build %s (%s), %d patches, config %s + %s\n", w.name, bd.b.Tree, len(patches),
		bd.baseCfg, strings.Join(bd.o.Config, ","))
	start := time.Now()
	if err := w.timed("source", func() error { return w.prepare(ctx) }); err != nil {
		return nil, err
	}
	if w.st.Git && w.st.Base != bd.b.ID {
		if err := w.timed("checkout", func() error { return w.move(ctx) }); err != nil {
			return nil, err
		}
	}
	if err := w.timed("patches", func() error { return w.applySeries(ctx, patches) }); err != nil {
		return nil, err
	}
	// From here to the end of make, src does not change: this is how make
	// (the config targets too) sees each file klab's patching touched.
	for f := range w.st.Files {
		w.st.Files[f] = stampOf(filepath.Join(w.src, f))
	}
	if err := w.st.save(w.statePath()); err != nil {
		return nil, fmt.Errorf("work tree state: %w", err)
	}
	m := &makeRun{src: w.src, out: w.out, arch: bd.o.Arch, jobs: bd.o.Jobs, ccache: bd.ccache, ccacheDir: CcacheDir(bd.o.CacheDir), log: log, prog: bd.prog}
	var vals map[string]string
	if err := w.timed("config", func() error {
		var err error
		vals, err = w.configure(ctx, m, in, patches)
		return err
	}); err != nil {
		return nil, err
	}
	targets := []string{"bzImage"}
	if vals["MODULES"] == "y" {
		targets = append(targets, "modules")
	}
	cold := !exists(filepath.Join(w.out, "vmlinux"))
	estKey := hashFields(recipe, "estimate", bd.baseCfg, strings.Join(in.Fragments, ","))
	est := 0
	if cold {
		if est = estimate(bd.s.EstimatesFile(), estKey); est == 0 {
			est = 2000
			if bd.baseCfg == "defconfig" {
				est = 6000
			}
		}
	}
	how := "incremental"
	if cold {
		how = "cold"
	}
	bd.logf("building %s (%s, make -j%d %s%s)...", w.name, how, bd.o.Jobs, strings.Join(targets, " "), map[bool]string{true: ", ccache", false: ""}[bd.ccache])
	bd.prog.begin("build:"+w.name, est)
	w.st.MakeStarted = time.Now().UnixNano()
	if err := w.st.save(w.statePath()); err != nil {
		return nil, fmt.Errorf("work tree state: %w", err)
	}
	makeStart := time.Now()
	err = w.timed("make", func() error { return m.run(ctx, w.logPath(), targets...) })
	steps := bd.prog.steps()
	bd.prog.end("")
	if err == nil {
		bd.res.Cold, bd.res.Steps, bd.res.Compiled = cold, m.steps, m.compiled
		bd.logf("make: %d kbuild step(s), %d file(s) compiled, in %s", m.steps, m.compiled, fmtDur(time.Since(makeStart)))
	}
	if ctx.Err() == nil {
		// make ended by itself, cleaning up after a failure.
		w.st.MakeStarted = 0
		if serr := w.st.save(w.statePath()); serr != nil && err == nil {
			err = fmt.Errorf("work tree state: %w", serr)
		}
	}
	if err != nil {
		return nil, err
	}
	if cold && steps > 0 {
		saveEstimate(bd.s.EstimatesFile(), estKey, steps)
	}
	var k *results.Kernel
	if err := w.timed("install", func() error {
		var err error
		k, err = w.install(ctx, m, in, patches, vals)
		return err
	}); err != nil {
		return nil, err
	}
	bd.res.Phases = w.phases
	var ph []string
	for _, p := range w.phases {
		ph = append(ph, fmt.Sprintf("%s %.1fs", p.Name, p.Took.Seconds()))
	}
	fi, _ := os.Stat(k.Image)
	var size int64
	if fi != nil {
		size = fi.Size()
	}
	bd.logf("built build:%s in %s (%s): %s %s, bzImage %s", w.name, fmtDur(time.Since(start)), strings.Join(ph, ", "),
		k.Version, k.ID, HumanSize(size))
	return k, nil
}

// recoverKilledMake handles a make that was killed (klab was interrupted
// or killed): the files it was writing may be half-written but newer than
// their sources, so make would take them as done. Every file in out/
// written in the last two minutes before make's last output is removed
// and will be made again.
func (w *work) recoverKilledMake() {
	st, err := readState(w.statePath())
	if err != nil || st.MakeStarted == 0 {
		return
	}
	end := time.Now()
	if fi, err := os.Stat(w.logPath()); err == nil {
		end = fi.ModTime()
	}
	from := max(st.MakeStarted, end.Add(-2*time.Minute).UnixNano())
	n := 0
	_ = filepath.WalkDir(w.out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().UnixNano() >= from {
			if os.Remove(p) == nil {
				n++
			}
		}
		return nil
	})
	w.bd.logf("the last make in %s was interrupted; removed the %d file(s) it wrote last, to be made again", w.dir, n)
	st.MakeStarted = 0
	_ = st.save(w.statePath())
}

// prepare makes sure the work tree holds the build's source with nothing
// half-done in it: a tarball's base tree, or a clone of the git
// repository at some commit (move then takes it to the build's). A tree
// that an interrupted build left busy is recovered (recoverTree); one
// that is new, or cannot be recovered, is unpacked again.
func (w *work) prepare(ctx context.Context) error {
	st, err := readState(w.statePath())
	if err == nil && w.holdsSource(st) {
		w.st = st
		if !st.Busy && st.MovingTo == "" {
			return nil
		}
		rerr := w.recoverTree(ctx)
		if rerr == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.bd.logf("the work tree %s was left %s by an interrupted build and cannot be recovered (%v); starting it again",
			w.dir, st.interrupted(), rerr)
		w.st = nil
	} else if err == nil && (st.Busy || st.MovingTo != "") {
		w.bd.logf("the work tree %s was left %s by an interrupted build; starting it again", w.dir, st.interrupted())
	}
	for _, d := range []string{"src", "out", "orig", "patches", "fragments", "state.json"} {
		if err := os.RemoveAll(filepath.Join(w.dir, d)); err != nil {
			return fmt.Errorf("work tree: %w", err)
		}
	}
	what := "unpacking " + filepath.Base(w.bd.b.Tarball)
	if w.bd.b.Kind == "git" {
		what = fmt.Sprintf("cloning %s at %.12s", w.bd.b.GitDir, w.bd.b.Commit)
	}
	w.bd.logf("new work tree %s: %s...", w.dir, what)
	start := time.Now()
	if err := w.bd.b.unpack(ctx, w.src); err != nil {
		return err
	}
	w.bd.logf("work tree ready in %.1fs", time.Since(start).Seconds())
	w.st = &slotState{Base: w.bd.b.ID, Git: w.bd.b.Kind == "git", Files: map[string]fileStamp{}, Orig: map[string]fileStamp{}}
	return w.st.save(w.statePath())
}

// holdsSource reports whether the work tree whose state is st holds the
// build's source: for a git source, a clone of the repository at any
// commit (the work tree's key names the repository); otherwise the same
// base tree.
func (w *work) holdsSource(st *slotState) bool {
	if w.bd.b.Kind == "git" {
		return st.Git && strings.HasPrefix(st.Base, "git:") && exists(filepath.Join(w.src, ".git", "HEAD"))
	}
	return !st.Git && st.Base == w.bd.b.ID && exists(filepath.Join(w.src, "Makefile"))
}

// interrupted says what an interrupted build was doing to the work tree
// whose state is st.
func (st *slotState) interrupted() string {
	if st.MovingTo != "" {
		return fmt.Sprintf("half-way through a move from %.12s to %.12s",
			strings.TrimPrefix(st.Base, "git:"), strings.TrimPrefix(st.MovingTo, "git:"))
	}
	return "half-patched"
}

// recoverTree brings back a work tree that an interrupted build left busy.
// A git tree is reset to the commit it was moving to, else to its own,
// and cleaned of files git does not track; another tree gets its
// unpatched files back (every file a patch can touch is saved before the
// first patch goes in). Either way out/ and its objects are kept, and
// files whose content is what make last saw get their mtime back.
func (w *work) recoverTree(ctx context.Context) error {
	st := w.st
	what := st.interrupted()
	how := "reverted it to the base tree"
	if st.Git {
		target := st.Base
		if st.MovingTo != "" {
			target = st.MovingTo
		}
		if err := w.resetGit(ctx, strings.TrimPrefix(target, "git:"), true); err != nil {
			return err
		}
		st.Base = target
		how = fmt.Sprintf("reset it to %.12s", strings.TrimPrefix(target, "git:"))
	} else if err := w.revert(ctx); err != nil {
		return err
	}
	st.Applied, st.Busy, st.MovingTo = nil, false, ""
	w.fixMtimes()
	if err := st.save(w.statePath()); err != nil {
		return fmt.Errorf("work tree state: %w", err)
	}
	w.bd.logf("the work tree %s was left %s by an interrupted build; %s", w.dir, what, how)
	return nil
}

// resetGit resets the git work tree to commit (git reset --hard, which
// rewrites only the files that differ from it), after aborting a git am
// that an interrupted build left behind; with clean, it first removes the
// lock files of a git that was killed (the caller holds the work tree's
// lock, so no other git runs in it) and afterwards every file git does
// not track.
func (w *work) resetGit(ctx context.Context, commit string, clean bool) error {
	gitDir := filepath.Join(w.src, ".git")
	if clean {
		for _, l := range []string{"index.lock", "HEAD.lock"} {
			if err := os.Remove(filepath.Join(gitDir, l)); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("work tree: %w", err)
			}
		}
	}
	if exists(filepath.Join(gitDir, "rebase-apply")) {
		_, _ = git(ctx, w.src, "am", "--abort")
		if clean {
			if err := os.RemoveAll(filepath.Join(gitDir, "rebase-apply")); err != nil {
				return fmt.Errorf("work tree: %w", err)
			}
		}
	}
	if _, err := git(ctx, w.src, "reset", "--quiet", "--hard", commit); err != nil {
		return fmt.Errorf("resetting the work tree to %.12s: %w", commit, err)
	}
	if clean {
		if _, err := git(ctx, w.src, "clean", "-ffdxq"); err != nil {
			return fmt.Errorf("cleaning the work tree: %w", err)
		}
	}
	return nil
}

// move takes a git work tree from the commit it holds to the build's, in
// the clone only: the commit is fetched from the user's repository into
// the clone when the clone cannot see it, and checked out with --force,
// which drops the series applied last time and rewrites only the files
// whose content differs, so that they get new mtimes and make recompiles
// what depends on them, and nothing else. The move is recorded in
// state.json (MovingTo) before src is touched.
func (w *work) move(ctx context.Context) error {
	b := w.bd.b
	from, to := strings.TrimPrefix(w.st.Base, "git:"), b.Commit
	if _, err := git(ctx, w.src, "cat-file", "-e", to+"^{commit}"); err != nil {
		w.bd.logf("fetching %.12s from %s into the work tree's clone...", to, b.GitDir)
		if _, err := git(ctx, w.src, "-c", "gc.auto=0", "fetch", "--quiet", "--no-tags", b.GitDir, to); err != nil {
			return fmt.Errorf("fetching %.12s from %s into the work tree: %w", to, b.GitDir, err)
		}
	}
	differ := "an unknown number of files differ" // from is no longer in the repository
	if out, err := git(ctx, w.src, "diff", "--no-renames", "--name-only", "-z", from, to, "--"); err == nil {
		differ = fmt.Sprintf("%d file(s) differ", strings.Count(string(out), "\x00"))
	}
	w.bd.logf("moving the work tree from %.12s to %.12s (%s)", from, to, differ)
	fmt.Fprintf(w.log, "moving the work tree from %s to %s (%s)\n", from, to, differ)
	w.st.MovingTo, w.st.Busy = b.ID, true
	if err := w.st.save(w.statePath()); err != nil {
		return fmt.Errorf("work tree state: %w", err)
	}
	if exists(filepath.Join(w.src, ".git", "rebase-apply")) {
		_, _ = git(ctx, w.src, "am", "--abort")
	}
	if _, err := git(ctx, w.src, "checkout", "--quiet", "--force", "--detach", to); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// What the next build would do (for example when the commit the
		// clone was at is gone from the user's repository): reset and
		// clean the tree at the new commit.
		if rerr := w.resetGit(ctx, to, true); rerr != nil {
			return fmt.Errorf("checking out %.12s in the work tree: %w", to, errors.Join(err, rerr))
		}
		fmt.Fprintf(w.log, "git checkout failed (%v); reset the work tree to %s instead\n", err, to)
	}
	w.st.Base, w.st.MovingTo, w.st.Applied, w.st.Busy = b.ID, "", nil, false
	w.fixMtimes()
	if err := w.st.save(w.statePath()); err != nil {
		return fmt.Errorf("work tree state: %w", err)
	}
	return nil
}

// applySeries brings the work tree from the series applied last time to
// patches, and gives unchanged files their old mtime back.
func (w *work) applySeries(ctx context.Context, patches []Patch) error {
	want := make([]string, len(patches))
	for i, p := range patches {
		want[i] = p.SHA256
	}
	if slices.Equal(w.st.Applied, want) {
		if len(patches) > 0 {
			w.bd.logf("the work tree already has these %d patches applied", len(patches))
		}
		return nil
	}
	w.st.Busy = true
	if err := w.st.save(w.statePath()); err != nil {
		return fmt.Errorf("work tree state: %w", err)
	}
	if err := w.revert(ctx); err != nil {
		return err
	}
	w.st.Applied = nil
	// Remember how make last saw each file about to change, and for a
	// tree that is not git, its unpatched content.
	for _, p := range patches {
		for _, f := range p.Files {
			if !safeRel(f) {
				return fmt.Errorf("patch %s touches %q, which is outside the tree", p.Path, f)
			}
			path := filepath.Join(w.src, f)
			if _, ok := w.st.Files[f]; !ok {
				w.st.Files[f] = stampOf(path)
			}
			if !w.st.Git {
				if _, ok := w.st.Orig[f]; !ok {
					st := stampOf(path)
					if st.SHA256 != "" {
						dst := filepath.Join(w.dir, "orig", f)
						if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
							return fmt.Errorf("work tree: %w", err)
						}
						if err := fileio.CopyFile(path, dst, 0o644, os.O_TRUNC); err != nil {
							return fmt.Errorf("work tree: %w", err)
						}
					}
					w.st.Orig[f] = st
				}
			}
		}
	}
	if err := w.st.save(w.statePath()); err != nil {
		return fmt.Errorf("work tree state: %w", err)
	}
	pdir := filepath.Join(w.dir, "patches")
	os.RemoveAll(pdir)
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return fmt.Errorf("work tree: %w", err)
	}
	if len(patches) > 0 {
		w.bd.logf("applying %d patch(es)...", len(patches))
	}
	for i, p := range patches {
		file := filepath.Join(pdir, fmt.Sprintf("%04d.patch", i+1))
		if err := os.WriteFile(file, p.Data, 0o644); err != nil {
			return fmt.Errorf("work tree: %w", err)
		}
		fmt.Fprintf(w.log, "applying %d/%d %s (%s)\n", i+1, len(patches), p.Path, p.Subject)
		note, err := applyPatch(ctx, w.src, w.st.Git, p, file, i+1, len(patches))
		if note != "" {
			w.bd.logf("note: %s", note)
		}
		if err != nil {
			fmt.Fprintf(w.log, "%v\n", err)
			if rerr := w.revert(ctx); rerr != nil {
				return errors.Join(err, rerr)
			}
			w.fixMtimes()
			w.st.Busy = false
			return errors.Join(err, w.st.save(w.statePath()))
		}
	}
	w.st.Applied = want
	w.fixMtimes()
	w.st.Busy = false
	if err := w.st.save(w.statePath()); err != nil {
		return fmt.Errorf("work tree state: %w", err)
	}
	return nil
}

func safeRel(f string) bool {
	return f != "" && !filepath.IsAbs(f) && !strings.HasPrefix(filepath.Clean(f), "..")
}

// revert brings src back to the base tree (in a git tree, to its commit).
func (w *work) revert(ctx context.Context) error {
	if w.st.Git {
		return w.resetGit(ctx, strings.TrimPrefix(w.st.Base, "git:"), false)
	}
	for f, orig := range w.st.Orig {
		path := filepath.Join(w.src, f)
		if stampOf(path).SHA256 == orig.SHA256 {
			continue
		}
		if orig.SHA256 == "" {
			if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("reverting %s: %w", f, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("reverting %s: %w", f, err)
		}
		if err := fileio.CopyFile(filepath.Join(w.dir, "orig", f), path, 0o644, os.O_TRUNC); err != nil {
			return fmt.Errorf("reverting %s: %w", f, err)
		}
	}
	return nil
}

// fixMtimes gives every file whose content is what make last saw its
// mtime from then, so that make does not rebuild it.
func (w *work) fixMtimes() {
	for f, want := range w.st.Files {
		if want.SHA256 == "" {
			continue
		}
		path := filepath.Join(w.src, f)
		cur := stampOf(path)
		if cur.SHA256 == want.SHA256 && cur.Mtime != want.Mtime {
			t := time.Unix(0, want.Mtime)
			_ = os.Chtimes(path, t, t)
		}
	}
}

// kconfigPath reports whether a patched file can change what the config
// step produces.
func kconfigPath(f string) bool {
	base := filepath.Base(f)
	return strings.HasPrefix(base, "Kconfig") || strings.HasPrefix(f, "scripts/kconfig/") ||
		strings.HasPrefix(f, "kernel/configs/") || (strings.HasPrefix(f, "arch/") && strings.Contains(f, "/configs/")) ||
		f == "Makefile"
}

// configure makes out/.config (unless it is already made from the same
// inputs) and checks that the requested options landed.
func (w *work) configure(ctx context.Context, m *makeRun, in Inputs, patches []Patch) (map[string]string, error) {
	bd := w.bd
	parts := []string{in.SlotKey()}
	if in.Line != "" {
		// A git work tree's key does not name the commit: the config is
		// made again on another commit, as a cold build of it would
		// make it (an unchanged .config keeps its mtime).
		parts = append(parts, in.Base)
	}
	for _, p := range patches {
		if slices.ContainsFunc(p.Files, kconfigPath) {
			parts = append(parts, p.SHA256)
		}
	}
	cfgFor := hashFields(parts...)
	dotconfig := filepath.Join(w.out, ".config")
	if w.st.ConfigFor != cfgFor || !exists(dotconfig) {
		if err := w.makeConfig(ctx, m); err != nil {
			return nil, err
		}
		w.st.ConfigFor = cfgFor
		if err := w.st.save(w.statePath()); err != nil {
			return nil, fmt.Errorf("work tree state: %w", err)
		}
	}
	data, err := os.ReadFile(dotconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the merged config: %w", err)
	}
	vals := ReadDotConfig(data)
	dropped := CheckConfig(bd.reqs, vals, nil)
	if len(dropped) > 0 {
		kc, err := ReadKconfig(w.src, "x86")
		if err != nil {
			bd.logf("note: cannot explain the dropped options: %v", err)
		}
		dropped = CheckConfig(bd.reqs, vals, kc)
		derr := &DroppedError{Dropped: dropped}
		if !bd.o.AllowDropped {
			return nil, derr
		}
		bd.res.Dropped = dropped
		bd.logf("warning: %s", derr)
	} else {
		bd.logf("config: %s + %s; all %d requested options landed", bd.baseCfg, strings.Join(bd.o.Config, ","), len(bd.reqs))
	}
	return vals, nil
}

// makeConfig runs the base config target, merge_config.sh and
// olddefconfig in out. When the result is the same as before, the old
// .config's mtime is kept so that make does not reconsider it.
func (w *work) makeConfig(ctx context.Context, m *makeRun) error {
	bd := w.bd
	dotconfig := filepath.Join(w.out, ".config")
	old, _ := os.ReadFile(dotconfig)
	oldFi, _ := os.Stat(dotconfig)
	if err := os.MkdirAll(w.out, 0o755); err != nil {
		return fmt.Errorf("build directory: %w", err)
	}
	bd.logf("configuring: %s + %s...", bd.baseCfg, strings.Join(bd.o.Config, ","))
	if err := m.run(ctx, w.logPath(), bd.baseCfg); err != nil {
		return err
	}
	fdir := filepath.Join(w.dir, "fragments")
	os.RemoveAll(fdir)
	if err := os.MkdirAll(fdir, 0o755); err != nil {
		return fmt.Errorf("work tree: %w", err)
	}
	argv := []string{filepath.Join(w.src, "scripts", "kconfig", "merge_config.sh"), "-m", "-O", w.out, dotconfig}
	for i, f := range bd.frags {
		p := filepath.Join(fdir, fmt.Sprintf("%02d-%s", i+1, filepath.Base(f.Name)))
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return fmt.Errorf("work tree: %w", err)
		}
		argv = append(argv, p)
	}
	fmt.Fprintf(w.log, "$ %s\n", strings.Join(argv, " "))
	_, err := proc.Run(ctx, proc.Opts{Dir: w.src, Timeout: 10 * time.Minute, Stdout: w.log, Stderr: w.log,
		Env: append(os.Environ(), "ARCH="+bd.o.Arch, "LC_ALL=C")}, argv...)
	if err != nil {
		return fmt.Errorf("merging config fragments (log: %s): %w", w.logPath(), err)
	}
	if err := m.run(ctx, w.logPath(), "olddefconfig"); err != nil {
		return err
	}
	if nw, err := os.ReadFile(dotconfig); err == nil && oldFi != nil && string(nw) == string(old) {
		_ = os.Chtimes(dotconfig, oldFi.ModTime(), oldFi.ModTime())
	}
	return nil
}

// install puts the finished kernel into the store and names it.
func (w *work) install(ctx context.Context, m *makeRun, in Inputs, patches []Patch, vals map[string]string) (*results.Kernel, error) {
	bd := w.bd
	cfg, err := os.ReadFile(filepath.Join(w.out, ".config"))
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	cfgSHA := sha256Hex(cfg)
	key := ResultKey(in.Arch, in.Base, in.Patches, cfgSHA, in.Compiler)
	return bd.s.Commit(ctx, key, in.InputKey(), w.name, func(ctx context.Context, tmp, out string) error {
		return w.assemble(ctx, m, tmp, out, bd.s.ResultDir(key), key, cfgSHA, patches, vals)
	})
}

// assemble fills out with the kernel's files and kernel.json (whose paths
// point into final, where out goes); tmp is scratch space.
func (w *work) assemble(ctx context.Context, m *makeRun, tmp, out, final, key, cfgSHA string, patches []Patch, vals map[string]string) error {
	bd := w.bd
	image := filepath.Join(out, "vmlinuz")
	for src, dst := range map[string]string{
		filepath.Join(w.out, "arch", "x86", "boot", "bzImage"): image,
		filepath.Join(w.out, ".config"):                        filepath.Join(out, "config"),
	} {
		if err := fileio.CopyFile(src, dst, 0o644, os.O_TRUNC); err != nil {
			return fmt.Errorf("build cache: %w", err)
		}
	}
	version, err := kerneldir.CheckBzImage(image)
	if err != nil {
		return err
	}
	k := &results.Kernel{
		Name: "build:" + w.name, Version: version, Source: "build",
		Image: filepath.Join(final, "vmlinuz"), Config: filepath.Join(final, "config"),
		Build: &results.KernelBuild{
			Tree: bd.b.Tree, BaseCommit: bd.b.Commit, BaseSHA256: bd.b.SHA256,
			BaseConfig: bd.baseCfg, Fragments: bd.fragHash, ConfigSHA256: cfgSHA,
			Compiler: bd.compiler, Key: key,
		},
	}
	for _, p := range patches {
		k.Build.Patches = append(k.Build.Patches, results.FileHash{Path: p.Path, SHA256: p.SHA256, Subject: p.Subject})
	}
	if k.ID, err = kerneldir.ID(image, filepath.Join(out, "config")); err != nil {
		return err
	}
	if vals["MODULES"] == "y" {
		root := filepath.Join(tmp, "modroot")
		if err := m.run(ctx, w.logPath(), "modules_install", "INSTALL_MOD_PATH="+root, "INSTALL_MOD_STRIP=1"); err != nil {
			return err
		}
		dirs, _ := filepath.Glob(filepath.Join(root, "lib", "modules", "*"))
		if len(dirs) != 1 {
			return fmt.Errorf("modules_install made %d module directories, want 1", len(dirs))
		}
		for _, l := range []string{"build", "source"} {
			os.Remove(filepath.Join(dirs[0], l))
		}
		if err := os.Rename(dirs[0], filepath.Join(out, "modules")); err != nil {
			return fmt.Errorf("build cache: %w", err)
		}
		os.RemoveAll(root)
		k.Modules = filepath.Join(final, "modules")
	}
	w.log.Sync()
	if err := fileio.CopyFile(w.logPath(), filepath.Join(out, "build.log"), 0o644, os.O_TRUNC); err != nil {
		return fmt.Errorf("build cache: %w", err)
	}
	return kerneldir.Write(out, k)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
