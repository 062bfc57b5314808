// Package kerneldir owns the files of a kernel as klab keeps it: the
// bzImage, checked against the x86 boot protocol (CheckBzImage); the
// kernel's identity, a hash of its image and config (ID); and a cached
// kernel's directory, the same for Debian kernels and kernels built from
// source:
//
//	vmlinuz      the bzImage
//	config       the kernel's .config (when known)
//	modules/     the modules (when the kernel has any)
//	kernel.json  the results.Kernel, with the image's size
//
// Load reads such a directory and Write writes its kernel.json.
package kerneldir

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"klab/results"
)

// Load reads dir/kernel.json and points the paths into dir, so a moved
// cache keeps working. An image whose size is not the one kernel.json
// records is an error: a cut or replaced image is no cache hit.
func Load(dir string) (*results.Kernel, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	if err != nil {
		return nil, err
	}
	var k results.Kernel
	if err := json.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "kernel.json"), err)
	}
	k.Image = filepath.Join(dir, "vmlinuz")
	fi, err := os.Stat(k.Image)
	if err != nil {
		return nil, err
	}
	// A cheap check that the hit is what was installed: a cut or
	// replaced image is a miss, fetched or built again.
	if k.ImageSize > 0 && fi.Size() != k.ImageSize {
		return nil, fmt.Errorf("%s: %d bytes, but %d were cached: damaged", k.Image, fi.Size(), k.ImageSize)
	}
	k.Config, k.Modules = "", ""
	if _, err := os.Stat(filepath.Join(dir, "config")); err == nil {
		k.Config = filepath.Join(dir, "config")
	}
	if fi, err := os.Stat(filepath.Join(dir, "modules")); err == nil && fi.IsDir() {
		k.Modules = filepath.Join(dir, "modules")
	}
	return &k, nil
}

// Write writes k as dir/kernel.json, with the size of dir/vmlinuz, which
// every later Load checks. The directory is made durable by whoever
// renames it into the cache (keyed.Fill).
func Write(dir string, k *results.Kernel) error {
	fi, err := os.Stat(filepath.Join(dir, "vmlinuz"))
	if err != nil {
		return fmt.Errorf("kernel.json: %w", err)
	}
	k.ImageSize = fi.Size()
	data, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return fmt.Errorf("kernel.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("kernel.json: %w", err)
	}
	return nil
}

// ID is a kernel's identity: "k-" and the first 16 hex digits of the
// SHA-256 of the image followed by the config (a missing config counts as
// empty).
func ID(image, config string) (string, error) {
	h := sha256.New()
	for i, p := range []string{image, config} {
		if p == "" {
			continue
		}
		f, err := os.Open(p)
		if i == 1 && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("kernel id: %w", err)
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("kernel id: %w", err)
		}
	}
	return "k-" + hex.EncodeToString(h.Sum(nil))[:16], nil
}
