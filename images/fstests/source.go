package fstests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"klab/internal/filehash"
	"klab/internal/proc"
)

// Source kinds.
const (
	// KindTarball is a tar archive of an fstests tree, compressed or not.
	KindTarball = "tarball"
	// KindGit is a directory inside a git work tree.
	KindGit = "git"
	// KindDir is a plain directory.
	KindDir = "dir"
)

// wantSource says what an fstests source is, for errors about a bad one.
const wantSource = "want an fstests checkout (a directory with the check script at its top) or a tarball of one (.tar, .tar.gz, .tar.xz, .tar.bz2, .tar.zst)"

// Source is an fstests source the user named, identified by its content.
type Source struct {
	// Path is where it is, absolute.
	Path string `json:"path"`
	// Kind is KindTarball, KindGit or KindDir.
	Kind string `json:"kind"`
	// ID is the content hash: "sha256:<hex>" of a tarball's bytes, or
	// "files-sha256:<hex>" of a directory's files (see OpenSource).
	ID string `json:"id"`
	// Commit is a git work tree's HEAD; Dirty says that its files differ
	// from HEAD's (changed, added or removed files). Both are informative:
	// ID alone names the content.
	Commit string `json:"commit,omitempty"`
	Dirty  bool   `json:"dirty,omitempty"`

	// files are a directory's files, relative to Path, that ID covers and
	// that the build copies.
	files []string
}

// OpenSource checks that path is an fstests source and hashes its content.
//
// A tarball is hashed as its bytes. A directory must hold the check
// script at its top; its ID hashes the path, kind (file, executable,
// symbolic link) and content of each of its files, in path order. In a
// git work tree the files are those git tracks plus untracked ones it does
// not ignore, as they are on disk: build products of a build in place are
// left out, and uncommitted changes count. In any other directory they are
// all files but .git. The whole content is read either way (about 23 MB
// for fstests); that is cheaper than a cache miss it would otherwise hide.
func OpenSource(ctx context.Context, path string) (*Source, error) {
	if path == "" {
		return nil, fmt.Errorf("no fstests source: %s", wantSource)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("fstests source %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("fstests source %s does not exist: %s", path, wantSource)
	}
	if err != nil {
		return nil, fmt.Errorf("fstests source %s: %w", path, err)
	}
	if fi.IsDir() {
		return openDir(ctx, path, abs)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("fstests source %s is not a file or a directory: %s", path, wantSource)
	}
	if err := checkTarball(abs); err != nil {
		return nil, fmt.Errorf("fstests source %s %w: %s", path, err, wantSource)
	}
	sum, err := filehash.SHA256(abs)
	if err != nil {
		return nil, fmt.Errorf("fstests source %s: %w", path, err)
	}
	return &Source{Path: abs, Kind: KindTarball, ID: "sha256:" + sum}, nil
}

// openDir checks and hashes a source directory.
func openDir(ctx context.Context, path, abs string) (*Source, error) {
	if fi, err := os.Stat(filepath.Join(abs, "check")); err != nil || !fi.Mode().IsRegular() {
		msg := fmt.Sprintf("fstests source %s has no check script at its top: %s", path, wantSource)
		if sub := subdirWithCheck(abs); sub != "" {
			msg += fmt.Sprintf("; did you mean %s?", filepath.Join(path, sub))
		}
		return nil, errors.New(msg)
	}
	s := &Source{Path: abs, Kind: KindDir}
	files, commit, dirty, ok := gitFiles(ctx, abs)
	if ok {
		s.Kind, s.Commit, s.Dirty = KindGit, commit, dirty
	} else {
		var err error
		if files, err = walkFiles(abs); err != nil {
			return nil, fmt.Errorf("fstests source %s: %w", path, err)
		}
	}
	id, kept, err := hashFiles(abs, files)
	if err != nil {
		return nil, fmt.Errorf("fstests source %s: %w", path, err)
	}
	s.ID, s.files = "files-sha256:"+id, kept
	return s, nil
}

// subdirWithCheck returns the name of the only subdirectory of dir, when
// it holds a check script (an unpacked tarball's parent directory).
func subdirWithCheck(dir string) string {
	des, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	var subs []string
	for _, de := range des {
		if de.IsDir() {
			subs = append(subs, de.Name())
		}
	}
	if len(subs) != 1 {
		return ""
	}
	if fi, err := os.Stat(filepath.Join(dir, subs[0], "check")); err == nil && fi.Mode().IsRegular() {
		return subs[0]
	}
	return ""
}

// gitFiles lists the files of the git work tree at dir (below dir only)
// that git tracks or would track (not ignored), with HEAD and whether the
// work tree differs from it. ok is false outside a git work tree or
// without git.
func gitFiles(ctx context.Context, dir string) (files []string, commit string, dirty, ok bool) {
	run := func(args ...string) ([]byte, error) {
		return proc.Run(ctx, proc.Opts{Dir: dir, Timeout: 2 * time.Minute}, append([]string{"git"}, args...)...)
	}
	if out, err := run("rev-parse", "--is-inside-work-tree"); err != nil || strings.TrimSpace(string(out)) != "true" {
		return nil, "", false, false
	}
	out, err := run("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".")
	if err != nil {
		return nil, "", false, false
	}
	seen := map[string]bool{}
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 && !seen[string(f)] { // a conflicted file is listed per stage
			seen[string(f)] = true
			files = append(files, string(f))
		}
	}
	if head, err := run("rev-parse", "HEAD"); err == nil {
		commit = strings.TrimSpace(string(head))
	}
	if st, err := run("status", "--porcelain", "--", "."); err == nil {
		dirty = len(bytes.TrimSpace(st)) > 0
	}
	return files, commit, dirty, true
}

// walkFiles lists every file and symbolic link under dir but .git.
func walkFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != dir {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files, err
}

// hashFiles hashes the files of dir (relative paths) in path order: each
// as its path, its kind ("f" file, "x" executable, "l" symbolic link) and
// its content (a link's target), length-prefixed. Files listed but gone
// (deleted from a git work tree) and directories (git submodules) are
// left out of the hash and of kept.
func hashFiles(dir string, files []string) (sum string, kept []string, err error) {
	sorted := append([]string(nil), files...)
	sort.Strings(sorted)
	h := sha256.New()
	field := func(s string) {
		writeLen(h, int64(len(s)))
		io.WriteString(h, s)
	}
	for _, rel := range sorted {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return "", nil, err
			}
			field(rel)
			field("l")
			field(target)
		case fi.Mode().IsRegular():
			field(rel)
			kind := "f"
			if fi.Mode().Perm()&0o111 != 0 {
				kind = "x"
			}
			field(kind)
			if err := hashContent(h, p, fi.Size()); err != nil {
				return "", nil, err
			}
		default:
			continue
		}
		kept = append(kept, rel)
	}
	return hex.EncodeToString(h.Sum(nil)), kept, nil
}

// hashContent writes the length and content of file p (size bytes when
// it was listed) into h.
func hashContent(h hash.Hash, p string, size int64) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	writeLen(h, size)
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("hashing %s: %w", p, err)
	}
	if n != size {
		return fmt.Errorf("hashing %s: it changed while being read", p)
	}
	return nil
}

func writeLen(h hash.Hash, n int64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	h.Write(b[:])
}

// checkTarball reports a file that is no tar archive, by its first bytes:
// gzip, xz, bzip2 or zstd compression, or a plain tar's ustar header.
// Whether the archive is whole and holds fstests is known when it is
// unpacked.
func checkTarball(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	for _, magic := range [][]byte{
		{0x1f, 0x8b},                     // gzip
		{0xfd, '7', 'z', 'X', 'Z', 0x00}, // xz
		[]byte("BZh"),                    // bzip2
		{0x28, 0xb5, 0x2f, 0xfd},         // zstd
	} {
		if bytes.HasPrefix(head, magic) {
			return nil
		}
	}
	if n >= 262 && bytes.HasPrefix(head[257:], []byte("ustar")) {
		return nil
	}
	return errors.New("is not a tarball")
}
