package images

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"klab/images/kerneldir"
	"klab/images/keyed"
	"klab/internal/paths"
	"klab/results"
)

// Kernels built from source (package klab/images/build writes them) are
// kept under <cache>/kernels/build:
//
//	results/<key>/   one finished build: vmlinuz, config, build.log,
//	                 kernel.json and, when the config has modules, modules/
//	names/<name>     a symbolic link to ../results/<key>; "build:<name>"
//
// A results directory is complete or absent: it is assembled next to its
// final place and renamed into it. This file is the read side, used by
// ResolveKernel and `klab kernels list`.

// BuiltKernelsDir returns the directory of kernels built from source,
// <cacheDir>/kernels/build (cacheDir empty means paths.CacheDir()).
func BuiltKernelsDir(cacheDir string) string {
	if cacheDir == "" {
		cacheDir = paths.CacheDir()
	}
	return filepath.Join(cacheDir, "kernels", "build")
}

// buildNameRe is what a build name may look like.
var buildNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$`)

// CheckBuildName reports whether name can name a built kernel.
func CheckBuildName(name string) error {
	if !buildNameRe.MatchString(name) {
		return fmt.Errorf("bad build name %q: want 1 to 100 letters, digits and . _ + -, starting with a letter or digit", name)
	}
	return nil
}

// LookupBuiltKernel returns the built kernel that ref names: "build:<name>"
// or "build:<kernel ID>" (k-<16 hex>). The prefix "build:" may be left out.
func LookupBuiltKernel(cacheDir, ref string) (*results.Kernel, error) {
	name := strings.TrimPrefix(ref, "build:")
	dir := BuiltKernelsDir(cacheDir)
	if CheckBuildName(name) == nil {
		k, err := LoadBuiltKernelDir(filepath.Join(dir, "names", name))
		if err == nil {
			k.Name = "build:" + name
			// Mark it used, so that `klab kernels gc` keeps what is booted.
			now := time.Now()
			_ = os.Chtimes(filepath.Dir(k.Image), now, now)
			return k, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("kernel %s: %w", ref, err)
		}
	}
	if strings.HasPrefix(name, "k-") {
		ks, err := CachedBuiltKernels(cacheDir)
		if err != nil {
			return nil, err
		}
		for _, k := range ks {
			if k.ID == name {
				return k, nil
			}
		}
	}
	var known []string
	if ks, err := CachedBuiltKernels(cacheDir); err == nil {
		for _, k := range ks {
			known = append(known, k.Name)
		}
	}
	if len(known) == 0 {
		return nil, fmt.Errorf("kernel %s: no kernels built yet; build one with: klab kernels build --source debian:7.3 --config lab --name %s", ref, name)
	}
	return nil, fmt.Errorf("kernel %s: no built kernel by that name or ID; built kernels: %s", ref, strings.Join(known, " "))
}

// CachedBuiltKernels lists the built kernels by name, sorted by name. A
// kernel with two names is listed twice.
func CachedBuiltKernels(cacheDir string) ([]*results.Kernel, error) {
	ndir := filepath.Join(BuiltKernelsDir(cacheDir), "names")
	des, err := os.ReadDir(ndir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing built kernels: %w", err)
	}
	var ks []*results.Kernel
	for _, de := range des {
		if CheckBuildName(de.Name()) != nil {
			continue
		}
		k, err := LoadBuiltKernelDir(filepath.Join(ndir, de.Name()))
		if err != nil {
			continue // a dangling name: its result was collected
		}
		k.Name = "build:" + de.Name()
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
	return ks, nil
}

// LoadBuiltKernelDir reads a built kernel's results directory (or a name
// linking to it) and points its paths into that directory.
func LoadBuiltKernelDir(dir string) (*results.Kernel, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	k, err := kerneldir.Load(dir)
	if err != nil {
		return nil, err
	}
	if k.Build != nil {
		k.Build.Log = ""
		if _, err := os.Stat(filepath.Join(dir, "build.log")); err == nil {
			k.Build.Log = filepath.Join(dir, "build.log")
		}
	}
	return k, nil
}

// Config fragments shipped with klab (images/configs). Read-only.
//
//go:embed configs
var configFS embed.FS

// ConfigFragmentNames lists the config fragments shipped with klab.
func ConfigFragmentNames() []string {
	des, _ := configFS.ReadDir("configs")
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// ConfigFragment returns the shipped config fragment called name ("lab",
// "debug").
func ConfigFragment(name string) ([]byte, error) {
	if strings.ContainsAny(name, `/\`) || name == "" || name[0] == '.' {
		return nil, fmt.Errorf("no shipped config fragment %q", name)
	}
	data, err := configFS.ReadFile("configs/" + name)
	if err != nil {
		return nil, fmt.Errorf("no shipped config fragment %q; klab ships: %s (or give a path to a fragment file)",
			name, strings.Join(ConfigFragmentNames(), ", "))
	}
	return data, nil
}

// RemoveBuiltResult removes the built kernel results/<key> and every name
// and input link that points to it (see BuiltKernelsDir). The result is
// renamed out of the way first, so that a half-removed kernel is never
// taken for a whole one.
func RemoveBuiltResult(cacheDir, key string) error {
	dir := BuiltKernelsDir(cacheDir)
	if !keyed.EntryName(key) {
		return fmt.Errorf("remove built kernel: bad key %q", key)
	}
	for _, d := range []string{"names", "inputs"} {
		des, _ := os.ReadDir(filepath.Join(dir, d))
		for _, de := range des {
			p := filepath.Join(dir, d, de.Name())
			if t, err := os.Readlink(p); err == nil && filepath.Base(t) == key {
				os.Remove(p)
			}
		}
	}
	return keyed.Discard(filepath.Join(dir, "results"), key)
}
