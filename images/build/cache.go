package build

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"klab/images"
	"klab/internal/filehash"
	"klab/internal/fileio"
	"klab/internal/units"
	"klab/results"
)

// The build cache lives in images.BuiltKernelsDir(cache):
//
//	results/<key>/   finished kernels (see images.BuiltKernelsDir)
//	names/<name>     -> ../results/<key>
//	inputs/<key>     -> ../results/<key>: the inputs that made a result,
//	                 so a repeated build is answered without the tree
//	work/<slot>/     one work tree per base tree and config: src/ (the
//	                 tree with the current patches), out/ (make O=),
//	                 state.json, build.log, .lock
//	hashes.json      tarball hashes by path, size and mtime
//	estimates.json   steps of a cold build by config, for the progress bar

// recipe changes whenever the way klab builds changes what it produces.
const recipe = "klab-build-1"

// Inputs are everything that decides what a build produces, known before
// the tree is unpacked.
type Inputs struct {
	// Arch is the kernel architecture (x86_64).
	Arch string
	// Base is the tree's identity ("git:<commit>" or "sha256:<hex>").
	Base string
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

// SlotKey names the work tree: the base tree and everything that shapes
// its config, but not the patches, so that builds of different series on
// one tree and config share it and recompile only what changed.
func (in Inputs) SlotKey() string {
	return hashFields(join(list(recipe, "slot", in.Arch, in.Base, in.BaseConfig), list(in.Fragments...), list(in.Compiler))...)
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

// store is the on-disk build cache.
type store struct {
	dir string
}

func (s *store) results() string             { return filepath.Join(s.dir, "results") }
func (s *store) work(slot string) string     { return filepath.Join(s.dir, "work", slot) }
func (s *store) inputLink(key string) string { return filepath.Join(s.dir, "inputs", key) }
func (s *store) nameLink(name string) string { return filepath.Join(s.dir, "names", name) }

// lookupInput returns the result the input key led to, if it is still
// there.
func (s *store) lookupInput(key string) (*results.Kernel, string, bool) {
	dir, err := filepath.EvalSymlinks(s.inputLink(key))
	if err != nil {
		return nil, "", false
	}
	k, err := images.LoadBuiltKernelDir(dir)
	if err != nil {
		return nil, "", false
	}
	return k, dir, true
}

// link points the symbolic link at path to results/<key>, atomically.
func (s *store) link(path, key string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-"+strconv.Itoa(os.Getpid()))
	os.Remove(tmp)
	if err := os.Symlink(filepath.Join("..", "results", key), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// linkTarget returns the result key a link points to, "" when none.
func linkTarget(path string) string {
	t, err := os.Readlink(path)
	if err != nil {
		return ""
	}
	return filepath.Base(t)
}

// estimates remembers how many kbuild steps a cold build of a config took.
func (s *store) estimate(cfgKey string) int {
	m := map[string]int{}
	if data, err := os.ReadFile(filepath.Join(s.dir, "estimates.json")); err == nil {
		_ = json.Unmarshal(data, &m)
	}
	return m[cfgKey]
}

func (s *store) saveEstimate(cfgKey string, steps int) {
	m := map[string]int{}
	p := filepath.Join(s.dir, "estimates.json")
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
	// Base is the tree's identity.
	Base string `json:"base"`
	// Git is true when src is a git clone (patches go in with git am).
	Git bool `json:"git"`
	// Applied are the SHA-256 of the patches applied to src, in order.
	Applied []string `json:"applied"`
	// Busy is set while src is being changed; a work tree found busy
	// without its lock held is rebuilt from scratch.
	Busy bool `json:"busy"`
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

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// removeAll removes a directory by renaming it out of the way first, so
// that a half-removed entry is never mistaken for a complete one.
func removeAll(p string) error {
	tmp := filepath.Join(filepath.Dir(p), ".tmp-rm-"+filepath.Base(p))
	if err := os.Rename(p, tmp); err != nil {
		return err
	}
	return os.RemoveAll(tmp)
}

// unlinkResult removes the names and input links that point to key.
func (s *store) unlinkResult(key string) {
	for _, d := range []string{"names", "inputs"} {
		des, _ := os.ReadDir(filepath.Join(s.dir, d))
		for _, de := range des {
			p := filepath.Join(s.dir, d, de.Name())
			if linkTarget(p) == key {
				os.Remove(p)
			}
		}
	}
}

// Remove deletes the built kernels refs name ("build:<name>" or
// "<name>"). A kernel's files go when no other name refers to them. It
// returns the results directories removed.
func Remove(cacheDir string, refs []string) ([]string, error) {
	s := &store{dir: images.BuiltKernelsDir(cacheDir)}
	var errs []error
	var removed []string
	for _, ref := range refs {
		name := strings.TrimPrefix(ref, "build:")
		if err := images.CheckBuildName(name); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
			continue
		}
		link := s.nameLink(name)
		key := linkTarget(link)
		if key == "" {
			errs = append(errs, fmt.Errorf("%s: no built kernel by that name (see klab kernels list)", ref))
			continue
		}
		if err := os.Remove(link); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
			continue
		}
		still := false
		des, _ := os.ReadDir(filepath.Join(s.dir, "names"))
		for _, de := range des {
			if linkTarget(s.nameLink(de.Name())) == key {
				still = true
			}
		}
		if still {
			continue
		}
		s.unlinkResult(key)
		p := filepath.Join(s.results(), key)
		if err := removeAll(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// HumanSize formats n bytes in binary units: "2.5 MiB", "20.0 GiB".
func HumanSize(n int64) string { return units.Bytes(n) }
