package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ResolveOptions tunes ResolveKernel.
type ResolveOptions struct {
	// Debian is used for "debian:..." references.
	Debian DebianOptions
	// Config is the .config of a local kernel image. When empty, a
	// bzImage at <tree>/arch/x86/boot/bzImage uses <tree>/.config if it
	// exists.
	Config string
}

// ResolveKernel turns a kernel reference into a Kernel:
//
//   - "debian:<series>" (debian:6.1, debian:7.3, ...) or
//     "debian:<kernel release>" (debian:7.3.4+deb13-cloud-amd64): a Debian
//     kernel, fetched into the cache unless it is there (see FetchDebian);
//   - a path to a bzImage (anything containing '/', or an existing file):
//     a local kernel, used in place. Its ID hashes the image and its
//     config; its modules are not supported yet;
//   - "build:<name>" or "build:<kernel ID>": a kernel built from source by
//     `klab kernels build` (see LookupBuiltKernel).
func ResolveKernel(ctx context.Context, ref string, o ResolveOptions) (*Kernel, error) {
	switch {
	case strings.HasPrefix(ref, "debian:"):
		return FetchDebian(ctx, ref, o.Debian)
	case strings.HasPrefix(ref, "build:"):
		return LookupBuiltKernel(o.Debian.cacheDir(), ref)
	case strings.Contains(ref, "/") || isFile(ref):
		return localKernel(ref, o.Config)
	}
	return nil, fmt.Errorf("unknown kernel %q: want debian:<series> (6.1, 6.12, 7.2, 7.3), "+
		"debian:<exact package version>, or a path to a bzImage", ref)
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// localKernel describes the bzImage at path.
func localKernel(path, config string) (*Kernel, error) {
	version, err := CheckBzImage(path)
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
	id, err := kernelID(abs, config)
	if err != nil {
		return nil, err
	}
	return &Kernel{
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
