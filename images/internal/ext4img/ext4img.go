// Package ext4img packs a directory tree into an ext4 image that guests
// attach read-only as a virtio-blk disk, and says how QEMU attaches it:
// the userspace (images/userspace) and the fstests tree (images/fstests)
// go into guests this way.
package ext4img

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"klab/internal/proc"
)

// Stats is what a tree holds, for sizing its image.
type Stats struct {
	// Bytes is the content of regular files; Blocks the 4 KiB blocks
	// files, directories and long links take.
	Bytes, Blocks int64
	// Files counts every entry, directories and links included.
	Files int
}

// Measure counts what tree holds.
func Measure(tree string) (Stats, error) {
	var st Stats
	err := filepath.WalkDir(tree, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st.Files++
		fi, err := de.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.Mode().IsRegular():
			st.Bytes += fi.Size()
			st.Blocks += (fi.Size() + 4095) / 4096
		case fi.IsDir():
			st.Blocks++
		case fi.Mode()&fs.ModeSymlink != 0 && fi.Size() >= 60:
			st.Blocks++
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return st, fmt.Errorf("measuring the tree: %w", err)
	}
	return st, err
}

// Make packs tree, whose content st measured, into a new ext4 image at
// img labelled label: no journal (it is mounted read-only), 4 KiB blocks,
// sized to the tree with some room for the file system's own metadata.
// Files keep their owners and modes; the root directory belongs to root.
// It needs mke2fs from e2fsprogs 1.43 or newer (-d).
func Make(ctx context.Context, tree, img, label string, st Stats) error {
	inodes := int64(st.Files) + 1024
	blocks := st.Blocks + st.Blocks/10 + inodes*256/4096 + 4096
	_, err := proc.Run(ctx, proc.Opts{Timeout: 10 * time.Minute}, "mke2fs", "-q", "-F", "-t", "ext4",
		"-O", "^has_journal", "-b", "4096", "-N", strconv.FormatInt(inodes, 10), "-m", "0",
		"-L", label, "-E", "root_owner=0:0,nodiscard", "-d", tree, img, strconv.FormatInt(blocks, 10))
	return err
}

// QEMUArgs attach the image at path as a read-only virtio-blk disk: id
// names QEMU's drive, serial is what the guest finds the disk by. QEMU
// takes a shared lock on a read-only image, so several guests can attach
// one image at once.
func QEMUArgs(path, id, serial string) []string {
	return []string{
		"-drive", "file=" + strings.ReplaceAll(path, ",", ",,") + ",if=none,id=" + id + ",format=raw,readonly=on",
		"-device", "virtio-blk-pci,drive=" + id + ",serial=" + serial,
	}
}
