package build

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"klab/internal/filehash"
	"klab/internal/fileio"
	"klab/internal/units"
)

// A build keeps its work trees, tarball hashes (hashes.json) and cold
// build estimates (estimates.json) in the store of built kernels, whose
// layout package images/buildstore owns; what a work tree holds is this
// package's:
//
//	work/<slot>/     src/ (the tree with the current patches), out/ (make
//	                 O=), state.json, build.log, .lock
//
// A slot is kept per source and config (SlotKey). For a git source the
// source is the repository, not the commit: its slot's clone moves from
// commit to commit, and make in out/ recompiles only what the move changed.

// recipe changes whenever the way klab builds changes what it produces.
const recipe = "klab-build-1"

// Inputs are everything that decides what a build produces, known before
// the tree is unpacked.
type Inputs struct {
	// Arch is the kernel architecture (x86_64).
	Arch string
	// Base is the tree's identity ("git:<commit>" or "sha256:<hex>").
	Base string
	// Line is the repository a git Base comes from ("repo:<top-level
	// directory>"), empty for other sources. Only SlotKey uses it: the
	// work tree of a repository follows it from commit to commit, while
	// results stay keyed by the commit.
	Line string
	// BaseConfig is the make target the fragments are merged onto.
	BaseConfig string
	// Fragments are the SHA-256 of each fragment, in order.
	Fragments []string
	// Patches are the SHA-256 of each patch, in order.
	Patches []string
	// Compiler is the compiler's and linker's version.
	Compiler string
}

// hashFields hashes fields unambiguously (each is length-prefixed).
func hashFields(fields ...string) string {
	h := sha256.New()
	for _, f := range fields {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		io.WriteString(h, f)
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// SlotKey names the work tree: the source (a git repository's Line, else
// the base tree) and everything that shapes its config, but not the
// patches nor a git commit, so that builds of different series, and of
// different commits of one repository, with one config share it and
// recompile only what changed.
func (in Inputs) SlotKey() string {
	tree := in.Base
	if in.Line != "" {
		tree = in.Line
	}
	return hashFields(join(list(recipe, "slot", in.Arch, tree, in.BaseConfig), list(in.Fragments...), list(in.Compiler))...)
}

// InputKey is the key of everything that decides the result; a build with
// the same InputKey is a cache hit without touching the tree.
func (in Inputs) InputKey() string {
	return hashFields(join(list(recipe, "input", in.Arch, in.Base, in.BaseConfig), list(in.Fragments...),
		list(in.Patches...), list(in.Compiler))...)
}

// ResultKey is the key of a finished build: the base tree, the patch
// contents, the merged .config and the compiler. Two sets of fragments
// that merge to the same .config share a result.
func ResultKey(arch, baseID string, patches []string, configSHA, compiler string) string {
	return hashFields(join(list(recipe, "result", arch, baseID), list(patches...), list(configSHA, compiler))...)
}

// list is a list of key fields preceded by its length, so that lists of
// different lengths never hash alike.
func list(fields ...string) []string {
	return append([]string{strconv.Itoa(len(fields))}, fields...)
}

func join(lists ...[]string) []string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// estimate is how many kbuild steps a cold build of a config took, as the
// estimates file path remembers it; 0 when unknown.
func estimate(path, cfgKey string) int {
	m := map[string]int{}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &m)
	}
	return m[cfgKey]
}

// saveEstimate remembers in the estimates file p that a cold build of a
// config took steps kbuild steps.
func saveEstimate(p, cfgKey string, steps int) {
	m := map[string]int{}
	if data, err := os.ReadFile(p); err == nil {
		_ = json.Unmarshal(data, &m)
	}
	if m == nil { // the file held null
		m = map[string]int{}
	}
	m[cfgKey] = steps
	if data, err := json.Marshal(m); err == nil {
		_ = fileio.WriteAtomic(p, data, 0o644)
	}
}

// slotState is a work tree's state.json.
type slotState struct {
	// Base is the identity of the tree src holds without patches; in a
	// git work tree, the commit it is at ("git:<commit>").
	Base string `json:"base"`
	// Git is true when src is a git clone (patches go in with git am,
	// and the clone moves between the repository's commits).
	Git bool `json:"git"`
	// Applied are the SHA-256 of the patches applied to src, in order.
	Applied []string `json:"applied"`
	// Busy is set while src is being changed (patched, reverted or moved
	// to another commit). A work tree found busy was left so by a build
	// that died: the next one reverts it (a git tree is reset to its
	// commit, or to MovingTo, and cleaned), or unpacks it again when that
	// fails.
	Busy bool `json:"busy"`
	// MovingTo is the base ("git:<commit>") a git work tree is being
	// moved to from Base. It is saved, with Busy, before the move touches
	// src, so that a build killed half-way through the checkout leaves a
	// known target behind.
	MovingTo string `json:"moving_to,omitempty"`
	// Files holds, for every file klab's patching ever touched, its
	// content hash and mtime as make last saw them. Restoring that mtime
	// when the content is the same again keeps make from recompiling it.
	Files map[string]fileStamp `json:"files"`
	// Orig holds the unpatched content's hash of every touched file of a
	// tree that is not git (the content itself is in orig/). Written
	// even when empty, and made on load, so that a state written by one
	// klab process is usable by the next.
	Orig map[string]fileStamp `json:"orig"`
	// ConfigFor is the key of the inputs the current out/.config was
	// made from.
	ConfigFor string `json:"config_for,omitempty"`
	// MakeStarted is set (Unix nanoseconds) while make runs. Found set,
	// make was killed and may have left a half-written object behind.
	MakeStarted int64 `json:"make_started,omitempty"`
}

// fileStamp is a file's content hash (empty for a missing file) and mtime.
type fileStamp struct {
	SHA256 string `json:"sha256,omitempty"`
	Mtime  int64  `json:"mtime,omitempty"`
}

func stampOf(path string) fileStamp {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return fileStamp{}
	}
	sum, err := filehash.SHA256(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{SHA256: sum, Mtime: fi.ModTime().UnixNano()}
}

func readState(path string) (*slotState, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var st slotState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Files == nil {
		st.Files = map[string]fileStamp{}
	}
	if st.Orig == nil {
		st.Orig = map[string]fileStamp{}
	}
	return &st, nil
}

func (st *slotState) save(path string) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return fileio.WriteAtomic(path, data, 0o644)
}

// ParseSize parses a size such as "20G", "500M", "1.5T" or "1048576"
// (bytes; K, M, G and T are powers of 1024, and a trailing "B" or "iB" is
// allowed).
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := float64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional K, M, G or T suffix, e.g. 20G", s)
	}
	return int64(f * mult), nil
}

// HumanSize formats n bytes in binary units: "2.5 MiB", "20.0 GiB".
func HumanSize(n int64) string { return units.Bytes(n) }
