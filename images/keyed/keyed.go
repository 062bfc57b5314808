// Package keyed owns the way klab keeps a cached artifact: a directory
// entry that is complete or absent. An entry is built in a temporary
// directory next to its final place and renamed into it (Fill); a miss is
// made once, under a lock, after looking again (Locked); an entry goes by
// being renamed out of the way first (Discard). Cache puts these together
// for a directory of entries named by keys, directly or through an alias
// index (kernels/debian, sources/debian, libfuse, libfuse-hp,
// userspace); the store of kernels built from source (package
// images/buildstore) uses the same steps with a lock of its own.
package keyed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"klab/internal/fileio"
	"klab/internal/flock"
)

// TempPrefix starts the name of every temporary entry: one being built
// (Fill) or being removed (Discard).
const TempPrefix = ".tmp-"

// IsTemp reports whether name is a temporary entry that klab makes
// while it writes: .tmp-* (Fill, Discard) or .<file>.tmp-* (an atomic
// write of <file>).
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, TempPrefix)
}

// Cache is one directory of cached artifacts: each artifact is a
// subdirectory, complete or absent, that a key names either directly or
// through the directory's alias index, aliases.json. Every change to the
// directory is made under its lock, Dir/.lock, which `klab cache gc` takes
// too; an artifact is built in a temporary directory Dir/.tmp-* and
// renamed into place, so a failure or a crash leaves nothing that looks
// complete.
type Cache[T any] struct {
	// Dir is the directory.
	Dir string
	// What names the cache in errors: "debian kernel cache".
	What string
	// Aliased says that keys are looked up in aliases.json; otherwise a
	// key is the name of its entry (a content hash).
	Aliased bool
	// Load reads a complete entry, or fails.
	Load func(entry string) (T, error)
	// Logf prints progress; it may be nil.
	Logf func(format string, args ...any)
}

// Plan says how to make the entry for a key that missed, once the lock is
// held.
type Plan struct {
	// Name is the entry's directory name.
	Name string
	// Build fills out, an empty directory that becomes the entry; tmp is
	// scratch space next to it. Both are removed afterwards.
	Build func(ctx context.Context, tmp, out string) error
	// Aliases are further keys to point at the entry.
	Aliases []Alias
}

// Alias is an extra key for an entry.
type Alias struct {
	// Key is the key.
	Key string
	// Keep leaves a key that already names an entry as it is.
	Keep bool
}

// Get returns the entry that key names. A hit (unless refresh is set) is
// answered from the index alone and marked used (Touch). On a miss, Get
// takes the lock, looks again (another klab may have made it meanwhile),
// removes what interrupted builds left, and asks miss for a plan: the
// entry's name and how to build it. An entry of that name already there
// is reused; otherwise plan.Build fills a temporary directory, which is
// synced and renamed into place (Fill). Then the key (and plan.Aliases)
// are pointed at the entry. hit reports a hit.
func (c Cache[T]) Get(ctx context.Context, key string, refresh bool, miss func(context.Context) (Plan, error)) (v T, hit bool, err error) {
	look := func() (T, bool) { return c.Lookup(key) }
	if refresh {
		look = nil
	}
	lock := func(ctx context.Context) (func(), error) {
		if err := os.MkdirAll(c.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("%s: %w", c.What, err)
		}
		return flock.Lock(ctx, filepath.Join(c.Dir, ".lock"), func() {
			c.printf("waiting for another klab to finish fetching into %s...", c.Dir)
		})
	}
	return Locked(ctx, look, lock, func(ctx context.Context) (T, error) {
		return c.make(ctx, key, miss)
	})
}

// make makes the entry for key; the caller holds the lock.
func (c Cache[T]) make(ctx context.Context, key string, miss func(context.Context) (Plan, error)) (T, error) {
	var zero T
	RemoveTemps(c.Dir)
	plan, err := miss(ctx)
	if err != nil {
		return zero, err
	}
	if !EntryName(plan.Name) {
		return zero, fmt.Errorf("%s: bad entry name %q", c.What, plan.Name)
	}
	final := filepath.Join(c.Dir, plan.Name)
	v, err := c.Load(final)
	if err != nil {
		if err := Fill(ctx, c.Dir, plan.Name, c.What, plan.Build); err != nil {
			return zero, err
		}
		if v, err = c.Load(final); err != nil {
			return zero, fmt.Errorf("%s: the new entry %s: %w", c.What, final, err)
		}
	} else {
		Touch(final)
	}
	if !c.Aliased {
		return v, nil
	}
	if err := AddAlias(c.Dir, key, plan.Name); err != nil {
		return zero, err
	}
	for _, a := range plan.Aliases {
		if _, ok := ReadAliases(c.Dir)[a.Key]; ok && a.Keep {
			continue
		}
		if err := AddAlias(c.Dir, a.Key, plan.Name); err != nil {
			return zero, err
		}
	}
	return v, nil
}

// Lookup answers key from the directory alone and marks a hit used.
func (c Cache[T]) Lookup(key string) (T, bool) {
	var zero T
	name := key
	if c.Aliased {
		name = ReadAliases(c.Dir)[key]
	}
	if !EntryName(name) {
		return zero, false
	}
	p := filepath.Join(c.Dir, name)
	v, err := c.Load(p)
	if err != nil {
		return zero, false
	}
	Touch(p)
	return v, true
}

func (c Cache[T]) printf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
}

// Locked is the sequence every cache of klab follows to make something
// once: it answers from look when it can; otherwise it takes a lock
// (lock returns its unlock), looks again, since another klab may have
// made it meanwhile, and calls build with the lock held. hit reports an
// answer from look. A nil look always builds.
func Locked[T any](ctx context.Context, look func() (T, bool), lock func(context.Context) (unlock func(), err error), build func(context.Context) (T, error)) (v T, hit bool, err error) {
	if look != nil {
		if v, ok := look(); ok {
			return v, true, nil
		}
	}
	unlock, err := lock(ctx)
	if err != nil {
		return v, false, err
	}
	defer unlock()
	if look != nil {
		if v, ok := look(); ok {
			return v, true, nil
		}
	}
	v, err = build(ctx)
	return v, false, err
}

// Fill makes the entry dir/name through a temporary directory dir/.tmp-*:
// build fills out, an empty directory that becomes the entry, and may use
// tmp, scratch space around it. out is synced to disk and renamed into
// place, replacing an incomplete leftover of that name; tmp goes in any
// case. Fill's own errors start with what.
func Fill(ctx context.Context, dir, name, what string, build func(ctx context.Context, tmp, out string) error) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	tmp, err := os.MkdirTemp(dir, TempPrefix)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := build(ctx, tmp, out); err != nil {
		return err
	}
	if err := os.Chmod(out, 0o755); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := SyncTree(out); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	final := filepath.Join(dir, name)
	if err := os.RemoveAll(final); err != nil { // an incomplete leftover
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := os.Rename(out, final); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if d, err := os.Open(dir); err == nil { // make the rename durable
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// SyncTree fsyncs every file and directory under dir.
func SyncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&os.ModeSymlink != 0 {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", p, err)
		}
		return nil
	})
}

// EntryName reports whether name can name an entry: not empty, no path
// separator, not hidden (temporary and lock files are).
func EntryName(name string) bool {
	return name != "" && !strings.ContainsAny(name, `/\`) && !strings.HasPrefix(name, ".")
}

// The alias index: dir/aliases.json maps keys (a Debian reference's key,
// "7.3", "sid") to entry names.

func aliasFile(dir string) string { return filepath.Join(dir, "aliases.json") }

// ReadAliases returns the alias index of dir; a missing or damaged index
// is empty.
func ReadAliases(dir string) map[string]string {
	m := map[string]string{}
	if data, err := os.ReadFile(aliasFile(dir)); err == nil {
		_ = json.Unmarshal(data, &m) // a damaged index only costs a refetch
	}
	if m == nil { // the file held null
		m = map[string]string{}
	}
	return m
}

// AddAlias records key -> name in the alias index of dir; the caller
// holds the directory's lock.
func AddAlias(dir, key, name string) error {
	m := ReadAliases(dir)
	if m[key] == name {
		return nil
	}
	m[key] = name
	return writeAliases(dir, m)
}

// writeAliases replaces the alias index of dir with m.
func writeAliases(dir string, m map[string]string) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("alias index: %w", err)
	}
	if err := fileio.WriteAtomic(aliasFile(dir), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("alias index: %w", err)
	}
	return nil
}

// RemoveTemps removes the temporary entries of dir (TempPrefix). Only a
// caller that holds the lock under which every temporary entry of dir is
// made may call it: then no live build owns them.
func RemoveTemps(dir string) {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), TempPrefix) {
			os.RemoveAll(filepath.Join(dir, de.Name()))
		}
	}
}

// RemoveStaleTemps removes the temporary entries of dir (TempPrefix) last
// changed more than age ago, for a directory without a lock that guards
// them all: younger ones may belong to work that is still running.
func RemoveStaleTemps(dir string, age time.Duration) {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), TempPrefix) {
			continue
		}
		if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > age {
			os.RemoveAll(filepath.Join(dir, de.Name()))
		}
	}
}

// RemoveEntry removes the entry name of the cache directory dir and every
// alias that points to it. The caller holds dir/.lock.
func RemoveEntry(dir, name string) error {
	if !EntryName(name) {
		return fmt.Errorf("remove %s: bad entry name %q", dir, name)
	}
	if err := Discard(dir, name); err != nil {
		return err
	}
	m := ReadAliases(dir)
	n := len(m)
	for k, v := range m {
		if v == name {
			delete(m, k)
		}
	}
	if len(m) == n {
		return nil
	}
	return writeAliases(dir, m)
}

// Discard removes dir/name. A directory is renamed out of the way first,
// to a temporary name that the next fetch or gc removes, so that a
// half-removed entry is never taken for a complete one; a file or a
// symbolic link is removed. A missing entry is no error.
func Discard(dir, name string) error {
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	if !fi.IsDir() {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
		return nil
	}
	tmp := filepath.Join(dir, TempPrefix+"rm-"+strings.TrimPrefix(name, "."))
	if err := os.Rename(p, tmp); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove %s: %w", p, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// ReadDir lists dir without following a symbolic link: a link, a file
// or a missing directory lists as empty; entries that vanish meanwhile are
// left out. An error is one that reading dir gave.
func ReadDir(dir string) ([]fs.FileInfo, error) {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return nil, nil
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var fis []fs.FileInfo
	for _, de := range des {
		if fi, err := de.Info(); err == nil {
			fis = append(fis, fi)
		}
	}
	return fis, nil
}

// Touch marks a cached file or directory as used now: `klab cache gc
// --max-size` removes the least recently used entries first, by their
// modification time. Errors are ignored (a read-only cache still works).
func Touch(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}
