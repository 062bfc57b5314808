package fstests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"klab/guest/proto"
	"klab/images/internal/ext4img"
	"klab/images/keyed"
	"klab/internal/flock"
)

// diskFile is the ext4 image of the tree, next to it in the entry.
const diskFile = "fstests.ext4"

// Disk returns the ext4 image of b's tree that guests attach read-only
// (DiskQEMUArgs), making it in b's cache entry the first time: under the
// fstests cache's lock, into a temporary file renamed into place, so that
// it is made once and is whole or absent.
func (b *Built) Disk(ctx context.Context) (string, error) {
	entry := filepath.Dir(b.Dir)
	img := filepath.Join(entry, diskFile)
	look := func() (string, bool) {
		_, err := os.Stat(img)
		return img, err == nil
	}
	lock := func(ctx context.Context) (func(), error) {
		return flock.Lock(ctx, filepath.Join(filepath.Dir(entry), ".lock"), nil)
	}
	p, _, err := keyed.Locked(ctx, look, lock, func(ctx context.Context) (string, error) {
		st, err := ext4img.Measure(b.Dir)
		if err != nil {
			return "", fmt.Errorf("fstests disk: %w", err)
		}
		f, err := os.CreateTemp(entry, "."+diskFile+keyed.TempPrefix+"*")
		if err != nil {
			return "", fmt.Errorf("fstests disk: %w", err)
		}
		tmp := f.Name()
		f.Close()
		defer os.Remove(tmp)
		if err := ext4img.Make(ctx, b.Dir, tmp, "klab-fstests", st); err != nil {
			return "", fmt.Errorf("making the fstests disk (mke2fs from e2fsprogs 1.43 or newer): %w", err)
		}
		if err := os.Chmod(tmp, 0o644); err != nil {
			return "", fmt.Errorf("fstests disk: %w", err)
		}
		if err := os.Rename(tmp, img); err != nil {
			return "", fmt.Errorf("fstests disk: %w", err)
		}
		return img, nil
	})
	return p, err
}

// DiskQEMUArgs attach the fstests disk at path read-only, with the serial
// the agent finds it by (proto.FstestsSerial).
func DiskQEMUArgs(path string) []string {
	return ext4img.QEMUArgs(path, "klabfst", proto.FstestsSerial)
}
