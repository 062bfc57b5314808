// Package buildstore owns the store of kernels built from source, the
// directory <cache>/kernels/build:
//
//	results/<key>/   one finished build (see package images/kerneldir):
//	                 vmlinuz, config, build.log, kernel.json and, when
//	                 the config has modules, modules/
//	names/<name>     a symbolic link to ../results/<key>: "build:<name>"
//	inputs/<key>     a symbolic link to ../results/<key>: the inputs that
//	                 made a result, so that a repeated build is answered
//	                 without the tree
//	work/<slot>/     one work tree per source (a tarball, or a git
//	                 repository whatever the commit) and config, guarded
//	                 by its .lock (package images/build owns what is in it)
//	hashes.json      tarball hashes by path, size and mtime (images/build)
//	estimates.json   steps of a cold build by config (images/build)
//
// A results directory is complete or absent: it is assembled next to its
// final place and renamed into it (Commit, through keyed.Fill). The store
// looks kernels up (Lookup, LookupInput), lists them (List), commits new
// ones (Commit), names them (Name) and removes them (Remove,
// RemoveResult); Entries tells `klab cache list` and both gc commands
// (package images/cache) what is in it and how each entry goes.
package buildstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"klab/images/kerneldir"
	"klab/images/keyed"
	"klab/internal/paths"
	"klab/results"
)

// staleAge is how old a temporary entry of results/ must be before a
// commit takes it for a leftover: younger ones may belong to a build that
// is still running.
const staleAge = time.Hour

// Store is the store of built kernels of one cache directory.
type Store struct {
	dir string
}

// New returns the store of the cache directory cacheDir (empty means
// paths.CacheDir()).
func New(cacheDir string) *Store {
	if cacheDir == "" {
		cacheDir = paths.CacheDir()
	}
	return &Store{dir: filepath.Join(cacheDir, "kernels", "build")}
}

// Dir is the store's directory, <cache>/kernels/build.
func (s *Store) Dir() string { return s.dir }

// ResultDir is the directory of the finished build key.
func (s *Store) ResultDir(key string) string { return filepath.Join(s.results(), key) }

// WorkDir is the work tree of slot.
func (s *Store) WorkDir(slot string) string { return filepath.Join(s.dir, "work", slot) }

// HashesFile is where package images/build remembers tarball hashes.
func (s *Store) HashesFile() string { return filepath.Join(s.dir, "hashes.json") }

// EstimatesFile is where package images/build remembers how many steps a
// cold build of a config took.
func (s *Store) EstimatesFile() string { return filepath.Join(s.dir, "estimates.json") }

func (s *Store) results() string             { return filepath.Join(s.dir, "results") }
func (s *Store) inputLink(key string) string { return filepath.Join(s.dir, "inputs", key) }
func (s *Store) nameLink(name string) string { return filepath.Join(s.dir, "names", name) }

// nameRe is what a build name may look like.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$`)

// CheckName reports whether name can name a built kernel.
func CheckName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("bad build name %q: want 1 to 100 letters, digits and . _ + -, starting with a letter or digit", name)
	}
	return nil
}

// Lookup returns the built kernel that ref names: "build:<name>" or
// "build:<kernel ID>" (k-<16 hex>). The prefix "build:" may be left out. A
// kernel found by name is marked used, so that gc keeps what is booted.
func (s *Store) Lookup(ref string) (*results.Kernel, error) {
	name := strings.TrimPrefix(ref, "build:")
	if CheckName(name) == nil {
		k, err := load(s.nameLink(name))
		if err == nil {
			k.Name = "build:" + name
			keyed.Touch(filepath.Dir(k.Image))
			return k, nil
		}
		var de *kerneldir.DamagedError
		if errors.As(err, &de) {
			return nil, fmt.Errorf("kernel %s: %w; build it again: %s", ref, err, RebuildCommand(name, de.Kernel.Build))
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("kernel %s: %w", ref, err)
		}
	}
	ks, err := s.List()
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(name, "k-") {
		for _, k := range ks {
			if k.ID == name {
				return k, nil
			}
		}
	}
	var known []string
	for _, k := range ks {
		known = append(known, k.Name)
	}
	if len(known) == 0 {
		return nil, fmt.Errorf("kernel %s: no kernels built yet; build one with: klab kernels build --source debian:7.3 --config lab --name %s", ref, name)
	}
	return nil, fmt.Errorf("kernel %s: no built kernel by that name or ID; built kernels: %s", ref, strings.Join(known, " "))
}

// List lists the built kernels by name, sorted by name. A kernel with two
// names is listed twice.
func (s *Store) List() ([]*results.Kernel, error) {
	ndir := filepath.Join(s.dir, "names")
	des, err := os.ReadDir(ndir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing built kernels: %w", err)
	}
	var ks []*results.Kernel
	for _, de := range des {
		if CheckName(de.Name()) != nil {
			continue
		}
		k, err := load(filepath.Join(ndir, de.Name()))
		if err != nil {
			continue // a dangling name: its result was collected
		}
		k.Name = "build:" + de.Name()
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
	return ks, nil
}

// load reads a results directory (or a link to one) and points the
// kernel's paths, its build log's too, into it.
func load(dir string) (*results.Kernel, error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	k, err := kerneldir.Load(dir)
	if err != nil {
		return nil, err
	}
	if k.Build != nil {
		k.Build.Log = ""
		if _, err := os.Stat(filepath.Join(dir, "build.log")); err == nil {
			k.Build.Log = filepath.Join(dir, "build.log")
		}
	}
	return k, nil
}

// LookupInput returns the finished kernel that the inputs keyed inputKey
// made, if it is still there, and marks it used. Its Name is left empty
// (see Name).
func (s *Store) LookupInput(inputKey string) (*results.Kernel, bool) {
	if !keyed.EntryName(inputKey) {
		return nil, false
	}
	k, err := load(s.inputLink(inputKey))
	if err != nil {
		return nil, false
	}
	keyed.Touch(filepath.Dir(k.Image))
	return k, true
}

// Name points names/<name> at the results directory of k, a kernel of the
// store, and names k "build:<name>".
func (s *Store) Name(name string, k *results.Kernel) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := s.link(s.nameLink(name), filepath.Base(filepath.Dir(k.Image))); err != nil {
		return err
	}
	k.Name = "build:" + name
	return nil
}

// Commit puts a finished build into the store as results/<key>, unless a
// complete one is there already: fill writes the kernel's files into out,
// an empty directory that becomes ResultDir(key), with tmp as scratch
// space (see keyed.Fill). Then inputs/<inputKey> and names/<name> point
// at it, and it is marked used. The kernel returned is "build:<name>".
func (s *Store) Commit(ctx context.Context, key, inputKey, name string, fill func(ctx context.Context, tmp, out string) error) (*results.Kernel, error) {
	if !keyed.EntryName(key) || !keyed.EntryName(inputKey) {
		return nil, fmt.Errorf("build cache: bad key %q or input key %q", key, inputKey)
	}
	if err := CheckName(name); err != nil {
		return nil, err
	}
	final := s.ResultDir(key)
	if _, err := load(final); err != nil {
		keyed.RemoveStaleTemps(s.results(), staleAge)
		if err := keyed.Fill(ctx, s.results(), key, "build cache", fill); err != nil {
			return nil, err
		}
	}
	for _, link := range []string{s.inputLink(inputKey), s.nameLink(name)} {
		if err := s.link(link, key); err != nil {
			return nil, fmt.Errorf("build cache: %w", err)
		}
	}
	keyed.Touch(final)
	k, err := load(final)
	if err != nil {
		return nil, fmt.Errorf("build cache: %w", err)
	}
	k.Name = "build:" + name
	return k, nil
}

// link points the symbolic link at path to results/<key>, atomically.
func (s *Store) link(path, key string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), keyed.TempPrefix+filepath.Base(path)+"-"+strconv.Itoa(os.Getpid()))
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

// namesOf maps result keys to the names that point at them.
func (s *Store) namesOf() map[string][]string {
	names := map[string][]string{}
	des, _ := os.ReadDir(filepath.Join(s.dir, "names"))
	for _, de := range des {
		if k := linkTarget(s.nameLink(de.Name())); k != "" {
			names[k] = append(names[k], de.Name())
		}
	}
	return names
}

// CheckRemove returns every problem Remove would meet with refs before
// it removes anything: a reference that is not build:NAME, a name that is
// not one, a name no built kernel has.
func (s *Store) CheckRemove(refs []string) error {
	var errs []error
	for _, ref := range refs {
		name, ok := strings.CutPrefix(ref, "build:")
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: klab kernels rm removes kernels built from source, named build:<name>", ref))
		case CheckName(name) != nil:
			errs = append(errs, fmt.Errorf("%s: %w", ref, CheckName(name)))
		case linkTarget(s.nameLink(name)) == "":
			errs = append(errs, fmt.Errorf("%s: no built kernel by that name (see klab kernels list)", ref))
		}
	}
	return errors.Join(errs...)
}

// Remove deletes the built kernels that refs name ("build:<name>" or
// "<name>"). A kernel's files go when no other name refers to them. It
// returns the results directories removed.
func (s *Store) Remove(refs []string) ([]string, error) {
	var errs []error
	var removed []string
	for _, ref := range refs {
		name := strings.TrimPrefix(ref, "build:")
		if err := CheckName(name); err != nil {
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
		if len(s.namesOf()[key]) > 0 {
			continue
		}
		if err := s.RemoveResult(key); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ref, err))
			continue
		}
		removed = append(removed, s.ResultDir(key))
	}
	return removed, errors.Join(errs...)
}

// RemoveResult removes the built kernel results/<key> and every name and
// input link that points to it. The result is renamed out of the way
// first (keyed.Discard), so that a half-removed kernel is never taken for
// a whole one.
func (s *Store) RemoveResult(key string) error {
	if !keyed.EntryName(key) {
		return fmt.Errorf("remove built kernel: bad key %q", key)
	}
	for _, d := range []string{"names", "inputs"} {
		des, _ := os.ReadDir(filepath.Join(s.dir, d))
		for _, de := range des {
			if p := filepath.Join(s.dir, d, de.Name()); linkTarget(p) == key {
				os.Remove(p)
			}
		}
	}
	return keyed.Discard(s.results(), key)
}

// EntryKind is what an entry of the store is.
type EntryKind int

// The kinds of entries.
const (
	// Result is a finished kernel, results/<key>.
	Result EntryKind = iota
	// WorkTree is a work tree, work/<slot>.
	WorkTree
	// Temporary is a leftover of an interrupted commit or removal:
	// .tmp-* in the store, results/ or work/.
	Temporary
	// Index is bookkeeping: names/, inputs/, the .json files, a lock.
	Index
	// Other is anything the store does not know.
	Other
)

// Entry is one thing in the store, as Entries finds it.
type Entry struct {
	// Kind is what it is.
	Kind EntryKind
	// Path is its file or directory.
	Path string
	// Info is what Lstat says of Path.
	Info fs.FileInfo
	// Names are the references that name a Result ("build:<name>"),
	// sorted.
	Names []string
	// Lock is the lock file a build holds while it uses the entry; ""
	// when there is none.
	Lock string
	// Remove removes the entry; nil for an Index or Other entry, which
	// are never removed.
	Remove func() error
}

// Entries lists everything in the store without following a symbolic
// link: results (with their names), work trees (with their locks),
// temporary leftovers, indexes and anything else. A missing store is
// empty. Directories that cannot be read are reported in the error; what
// could be read is listed.
func (s *Store) Entries() ([]Entry, error) {
	l := &lister{}
	names := map[string][]string{}
	for _, fi := range l.readDir(filepath.Join(s.dir, "names")) {
		if t := linkTarget(s.nameLink(fi.Name())); t != "" {
			names[t] = append(names[t], "build:"+fi.Name())
		}
	}
	work := filepath.Join(s.dir, "work")
	for _, fi := range l.readDir(s.dir) {
		switch name := fi.Name(); {
		case name == "results" && isDir(fi):
			l.scan(s.results(), func(key string) Entry {
				e := Entry{Kind: Result, Names: names[key], Remove: func() error { return s.RemoveResult(key) }}
				sort.Strings(e.Names)
				return e
			})
		case name == "work" && isDir(fi):
			l.scan(work, func(slot string) Entry {
				return Entry{Kind: WorkTree, Lock: filepath.Join(work, slot, ".lock"),
					Remove: func() error { return keyed.Discard(work, slot) }}
			})
		case name == "names" || name == "inputs" || strings.HasSuffix(name, ".json") || name == ".lock":
			l.add(s.dir, fi, Entry{Kind: Index})
		default:
			l.add(s.dir, fi, l.unknown(s.dir, name))
		}
	}
	return l.entries, errors.Join(l.errs...)
}

// lister collects the entries of a store.
type lister struct {
	entries []Entry
	errs    []error
}

// readDir lists dir (see keyed.ReadDir), keeping the error for the
// listing.
func (l *lister) readDir(dir string) []fs.FileInfo {
	fis, err := keyed.ReadDir(dir)
	if err != nil {
		l.errs = append(l.errs, err)
	}
	return fis
}

// scan adds the entries of dir, a directory of entries (results/, work/):
// entry makes the entry of each subdirectory that is not hidden.
func (l *lister) scan(dir string, entry func(name string) Entry) {
	for _, fi := range l.readDir(dir) {
		if isDir(fi) && keyed.EntryName(fi.Name()) {
			l.add(dir, fi, entry(fi.Name()))
		} else {
			l.add(dir, fi, l.unknown(dir, fi.Name()))
		}
	}
}

// unknown is the entry of dir/name when the layout does not name it: a
// temporary leftover, or something else.
func (l *lister) unknown(dir, name string) Entry {
	if keyed.IsTemp(name) {
		return Entry{Kind: Temporary, Remove: func() error { return keyed.Discard(dir, name) }}
	}
	return Entry{Kind: Other}
}

func (l *lister) add(dir string, fi fs.FileInfo, e Entry) {
	e.Path, e.Info = filepath.Join(dir, fi.Name()), fi
	l.entries = append(l.entries, e)
}

// isDir reports whether fi is a real directory (a link to one is not).
func isDir(fi fs.FileInfo) bool { return fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 }

// RebuildCommand is the `klab kernels build` command line that builds the
// kernel named name again from the recipe b records (its source, config
// fragments and patches), ignoring the cached result: for a kernel
// whose files were damaged on disk.
func RebuildCommand(name string, b *results.KernelBuild) string {
	args := []string{"klab", "kernels", "build"}
	if b != nil && b.Tree != "" {
		src := b.Tree
		if series, _, ok := strings.Cut(src, "="); ok && strings.HasPrefix(src, "debian:") {
			src = series // the series; the pinned version resolves the same
		}
		args = append(args, "--source", src)
		var cfg []string
		for _, f := range b.Fragments {
			cfg = append(cfg, f.Path)
		}
		if len(cfg) > 0 {
			args = append(args, "--config", strings.Join(cfg, ","))
		}
		var ps []string
		for _, p := range b.Patches {
			path, _, _ := strings.Cut(p.Path, "#")
			if !slices.Contains(ps, path) {
				ps = append(ps, path)
			}
		}
		for _, p := range ps {
			args = append(args, "--patches", p)
		}
	} else {
		args = append(args, "...")
	}
	args = append(args, "--name", name, "--rebuild")
	return strings.Join(args, " ")
}
