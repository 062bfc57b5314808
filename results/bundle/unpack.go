package bundle

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
)

// ErrBad is wrapped by every error Unpack returns for a damaged, edited
// or hostile bundle (as against an error of this machine, such as a full
// disk).
var ErrBad = errors.New("bad bundle")

// UnpackOptions say how Unpack reads a bundle.
type UnpackOptions struct {
	// Limits bound the bundle; the zero value means DefaultLimits.
	Limits Limits
	// SkipBlobs verifies the artefacts' hashes but does not write them:
	// for reading the results only.
	SkipBlobs bool
}

// badf returns an error wrapping ErrBad.
func badf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBad, fmt.Sprintf(format, args...))
}

// Unpack verifies the bundle file and creates the directory dest holding
// bundle.json, run/ (a matrix tree's bundle: tree/) and (unless
// opts.SkipBlobs) blobs/sha256/. dest must
// not exist. The bundle is extracted into a temporary directory next to
// dest and renamed into place only when every member has been verified;
// on any error the temporary directory is removed and dest is not
// created. Errors for a bad bundle wrap ErrBad and name the member.
func Unpack(file, dest string, opts UnpackOptions) (*Index, error) {
	lim := opts.Limits
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	if _, err := os.Lstat(dest); err == nil {
		return nil, fmt.Errorf("unpack %s: %s exists already", file, dest)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("unpack: %w", err)
	}
	defer f.Close()
	tmp, err := os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".unpack-*")
	if err != nil {
		return nil, fmt.Errorf("unpack %s: %w", file, err)
	}
	ix, err := extract(f, tmp, lim, opts.SkipBlobs)
	if err == nil {
		err = os.Rename(tmp, dest)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("unpack %s: %w", file, err)
	}
	return ix, nil
}

// ReadIndex reads and checks the index of the bundle file, its first
// member, without reading the rest: what the bundle says it holds, not
// yet verified (Unpack verifies it). Errors for a bad bundle wrap ErrBad.
func ReadIndex(file string, lim Limits) (*Index, error) {
	if lim == (Limits{}) {
		lim = DefaultLimits
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	defer f.Close()
	zr, err := newZstdReader(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	defer zr.Close()
	ix, _, err := readIndex(tar.NewReader(zr), lim)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	return ix, nil
}

// newZstdReader reads a bundle's zstd stream with bounded memory.
func newZstdReader(r io.Reader) (*zstd.Decoder, error) {
	return zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(64<<20))
}

// readIndex reads the first member of tr, bundle.json, and checks it; it
// returns the index and its bytes.
func readIndex(tr *tar.Reader, lim Limits) (*Index, []byte, error) {
	hdr, err := tr.Next()
	if err != nil {
		return nil, nil, badf("member %s: %v: the file is damaged, or not a klab bundle (a zstd-compressed tar)", IndexName, err)
	}
	if hdr.Name != IndexName || !isRegular(hdr) {
		return nil, nil, badf("first member is %q, want %s", hdr.Name, IndexName)
	}
	if hdr.Size > lim.MaxIndex {
		return nil, nil, badf("%s: %d bytes, at most %d allowed", IndexName, hdr.Size, lim.MaxIndex)
	}
	data, err := io.ReadAll(io.LimitReader(tr, lim.MaxIndex))
	if err != nil {
		return nil, nil, badf("%s: %v", IndexName, err)
	}
	ix, err := decodeIndex(data)
	if err != nil {
		return nil, nil, badf("%v", err)
	}
	if err := ix.Check(lim); err != nil {
		return nil, nil, badf("%v", err)
	}
	return ix, data, nil
}

// extract reads the archive r into dir, verifying it against its index.
func extract(r io.Reader, dir string, lim Limits, skipBlobs bool) (*Index, error) {
	zr, err := newZstdReader(r)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	ix, data, err := readIndex(tr, lim)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, IndexName), data, 0o644); err != nil {
		return nil, err
	}
	listed := make(map[string]Member, len(ix.Members))
	for _, m := range ix.Members {
		listed[m.Name] = m
	}
	seen := make(map[string]bool, len(ix.Members))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, badf("after %d members: %v", len(seen), err)
		}
		name := hdr.Name
		m, ok := listed[name]
		if !ok {
			if err := validRel(name, lim.MaxName); err != nil {
				return nil, badf("member %q: %v", name, err)
			}
			if !isRegular(hdr) {
				return nil, badf("member %s: %s, and a bundle holds only regular files", name, typeName(hdr.Typeflag))
			}
			return nil, badf("member %s: not listed in %s", name, IndexName)
		}
		if !isRegular(hdr) {
			return nil, badf("member %s: %s, and a bundle holds only regular files", name, typeName(hdr.Typeflag))
		}
		if seen[name] {
			return nil, badf("member %s: appears twice", name)
		}
		seen[name] = true
		if hdr.Size != m.Size {
			return nil, badf("member %s: %d bytes, %s says %d", name, hdr.Size, IndexName, m.Size)
		}
		var w io.Writer = io.Discard
		var out *os.File
		if !(skipBlobs && len(name) > len(BlobPrefix) && name[:len(BlobPrefix)] == BlobPrefix) {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, fmt.Errorf("member %s: %w", name, err)
			}
			out, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return nil, fmt.Errorf("member %s: %w", name, err)
			}
			w = out
		}
		sum := sha256.New()
		n, err := io.Copy(io.MultiWriter(w, sum), io.LimitReader(tr, m.Size))
		if out != nil {
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return nil, badf("member %s: %v", name, err)
		}
		if n != m.Size {
			return nil, badf("member %s: truncated at %d of %d bytes", name, n, m.Size)
		}
		if got := hex.EncodeToString(sum.Sum(nil)); got != m.SHA256 {
			return nil, badf("member %s: SHA-256 %s, %s says %s: the bundle is damaged or was edited", name, got, IndexName, m.SHA256)
		}
	}
	for _, m := range ix.Members {
		if !seen[m.Name] {
			return nil, badf("member %s: listed in %s but missing from the archive", m.Name, IndexName)
		}
	}
	return ix, nil
}

// isRegular reports whether h is a regular file.
func isRegular(h *tar.Header) bool {
	return h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeRegA //nolint:staticcheck // old tars write TypeRegA
}

// typeName names a tar entry type for errors.
func typeName(t byte) string {
	switch t {
	case tar.TypeLink:
		return "a hard link"
	case tar.TypeSymlink:
		return "a symbolic link"
	case tar.TypeChar, tar.TypeBlock:
		return "a device"
	case tar.TypeFifo:
		return "a FIFO"
	case tar.TypeDir:
		return "a directory entry"
	}
	return fmt.Sprintf("an entry of type %q", t)
}
