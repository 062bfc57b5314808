// Package userspace builds the guest userspace that test suites run in: a
// Debian root tree made from binary packages named by the user (bash, perl,
// xfsprogs, ... for fstests) and their Depends and Pre-Depends, resolved by
// apt in klab's private apt environment, unpacked with dpkg-deb without
// running any maintainer script, trimmed of documentation and locales,
// given the users and groups test suites expect, and packed into an ext4
// image that guests attach read-only. It owns the image, its descriptor
// (what went in, for manifests) and its cache entry, and says what a
// kernel needs to mount it (see Attach). The agent mounts it and runs
// commands chrooted into it (guest/agent, StepUserspace).
package userspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"klab/images/debian"
	"klab/images/keyed"
	"klab/internal/fileio"
	"klab/internal/paths"
)

// Recipe names the way Build turns packages into an image. It is part of
// every cache key: change it whenever a change to this package changes
// what an image holds.
const Recipe = "klab-userspace-3"

// DefaultSuite is the Debian suite the packages come from when a Spec
// names none.
const DefaultSuite = "trixie"

// Format is the image's file system.
const Format = "ext4"

// DefaultPackages are what fstests needs (its common/config checks and the
// commands its tests run widely), and a /bin/sh.
func DefaultPackages() []string {
	return []string{
		"bash", "dash", "perl-base", "gawk", "sed", "grep", "bc",
		"coreutils", "findutils", "diffutils", "util-linux", "mount",
		"bsdutils", "bsdextrautils", "uuid-runtime", "hostname", "procps",
		"psmisc", "kmod", "attr", "acl", "e2fsprogs", "xfsprogs",
	}
}

// LibraryPackages are the packages of the shared libraries fstests'
// programs link against (images/fstests records their sonames: libaio,
// liburing, gdbm's compatibility library) in suite, whose package names
// changed with the 64-bit time_t transition after bookworm. libacl,
// libcap, libuuid and libhandle come with the default packages.
func LibraryPackages(suite string) []string {
	if suite == "bookworm" {
		return []string{"libaio1", "liburing2", "libgdbm-compat4"}
	}
	return []string{"libaio1t64", "liburing2", "libgdbm-compat4t64"}
}

// Suites are the suites a userspace can come from: those of klab's apt
// environment (debian.Suites) but backports, whose packages apt only
// prefers when a package has a backport, which would mix suites.
func Suites() []string {
	var out []string
	for _, s := range debian.Suites() {
		if !strings.HasSuffix(s, "-backports") {
			out = append(out, s)
		}
	}
	return out
}

// Spec says what goes into a userspace.
type Spec struct {
	// Suite is the Debian suite the packages come from, one of Suites();
	// empty means DefaultSuite.
	Suite string `json:"suite"`
	// Packages are binary package names; empty means DefaultPackages.
	// What they depend on (Depends, Pre-Depends) comes along.
	Packages []string `json:"packages"`
}

// Package is one Debian binary package in a userspace.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Arch    string `json:"arch"`
}

// Descriptor is what a userspace image holds, saved beside it as
// userspace.json: small enough for a run's manifest.
type Descriptor struct {
	// ID names the image: the suite and a hash of Recipe, Suite,
	// Requested and Packages.
	ID string `json:"id"`
	// Recipe is the Recipe the image was built with.
	Recipe string `json:"recipe"`
	// Suite is where the packages came from.
	Suite string `json:"suite"`
	// Requested are the packages asked for, sorted.
	Requested []string `json:"requested"`
	// Packages are every package unpacked, by name: the requested ones
	// and their dependency closure, with the versions apt resolved.
	Packages []Package `json:"packages"`
	// Format is the image's file system (Format).
	Format string `json:"format"`
	// ImageBytes is the image file's size; TreeBytes and Files are the
	// tree's content in it.
	ImageBytes int64 `json:"image_bytes"`
	TreeBytes  int64 `json:"tree_bytes"`
	Files      int   `json:"files"`
	// Users are the accounts added for test suites.
	Users []string `json:"users"`
	// Libs are the sonames of the shared libraries in the image's
	// library directories, sorted: what programs brought into it (such as
	// fstests') can link against.
	Libs []string `json:"libs,omitempty"`
	// Built is when the image was made.
	Built time.Time `json:"built"`
}

// Image is a built userspace.
type Image struct {
	// Path is the ext4 image to attach read-only.
	Path string
	// Descriptor says what it holds.
	Descriptor Descriptor
	// Cached is true when nothing had to be built or resolved.
	Cached bool
}

// Files in a cache entry.
const (
	imageFile      = "rootfs.ext4"
	descriptorFile = "userspace.json"
)

// Options tunes Build.
type Options struct {
	// Debian gives the mirror, the cache directory and Refresh, as for
	// Debian kernels. Refresh resolves the packages again (a newer
	// archive gives a new image) instead of answering from the cache.
	Debian debian.Options
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

func (o *Options) logf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// Dir is the userspace cache directory under cacheDir (empty means
// paths.CacheDir()).
func Dir(cacheDir string) string {
	if cacheDir == "" {
		cacheDir = paths.CacheDir()
	}
	return filepath.Join(cacheDir, "userspace")
}

// pkgNameRe is Debian policy's package name.
var pkgNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// Normalize fills in the defaults and checks s: a known suite and valid
// package names, which come back sorted without duplicates. Every
// problem is reported at once.
func (s Spec) Normalize() (Spec, error) {
	if s.Suite == "" {
		s.Suite = DefaultSuite
	}
	var errs []string
	if !slices.Contains(Suites(), s.Suite) {
		errs = append(errs, fmt.Sprintf("suite %q is not one a userspace can come from, want one of %s", s.Suite, strings.Join(Suites(), ", ")))
	}
	pkgs := s.Packages
	if len(pkgs) == 0 {
		pkgs = append(DefaultPackages(), LibraryPackages(s.Suite)...)
	}
	var out []string
	for _, p := range pkgs {
		p = strings.TrimSpace(p)
		if !pkgNameRe.MatchString(p) {
			errs = append(errs, fmt.Sprintf("package %q is not a Debian package name (lower case letters, digits, + - .)", p))
			continue
		}
		out = append(out, p)
	}
	slices.Sort(out)
	s.Packages = slices.Compact(out)
	if len(errs) > 0 {
		return s, fmt.Errorf("userspace: %s", strings.Join(errs, "; "))
	}
	return s, nil
}

// Key is the cache key of a normalized spec before resolution: what the
// alias index maps to an image.
func (s Spec) Key() string {
	return Recipe + " " + s.Suite + " " + strings.Join(s.Packages, ",")
}

// imageID is the content key of an image: the suite and a hash of the
// recipe, the suite, the requested packages and the resolved ones.
func imageID(s Spec, pkgs []Package) string {
	h := sha256.New()
	field := func(v string) { fmt.Fprintf(h, "%d:%s\n", len(v), v) }
	field(Recipe)
	field(s.Suite)
	for _, p := range s.Packages {
		field(p)
	}
	field("--")
	for _, p := range pkgs {
		field(p.Name + "=" + p.Version + ":" + p.Arch)
	}
	return s.Suite + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Build returns the userspace that spec names, building it into the
// cache when needed. A spec built once is answered from the cache's alias
// index with no apt call and no network unless o.Debian.Refresh is set;
// a build whose resolved packages match an image already there reuses
// that image.
func Build(ctx context.Context, spec Spec, o Options) (*Image, error) {
	s, err := spec.Normalize()
	if err != nil {
		return nil, err
	}
	dir := Dir(o.Debian.CacheDir)
	start := time.Now()
	c := keyed.Cache[*Image]{Dir: dir, What: "userspace cache", Aliased: true, Load: loadEntry, Logf: o.logf}
	img, hit, err := c.Get(ctx, s.Key(), o.Debian.Refresh,
		func(ctx context.Context) (keyed.Plan, error) {
			if os.Geteuid() != 0 {
				// dpkg-deb gives the files to whoever unpacks them, and
				// mke2fs -d keeps those owners.
				return keyed.Plan{}, fmt.Errorf("building a userspace needs root, so that its files belong to root as the packages say (a cached one does not)")
			}
			env, err := o.Debian.AptEnv(ctx)
			if err != nil {
				return keyed.Plan{}, err
			}
			o.logf("resolving %d packages and their dependencies in %s...", len(s.Packages), s.Suite)
			pkgs, err := resolve(ctx, env, s)
			if err != nil {
				return keyed.Plan{}, err
			}
			id := imageID(s, pkgs)
			o.logf("%d packages in all; image %s", len(pkgs), id)
			return keyed.Plan{Name: id, Build: func(ctx context.Context, tmp, out string) error {
				return build(ctx, env, tmp, out, Descriptor{ID: id, Recipe: Recipe, Suite: s.Suite, Requested: s.Packages, Packages: pkgs, Format: Format}, &o)
			}}, nil
		})
	if err != nil {
		return nil, err
	}
	img.Cached = hit
	if hit {
		o.logf("userspace %s: cached at %s", img.Descriptor.ID, img.Path)
	} else {
		o.logf("userspace %s at %s in %.1fs", img.Descriptor.ID, img.Path, time.Since(start).Seconds())
	}
	return img, nil
}

// Load returns the cached userspace whose descriptor ID is id (as
// `klab userspace build` prints it), without building anything.
func Load(cacheDir, id string) (*Image, error) {
	if !keyed.EntryName(id) {
		return nil, fmt.Errorf("userspace %q: not an image id such as trixie-0123456789abcdef", id)
	}
	img, err := loadEntry(filepath.Join(Dir(cacheDir), id))
	if err != nil {
		return nil, fmt.Errorf("userspace %s: not in the cache (klab userspace build makes it): %w", id, err)
	}
	img.Cached = true
	return img, nil
}

// loadEntry reads a complete cache entry: its descriptor and image.
func loadEntry(dir string) (*Image, error) {
	d, err := ReadDescriptor(filepath.Join(dir, descriptorFile))
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, imageFile)
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.Size() != d.ImageBytes {
		return nil, fmt.Errorf("%s: %d bytes, but %d were built: damaged", p, fi.Size(), d.ImageBytes)
	}
	return &Image{Path: p, Descriptor: *d}, nil
}

// ReadDescriptor reads a userspace.json.
func ReadDescriptor(path string) (*Descriptor, error) {
	var d Descriptor
	if err := fileio.ReadJSON(path, &d); err != nil {
		return nil, err
	}
	if d.ID == "" || d.Format != Format {
		return nil, fmt.Errorf("%s: not a userspace descriptor of format %s", path, Format)
	}
	return &d, nil
}

// writeDescriptor saves d as dir/userspace.json.
func writeDescriptor(dir string, d *Descriptor) error {
	return fileio.WriteJSON(filepath.Join(dir, descriptorFile), d)
}
