package images

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"klab/images/buildstore"
	"klab/images/debian"
	"klab/images/kerneldir"
	"klab/images/keyed"
	"klab/results"
)

// ResolveOptions tunes ResolveKernel.
type ResolveOptions struct {
	// Debian is used for "debian:..." references.
	Debian debian.Options
	// Config is the .config of a local kernel image. When empty, a
	// bzImage at <tree>/arch/x86/boot/bzImage uses <tree>/.config if it
	// exists.
	Config string
}

// ResolveKernel turns a kernel reference into a Kernel:
//
//   - "debian:<series>" (debian:6.1, debian:7.3, ...) or
//     "debian:<kernel release>" (debian:7.3.4+deb13-cloud-amd64): a Debian
//     kernel, fetched into the cache unless it is there (see debian.Fetch);
//   - a path to a bzImage (anything containing '/', or an existing file):
//     a local kernel, used in place. Its ID hashes the image and its
//     config; its modules are not supported yet;
//   - "build:<name>" or "build:<kernel ID>": a kernel built from source by
//     `klab kernels build` (see buildstore.Store.Lookup);
//   - "tree:<dir>", or a directory ("."): a kernel tree (or make O=
//     directory) built in place, booted with its own bzImage, .config and
//     modules (see TreeKernel);
//   - "bundle:<kernel ID>": a kernel that `klab runs unpack` (or `klab
//     rerun FILE`) placed from a run bundle (see BundledKernel).
func ResolveKernel(ctx context.Context, ref string, o ResolveOptions) (*results.Kernel, error) {
	switch kindOf(ref) {
	case refDebian:
		return debian.Fetch(ctx, ref, o.Debian)
	case refBuild:
		return buildstore.New(o.Debian.CacheDir).Lookup(ref)
	case refTree:
		return TreeKernel(strings.TrimPrefix(ref, "tree:"))
	case refTreeDir:
		return TreeKernel(ref)
	case refImage:
		return localKernel(ref, o.Config)
	case refBundle:
		return BundledKernel(o.Debian.CacheRoot(), strings.TrimPrefix(ref, "bundle:"))
	}
	return nil, unknownKernel(ref)
}

// BundlesDir is where a run bundle's kernels are placed in the cache
// directory cacheDir: <cache>/bundles/<kernel ID>/, each with the layout of
// package kerneldir.
func BundlesDir(cacheDir string) string { return filepath.Join(cacheDir, "bundles") }

// BundledKernel loads the kernel id that a run bundle placed in the cache
// directory cacheDir, and checks that its image and config still hash to
// id: a bundled kernel is never booted damaged.
func BundledKernel(cacheDir, id string) (*results.Kernel, error) {
	if !results.ValidName(id) || !strings.HasPrefix(id, "k-") {
		return nil, fmt.Errorf("kernel bundle:%s: want bundle:<kernel ID> (k-<16 hex digits>), as klab runs unpack prints it", id)
	}
	dir := filepath.Join(BundlesDir(cacheDir), id)
	k, err := kerneldir.Load(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("kernel bundle:%s: not in %s; klab runs unpack FILE places a bundle's kernels there", id, BundlesDir(cacheDir))
	}
	var de *kerneldir.DamagedError
	if errors.As(err, &de) {
		return nil, fmt.Errorf("kernel bundle:%s: %w; remove %s and unpack the bundle again", id, err, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("kernel bundle:%s: %w", id, err)
	}
	// Load checked that the image and config hash to k.ID.
	if k.ID != id {
		return nil, fmt.Errorf("kernel bundle:%s: %s holds kernel %q: damaged; remove %s and unpack the bundle again", id, dir, k.ID, dir)
	}
	keyed.Touch(dir) // its last use, for klab cache gc
	k.Name = "bundle:" + id
	return k, nil
}

// CheckKernelRef returns the error ResolveKernel would give for ref when
// that error needs no download and no build to find: a reference of no
// known form, a debian: reference that does not parse (with
// o.Debian.Flavour), a build: name klab has not built (in
// o.Debian.CacheDir), a tree: that is not a directory, a path that is not
// there or not a bzImage. Commands check a user's reference with it before
// doing any work; nil does not promise that the kernel resolves (a Debian
// series may have no package yet, a tree may not be built).
func CheckKernelRef(ref string, o ResolveOptions) error {
	switch kindOf(ref) {
	case refDebian:
		return debian.CheckRef(ref, o.Debian.Flavour)
	case refBuild:
		_, err := buildstore.New(o.Debian.CacheDir).Lookup(ref)
		return err
	case refTree:
		if dir := strings.TrimPrefix(ref, "tree:"); !isDir(dir) {
			return fmt.Errorf("kernel tree %s: not a directory", dir)
		}
		return nil
	case refTreeDir:
		return nil
	case refImage:
		_, err := kerneldir.CheckBzImage(ref)
		return err
	case refBundle:
		_, err := BundledKernel(o.Debian.CacheRoot(), strings.TrimPrefix(ref, "bundle:"))
		return err
	}
	return unknownKernel(ref)
}

// refKind is the form of a kernel reference.
type refKind int

const (
	refUnknown refKind = iota
	refDebian          // debian:...
	refBuild           // build:NAME
	refTree            // tree:DIR
	refTreeDir         // a directory
	refImage           // a path: a bzImage
	refBundle          // bundle:<kernel ID>
)

// kindOf says which form ref has, as ResolveKernel reads it.
func kindOf(ref string) refKind {
	switch {
	case strings.HasPrefix(ref, "debian:"):
		return refDebian
	case strings.HasPrefix(ref, "build:"):
		return refBuild
	case strings.HasPrefix(ref, "tree:"):
		return refTree
	case strings.HasPrefix(ref, "bundle:"):
		return refBundle
	case isDir(ref):
		return refTreeDir
	case strings.Contains(ref, "/") || isFile(ref):
		return refImage
	}
	return refUnknown
}

func unknownKernel(ref string) error {
	return fmt.Errorf("unknown kernel %q: %s", ref, KernelRefHelp)
}

// KernelRefHelp says what a kernel reference may be.
var KernelRefHelp = "want debian:<series> (" + strings.Join(debian.Series(), ", ") + "), " +
	"debian:<exact package version>, build:<name> (from klab kernels build), " +
	"tree:<dir> or a directory (a kernel tree built in place, e.g. .), the path of a bzImage, " +
	"or bundle:<kernel ID> (placed by klab runs unpack)"

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// TreeImage is where a kernel tree (or make O= directory) keeps its image.
const TreeImage = "arch/x86/boot/bzImage"

// TreeKernel describes the kernel built in place in dir: a kernel tree
// after make, or a make O= directory. Its image is dir/arch/x86/boot/bzImage
// and its config dir/.config; when the tree built modules (modules.order),
// they are taken from the tree. A tree that was not built is an error that
// says which make target to run.
func TreeKernel(dir string) (*results.Kernel, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("kernel tree %s: %w", dir, err)
	}
	if !isDir(abs) {
		return nil, fmt.Errorf("kernel tree %s: not a directory", dir)
	}
	image := filepath.Join(abs, TreeImage)
	if _, err := os.Stat(image); err != nil {
		if _, kerr := os.Stat(filepath.Join(abs, "Kconfig")); kerr == nil {
			if _, cerr := os.Stat(filepath.Join(abs, ".config")); cerr != nil {
				return nil, fmt.Errorf("kernel tree %s is not configured or built (no .config, no %s): "+
					"configure and build it there (make defconfig && make -j$(nproc) bzImage modules), "+
					"or let klab build it in its own cache without touching the tree: klab boot --kernel %s --build", dir, TreeImage, dir)
			}
			return nil, fmt.Errorf("kernel tree %s is not built (no %s): run make -j$(nproc) bzImage modules there, "+
				"or let klab build it in its own cache without touching the tree: klab boot --kernel %s --build", dir, TreeImage, dir)
		}
		return nil, fmt.Errorf("%s is not a kernel tree or build directory: no %s (and no Kconfig)", dir, TreeImage)
	}
	version, err := kerneldir.CheckBzImage(image)
	if err != nil {
		return nil, err
	}
	config := filepath.Join(abs, ".config")
	if fi, err := os.Stat(config); err != nil || !fi.Mode().IsRegular() {
		config = ""
	}
	id, err := kerneldir.ID(image, config)
	if err != nil {
		return nil, err
	}
	k := &results.Kernel{Name: "tree:" + abs, ID: id, Version: version, Source: "tree", Image: image, Config: config}
	if _, err := os.Stat(filepath.Join(abs, "modules.order")); err == nil {
		k.Modules = abs
	}
	if config != "" {
		if err := checkTreeConfig(dir, config, k.Modules != ""); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// agentOptions are the config options without which klab's agent cannot
// reach the host: virtio-serial over PCI.
var agentOptions = []string{"CONFIG_VIRTIO_PCI", "CONFIG_VIRTIO_CONSOLE"}

// checkTreeConfig checks that a tree's kernel can talk to klab's agent:
// the options it needs are built in, or modules that were built.
func checkTreeConfig(dir, config string, modulesBuilt bool) error {
	val, err := ReadConfig(config)
	if err != nil {
		return fmt.Errorf("kernel tree %s: %w", dir, err)
	}
	var missing, modular []string
	for _, o := range agentOptions {
		switch val[o] {
		case "y":
		case "m":
			if !modulesBuilt {
				modular = append(modular, o)
			}
		default:
			missing = append(missing, o)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kernel tree %s: its .config lacks %s, which klab's guest agent needs to reach the host; "+
			"enable them (=y), or build with klab's lab fragment: klab boot --kernel %s --build", dir, strings.Join(missing, " and "), dir)
	}
	if len(modular) > 0 {
		return fmt.Errorf("kernel tree %s: %s=m, but the tree has no built modules (no modules.order): run make modules there", dir, strings.Join(modular, "=m, "))
	}
	return nil
}

// ReadConfig reads a kernel .config into its CONFIG_ options and their
// values (y, m, a number, or a string without its quotes); options that
// are not set are absent.
func ReadConfig(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	val := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && strings.HasPrefix(k, "CONFIG_") {
			val[k] = strings.Trim(v, `"`)
		}
	}
	return val, nil
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// localKernel describes the bzImage at path.
func localKernel(path, config string) (*results.Kernel, error) {
	version, err := kerneldir.CheckBzImage(path)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", path, err)
	}
	if config != "" {
		if fi, err := os.Stat(config); err != nil {
			return nil, fmt.Errorf("kernel config: %w", err)
		} else if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("kernel config %s is not a regular file", config)
		}
		if config, err = filepath.Abs(config); err != nil {
			return nil, fmt.Errorf("kernel config: %w", err)
		}
	} else {
		config = treeConfig(abs)
	}
	id, err := kerneldir.ID(abs, config)
	if err != nil {
		return nil, err
	}
	return &results.Kernel{
		Name:    path,
		ID:      id,
		Version: version,
		Source:  "local",
		Image:   abs,
		Config:  config,
	}, nil
}

// treeConfig returns <tree>/.config for an image at
// <tree>/arch/x86/boot/bzImage (or arch/x86_64/...), or "".
func treeConfig(image string) string {
	boot := filepath.Dir(image)
	arch := filepath.Dir(boot)
	if filepath.Base(boot) != "boot" || filepath.Base(filepath.Dir(arch)) != "arch" {
		return ""
	}
	if a := filepath.Base(arch); a != "x86" && a != "x86_64" {
		return ""
	}
	cfg := filepath.Join(filepath.Dir(filepath.Dir(arch)), ".config")
	if fi, err := os.Stat(cfg); err == nil && fi.Mode().IsRegular() {
		return cfg
	}
	return ""
}
