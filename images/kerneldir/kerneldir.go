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
// cache keeps working. It checks that the image and config are still the
// kernel that kernel.json names: an image whose size is not the one it
// records, or whose content and config do not hash to its ID (see ID),
// is a *DamagedError. Hashing a 10-15 MB image takes a few milliseconds
// (BenchmarkLoad), so every resolve checks it: a damaged kernel is never
// booted.
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
	k.Config, k.Modules = "", ""
	if _, err := os.Stat(filepath.Join(dir, "config")); err == nil {
		k.Config = filepath.Join(dir, "config")
	}
	if fi, err := os.Stat(filepath.Join(dir, "modules")); err == nil && fi.IsDir() {
		k.Modules = filepath.Join(dir, "modules")
	}
	// A cut or replaced image is no cache hit: it is fetched or built
	// again, never booted.
	if k.ImageSize > 0 && fi.Size() != k.ImageSize {
		return nil, &DamagedError{Dir: dir, Kernel: &k, Why: fmt.Sprintf("%s has %d bytes, but %d were cached", k.Image, fi.Size(), k.ImageSize)}
	}
	if k.ID != "" {
		got, err := ID(k.Image, k.Config)
		if err != nil {
			return nil, err
		}
		if got != k.ID {
			return nil, &DamagedError{Dir: dir, Kernel: &k, Why: fmt.Sprintf("%s and its config hash to %s, but kernel.json names %s", k.Image, got, k.ID)}
		}
	}
	return &k, nil
}

// DamagedError says that a kernel directory's image (or config) is not
// what its kernel.json records: cut, overwritten or corrupted on disk.
type DamagedError struct {
	// Dir is the kernel directory; Kernel what its kernel.json says.
	Dir    string
	Kernel *results.Kernel
	// Why says what does not match.
	Why string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("the cached kernel in %s is damaged: %s", e.Dir, e.Why)
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
