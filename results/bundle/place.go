package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"klab/internal/fileio"
	"klab/results"
)

// KernelInfoFile is the name of the file Place writes in each kernel's
// directory: the kernel as the manifest recorded it, with its paths
// pointing into that directory and its image's size. The directory has
// the layout of a cached kernel (package images/kerneldir: vmlinuz,
// config, modules/, kernel.json).
const KernelInfoFile = "kernel.json"

// Placed says where Place (PlaceTree) put a bundle's run (tree) and
// kernels.
type Placed struct {
	// RunDir is the run's directory; empty for a matrix tree's bundle.
	RunDir string
	// TreeDir is the matrix results tree's directory; empty for a run's
	// bundle.
	TreeDir string
	// Kernels are the kernels' directories, in the index's order.
	Kernels []PlacedKernel
	// Initramfs are the run's initramfs images, each at
	// <kernelsDir>/initramfs/<sha256>.cpio, in the index's order.
	Initramfs []string
}

// PlacedKernel is one kernel that Place put (or found) in place.
type PlacedKernel struct {
	// Ref and ID are the kernel's as the manifest names it.
	Ref, ID string
	// Dir is its directory, holding the files at their KernelFile paths
	// and kernel.json.
	Dir string
	// Existed is set when Dir was there already and was kept.
	Existed bool
}

// Place moves the run of a directory that Unpack made into runsDir/<run
// id>, and assembles each kernel's files from the blobs into
// kernelsDir/<kernel id>/ with a kernel.json. A kernel directory that
// exists already is kept (kernel ids are content hashes); a run directory
// that exists already is an error, checked before anything is placed.
// Each directory is assembled next to its place and renamed into it.
func Place(unpacked string, ix *Index, runsDir, kernelsDir string) (*Placed, error) {
	if ix.IsMatrix() {
		return nil, fmt.Errorf("place: the bundle holds the matrix results tree %s, not a run", ix.Tree.Name)
	}
	kernelsDir, err := filepath.Abs(kernelsDir)
	if err != nil {
		return nil, fmt.Errorf("place kernels: %w", err)
	}
	p := &Placed{RunDir: filepath.Join(runsDir, ix.RunID)}
	if _, err := os.Lstat(p.RunDir); err == nil {
		return nil, fmt.Errorf("place run %s: %s exists already (klab runs rm %s removes it)", ix.RunID, p.RunDir, ix.RunID)
	}
	if err := placeArtefacts(unpacked, ix, kernelsDir, p); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(runsDir, 0o755); err != nil {
		return nil, fmt.Errorf("place run %s: %w", ix.RunID, err)
	}
	if err := moveDir(filepath.Join(unpacked, "run"), p.RunDir); err != nil {
		return nil, fmt.Errorf("place run %s: %w", ix.RunID, err)
	}
	return p, nil
}

// placeArtefacts puts the index's kernels and initramfs images in
// kernelsDir, recording them in p.
func placeArtefacts(unpacked string, ix *Index, kernelsDir string, p *Placed) error {
	if len(ix.Kernels) > 0 {
		if err := os.MkdirAll(kernelsDir, 0o755); err != nil {
			return fmt.Errorf("place kernels: %w", err)
		}
	}
	for _, k := range ix.Kernels {
		pk, err := placeKernel(unpacked, k, kernelsDir)
		if err != nil {
			return fmt.Errorf("place kernel %s (%s): %w", k.Ref, k.Kernel.ID, err)
		}
		p.Kernels = append(p.Kernels, pk)
	}
	for _, f := range ix.Initramfs {
		img, err := placeInitramfs(unpacked, f, kernelsDir)
		if err != nil {
			return fmt.Errorf("place initramfs %s: %w", f.Path, err)
		}
		p.Initramfs = append(p.Initramfs, img)
	}
	return nil
}

// placeKernel assembles one kernel's directory.
func placeKernel(unpacked string, k Kernel, kernelsDir string) (PlacedKernel, error) {
	pk := PlacedKernel{Ref: k.Ref, ID: k.Kernel.ID, Dir: filepath.Join(kernelsDir, k.Kernel.ID)}
	if _, err := os.Lstat(pk.Dir); err == nil {
		pk.Existed = true
		return pk, nil
	}
	tmp, err := os.MkdirTemp(kernelsDir, "."+k.Kernel.ID+".tmp-*")
	if err != nil {
		return pk, err
	}
	defer os.RemoveAll(tmp)
	kern := k.Kernel
	kern.Image, kern.Config, kern.Modules = "", "", ""
	if kern.Build != nil {
		b := *kern.Build
		b.Log = ""
		kern.Build = &b
	}
	for _, f := range k.Files {
		dst := filepath.Join(tmp, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return pk, err
		}
		if err := linkOrCopy(filepath.Join(unpacked, filepath.FromSlash(f.Blob)), dst); err != nil {
			return pk, fmt.Errorf("%s: %w", f.Path, err)
		}
		final := filepath.Join(pk.Dir, filepath.FromSlash(f.Path))
		switch f.Role {
		case RoleImage:
			kern.Image = final
			if st, err := os.Stat(dst); err == nil {
				kern.ImageSize = st.Size()
			}
		case RoleConfig:
			kern.Config = final
		case RoleModule:
			kern.Modules = filepath.Join(pk.Dir, "modules")
		case RoleBuildLog:
			kern.Build.Log = final
		}
	}
	data, err := json.MarshalIndent(kern, "", "  ")
	if err != nil {
		return pk, err
	}
	if err := writeNew(filepath.Join(tmp, KernelInfoFile), append(data, '\n')); err != nil {
		return pk, err
	}
	if err := os.Rename(tmp, pk.Dir); err != nil {
		if _, serr := os.Lstat(pk.Dir); serr == nil {
			pk.Existed = true // placed meanwhile by another unpack
			return pk, nil
		}
		return pk, err
	}
	return pk, nil
}

// InitramfsDir is where Place puts a bundle's initramfs images, under
// the directory it puts kernels in.
const InitramfsDir = "initramfs"

// placeInitramfs puts one initramfs image at
// kernelsDir/initramfs/<sha256>.cpio, unless it is there already.
func placeInitramfs(unpacked string, f InitramfsFile, kernelsDir string) (string, error) {
	dir := filepath.Join(kernelsDir, InitramfsDir)
	dst := filepath.Join(dir, strings.TrimPrefix(f.Blob, BlobPrefix)+".cpio")
	if _, err := os.Lstat(dst); err == nil {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, "."+filepath.Base(dst)+".tmp-"+strconv.Itoa(os.Getpid()))
	os.Remove(tmp)
	if err := linkOrCopy(filepath.Join(unpacked, filepath.FromSlash(f.Blob)), tmp); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return dst, nil
}

// ReadKernelInfo reads the kernel.json of a kernel directory that Place
// made.
func ReadKernelInfo(dir string) (*results.Kernel, error) {
	data, err := os.ReadFile(filepath.Join(dir, KernelInfoFile))
	if err != nil {
		return nil, err
	}
	var k results.Kernel
	if err := json.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, KernelInfoFile), err)
	}
	return &k, nil
}

// linkOrCopy hard-links src to dst, or copies it when they are on
// different file systems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return fileio.CopyFile(src, dst, 0o644, os.O_EXCL)
}

// moveDir renames src to dst, or, across file systems, copies it next to
// dst and renames the copy into place.
func moveDir(src, dst string) error {
	if err := os.Rename(src, dst); err == nil {
		return nil
	} else if _, serr := os.Lstat(dst); serr == nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return err
	}
	err = filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(tmp, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			return fileio.CopyFile(p, to, 0o644, os.O_EXCL)
		}
		return errors.New(p + ": not a regular file")
	})
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.RemoveAll(tmp)
	}
	return err
}

// writeNew writes data to the new file p.
func writeNew(p string, data []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
