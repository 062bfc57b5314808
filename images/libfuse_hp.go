package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/images/apt"
	"klab/images/debian"
	"klab/images/keyed"
	"klab/internal/fileio"
	"klab/internal/proc"
)

// libfuse's passthrough_hp with FUSE-over-io_uring, for comparing klab's
// io_uring gain with libfuse's on the same host. Debian's own libfuse3
// (3.14 in bookworm) has no io_uring, and sid's binary packages are built
// without liburing, so BuildPassthroughHP builds libfuse from sid's fuse3
// source package instead: the sources are fetched with `apt-get source
// --download-only` through a private apt configuration under
// <cache>/apt-src (deb-src lines for sid only, the mirror taken from the
// host's apt sources as for kernels), and libfuse is built with meson as a
// static library with io_uring, linked statically against liburing and
// libnuma, so that the binary needs only libc and libstdc++ at run time.
//
// Cache layout, under <cache>/libfuse-hp:
//
//	aliases.json                    "sid" (or "sid=<version>") -> directory
//	fuse3_<version>/passthrough_hp  the server
//	fuse3_<version>/build.json      what was built, from what, with what
//
// A reference built once is answered from the cache with no apt call and
// no network unless Refresh is set.
//
// In libfuse 3.18 the server takes io_uring as mount options:
//
//	passthrough_hp --nopassthrough -o io_uring -o io_uring_q_depth=8 SRC MNT
//
// (the --uring flags of 3.17's passthrough_hp are gone). Without
// --nopassthrough, reads and writes of open files bypass the server
// through the kernel's FUSE passthrough and never reach either transport.
// The kernel only offers io_uring when fuse's enable_uring module
// parameter is Y; otherwise libfuse quietly serves /dev/fuse.

const (
	// libfuseHPPackage is the Debian source package of libfuse 3.
	libfuseHPPackage = "fuse3"
	// libfuseHPSuite is the suite whose fuse3 source is built: the first
	// with a libfuse (3.18) whose example server speaks io_uring.
	libfuseHPSuite = "sid"
	// libfuseHPHint says what to install when the build cannot run.
	libfuseHPHint = "install the build tools: apt-get install meson ninja-build g++ pkg-config liburing-dev libnuma-dev"
)

// PassthroughHPOptions tunes BuildPassthroughHP.
type PassthroughHPOptions struct {
	// DebianOptions' Mirror, CacheDir, Refresh and Progress are used as
	// by debian.Fetch; Flavour is ignored.
	DebianOptions debian.Options
	// Version pins the fuse3 source package version (e.g. "3.18.3-1");
	// empty means the newest in sid.
	Version string
}

// PassthroughHPBuild is build.json: what a cached passthrough_hp is.
type PassthroughHPBuild struct {
	// Package and Version name the Debian source package, e.g. fuse3
	// 3.18.3-1; Suite is where it came from.
	Package string `json:"package"`
	Version string `json:"version"`
	Suite   string `json:"suite"`
	// Orig is the upstream tarball and OrigSHA256 its SHA-256 as the
	// .dsc lists it (apt checked it against the signed Sources index).
	Orig       string `json:"orig"`
	OrigSHA256 string `json:"orig_sha256"`
	// Patches are the Debian patches applied, in order.
	Patches []string `json:"patches,omitempty"`
	// Binary is the file name of the server in the build directory.
	Binary string `json:"binary"`
	// Toolchain: the versions that built it.
	Compiler string `json:"compiler"`
	Meson    string `json:"meson"`
	Liburing string `json:"liburing"`
	Numa     string `json:"numa"`
	// BuildSeconds is how long download and build took.
	BuildSeconds float64 `json:"build_seconds"`
	// Built is when, in RFC 3339 UTC.
	Built string `json:"built"`
}

// BuildPassthroughHP returns the path of a runnable passthrough_hp built
// with FUSE-over-io_uring from Debian sid's fuse3 source package, and that
// package's version, building it into the cache when needed (see the
// comment at the top of this file).
func BuildPassthroughHP(ctx context.Context, o PassthroughHPOptions) (path, version string, err error) {
	key := libfuseHPSuite
	if o.Version != "" {
		if strings.ContainsAny(o.Version, " \t\n/=") {
			return "", "", fmt.Errorf("bad fuse3 version %q", o.Version)
		}
		key += "=" + o.Version
	}
	do := &o.DebianOptions
	c := passthroughHPCache(filepath.Join(do.CacheRoot(), "libfuse-hp"), do.Logf)
	e, _, err := c.Get(ctx, key, do.Refresh, func(ctx context.Context) (keyed.Plan, error) {
		if err := checkHPTools(); err != nil {
			return keyed.Plan{}, err
		}
		sp, env, err := do.FindSourcePackage(ctx, libfuseHPPackage, o.Version, []string{libfuseHPSuite})
		if err != nil {
			return keyed.Plan{}, err
		}
		return keyed.Plan{
			Name: debian.DirName(sp.Name, sp.Version),
			Build: func(ctx context.Context, tmp, out string) error {
				return buildPassthroughHP(ctx, env, tmp, out, sp, do)
			},
		}, nil
	})
	if err != nil {
		return "", "", err
	}
	return e.path, e.build.Version, nil
}

// hpEntry is a cached passthrough_hp: its build record and binary.
type hpEntry struct {
	build *PassthroughHPBuild
	path  string
}

// passthroughHPCache is the keyed cache of passthrough_hp builds in hdir.
func passthroughHPCache(hdir string, logf func(string, ...any)) keyed.Cache[hpEntry] {
	return keyed.Cache[hpEntry]{Dir: hdir, What: "passthrough_hp cache", Aliased: true, Logf: logf,
		Load: func(dir string) (hpEntry, error) {
			b, p, err := loadHPDir(dir)
			return hpEntry{b, p}, err
		}}
}

// checkHPTools fails early, with the packages to install, when a build
// tool or library is missing.
func checkHPTools() error {
	var missing []string
	for _, tool := range []string{"meson", "ninja", "c++", "pkg-config", "tar", "apt-get"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		for _, lib := range []string{"liburing", "numa"} {
			if _, err := proc.Run(context.Background(), proc.Opts{Timeout: time.Minute}, "pkg-config", "--exists", lib); err != nil {
				missing = append(missing, "pkg-config "+lib)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("build passthrough_hp: missing %s: %s", strings.Join(missing, ", "), libfuseHPHint)
	}
	return nil
}

// loadHPDir reads dir/build.json and returns it with the binary's path.
func loadHPDir(dir string) (*PassthroughHPBuild, string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "build.json"))
	if err != nil {
		return nil, "", err
	}
	var b PassthroughHPBuild
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, "", fmt.Errorf("%s: %w", filepath.Join(dir, "build.json"), err)
	}
	if b.Binary == "" || strings.ContainsAny(b.Binary, `/\`) || b.Version == "" {
		return nil, "", fmt.Errorf("%s: bad build record", filepath.Join(dir, "build.json"))
	}
	p := filepath.Join(dir, b.Binary)
	fi, err := os.Stat(p)
	if err != nil {
		return nil, "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return nil, "", fmt.Errorf("%s is not an executable file", p)
	}
	return &b, p, nil
}

// dscFile is one file a .dsc lists.
type dscFile struct{ Name, SHA256 string }

// parseDscFiles returns the Checksums-Sha256 entries of a .dsc (which may
// be clear-signed).
func parseDscFiles(dsc []byte) []dscFile {
	var files []dscFile
	in := false
	for _, line := range strings.Split(string(dsc), "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.HasPrefix(line, "Checksums-Sha256:"):
			in = true
		case in && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")):
			if f := strings.Fields(line); len(f) == 3 {
				files = append(files, dscFile{Name: f[2], SHA256: f[0]})
			}
		default:
			in = false
		}
	}
	return files
}

// sourceTarballs picks from a .dsc's files the main tarball (the upstream
// .orig.tar.*, or the whole tarball of a native package) and the Debian
// tarball (empty for a native package). Signatures and component
// tarballs (.orig-NAME.tar.*) are left out.
func sourceTarballs(files []dscFile) (main dscFile, debian string, err error) {
	var native dscFile
	for _, f := range files {
		switch {
		case strings.HasSuffix(f.Name, ".asc"):
		case strings.Contains(f.Name, ".orig.tar."):
			main = f
		case strings.Contains(f.Name, ".debian.tar."):
			debian = f.Name
		case strings.Contains(f.Name, ".tar.") && !strings.Contains(f.Name, ".orig-"):
			native = f
		}
	}
	if main.Name == "" {
		main = native
		debian = ""
	}
	if main.Name == "" {
		return dscFile{}, "", errors.New("the .dsc lists no source tarball")
	}
	return main, debian, nil
}

// parseSeries returns the patch names of a quilt series file.
func parseSeries(data []byte) []string {
	var ps []string
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if f := strings.Fields(line); len(f) > 0 {
			ps = append(ps, f[0])
		}
	}
	return ps
}

// buildPassthroughHP downloads the source package l, builds
// passthrough_hp and leaves it with its build.json in out, the new entry;
// tmp is scratch space.
func buildPassthroughHP(ctx context.Context, env *apt.Env, tmp, out string, l debian.SourcePackage, o *debian.Options) error {
	dl, src, build := filepath.Join(tmp, "dl"), filepath.Join(tmp, "src"), filepath.Join(tmp, "build")
	for _, d := range []string{dl, src} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("passthrough_hp cache: %w", err)
		}
	}
	start := time.Now()
	o.Logf("downloading source package %s %s (%s)...", l.Name, l.Version, l.Suite)
	if err := env.Download(ctx, 30*time.Minute, dl, "-q", "source", "--download-only", l.Name+"="+l.Version); err != nil {
		return fmt.Errorf("downloading source package %s %s: %w", l.Name, l.Version, err)
	}
	dscs, _ := filepath.Glob(filepath.Join(dl, debian.GlobEscape(l.Name)+"_*.dsc"))
	if len(dscs) != 1 {
		return fmt.Errorf("downloading source package %s: apt-get source left %d .dsc files in %s", l.Name, len(dscs), dl)
	}
	dsc, err := os.ReadFile(dscs[0])
	if err != nil {
		return err
	}
	orig, debTar, err := sourceTarballs(parseDscFiles(dsc))
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(dscs[0]), err)
	}

	o.Logf("unpacking %s...", orig.Name)
	untar := func(name string, extra ...string) error {
		argv := append([]string{"tar", "-xf", filepath.Join(dl, name), "-C", src}, extra...)
		if _, err := proc.Run(ctx, proc.Opts{Timeout: 5 * time.Minute}, argv...); err != nil {
			return fmt.Errorf("unpacking %s: %w", name, err)
		}
		return nil
	}
	if err := untar(orig.Name, "--strip-components=1"); err != nil {
		return err
	}
	var patches []string
	if debTar != "" {
		if err := untar(debTar); err != nil {
			return err
		}
		if series, err := os.ReadFile(filepath.Join(src, "debian", "patches", "series")); err == nil {
			patches = parseSeries(series)
		}
	}
	for _, p := range patches {
		if strings.Contains(p, "..") {
			return fmt.Errorf("%s: bad patch name %q in debian/patches/series", l.Name, p)
		}
		if _, err := proc.Run(ctx, proc.Opts{Dir: src, Timeout: time.Minute},
			"patch", "-p1", "-N", "-s", "-i", filepath.Join("debian", "patches", p)); err != nil {
			return fmt.Errorf("applying Debian patch %s: %w", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(src, "meson.build")); err != nil {
		return fmt.Errorf("%s %s: no meson.build at the top of %s: not a libfuse 3 source", l.Name, l.Version, orig.Name)
	}

	o.Logf("configuring libfuse with io_uring (meson)...")
	setup := []string{"meson", "setup", build, src,
		"--wrap-mode=nodownload",
		// libfuse, liburing and libnuma linked in: the binary runs on
		// hosts without any of them installed.
		"-Ddefault_library=static", "-Dprefer_static=true",
		"-Denable-io-uring=true", "-Dexamples=true",
		"-Dutils=false", "-Dtests=false", "-Duseroot=false", "-Dinitscriptdir=",
	}
	if _, err := proc.Run(ctx, proc.Opts{Dir: tmp, Timeout: 5 * time.Minute}, setup...); err != nil {
		return fmt.Errorf("configuring libfuse: %w (%s)", err, libfuseHPHint)
	}
	if cfg, err := os.ReadFile(filepath.Join(build, "fuse_config.h")); err != nil || !bytes.Contains(cfg, []byte("#define HAVE_URING")) {
		return fmt.Errorf("libfuse %s was configured without io_uring: meson found no liburing with IORING_SETUP_SQE128 or no libnuma (see %s); %s",
			l.Version, "meson-logs/meson-log.txt", libfuseHPHint)
	}
	o.Logf("building passthrough_hp (ninja)...")
	if _, err := proc.Run(ctx, proc.Opts{Dir: tmp, Timeout: 30 * time.Minute}, "ninja", "-C", build, "example/passthrough_hp"); err != nil {
		return fmt.Errorf("building passthrough_hp: %w", err)
	}
	bin := filepath.Join(out, "passthrough_hp")
	if err := os.Rename(filepath.Join(build, "example", "passthrough_hp"), bin); err != nil {
		return fmt.Errorf("building passthrough_hp: %w", err)
	}
	help, err := proc.Run(ctx, proc.Opts{Timeout: time.Minute}, bin, "--help")
	if err != nil {
		return fmt.Errorf("the built passthrough_hp does not run: %w", err)
	}
	if !bytes.Contains(help, []byte("io_uring")) {
		return fmt.Errorf("the built passthrough_hp offers no io_uring option; --help says:\n%s", help)
	}

	b := &PassthroughHPBuild{
		Package: l.Name, Version: l.Version, Suite: l.Suite,
		Orig: orig.Name, OrigSHA256: orig.SHA256, Patches: patches,
		Binary:   "passthrough_hp",
		Compiler: toolVersion(ctx, "c++", "--version"),
		Meson:    toolVersion(ctx, "meson", "--version"),
		Liburing: toolVersion(ctx, "pkg-config", "--modversion", "liburing"),
		Numa:     toolVersion(ctx, "pkg-config", "--modversion", "numa"),
		Built:    time.Now().UTC().Format(time.RFC3339),
	}
	b.BuildSeconds = float64(time.Since(start).Milliseconds()) / 1000
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return fmt.Errorf("build.json: %w", err)
	}
	if err := fileio.WriteAtomic(filepath.Join(out, "build.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("build.json: %w", err)
	}
	o.Logf("built libfuse %s passthrough_hp with io_uring (liburing %s) in %.1fs", l.Version, b.Liburing, b.BuildSeconds)
	return nil
}

// toolVersion returns the first line a version query prints, or "".
func toolVersion(ctx context.Context, argv ...string) string {
	out, err := proc.Run(ctx, proc.Opts{Timeout: time.Minute}, argv...)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(line)
}

// PassthroughHPFiles builds passthrough_hp (BuildPassthroughHP, cached)
// and returns it with its shared-library closure, for
// InitramfsOptions.Extra: the binary lands at
// proto.LibfusePassthroughHPPath, where the agent's fuse step looks for it
// (server libfuse-passthrough_hp). A failed build says what to install.
func PassthroughHPFiles(ctx context.Context, o PassthroughHPOptions) ([]ExtraFile, error) {
	bin, version, err := BuildPassthroughHP(ctx, o)
	if err != nil {
		msg := err.Error()
		if !strings.Contains(msg, libfuseHPHint) {
			msg += " (" + libfuseHPHint + ")"
		}
		return nil, fmt.Errorf("server %s needs libfuse's passthrough_hp, built on the host from Debian %s's %s source: %s",
			proto.FUSELibfusePassthroughHP, libfuseHPSuite, libfuseHPPackage, msg)
	}
	o.DebianOptions.Logf("libfuse %s passthrough_hp for the guest: %s", version, bin)
	return passthroughHPFiles(bin)
}

// passthroughHPFiles returns bin with its libraries, bin at
// proto.LibfusePassthroughHPPath.
func passthroughHPFiles(bin string) ([]ExtraFile, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	return programAt(bin, proto.LibfusePassthroughHPPath)
}
