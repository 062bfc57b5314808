// Package hostguest runs an experiment's guest steps on the host itself,
// without a VM: the kernel under test is the host's running kernel
// (--kernel host). klab's own executable, started again as the guest
// agent in a child process, serves the same guest/proto over a socket
// pair, so that the host's cells are planned, measured and reported by
// the experiment machinery exactly as a guest's.
//
// The child is confined: it runs in a private mount namespace, chrooted
// into a private temporary root (a tmpfs that disappears with it), where
// the host's /usr and /etc are bound read-only, /proc/sys and /sys are
// read-only but for /proc/sys/vm/drop_caches and the FUSE control file
// system, and /dev holds only the character devices a FUSE run needs. A
// spec's directories (/tmp/..., /mnt/...) are therefore the private
// root's, never the host's. What would change the host (sysctls, module
// loads, shares, turning on fuse's enable_uring) is refused with a reason
// before anything runs (Opener.Open). FUSE mounts need root; a run as
// another user is refused and says so.
package hostguest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"klab/images/kerneldir"
	"klab/internal/fileio"
	"klab/results"
)

// Ref is the kernel reference that selects this host: klab run
// --kernel host runs the experiment's steps on the running kernel,
// without a VM.
const Ref = "host"

// Source is the results.Kernel Source of the host's kernel.
const Source = "host"

// Kernel describes the running kernel as a kernel klab knows: Name host,
// Source host, Version its release, Config its configuration (from
// /boot/config-RELEASE, else /proc/config.gz copied under cacheDir; none
// when neither exists), and an ID hashed from /proc/version and the
// configuration.
func Kernel(cacheDir string) (*results.Kernel, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return nil, fmt.Errorf("host kernel: %w", err)
	}
	release := unix.ByteSliceToString(u.Release[:])
	version, err := os.ReadFile("/proc/version")
	if err != nil {
		return nil, fmt.Errorf("host kernel: %w", err)
	}
	dir := filepath.Join(cacheDir, "host", release)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("host kernel: %w", err)
	}
	versionFile := filepath.Join(dir, "version")
	if err := fileio.WriteAtomic(versionFile, version, 0o644); err != nil {
		return nil, fmt.Errorf("host kernel: %w", err)
	}
	config, err := hostConfig(release, dir)
	if err != nil {
		return nil, fmt.Errorf("host kernel: %w", err)
	}
	id, err := kerneldir.ID(versionFile, config)
	if err != nil {
		return nil, err
	}
	return &results.Kernel{Name: Ref, ID: id, Version: release, Source: Source, Config: config}, nil
}

// hostConfig returns the running kernel's configuration file:
// /boot/config-RELEASE, or /proc/config.gz decompressed into dir; "" when
// there is neither.
func hostConfig(release, dir string) (string, error) {
	boot := "/boot/config-" + release
	if _, err := os.Stat(boot); err == nil {
		return boot, nil
	}
	gz, err := os.ReadFile("/proc/config.gz")
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return "", fmt.Errorf("/proc/config.gz: %w", err)
	}
	// A kernel configuration is some hundred KiB; 16 MiB bounds a
	// corrupt one.
	data, err := io.ReadAll(io.LimitReader(zr, 16<<20))
	if err != nil {
		return "", fmt.Errorf("/proc/config.gz: %w", err)
	}
	p := filepath.Join(dir, "config")
	if err := fileio.WriteAtomic(p, data, 0o644); err != nil {
		return "", err
	}
	return p, nil
}
