// Package bundle owns run bundles: one zstd-compressed tar file that holds a
// run directory and, unless it is results-only, the kernel artefacts the
// run's manifest names (images, configs, module trees, and for a kernel
// built from source its build log, patches and config fragments), so that
// the run can be read, compared and repeated on another machine after the
// original cache is gone. A bundle of kind KindMatrix holds a matrix
// results tree instead: every file of the tree, and the artefacts of the
// kernels of all its cells' runs, each kernel and each blob once.
//
// A bundle's first member is bundle.json (Index): the schema, the run (or
// the tree and its cells), the klab version that packed it, and every
// other member with its size and SHA-256. The run's files follow under
// run/ (a tree's under tree/), then the artefacts, stored once each by
// content under blobs/sha256/<hex>; Index.Kernels maps each kernel of the
// manifests to its blobs and the relative paths they take.
//
// Pack refuses a file that changes while it is being packed. Unpack treats
// a bundle as untrusted input: it bounds sizes, counts and names, refuses
// links, devices, escaping, duplicate, unlisted and missing members and any
// hash mismatch, and places nothing until every member has been verified.
package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"klab/results"
)

// Schema is the value of Index.Schema of a run's bundle. A v1 bundle has
// no Kind and holds a run; Pack writes v1, so that an older klab reads
// the bundles of runs.
const Schema = "klab.bundle/v1"

// SchemaV2 is the value of Index.Schema of a bundle with a Kind: v1 with
// Kind and Tree added. PackTree writes it; an older klab refuses it by
// its schema rather than misreading it.
const SchemaV2 = "klab.bundle/v2"

// Kinds of bundle (Index.Kind, in a v2 bundle).
const (
	// KindRun is a run's bundle, as every v1 bundle is.
	KindRun = "run"
	// KindMatrix is a matrix results tree's bundle.
	KindMatrix = "matrix"
)

// IndexName is the name of the first member, the bundle's Index.
const IndexName = "bundle.json"

// Member name prefixes: the run directory's files, a matrix results
// tree's files, and the artefacts by content.
const (
	RunPrefix  = "run/"
	TreePrefix = "tree/"
	BlobPrefix = "blobs/sha256/"
)

// Extension is the file name ending klab gives bundles.
const Extension = ".klab.tar.zst"

// Roles of a kernel's files (KernelFile.Role).
const (
	RoleImage    = "image"
	RoleConfig   = "config"
	RoleModule   = "module"
	RoleBuildLog = "build-log"
	RolePatch    = "patch"
	RoleFragment = "fragment"
)

// Index is bundle.json: what the bundle holds.
type Index struct {
	// Schema is Schema or SchemaV2.
	Schema string `json:"schema"`
	// Kind is KindRun or KindMatrix in a v2 bundle, and empty in a v1
	// bundle, which holds a run.
	Kind string `json:"kind,omitempty"`
	// RunID is the packed run's id (its directory's name); empty in a
	// matrix tree's bundle.
	RunID string `json:"run_id,omitempty"`
	// Tree is the packed matrix results tree; nil in a run's bundle.
	Tree *Tree `json:"tree,omitempty"`
	// KlabVersion is the version line of the klab that packed it.
	KlabVersion string `json:"klab_version,omitempty"`
	// Created is when the bundle was packed.
	Created time.Time `json:"created"`
	// ResultsOnly is set for a bundle without artefacts.
	ResultsOnly bool `json:"results_only,omitempty"`
	// Members are every member after bundle.json, in archive order.
	Members []Member `json:"members"`
	// Kernels are the manifest's kernels (a tree's: those of every
	// cell's run, once each by id) and the blobs that hold their files;
	// empty for a results-only bundle.
	Kernels []Kernel `json:"kernels,omitempty"`
	// Initramfs are the initramfs images the run booted, as its manifest
	// records them: the agent and every host program the guest received
	// (fio, perf, libfuse servers with their libraries), byte for byte.
	// Empty for a results-only bundle.
	Initramfs []InitramfsFile `json:"initramfs,omitempty"`
	// Missing names artefacts the manifest names that were not on the
	// packing machine (a patch file moved away since the build, say).
	Missing []string `json:"missing,omitempty"`
}

// InitramfsFile is one initramfs image of the run.
type InitramfsFile struct {
	// Path is where the packing machine kept it, as the manifest says.
	Path string `json:"path"`
	// Key is the manifest's sha256 of it: the hash of what went into it
	// (base, agent, modules, host programs), which names its file.
	Key string `json:"key,omitempty"`
	// Blob is the member that holds it (blobs/sha256/<hex>), whose hash
	// is the manifest's.
	Blob string `json:"blob"`
}

// Member is one archive member after bundle.json.
type Member struct {
	// Name is the member's path in the archive: run/... (tree/... in a
	// matrix tree's bundle) or blobs/sha256/<hex>.
	Name string `json:"name"`
	// Size is its length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the lower-case hex SHA-256 of its content.
	SHA256 string `json:"sha256"`
}

// Kernel is one kernel of the run's manifest and the blobs of its files.
type Kernel struct {
	// Ref is the kernel as asked ("debian:7.3", "build:fix").
	Ref string `json:"ref"`
	// Kernel is the kernel as the manifest recorded it, with the paths
	// of the packing machine.
	Kernel results.Kernel `json:"kernel"`
	// Files are its files, each a blob and the relative path it takes in
	// the kernel's directory once unpacked.
	Files []KernelFile `json:"files"`
}

// KernelFile is one file of a kernel.
type KernelFile struct {
	// Path is the file's path relative to the kernel's directory:
	// "vmlinuz", "config", "build.log", "modules/...", "patches/...",
	// "fragments/...".
	Path string `json:"path"`
	// Role is one of the Role constants.
	Role string `json:"role"`
	// Blob is the member that holds the content (blobs/sha256/<hex>).
	Blob string `json:"blob"`
}

// Limits bound what Unpack accepts.
type Limits struct {
	// MaxIndex is the largest bundle.json, in bytes.
	MaxIndex int64
	// MaxMembers is the most members after bundle.json.
	MaxMembers int
	// MaxMember is the largest member, in bytes.
	MaxMember int64
	// MaxTotal is the largest sum of the members' sizes, in bytes.
	MaxTotal int64
	// MaxName is the longest member name or kernel file path, in bytes.
	MaxName int
}

// DefaultLimits are the limits Unpack applies when given none: room for
// a run with a few distribution kernels and their module trees.
var DefaultLimits = Limits{
	MaxIndex:   64 << 20,
	MaxMembers: 200_000,
	MaxMember:  4 << 30,
	MaxTotal:   32 << 30,
	MaxName:    1024,
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// validRel reports whether p is a clean relative slash path of at most max
// bytes: no leading '/', no empty, "." or ".." elements, no backslash and
// no control characters.
func validRel(p string, max int) error {
	if p == "" {
		return errors.New("empty name")
	}
	if len(p) > max {
		return fmt.Errorf("name of %d bytes, at most %d allowed", len(p), max)
	}
	if strings.HasPrefix(p, "/") {
		return errors.New("absolute path")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return errors.New("control character or backslash in the name")
		}
	}
	for _, e := range strings.Split(p, "/") {
		switch e {
		case "..":
			return errors.New("path leaves the destination (..)")
		case "", ".":
			return errors.New("path is not clean (empty or . element)")
		}
	}
	if path.Clean(p) != p {
		return errors.New("path is not clean")
	}
	return nil
}

// checkMemberName checks a member name: <prefix><clean path> (prefix is
// RunPrefix or TreePrefix) or blobs/sha256/<hex> whose hex is the
// member's hash.
func checkMemberName(m Member, max int, prefix string) error {
	if err := validRel(m.Name, max); err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(m.Name, prefix):
		return nil
	case strings.HasPrefix(m.Name, BlobPrefix):
		if h := strings.TrimPrefix(m.Name, BlobPrefix); h != m.SHA256 {
			return errors.New("a blob's name is not its content's SHA-256")
		}
		return nil
	}
	return fmt.Errorf("want a name under %s or %s", prefix, BlobPrefix)
}

// IsMatrix reports whether the bundle holds a matrix results tree.
func (ix *Index) IsMatrix() bool { return ix.Kind == KindMatrix }

// checkSchema checks the schema and the kind: a bundle that this klab
// cannot read says only that, and nothing else of it is checked.
func (ix *Index) checkSchema() error {
	switch ix.Schema {
	case Schema:
		if ix.Kind != "" {
			return fmt.Errorf("%s: kind %q in a %s bundle, which holds a run and has no kind", IndexName, ix.Kind, Schema)
		}
	case SchemaV2:
		if ix.Kind != KindRun && ix.Kind != KindMatrix {
			return fmt.Errorf("%s: kind %q, want %s or %s (a newer klab may read it)", IndexName, ix.Kind, KindRun, KindMatrix)
		}
	default:
		return fmt.Errorf("%s: schema %q, want %q or %q (a newer klab may read it)", IndexName, ix.Schema, Schema, SchemaV2)
	}
	return nil
}

// checkKind checks what the bundle's kind needs (a run id, or a tree)
// and returns the prefix of the bundle's files.
func (ix *Index) checkKind(lim Limits) (string, []error) {
	var errs []error
	if !ix.IsMatrix() {
		if !results.ValidName(ix.RunID) {
			errs = append(errs, fmt.Errorf("%s: run id %q is not a plain name", IndexName, ix.RunID))
		}
		if ix.Tree != nil {
			errs = append(errs, fmt.Errorf("%s: a run's bundle with a tree", IndexName))
		}
		return RunPrefix, errs
	}
	if ix.RunID != "" {
		errs = append(errs, fmt.Errorf("%s: a matrix tree's bundle with a run id", IndexName))
	}
	if ix.Tree == nil {
		return TreePrefix, append(errs, fmt.Errorf("%s: a matrix tree's bundle without its tree", IndexName))
	}
	return TreePrefix, append(errs, ix.Tree.check(ix.Members, lim)...)
}

// Check validates an index against lim and returns every problem found,
// each naming the member or kernel file at fault.
func (ix *Index) Check(lim Limits) error {
	if err := ix.checkSchema(); err != nil {
		return err
	}
	prefix, errs := ix.checkKind(lim)
	if len(ix.Members) > lim.MaxMembers {
		return errors.Join(append(errs, fmt.Errorf("%s: %d members, at most %d allowed", IndexName, len(ix.Members), lim.MaxMembers))...)
	}
	seen := make(map[string]bool, len(ix.Members))
	var total int64
	for _, m := range ix.Members {
		if err := checkMemberName(m, lim.MaxName, prefix); err != nil {
			errs = append(errs, fmt.Errorf("member %q: %w", m.Name, err))
			continue
		}
		if seen[m.Name] {
			errs = append(errs, fmt.Errorf("member %s: listed twice", m.Name))
		}
		seen[m.Name] = true
		if !hexSHA256.MatchString(m.SHA256) {
			errs = append(errs, fmt.Errorf("member %s: sha256 %q is not 64 lower-case hex digits", m.Name, m.SHA256))
		}
		if m.Size < 0 || m.Size > lim.MaxMember {
			errs = append(errs, fmt.Errorf("member %s: size %d, want 0..%d", m.Name, m.Size, lim.MaxMember))
			continue
		}
		total += m.Size
	}
	for _, m := range ix.Members {
		if parent := parentListed(m.Name, seen); parent != "" {
			errs = append(errs, fmt.Errorf("member %s: %s is a file, not a directory", m.Name, parent))
		}
	}
	if total > lim.MaxTotal {
		errs = append(errs, fmt.Errorf("%s: members of %d bytes in all, at most %d allowed", IndexName, total, lim.MaxTotal))
	}
	for _, k := range ix.Kernels {
		paths := make(map[string]bool, len(k.Files))
		for _, f := range k.Files {
			if err := validRel(f.Path, lim.MaxName); err != nil {
				errs = append(errs, fmt.Errorf("kernel %s: file %q: %w", k.Kernel.ID, f.Path, err))
			}
			if f.Path == KernelInfoFile {
				errs = append(errs, fmt.Errorf("kernel %s: file %s: the name is klab's own", k.Kernel.ID, f.Path))
			}
			if paths[f.Path] {
				errs = append(errs, fmt.Errorf("kernel %s: file %s listed twice", k.Kernel.ID, f.Path))
			}
			paths[f.Path] = true
			if !strings.HasPrefix(f.Blob, BlobPrefix) || !seen[f.Blob] {
				errs = append(errs, fmt.Errorf("kernel %s: file %s: blob %q is not a member", k.Kernel.ID, f.Path, f.Blob))
			}
		}
		for _, f := range k.Files {
			if parent := parentListed(f.Path, paths); parent != "" {
				errs = append(errs, fmt.Errorf("kernel %s: file %s: %s is a file, not a directory", k.Kernel.ID, f.Path, parent))
			}
		}
		if !results.ValidName(k.Kernel.ID) {
			errs = append(errs, fmt.Errorf("kernel %q: id is not a plain name", k.Kernel.ID))
		}
	}
	for _, f := range ix.Initramfs {
		if !strings.HasPrefix(f.Blob, BlobPrefix) || !seen[f.Blob] {
			errs = append(errs, fmt.Errorf("initramfs %q: blob %q is not a member", f.Path, f.Blob))
		}
	}
	return errors.Join(errs...)
}

// parentListed returns the first directory of name (a/b of a/b/c) that
// names holds as a file, or "".
func parentListed(name string, names map[string]bool) string {
	for i := 0; i < len(name); i++ {
		if name[i] == '/' && names[name[:i]] {
			return name[:i]
		}
	}
	return ""
}

// decodeIndex decodes bundle.json.
func decodeIndex(data []byte) (*Index, error) {
	var ix Index
	if err := json.Unmarshal(data, &ix); err != nil {
		return nil, fmt.Errorf("%s: %w", IndexName, err)
	}
	return &ix, nil
}
