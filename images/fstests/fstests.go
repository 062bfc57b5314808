// Package fstests builds fstests (xfstests) from a source the user names,
// a checkout or a tarball, on the host, and caches the result by the
// source's content: a tree ready to copy into a guest's userspace (the
// check script, common/, tests/generic and tests/ext4 with their .out
// files, and the src/ and ltp/ programs), with a descriptor that says what
// it was built from and with, and which shared libraries its programs need.
//
// Cache layout, under <cache>/fstests:
//
//	<key>/fstests.json  the Descriptor
//	<key>/build.log     the build's output
//	<key>/tree/         fstests as `make install` lays it out
//	logs/<key>.log      the log of the last build of <key>, kept when it fails
//
// The key hashes the source's content (Source.ID), the C compiler's
// version and the architecture. An entry is complete or absent: it is built
// in a temporary directory and renamed into place (keyed.Cache).
package fstests

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"klab/images/keyed"
	"klab/internal/fileio"
	"klab/internal/paths"
	"klab/internal/proc"
)

// recipe changes whenever the way klab builds fstests changes what it
// produces.
const recipe = "klab-fstests-1"

// TestDirs returns the test directories the tree keeps: the ones of the
// file systems klab runs (ext4, and FUSE, which runs generic).
func TestDirs() []string { return []string{"generic", "ext4"} }

// DepsHint says how to get what a build needs.
const DepsHint = "install the build dependencies with `make fstests-deps` in klab's source tree, or: apt-get install " +
	"xfslibs-dev libacl1-dev libaio-dev liburing-dev libgdbm-dev libgdbm-compat-dev libcap-dev uuid-dev autoconf automake libtool xfsprogs make gcc"

// Descriptor says what a cached fstests build is: fstests.json.
type Descriptor struct {
	// Key is the cache key (the entry's name).
	Key string `json:"key"`
	// Source is what it was built from.
	Source Source `json:"source"`
	// Built is when, in RFC 3339 UTC; BuildSeconds is how long the
	// build took.
	Built        string  `json:"built"`
	BuildSeconds float64 `json:"build_seconds"`
	// Steps are the build's steps with their times.
	Steps []StepTime `json:"steps"`
	// Toolchain is what built it.
	Toolchain Toolchain `json:"toolchain"`
	// TestDirs are the test directories kept under tests/.
	TestDirs []string `json:"test_dirs"`
	// Programs is the number of ELF programs in the tree; Libs are the
	// shared libraries they need (DT_NEEDED sonames), sorted.
	Programs int      `json:"programs"`
	Libs     []string `json:"libs"`
	// Size is the tree's size in bytes (file contents).
	Size int64 `json:"size"`
}

// StepTime is how long one step of a build took.
type StepTime struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Toolchain is the versions of the tools that build fstests.
type Toolchain struct {
	// Arch is the host architecture (uname -m).
	Arch string `json:"arch"`
	// Compiler is the C compiler that fstests' configure picks ($CC,
	// else gcc, else cc), as its resolved file name and version
	// ("x86_64-linux-gnu-gcc-12 12.2.0"); it is part of the key.
	Compiler string `json:"compiler"`
	// Make, Autoconf and Libtool are their --version's first lines.
	Make     string `json:"make,omitempty"`
	Autoconf string `json:"autoconf,omitempty"`
	Libtool  string `json:"libtool,omitempty"`
}

// Built is a cached fstests build.
type Built struct {
	// Dir is the tree to copy into a guest: check, common/, tests/,
	// src/, ltp/.
	Dir string `json:"dir"`
	// Log is the build's log.
	Log string `json:"log"`
	// Descriptor says what it is.
	Descriptor Descriptor `json:"descriptor"`
	// Hit is set when the cache answered.
	Hit bool `json:"hit"`
}

// Options tunes Build.
type Options struct {
	// CacheDir is klab's cache directory; empty means paths.CacheDir().
	CacheDir string
	// Jobs is make's -j; 0 means the number of CPUs.
	Jobs int
	// Progress, when set, receives progress lines.
	Progress io.Writer

	// steps replaces the build's steps (tests).
	steps func(jobs int, src, tree string) []step
}

// printf prints a progress line to o.Progress, if set.
func (o Options) printf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// step is one command of a build, named in errors.
type step struct {
	name string
	argv []string
}

// buildSteps are the steps of an fstests build in its source directory
// src: the autotools, configure (with fstests' own install paths), make,
// and make install into tree. The install goes through PKG_LIB_DIR,
// fstests' installed tree (/var/lib/xfstests): with DESTDIR, its
// install-sh and libtool would disagree on where files go. TESTS_SUBDIRS
// limits it to TestDirs, which makes it about three times faster.
func buildSteps(jobs int, src, tree string) []step {
	var testDirs []string
	for _, d := range TestDirs() {
		testDirs = append(testDirs, filepath.Join(src, "tests", d)+"/")
	}
	return []step{
		{"autotools", []string{"make", "configure"}},
		{"configure", []string{"./configure", "--libexecdir=/usr/lib", "--exec_prefix=/var/lib"}},
		{"make", []string{"make", "-j" + strconv.Itoa(jobs)}},
		{"install", []string{"make", "install", "PKG_LIB_DIR=" + tree, "TESTS_SUBDIRS=" + strings.Join(testDirs, " ")}},
	}
}

// Dir returns the fstests cache directory, <cacheDir>/fstests.
func Dir(cacheDir string) string {
	if cacheDir == "" {
		cacheDir = paths.CacheDir()
	}
	return filepath.Join(cacheDir, "fstests")
}

// Build returns fstests built from src, a directory or a tarball (see
// OpenSource), from the cache when it holds that content, otherwise
// building it into the cache. A build that fails names the step and keeps
// its log (Dir(cacheDir)/logs/<key>.log).
func Build(ctx context.Context, src string, o Options) (*Built, error) {
	s, err := OpenSource(ctx, src)
	if err != nil {
		return nil, err
	}
	return BuildSource(ctx, s, o)
}

// BuildSource is Build for a source already opened.
func BuildSource(ctx context.Context, s *Source, o Options) (*Built, error) {
	tc, err := toolchain(ctx)
	if err != nil {
		return nil, err
	}
	key := Key(s.ID, tc)
	dir := Dir(o.CacheDir)
	c := keyed.Cache[*Built]{Dir: dir, What: "fstests cache", Load: loadEntry, Logf: o.printf}
	b, hit, err := c.Get(ctx, key, false, func(context.Context) (keyed.Plan, error) {
		return keyed.Plan{Name: key, Build: func(ctx context.Context, tmp, out string) error {
			return build(ctx, s, key, tc, o, tmp, out)
		}}, nil
	})
	if err != nil {
		return nil, err
	}
	b.Hit = hit
	return b, nil
}

// Key is the cache key of a build of the source whose content is id
// with toolchain tc.
func Key(id string, tc Toolchain) string {
	h := sha256.New()
	for _, f := range []string{recipe, id, tc.Arch, tc.Compiler} {
		fmt.Fprintf(h, "%d:%s\n", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// toolchain finds the C compiler, whose identity is part of the key, and
// the architecture.
func toolchain(ctx context.Context) (Toolchain, error) {
	cc := compiler()
	path, err := exec.LookPath(cc)
	if err != nil {
		return Toolchain{}, fmt.Errorf("build fstests: no C compiler (%s): %s", cc, DepsHint)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	version := firstLine(ctx, cc, "-dumpfullversion", "-dumpversion")
	if version == "" {
		return Toolchain{}, fmt.Errorf("build fstests: %s -dumpfullversion failed: %s", cc, DepsHint)
	}
	return Toolchain{Arch: firstLine(ctx, "uname", "-m"), Compiler: filepath.Base(path) + " " + version}, nil
}

// compiler is the C compiler fstests' configure picks: $CC, else gcc,
// else cc.
func compiler() string {
	if f := strings.Fields(os.Getenv("CC")); len(f) > 0 {
		return f[0]
	}
	if _, err := exec.LookPath("gcc"); err == nil {
		return "gcc"
	}
	return "cc"
}

// needs are what a build needs on the host: commands, and headers with
// the Debian package that has them.
var (
	needCommands = []string{"make", "autoconf", "automake", "libtoolize", "aclocal", "autoheader"}
	needHeaders  = [][2]string{
		{"xfs/xfs.h", "xfslibs-dev"}, {"sys/acl.h", "libacl1-dev"}, {"libaio.h", "libaio-dev"},
		{"liburing.h", "liburing-dev"}, {"gdbm.h", "libgdbm-dev"}, {"ndbm.h", "libgdbm-compat-dev"},
		{"sys/capability.h", "libcap-dev"}, {"uuid/uuid.h", "uuid-dev"},
	}
)

// checkDeps fails, naming what to install, when a build tool or header is
// missing.
func checkDeps() error {
	var missing []string
	for _, c := range needCommands {
		if _, err := exec.LookPath(c); err != nil {
			missing = append(missing, c)
		}
	}
	for _, h := range needHeaders {
		if _, err := os.Stat(filepath.Join("/usr/include", h[0])); err != nil {
			missing = append(missing, h[0]+" ("+h[1]+")")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("build fstests: missing %s: %s", strings.Join(missing, ", "), DepsHint)
	}
	return nil
}

// build makes the entry key in out: the source is put in tmp/src, built
// there, and installed into out/tree.
func build(ctx context.Context, s *Source, key string, tc Toolchain, o Options, tmp, out string) error {
	steps := buildSteps
	if o.steps != nil {
		steps = o.steps
	} else if err := checkDeps(); err != nil {
		return err
	}
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	logDir := filepath.Join(Dir(o.CacheDir), "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("build fstests: %w", err)
	}
	logPath := filepath.Join(logDir, key+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("build fstests: %w", err)
	}
	defer logFile.Close()
	start := time.Now()
	srcDir := filepath.Join(tmp, "src")
	o.printf("fstests: preparing %s (%s)...", s.Path, s.ID)
	if err := stage(ctx, s, tmp, srcDir, logFile); err != nil {
		os.Remove(logPath) // the source is at fault, and the error says how
		return err
	}
	tree := filepath.Join(out, "tree")
	times := []StepTime{{"prepare", time.Since(start).Round(time.Millisecond).Seconds()}}
	for _, st := range steps(jobs, srcDir, tree) {
		o.printf("fstests: %s...", st.name)
		fmt.Fprintf(logFile, "\n### %s: %s\n", st.name, strings.Join(st.argv, " "))
		t0 := time.Now()
		if _, err := proc.Run(ctx, proc.Opts{Dir: srcDir, Stdout: logFile, Stderr: logFile}, st.argv...); err != nil {
			return fmt.Errorf("build fstests from %s: step %s failed; its log is %s: %w", s.Path, st.name, logPath, err)
		}
		times = append(times, StepTime{st.name, time.Since(t0).Round(time.Millisecond).Seconds()})
	}
	if fi, err := os.Stat(filepath.Join(tree, "check")); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("build fstests from %s: step install left no check script in the tree; its log is %s", s.Path, logPath)
	}
	if err := pruneTests(tree); err != nil {
		return fmt.Errorf("build fstests: %w", err)
	}
	progs, libs, size, err := scanTree(tree)
	if err != nil {
		return fmt.Errorf("build fstests: %w", err)
	}
	tc.Make = firstLine(ctx, "make", "--version")
	tc.Autoconf = firstLine(ctx, "autoconf", "--version")
	tc.Libtool = firstLine(ctx, "libtoolize", "--version")
	d := Descriptor{
		Key:          key,
		Source:       *s,
		Built:        time.Now().UTC().Format(time.RFC3339),
		BuildSeconds: time.Since(start).Round(time.Millisecond).Seconds(),
		Steps:        times,
		Toolchain:    tc,
		TestDirs:     TestDirs(),
		Programs:     progs,
		Libs:         libs,
		Size:         size,
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("build fstests: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "fstests.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("build fstests: %w", err)
	}
	if err := logFile.Sync(); err != nil {
		return fmt.Errorf("build fstests: %w", err)
	}
	if err := fileio.CopyFile(logPath, filepath.Join(out, "build.log"), 0o644, os.O_TRUNC); err != nil {
		return fmt.Errorf("build fstests: %w", err)
	}
	os.Remove(logPath) // kept only for a build that failed
	o.printf("fstests: built in %.0fs", d.BuildSeconds)
	return nil
}

// firstLine is the first line of argv's output, "" when it fails.
func firstLine(ctx context.Context, argv ...string) string {
	out, err := proc.Run(ctx, proc.Opts{Timeout: time.Minute}, argv...)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// stage puts the source in dst: a tarball is unpacked (its single top
// directory, if any, becomes dst); a directory's files are copied.
func stage(ctx context.Context, s *Source, tmp, dst string, log io.Writer) error {
	if s.Kind != KindTarball {
		for _, rel := range s.files {
			if err := copyEntry(filepath.Join(s.Path, filepath.FromSlash(rel)), filepath.Join(dst, filepath.FromSlash(rel))); err != nil {
				return fmt.Errorf("build fstests: copying %s: %w", s.Path, err)
			}
		}
		return nil
	}
	unpack := filepath.Join(tmp, "unpack")
	if err := os.Mkdir(unpack, 0o755); err != nil {
		return fmt.Errorf("build fstests: %w", err)
	}
	fmt.Fprintf(log, "### unpack: tar -xf %s\n", s.Path)
	if _, err := proc.Run(ctx, proc.Opts{Dir: unpack, Stdout: log, Stderr: log}, "tar", "-xf", s.Path, "--no-same-owner"); err != nil {
		return fmt.Errorf("fstests source %s cannot be unpacked: %w", s.Path, err)
	}
	top := unpack
	if _, err := os.Stat(filepath.Join(unpack, "check")); err != nil {
		sub := subdirWithCheck(unpack)
		if sub == "" {
			return fmt.Errorf("fstests source %s has no check script at its top (nor in a single top directory): %s", s.Path, wantSource)
		}
		top = filepath.Join(unpack, sub)
	}
	return os.Rename(top, dst)
}

// pruneTests removes the test directories that are not in TestDirs (an
// fstests whose tests/Makefile ignores TESTS_SUBDIRS installs them all).
func pruneTests(tree string) error {
	des, err := os.ReadDir(filepath.Join(tree, "tests"))
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, d := range TestDirs() {
		keep[d] = true
	}
	for _, de := range des {
		if de.IsDir() && !keep[de.Name()] {
			if err := os.RemoveAll(filepath.Join(tree, "tests", de.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// scanTree counts the ELF programs under tree and the shared libraries
// they need, and sums the files' sizes.
func scanTree(tree string) (progs int, libs []string, size int64, err error) {
	need := map[string]bool{}
	err = filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		size += fi.Size()
		f, err := elf.Open(p)
		if err != nil {
			return nil // not ELF
		}
		defer f.Close()
		progs++
		sonames, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for _, l := range sonames {
			need[l] = true
		}
		return nil
	})
	for l := range need {
		libs = append(libs, l)
	}
	sort.Strings(libs)
	return progs, libs, size, err
}

// loadEntry reads a complete cache entry.
func loadEntry(dir string) (*Built, error) {
	data, err := os.ReadFile(filepath.Join(dir, "fstests.json"))
	if err != nil {
		return nil, err
	}
	var d Descriptor
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "fstests.json"), err)
	}
	if d.Key != filepath.Base(dir) || d.Source.ID == "" {
		return nil, fmt.Errorf("%s: bad descriptor", filepath.Join(dir, "fstests.json"))
	}
	tree := filepath.Join(dir, "tree")
	if fi, err := os.Stat(filepath.Join(tree, "check")); err != nil || !fi.Mode().IsRegular() {
		return nil, errors.New(tree + ": no check script")
	}
	return &Built{Dir: tree, Log: filepath.Join(dir, "build.log"), Descriptor: d}, nil
}

// copyEntry copies a file or symbolic link, making its parents.
func copyEntry(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	}
	return fileio.CopyFile(src, dst, fi.Mode().Perm(), os.O_TRUNC)
}
