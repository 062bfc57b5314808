package apt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"klab/internal/fileio"
	"klab/internal/flock"
	"klab/internal/proc"
)

// listsMaxAge is how old the private package lists may get before Update
// refreshes them.
const listsMaxAge = 24 * time.Hour

// Options configures an Env.
type Options struct {
	// Mirror is the Debian archive URI (see ResolveMirror).
	Mirror string
	// Keyring is the keyring file the archive is signed with; empty
	// means apt's trusted keys (see Keyring).
	Keyring string
	// Suites are the suites whose lists the Env keeps, e.g. bookworm sid.
	Suites []string
	// Source makes the lists those of source packages (deb-src lines,
	// for `apt-get source`) instead of amd64 binary packages.
	Source bool
	// Log receives progress lines and warnings; nil discards them.
	Log func(format string, args ...any)
	// StageRoot is where, as root, the staging directories of caches
	// that _apt cannot reach are kept (see New); empty means
	// /var/cache/klab.
	StageRoot string
}

// Env is a private apt configuration under one directory of klab's cache:
// apt.conf, sources.list, status, cache/ and (unless the sandbox keeps
// them elsewhere, see New) lists/. Every apt call through it holds the
// directory's one lock, whichever klab process makes it.
type Env struct {
	dir string
	o   Options
	sb  sandbox
	// held is set while this Env holds the lock (Update holds it across
	// its own apt call). An Env is used by one goroutine at a time.
	held bool
}

// New makes (or reuses) the private apt configuration in dir.
//
// When klab runs as root, apt's download methods, which parse what the
// mirror sends, drop to the _apt user as they do for the host's own apt.
// That user must reach the directories apt downloads into: the lists'
// partial/ directory and the directory `apt-get download` writes to. When
// dir is reachable by _apt they stay in it; when it is not (a cache under
// /root, mode 0700) they are kept in /var/cache/klab/apt-<hash of dir>
// (root's, mode 0755), with the parts _apt writes owned by _apt, mode 0700;
// staging directories whose cache is gone are removed. When neither
// works, apt downloads as root and New says why in one warning line.
func New(dir string, o Options) (*Env, error) {
	if strings.ContainsAny(dir, "\"\n{};") {
		return nil, fmt.Errorf("apt configuration: unusable cache path %q", dir)
	}
	if strings.ContainsAny(o.Keyring, "\"\n{}; ]") {
		o.Keyring = "" // cannot be written into sources.list; use apt's trusted keys
	}
	for _, d := range []string{"cache/archives/partial", "sources.list.d", "preferences.d"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("apt configuration: %w", err)
		}
	}
	// Used now, for `klab cache gc`, which removes the least recently
	// used entries first.
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
	e := &Env{dir: dir, o: o}
	if o.StageRoot == "" {
		o.StageRoot = systemStageRoot
	}
	e.sb = prepareSandbox(dir, o.StageRoot, currentIdentity())
	if err := os.MkdirAll(e.listsDir(), 0o755); err != nil {
		return nil, fmt.Errorf("apt configuration: %w", err)
	}
	if e.sb.why != "" {
		e.logf("warning: %s", e.sb.why)
	}
	return e, nil
}

func (e *Env) logf(format string, args ...any) {
	if e.o.Log != nil {
		e.o.Log(format, args...)
	}
}

func (e *Env) path(p string) string { return filepath.Join(e.dir, p) }

// listsDir is where apt keeps the package lists (Dir::State::Lists).
func (e *Env) listsDir() string { return filepath.Join(e.sb.stage, "lists") }

// sandboxed reports whether apt's downloads drop to the _apt user.
func (e *Env) sandboxed() bool { return e.sb.user != "" }

// lock takes the one lock on the apt directory that every apt call and
// every change of its configuration and lists holds, whichever klab
// command (fetching kernels, fetching sources) and process runs it: the
// private configuration turns apt's own locking off. The returned
// function releases it.
func (e *Env) lock(ctx context.Context) (func(), error) {
	if e.held {
		return func() {}, nil
	}
	unlock, err := flock.Lock(ctx, e.path(".lock"), func() {})
	if err != nil {
		return nil, fmt.Errorf("apt lock: %w", err)
	}
	e.held = true
	return func() {
		e.held = false
		unlock()
	}, nil
}

// kind names what the lists hold, for messages.
func (e *Env) kind() string {
	if e.o.Source {
		return "source package"
	}
	return "package"
}

// sourcesList is the private sources.list.
func (e *Env) sourcesList() string {
	var b strings.Builder
	if e.o.Source {
		opts := ""
		if e.o.Keyring != "" {
			opts = " [signed-by=" + e.o.Keyring + "]"
		}
		b.WriteString("# Written by klab: the Debian suites searched for source packages.\n")
		for _, s := range e.o.Suites {
			fmt.Fprintf(&b, "deb-src%s %s %s main\n", opts, e.o.Mirror, s)
		}
		return b.String()
	}
	opts := "arch=amd64 target=Packages"
	if e.o.Keyring != "" {
		opts += " signed-by=" + e.o.Keyring
	}
	b.WriteString("# Written by klab: the Debian suites searched for kernels.\n")
	for _, s := range e.o.Suites {
		fmt.Fprintf(&b, "deb [%s] %s %s main\n", opts, e.o.Mirror, s)
	}
	return b.String()
}

// aptConf is the private configuration, read after the host's apt.conf.d
// (so proxies and similar settings still apply) and overriding everything
// that would touch the host's apt state.
func (e *Env) aptConf() string {
	var b strings.Builder
	set := func(k, v string) { fmt.Fprintf(&b, "%s \"%s\";\n", k, v) }
	b.WriteString("// Written by klab: a private apt configuration for fetching kernels.\n")
	set("Dir::Etc::SourceList", e.path("sources.list"))
	set("Dir::Etc::SourceParts", e.path("sources.list.d"))
	set("Dir::Etc::Preferences", e.path("preferences"))
	set("Dir::Etc::PreferencesParts", e.path("preferences.d"))
	set("Dir::State::Lists", e.listsDir())
	set("Dir::State::Status", e.path("status"))
	set("Dir::State::extended_states", e.path("extended_states"))
	set("Dir::Cache", e.path("cache"))
	set("Dir::Cache::archives", e.path("cache/archives"))
	// Some hosts (Debian's docker images) disable the binary caches,
	// which makes every apt-cache call re-read all package lists.
	set("Dir::Cache::pkgcache", "pkgcache.bin")
	set("Dir::Cache::srcpkgcache", "srcpkgcache.bin")
	set("APT::Architecture", "amd64")
	b.WriteString("#clear APT::Architectures;\n")
	set("APT::Architectures::", "amd64")
	set("Debug::NoLocking", "1")
	b.WriteString("#clear Acquire::Languages;\n")
	set("Acquire::Languages::", "none")
	b.WriteString("#clear APT::Update::Post-Invoke;\n")
	b.WriteString("#clear APT::Update::Post-Invoke-Success;\n")
	switch {
	case e.sb.user != "":
		set("APT::Sandbox::User", e.sb.user)
	case e.sb.root:
		// The sandbox is off (New said why): say so to apt too, which
		// would otherwise warn on every download.
		set("APT::Sandbox::User", "root")
	}
	return b.String()
}

// Run runs apt-get or apt-cache (prog) with the private configuration and
// returns its output.
func (e *Env) Run(ctx context.Context, timeout time.Duration, prog string, args ...string) ([]byte, error) {
	return e.run(ctx, timeout, "", prog, args...)
}

func (e *Env) run(ctx context.Context, timeout time.Duration, dir, prog string, args ...string) ([]byte, error) {
	unlock, err := e.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	argv := append([]string{prog, "-c", e.path("apt.conf")}, args...)
	env := append(os.Environ(), "LC_ALL=C", "LANGUAGE=", "DEBIAN_FRONTEND=noninteractive")
	if e.sb.user != "" {
		// apt's methods make temporary files as _apt (gpgv's, for
		// instance); the host's TMPDIR or /tmp may not let them.
		env = append(env, "TMPDIR="+e.sb.dir("tmp"))
	}
	var stderr strings.Builder
	out, err := proc.Run(ctx, proc.Opts{Timeout: timeout, Dir: dir, Env: env, Stderr: &limitedWriter{w: &stderr, n: 64 << 10}}, argv...)
	if e.sb.user != "" {
		// Should apt still give the sandbox up, say so.
		for _, line := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(line, "unsandboxed") || strings.Contains(line, "drop privileges") {
				e.logf("warning: apt: %s", strings.TrimSpace(line))
				break
			}
		}
	}
	return out, err
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// Download runs `apt-get <args>` for a command that downloads into the
// working directory (`download PKG=VERSION`, `source --download-only
// PKG=VERSION`) and leaves the files it fetched in dir. Under the
// sandbox apt downloads into its own staging directory, which _apt may
// write, and the regular files it leaves there are moved into dir.
func (e *Env) Download(ctx context.Context, timeout time.Duration, dir string, args ...string) error {
	if e.sb.user == "" {
		_, err := e.run(ctx, timeout, dir, "apt-get", args...)
		return err
	}
	unlock, err := e.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	stage := e.sb.dir("download")
	if err := emptyDir(stage); err != nil {
		return fmt.Errorf("apt download directory: %w", err)
	}
	if _, err := e.run(ctx, timeout, stage, "apt-get", args...); err != nil {
		return err
	}
	des, err := os.ReadDir(stage)
	if err != nil {
		return fmt.Errorf("apt download directory: %w", err)
	}
	for _, de := range des {
		// Only regular files: never a link _apt could have left.
		if !de.Type().IsRegular() {
			continue
		}
		if err := moveFile(filepath.Join(stage, de.Name()), filepath.Join(dir, de.Name())); err != nil {
			return fmt.Errorf("apt download: %w", err)
		}
	}
	return emptyDir(stage)
}

// emptyDir removes everything in dir.
func emptyDir(dir string) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		if err := os.RemoveAll(filepath.Join(dir, de.Name())); err != nil {
			return err
		}
	}
	return nil
}

// moveFile renames src to dst, copying when they are on different file
// systems.
func moveFile(src, dst string) error {
	err := os.Rename(src, dst)
	if err == nil || !errors.Is(err, syscall.EXDEV) {
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := fileio.WriteAtomic(dst, data, 0o644); err != nil {
		return err
	}
	return os.Remove(src)
}

// writeIfChanged writes data to path unless it already holds it, and
// reports whether it wrote.
func writeIfChanged(path, data string) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && string(old) == data {
		return false, nil
	}
	return true, fileio.WriteAtomic(path, []byte(data), 0o644)
}

// listsFiles returns the suites that have a package list (a Sources list
// for source packages).
func (e *Env) listsFiles() map[string]bool {
	suffix := "_main_binary-amd64_Packages"
	if e.o.Source {
		suffix = "_main_source_Sources"
	}
	have := map[string]bool{}
	des, _ := os.ReadDir(e.listsDir())
	for _, de := range des {
		for _, s := range e.o.Suites {
			if strings.Contains(de.Name(), "_dists_"+s+suffix) {
				have[s] = true
			}
		}
	}
	return have
}

// Update writes the configuration and runs `apt-get update` when the
// package lists are missing, older than listsMaxAge, made for another
// mirror, or force is set. A failed update that leaves some lists is a
// warning: the old lists still answer.
func (e *Env) Update(ctx context.Context, force bool) error {
	unlock, err := e.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(e.path("status")); err != nil {
		if err := fileio.WriteAtomic(e.path("status"), nil, 0o644); err != nil {
			return fmt.Errorf("apt configuration: %w", err)
		}
	}
	if e.sb.stage != e.dir {
		// Lists an earlier klab kept in the cache, before the sandbox
		// moved them to the staging directory.
		_ = os.RemoveAll(e.path("lists"))
	}
	if _, err := writeIfChanged(e.path("apt.conf"), e.aptConf()); err != nil {
		return fmt.Errorf("apt configuration: %w", err)
	}
	changed, err := writeIfChanged(e.path("sources.list"), e.sourcesList())
	if err != nil {
		return fmt.Errorf("apt configuration: %w", err)
	}
	stamp := e.path("lists.stamp")
	suites := strings.Join(e.o.Suites, " ")
	have := e.listsFiles()
	if !force && !changed && len(have) == len(e.o.Suites) {
		if fi, err := os.Stat(stamp); err == nil && time.Since(fi.ModTime()) < listsMaxAge {
			return nil
		}
	}
	os.Remove(stamp)
	e.logf("updating %s lists for %s from %s...", e.kind(), suites, e.o.Mirror)
	start := time.Now()
	_, err = e.Run(ctx, 15*time.Minute, "apt-get", "-q", "update")
	have = e.listsFiles()
	if err != nil {
		if ctx.Err() != nil || len(have) == 0 {
			return fmt.Errorf("updating Debian %s lists: %w", e.kind(), err)
		}
		e.logf("warning: apt-get update failed, continuing with the %s lists of %s: %v", e.kind(), strings.Join(sortedKeys(have), " "), err)
		return nil
	}
	var missing []string
	for _, s := range e.o.Suites {
		if !have[s] {
			missing = append(missing, s)
		}
	}
	if len(missing) == len(e.o.Suites) {
		return fmt.Errorf("updating Debian %s lists from %s: no suite of %s has a list", e.kind(), e.o.Mirror, suites)
	}
	if len(missing) > 0 {
		e.logf("warning: the mirror has no %s list for %s", e.kind(), strings.Join(missing, " "))
	}
	e.logf("%s lists updated in %.1fs", e.kind(), time.Since(start).Seconds())
	return fileio.WriteAtomic(stamp, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}

func sortedKeys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
