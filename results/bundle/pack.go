package bundle

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"klab/results"
)

// PackOptions say what Pack puts in a bundle.
type PackOptions struct {
	// ResultsOnly leaves the kernel artefacts out.
	ResultsOnly bool
	// KlabVersion is recorded in bundle.json.
	KlabVersion string
	// Now is the creation time; zero means time.Now.
	Now time.Time
}

// PackResult says what Pack wrote.
type PackResult struct {
	// Index is the bundle's bundle.json.
	Index *Index
	// Size is the archive's size in bytes.
	Size int64
}

// source is one member to pack: a file of this machine, and what it was
// when it was first hashed.
type source struct {
	file    string
	member  Member
	modTime time.Time
}

// ErrChanged is returned by Pack for a file that changed while it was
// being packed.
var ErrChanged = errors.New("changed while it was being packed")

// cachedKernelFile is the kernel.json of a cached kernel's directory
// (package images/kerneldir).
const cachedKernelFile = "kernel.json"

// experimentManifest is an experiment run's manifest (package
// experiments' ManifestFileName); a boot run's is results.ManifestFile.
const experimentManifest = "experiment.json"

// manifestKernels is what Pack reads of a run's manifest.json: an
// experiment's kernels, or a boot's kernel.
type manifestKernels struct {
	Kernels []struct {
		Ref    string         `json:"ref"`
		Kernel results.Kernel `json:"kernel"`
	} `json:"kernels"`
	Kernel *results.Kernel `json:"kernel"`
}

// Pack writes the bundle of the run directory runDir to out, which must
// not exist yet: it is written next to out and renamed into place.
// Kernel artefacts are read where the run's manifest says they are.
func Pack(runDir, out string, opts PackOptions) (*PackResult, error) {
	ix := &Index{Schema: Schema, RunID: filepath.Base(filepath.Clean(runDir)), KlabVersion: opts.KlabVersion,
		Created: opts.Now, ResultsOnly: opts.ResultsOnly}
	if ix.Created.IsZero() {
		ix.Created = time.Now().UTC()
	}
	if !results.ValidName(ix.RunID) {
		return nil, fmt.Errorf("pack %s: the directory's name %q is no run id", runDir, ix.RunID)
	}
	srcs, err := runSources(runDir)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", runDir, err)
	}
	if !opts.ResultsOnly {
		blobs, err := artefactSources(runDir, ix, srcs)
		if err != nil {
			return nil, fmt.Errorf("pack %s: %w", runDir, err)
		}
		srcs = append(srcs, blobs...)
	}
	for _, s := range srcs {
		ix.Members = append(ix.Members, s.member)
	}
	if err := ix.Check(DefaultLimits); err != nil {
		return nil, fmt.Errorf("pack %s: %w", runDir, err)
	}
	size, err := writeArchive(out, ix, srcs)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", runDir, err)
	}
	return &PackResult{Index: ix, Size: size}, nil
}

// runSources lists the run directory's regular files as run/ members.
// Anything else (a link, a device) is refused: a run holds only files.
func runSources(runDir string) ([]source, error) {
	srcs, err := dirSources(runDir, RunPrefix)
	if err == nil && len(srcs) == 0 {
		err = errors.New("the run directory holds no files")
	}
	return srcs, err
}

// hashSource stats and hashes file as member name.
func hashSource(file, name string) (source, error) {
	f, err := os.Open(file)
	if err != nil {
		return source{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return source{}, err
	}
	if !st.Mode().IsRegular() {
		return source{}, fmt.Errorf("%s: not a regular file", file)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return source{}, fmt.Errorf("read %s: %w", file, err)
	}
	if n != st.Size() {
		return source{}, fmt.Errorf("%s: %w (%d bytes read, %d expected)", file, ErrChanged, n, st.Size())
	}
	return source{file: file, modTime: st.ModTime(),
		member: Member{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}}, nil
}

// artefactSources reads the run directory's manifest once and returns the
// blobs of its kernels' files and initramfs images, once each and none
// that srcs holds, filling ix.Kernels, ix.Initramfs and ix.Missing.
func artefactSources(runDir string, ix *Index, srcs []source) ([]source, error) {
	var data []byte
	var err error
	for _, name := range []string{experimentManifest, results.ManifestFile} {
		data, err = os.ReadFile(filepath.Join(runDir, name))
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		ix.Missing = append(ix.Missing, "the run has no manifest naming kernels ("+experimentManifest+" or "+results.ManifestFile+")")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the run's manifest: %w", err)
	}
	blobs, err := kernelSources(data, ix)
	if err != nil {
		return nil, err
	}
	imgs, err := initramfsSources(data, ix, slices.Concat(srcs, blobs))
	if err != nil {
		return nil, err
	}
	return append(blobs, imgs...), nil
}

// kernelSources returns the blobs of the kernels' files that the run's
// manifest data names, once each, filling ix.Kernels and ix.Missing.
func kernelSources(data []byte, ix *Index) ([]source, error) {
	var mk manifestKernels
	if err := json.Unmarshal(data, &mk); err != nil {
		return nil, fmt.Errorf("read the run's manifest: %w", err)
	}
	type refKernel struct {
		ref string
		k   results.Kernel
	}
	var ks []refKernel
	for _, k := range mk.Kernels {
		ks = append(ks, refKernel{k.Ref, k.Kernel})
	}
	if len(ks) == 0 && mk.Kernel != nil {
		ks = append(ks, refKernel{mk.Kernel.Name, *mk.Kernel})
	}
	blobs := map[string]bool{}
	var srcs []source
	add := func(k *Kernel, file, rel, role string) error {
		s, err := hashSource(file, "")
		if errors.Is(err, fs.ErrNotExist) && (role == RolePatch || role == RoleFragment || role == RoleBuildLog) {
			ix.Missing = append(ix.Missing, fmt.Sprintf("kernel %s: %s %s", k.Kernel.ID, role, file))
			return nil
		}
		if err != nil {
			return fmt.Errorf("kernel %s (%s): %w", k.Ref, role, err)
		}
		s.member.Name = BlobPrefix + s.member.SHA256
		k.Files = append(k.Files, KernelFile{Path: rel, Role: role, Blob: s.member.Name})
		if !blobs[s.member.Name] {
			blobs[s.member.Name] = true
			srcs = append(srcs, s)
		}
		return nil
	}
	for _, rk := range ks {
		if rk.k.Image == "" || rk.k.Source == "host" {
			continue // skipped, or no VM
		}
		rk.k = completeKernel(rk.k)
		k := Kernel{Ref: rk.ref, Kernel: rk.k}
		if err := add(&k, rk.k.Image, "vmlinuz", RoleImage); err != nil {
			return nil, err
		}
		if rk.k.Config != "" {
			if err := add(&k, rk.k.Config, "config", RoleConfig); err != nil {
				return nil, err
			}
		}
		if rk.k.Modules != "" {
			if err := addTree(rk.k.Modules, "modules", func(file, rel string) error { return add(&k, file, rel, RoleModule) }); err != nil {
				return nil, fmt.Errorf("kernel %s: modules: %w", rk.ref, err)
			}
		}
		if b := rk.k.Build; b != nil {
			if b.Log != "" {
				if err := add(&k, b.Log, "build.log", RoleBuildLog); err != nil {
					return nil, err
				}
			}
			for i, p := range b.Patches {
				file, _, _ := strings.Cut(p.Path, "#")
				rel := fmt.Sprintf("patches/%04d-%s", i+1, safeBase(file))
				if err := addOnce(&k, file, rel, RolePatch, add); err != nil {
					return nil, err
				}
			}
			for i, fr := range b.Fragments {
				if fr.Path == "lab" || fr.Path == "debug" {
					continue // shipped with klab
				}
				rel := fmt.Sprintf("fragments/%04d-%s", i+1, safeBase(fr.Path))
				if err := add(&k, fr.Path, rel, RoleFragment); err != nil {
					return nil, err
				}
			}
		}
		ix.Kernels = append(ix.Kernels, k)
	}
	return srcs, nil
}

// manifestInitramfs is what Pack reads of a run's initramfs images: an
// experiment's list, or a boot's one.
type manifestInitramfs struct {
	Initramfs json.RawMessage `json:"initramfs"`
}

// initramfsSources returns the blobs of the initramfs images that the
// run's manifest data records and that are still on this machine, skipping any that
// srcs holds already; the others are named in ix.Missing. An image's file
// is named by the hash of what went into it (the manifest's sha256), so
// the file there is the one the run booted.
func initramfsSources(data []byte, ix *Index, srcs []source) ([]source, error) {
	var mi manifestInitramfs
	var err error
	if err := json.Unmarshal(data, &mi); err != nil {
		return nil, fmt.Errorf("read the run's manifest: %w", err)
	}
	var list []results.Initramfs
	if len(mi.Initramfs) > 0 && mi.Initramfs[0] == '[' {
		err = json.Unmarshal(mi.Initramfs, &list)
	} else if len(mi.Initramfs) > 0 && string(mi.Initramfs) != "null" {
		var one results.Initramfs
		err = json.Unmarshal(mi.Initramfs, &one)
		list = append(list, one)
	}
	if err != nil {
		return nil, fmt.Errorf("read the run's manifest: initramfs: %w", err)
	}
	have := map[string]bool{}
	for _, s := range srcs {
		have[s.member.Name] = true
	}
	var out []source
	for _, i := range list {
		if i.Path == "" {
			continue
		}
		s, err := hashSource(i.Path, "")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			ix.Missing = append(ix.Missing, "initramfs "+i.Path+": no longer on this machine")
			continue
		case err != nil:
			return nil, fmt.Errorf("initramfs: %w", err)
		}
		s.member.Name = BlobPrefix + s.member.SHA256
		ix.Initramfs = append(ix.Initramfs, InitramfsFile{Path: i.Path, Key: i.SHA256, Blob: s.member.Name})
		if !have[s.member.Name] {
			have[s.member.Name] = true
			out = append(out, s)
		}
	}
	return out, nil
}

// addOnce adds file unless k already holds it (an mbox gives several
// patches of one file).
func addOnce(k *Kernel, file, rel, role string, add func(*Kernel, string, string, string) error) error {
	for _, f := range k.Files {
		if f.Role == role && strings.HasSuffix(f.Path, "-"+safeBase(file)) {
			return nil
		}
	}
	return add(k, file, rel, role)
}

// safeBase is file's base name reduced to [A-Za-z0-9._-].
func safeBase(file string) string {
	b := []byte(filepath.Base(file))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	s := strings.TrimLeft(string(b), ".")
	if s == "" {
		s = "file"
	}
	return s
}

// addTree calls add for every regular file under dir, with its path
// relative to dir under prefix. Symbolic links (such as a module tree's
// build and source links) are left out: they point into the packing
// machine, and a bundle holds no links.
func addTree(dir, prefix string, add func(file, rel string) error) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			return err
		}
		if err := add(f, path.Join(prefix, filepath.ToSlash(rel))); err != nil {
			return err
		}
	}
	return nil
}

// writeArchive writes bundle.json and then every source to a file next to
// out, hashing each again as it goes, and renames it to out. It returns
// the archive's size.
func writeArchive(out string, ix *Index, srcs []source) (size int64, err error) {
	idx, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return 0, err
	}
	if _, err := os.Lstat(out); err == nil {
		return 0, fmt.Errorf("%s exists already", out)
	}
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".*.tmp")
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	zw, err := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return 0, err
	}
	tw := tar.NewWriter(zw)
	hdr := func(name string, size int64, mod time.Time) *tar.Header {
		return &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644, ModTime: mod.UTC().Truncate(time.Second), Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr(IndexName, int64(len(idx)), ix.Created)); err != nil {
		return 0, err
	}
	if _, err := tw.Write(idx); err != nil {
		return 0, err
	}
	for _, s := range srcs {
		if err := writeSource(tw, s, hdr(s.member.Name, s.member.Size, s.modTime)); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	// A link never replaces a file that appeared meanwhile; a file
	// system without hard links gets a rename.
	if err := os.Link(f.Name(), out); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return 0, fmt.Errorf("place %s: %w", out, err)
		}
		if err := os.Rename(f.Name(), out); err != nil {
			return 0, fmt.Errorf("place %s: %w", out, err)
		}
	} else {
		os.Remove(f.Name())
	}
	return st.Size(), nil
}

// writeSource copies one source into the archive, and fails with
// ErrChanged when its size, modification time or hash are no longer what
// they were when bundle.json was made.
func writeSource(tw *tar.Writer, s source, h *tar.Header) error {
	f, err := os.Open(s.file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() != s.member.Size || !st.ModTime().Equal(s.modTime) {
		return fmt.Errorf("%s (%s): %w", s.file, s.member.Name, ErrChanged)
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	sum := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(tw, sum), f, s.member.Size); err != nil {
		return fmt.Errorf("%s (%s): %w", s.file, s.member.Name, err)
	}
	if hex.EncodeToString(sum.Sum(nil)) != s.member.SHA256 {
		return fmt.Errorf("%s (%s): %w", s.file, s.member.Name, ErrChanged)
	}
	if st2, err := f.Stat(); err != nil || st2.Size() != s.member.Size || !st2.ModTime().Equal(s.modTime) {
		return fmt.Errorf("%s (%s): %w", s.file, s.member.Name, ErrChanged)
	}
	return nil
}

// completeKernel fills in what an experiment's manifest leaves out of a
// kernel (its modules directory, its build log) from the kernel.json of
// the cached kernel directory that holds the image (vmlinuz, config,
// modules/, kernel.json), when that directory is there and holds the
// same kernel (by ID).
func completeKernel(k results.Kernel) results.Kernel {
	if filepath.Base(k.Image) != "vmlinuz" {
		return k
	}
	dir := filepath.Dir(k.Image)
	data, err := os.ReadFile(filepath.Join(dir, cachedKernelFile))
	if err != nil {
		return k
	}
	var c results.Kernel
	if json.Unmarshal(data, &c) != nil || c.ID != k.ID {
		return k
	}
	if k.Modules == "" {
		if st, err := os.Stat(filepath.Join(dir, "modules")); err == nil && st.IsDir() {
			k.Modules = filepath.Join(dir, "modules")
		}
	}
	if k.Build != nil && k.Build.Log == "" {
		if _, err := os.Stat(filepath.Join(dir, "build.log")); err == nil {
			b := *k.Build
			b.Log = filepath.Join(dir, "build.log")
			k.Build = &b
		}
	}
	return k
}
