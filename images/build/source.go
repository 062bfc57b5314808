package build

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"klab/images/debian"
	"klab/internal/filehash"
	"klab/internal/fileio"
	"klab/internal/option"
	"klab/internal/proc"
)

// base is the unpatched tree a build starts from.
type base struct {
	// Kind is "git", "tarball" or "debian".
	Kind string
	// ID identifies the tree's content: "git:<commit>" or
	// "sha256:<tarball hash>".
	ID string
	// Tree is how KernelBuild.Tree names it.
	Tree string
	// Commit is the git commit, for Kind "git".
	Commit string
	// SHA256 is the tarball's hash, for the other kinds.
	SHA256 string
	// GitDir is the user's tree, for Kind "git".
	GitDir string
	// Tarball is the tarball's path, for the other kinds.
	Tarball string
	// Dirty is set when the user's git tree has uncommitted changes.
	Dirty bool
}

// resolveBase identifies the source o names without unpacking it.
func resolveBase(ctx context.Context, o *Options, hashes *hashMemo) (*base, error) {
	src := o.Source
	if strings.HasPrefix(src, "debian:") {
		if o.Rev != "" {
			return nil, option.Errorf("rev", "%s: a revision needs a git tree, not %s", o.Rev, src)
		}
		d, err := debian.FetchSource(ctx, src, o.Debian)
		if err != nil {
			return nil, err
		}
		touch(filepath.Dir(d.Tarball))
		return &base{Kind: "debian", ID: "sha256:" + d.SHA256, SHA256: d.SHA256, Tarball: d.Tarball,
			Tree: "debian:" + strings.TrimPrefix(d.Package, "linux-source-") + "=" + d.Version}, nil
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", src, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("source: %w; want a git tree, a kernel tarball or debian:<series> (6.1, 6.12, 7.2, 7.3)", err)
	}
	if fi.IsDir() {
		return resolveGit(ctx, abs, o.Rev)
	}
	if o.Rev != "" {
		return nil, option.Errorf("rev", "%s: a revision needs a git tree, and %s is a file", o.Rev, src)
	}
	sum, err := hashes.sum(abs, fi)
	if err != nil {
		return nil, err
	}
	return &base{Kind: "tarball", ID: "sha256:" + sum, SHA256: sum, Tarball: abs, Tree: abs}, nil
}

// resolveGit finds the commit rev (HEAD when empty) of the git tree dir.
func resolveGit(ctx context.Context, dir, rev string) (*base, error) {
	top, err := proc.Run(ctx, proc.Opts{Dir: dir, Timeout: time.Minute, Env: append(os.Environ(), "LC_ALL=C")},
		"git", "rev-parse", "--show-toplevel")
	if err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "Makefile")); serr == nil {
			return nil, fmt.Errorf("source %s is a directory but not a git tree: klab builds a git tree at a commit, "+
				"so that your checkout is never touched; make a tarball of it (tar -C %s -czf linux.tar.gz .) or commit it to git", dir, dir)
		}
		return nil, fmt.Errorf("source %s is not a git tree: %w", dir, err)
	}
	gitDir := strings.TrimSpace(string(top))
	if rev == "" {
		rev = "HEAD"
	}
	out, err := proc.Run(ctx, proc.Opts{Dir: gitDir, Timeout: time.Minute}, "git", "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return nil, option.Errorf("rev", "%s: no such commit in %s", rev, gitDir)
	}
	commit := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(gitDir, "Kconfig")); err != nil && rev == "HEAD" {
		return nil, fmt.Errorf("source %s: not a kernel tree (no Kconfig at its top)", gitDir)
	}
	b := &base{Kind: "git", ID: "git:" + commit, Commit: commit, GitDir: gitDir, Tree: gitDir}
	if rev == "HEAD" {
		// Only the committed tree is built; say so when there is more.
		if _, err := proc.Run(ctx, proc.Opts{Dir: gitDir, Timeout: time.Minute}, "git", "diff-index", "--quiet", "HEAD", "--"); err != nil {
			b.Dirty = true
		} else if out, err := proc.Run(ctx, proc.Opts{Dir: gitDir, Timeout: time.Minute}, "git", "ls-files", "--others", "--exclude-standard"); err == nil && len(bytes.TrimSpace(out)) > 0 {
			b.Dirty = true
		}
	}
	return b, nil
}

// maxWorktreeDiff bounds the uncommitted changes --dirty carries into a
// build.
const maxWorktreeDiff = 256 << 20

// worktreePatch returns the uncommitted changes of the git tree dir as one
// patch: `git diff HEAD` of the tracked files, then each untracked file
// that .gitignore does not exclude as a new file. Git is run so that it
// does not even refresh the index (GIT_OPTIONAL_LOCKS=0).
func worktreePatch(ctx context.Context, dir string) (Patch, error) {
	env := append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
	run := func(okCodes []int, args ...string) ([]byte, error) {
		out, err := proc.Run(ctx, proc.Opts{Dir: dir, Env: env, Timeout: 5 * time.Minute}, append([]string{"git"}, args...)...)
		if err != nil {
			var pe *proc.Error
			if errors.As(err, &pe) && slices.Contains(okCodes, pe.ExitCode) {
				return out, nil
			}
			return nil, fmt.Errorf("the uncommitted changes of %s: git %s: %w", dir, args[0], err)
		}
		return out, nil
	}
	diff, err := run(nil, "diff", "--binary", "--no-color", "--no-ext-diff", "--no-textconv", "--full-index", "HEAD", "--")
	if err != nil {
		return Patch{}, err
	}
	others, err := run(nil, "ls-files", "-z", "--others", "--exclude-standard")
	if err != nil {
		return Patch{}, err
	}
	var b bytes.Buffer
	b.Write(diff)
	for _, f := range strings.Split(string(others), "\x00") {
		if f == "" {
			continue
		}
		// git diff --no-index exits 1 when the files differ, as they do.
		out, err := run([]int{1}, "diff", "--no-index", "--binary", "--no-color", "--no-ext-diff", "--full-index", "--", "/dev/null", f)
		if err != nil {
			return Patch{}, err
		}
		b.Write(out)
		if b.Len() > maxWorktreeDiff {
			return Patch{}, fmt.Errorf("the uncommitted changes of %s pass %d MiB (untracked %s?): commit or .gitignore what is not source", dir, maxWorktreeDiff>>20, f)
		}
	}
	p := newPatch(dir, b.Bytes())
	p.Path = dir + " (uncommitted changes)"
	p.File = ""
	p.Subject = "uncommitted changes of " + dir
	return p, nil
}

// unpack creates the tree of b at dst (which must not exist), through a
// temporary directory next to it.
func (b *base) unpack(ctx context.Context, dst string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".tmp-src-")
	if err != nil {
		return fmt.Errorf("work tree: %w", err)
	}
	defer os.RemoveAll(tmp)
	switch b.Kind {
	case "git":
		// A clone that borrows the user's objects (--shared): nothing is
		// copied, and the user's repository and checkout stay untouched.
		tree := filepath.Join(tmp, "src")
		if _, err := git(ctx, tmp, "clone", "--quiet", "--shared", "--no-checkout", b.GitDir, tree); err != nil {
			return fmt.Errorf("cloning %s: %w", b.GitDir, err)
		}
		if _, err := git(ctx, tree, "checkout", "--quiet", "--detach", b.Commit); err != nil {
			return fmt.Errorf("checking out %s: %w", b.Commit, err)
		}
		return os.Rename(tree, dst)
	default:
		x := filepath.Join(tmp, "x")
		if err := os.Mkdir(x, 0o755); err != nil {
			return fmt.Errorf("work tree: %w", err)
		}
		argv := []string{"tar", "-x", "--no-same-owner", "-f", b.Tarball, "-C", x}
		if strings.HasSuffix(b.Tarball, ".xz") || strings.HasSuffix(b.Tarball, ".txz") {
			// Debian's tarballs have many xz blocks: unpack them on every
			// CPU.
			argv = append(argv, "--use-compress-program=xz -T0")
		}
		if _, err := proc.Run(ctx, proc.Opts{Timeout: 30 * time.Minute}, argv...); err != nil {
			return fmt.Errorf("unpacking %s: %w", b.Tarball, err)
		}
		root := x
		if des, err := os.ReadDir(x); err == nil && len(des) == 1 && des[0].IsDir() {
			root = filepath.Join(x, des[0].Name())
		}
		for _, f := range []string{"Makefile", "Kconfig", "scripts/kconfig/merge_config.sh"} {
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				return fmt.Errorf("%s does not hold a kernel tree: no %s at its top", b.Tarball, f)
			}
		}
		if err := os.Rename(root, dst); err != nil {
			return fmt.Errorf("work tree: %w", err)
		}
		return nil
	}
}

// hashMemo remembers tarball hashes by path, size and modification time,
// so that a cache hit does not read a large tarball again.
type hashMemo struct {
	path    string
	mu      sync.Mutex // guards m and changed
	m       map[string]string
	changed bool
}

func newHashMemo(path string) *hashMemo {
	h := &hashMemo{path: path, m: map[string]string{}}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &h.m) // a damaged memo only costs a re-hash
	}
	if h.m == nil { // the file held null
		h.m = map[string]string{}
	}
	return h
}

func (h *hashMemo) sum(path string, fi fs.FileInfo) (string, error) {
	key := fmt.Sprintf("%s|%d|%d", path, fi.Size(), fi.ModTime().UnixNano())
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.m[key]; ok {
		return s, nil
	}
	s, err := filehash.SHA256(path)
	if err != nil {
		return "", err
	}
	h.m[key] = s
	h.changed = true
	return s, nil
}

// save writes the memo if it learnt a hash: after a build that worked, so
// that a failed one leaves nothing in the cache.
func (h *hashMemo) save() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.changed {
		return
	}
	if data, err := json.Marshal(h.m); err == nil {
		if err := os.MkdirAll(filepath.Dir(h.path), 0o755); err == nil {
			_ = fileio.WriteAtomic(h.path, data, 0o644)
		}
	}
	h.changed = false
}

// touch marks a cache entry as used now, for gc.
func touch(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now) // best effort: gc only orders by it
}
