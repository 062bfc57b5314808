// Package debian owns klab's use of the Debian archive: Debian kernels
// (Fetch: references such as debian:7.3, resolved through apt queries,
// downloaded and laid out as a cached kernel directory), Debian kernel
// sources (FetchSource: linux-source-<series>), source packages for other
// builds (FindSourcePackage), the reachability of the suites
// (CheckSuites) and the ordering of Debian versions. Everything apt does
// runs through package images/apt, with a private configuration under
// <cache>/apt (<cache>/apt-src for source packages); the host's apt state
// is never touched.
package debian

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"klab/images/apt"
	"klab/images/kerneldir"
	"klab/images/keyed"
	"klab/internal/paths"
	"klab/results"
)

// DefaultFlavour is the kernel flavour used when none is given.
const DefaultFlavour = "cloud-amd64"

// Suites returns the suites klab's apt environment (AptEnv) keeps package
// lists of, searched for kernels and kernel sources, oldest first.
func Suites() []string {
	return []string{"bookworm", "trixie", "trixie-backports", "sid"}
}

// Options tunes Fetch, FetchSource, FindSourcePackage and CheckSuites.
type Options struct {
	// Mirror is the Debian archive URI. Empty means $KLAB_DEBIAN_MIRROR,
	// else the host's apt sources (see apt.ResolveMirror). It is only
	// consulted when the network is needed.
	Mirror string
	// AptRoot is the root directory whose etc/apt sources name the mirror
	// when neither Mirror nor $KLAB_DEBIAN_MIRROR does; empty means "/",
	// the host's own.
	AptRoot string
	// CacheDir is klab's cache directory; empty means paths.CacheDir().
	CacheDir string
	// Flavour is the kernel flavour: "cloud-amd64" (the default),
	// "amd64" or "rt-amd64".
	Flavour string
	// Refresh forces the package lists to be updated and the reference
	// to be resolved again, instead of using the cached answer.
	Refresh bool
	// Progress receives one line per step; nil discards them.
	Progress io.Writer

	// aptStage replaces /var/cache/klab for apt's staging directories
	// (see apt.Options.StageRoot), for tests.
	aptStage string
}

// CacheRoot is klab's cache directory: CacheDir, or paths.CacheDir()
// when it is empty.
func (o *Options) CacheRoot() string {
	if o.CacheDir != "" {
		return o.CacheDir
	}
	return paths.CacheDir()
}

// mirror resolves the Debian archive URI (see apt.ResolveMirror).
func (o *Options) mirror() (string, error) { return apt.ResolveMirror(o.Mirror, o.AptRoot) }

// Logf prints one line of progress to Progress, if set.
func (o *Options) Logf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// Fetch returns the Debian kernel that ref names, downloading and
// installing it into the cache when needed. The returned Kernel's Name is
// ref. References ("debian:" may be left out):
//
//   - debian:<series>, e.g. debian:7.3 or debian:6.1: the newest kernel of
//     that upstream series in the suites bookworm, trixie, trixie-backports
//     and sid, in flavour o.Flavour (cloud-amd64 unless set). Kernels whose
//     packages are all in the archive are preferred.
//   - debian:<kernel release>, e.g. debian:7.3.4+deb13-cloud-amd64 or
//     debian:6.1.0-37-cloud-amd64: one exact kernel ABI, as in the package
//     name linux-image-<kernel release> and in `uname -r` in the guest. A
//     release without a flavour (debian:7.3.4+deb13) gets o.Flavour.
//   - debian:<kernel release>=<package version>, e.g.
//     debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1: pinned to one
//     package version.
//
// The packages are downloaded with `apt-get download`, unpacked with
// `dpkg-deb -x` and installed at <cache>/kernels/debian/<package>_<version>/:
//
//	vmlinuz      the bzImage
//	config       the kernel's .config (when the packages ship one)
//	modules/     kernel/**.ko*, modules.builtin, modules.order (when shipped)
//	kernel.json  the Kernel
//
// The directory is built next to its final place and renamed into it at
// the end, so a failed fetch leaves nothing behind. The alias index
// <cache>/kernels/debian/aliases.json maps references to directories, so
// a reference fetched once is answered from the cache with no network, no
// mirror and no apt call at all, unless o.Refresh is set. Package lists
// are refreshed when older than 24 hours.
//
// A pinned reference that the cache lacks and the archive cannot supply
// (the version is gone from it, the mirror cannot be reached, a package
// cannot be downloaded) fails with a *PinnedUnavailableError.
func Fetch(ctx context.Context, ref string, o Options) (*results.Kernel, error) {
	r, err := parseDebianRef(ref, o.Flavour)
	if err != nil {
		return nil, err
	}
	kdir := filepath.Join(o.CacheRoot(), "kernels", "debian")
	// A damaged entry (its image changed on disk) is a miss: it is
	// fetched again and replaced, never booted.
	var damaged *kerneldir.DamagedError
	load := func(dir string) (*results.Kernel, error) {
		k, err := kerneldir.Load(dir)
		var de *kerneldir.DamagedError
		if errors.As(err, &de) && damaged == nil {
			damaged = de
			o.Logf("%s: %v; fetching it again", r, de)
		}
		return k, err
	}
	c := keyed.Cache[*results.Kernel]{Dir: kdir, What: "debian kernel cache", Aliased: true, Load: load, Logf: o.Logf}
	k, hit, err := c.Get(ctx, r.key(), o.Refresh, func(ctx context.Context) (keyed.Plan, error) {
		plan, err := planDebian(ctx, r, kdir, &o)
		return plan, r.unavailable(ctx, err)
	})
	if err != nil {
		if damaged != nil {
			return nil, fmt.Errorf("%v, and fetching it again failed: %w", damaged, err)
		}
		return nil, err
	}
	if hit {
		o.Logf("%s: cached at %s", r, filepath.Dir(k.Image))
	} else {
		o.Logf("cached at %s", filepath.Dir(k.Image))
	}
	k.Name = ref
	return k, nil
}

// planDebian resolves r in the archive and says how to install it.
func planDebian(ctx context.Context, r debianRef, kdir string, o *Options) (keyed.Plan, error) {
	env, err := o.AptEnv(ctx)
	if err != nil {
		return keyed.Plan{}, err
	}
	o.Logf("resolving %s in %s...", r, strings.Join(Suites(), " "))
	pick, err := resolveDebian(ctx, env, r)
	if err != nil {
		return keyed.Plan{}, err
	}
	if pick.skipped != "" {
		o.Logf("note: skipping %s: packages it depends on are missing from the archive", pick.skipped)
	}
	o.Logf("%s is %s %s (%s)", r, pick.image.Name, pick.image.Version, pick.suite)
	if len(pick.missing) > 0 {
		o.Logf("note: the archive lacks %s, which %s depends on; installing what there is",
			strings.Join(pick.missing, ", "), pick.image.Name)
	}
	final := filepath.Join(kdir, pick.dirName())
	plan := keyed.Plan{Name: pick.dirName(), Build: func(ctx context.Context, tmp, out string) error {
		return installDebian(ctx, env, tmp, out, final, pick, o)
	}}
	// The exact release resolves offline too: to the newest package when
	// a series was resolved, to the first one fetched for a pinned version.
	switch {
	case r.Series != "":
		plan.Aliases = []keyed.Alias{{Key: pick.release}}
	case r.PkgVersion != "":
		plan.Aliases = []keyed.Alias{{Key: pick.release, Keep: true}}
	}
	return plan, nil
}

// AptEnv returns the private apt environment that Debian kernels are
// fetched through: <cache>/apt, with the package lists of Suites from the
// mirror o names, updated when stale or when o.Refresh is set.
func (o *Options) AptEnv(ctx context.Context) (*apt.Env, error) {
	return o.aptEnv(ctx, "apt", Suites(), false)
}

// aptEnv returns the private apt environment <cache>/<sub> for the mirror
// o names, its lists of suites (of source packages when source is set)
// updated when stale.
func (o *Options) aptEnv(ctx context.Context, sub string, suites []string, source bool) (*apt.Env, error) {
	mirror, err := o.mirror()
	if err != nil {
		return nil, err
	}
	env, err := apt.New(filepath.Join(o.CacheRoot(), sub), apt.Options{
		Mirror: mirror, Keyring: apt.Keyring(mirror), Suites: suites, Source: source, Log: o.Logf, StageRoot: o.aptStage,
	})
	if err != nil {
		return nil, err
	}
	if err := env.Update(ctx, o.Refresh); err != nil {
		return nil, err
	}
	return env, nil
}

// CachedKernels lists the Debian kernels installed in cacheDir (empty means
// paths.CacheDir()), oldest kernel release first. Each Name is the exact
// reference, "debian:<kernel release>".
func CachedKernels(cacheDir string) ([]*results.Kernel, error) {
	if cacheDir == "" {
		cacheDir = paths.CacheDir()
	}
	kdir := filepath.Join(cacheDir, "kernels", "debian")
	des, err := os.ReadDir(kdir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing cached kernels: %w", err)
	}
	var ks []*results.Kernel
	for _, de := range des {
		if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		k, err := kerneldir.Load(filepath.Join(kdir, de.Name()))
		if err != nil {
			continue // not a complete kernel directory
		}
		ks = append(ks, k)
	}
	sort.SliceStable(ks, func(i, j int) bool {
		if c := compareDebianVersions(ks[i].Version, ks[j].Version); c != 0 {
			return c < 0
		}
		if ks[i].Package != ks[j].Package {
			return ks[i].Package < ks[j].Package
		}
		return compareDebianVersions(ks[i].PackageVersion, ks[j].PackageVersion) < 0
	})
	return ks, nil
}
