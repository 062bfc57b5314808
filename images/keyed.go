package images

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

// keyedCache is one directory of cached artifacts (kernels/debian,
// sources/debian, libfuse-hp, libfuse): each artifact is a subdirectory,
// complete or absent, that a key names either directly or through the
// directory's alias index, aliases.json. Every change to the directory is
// made under its lock, dir/.lock, which `klab cache gc` takes too; an
// artifact is built in a temporary directory dir/.tmp-* and renamed into
// place, so a failure or a crash leaves nothing that looks complete.
type keyedCache[T any] struct {
	// dir is the directory.
	dir string
	// what names the cache in errors: "debian kernel cache".
	what string
	// aliased says that keys are looked up in aliases.json; otherwise a
	// key is the name of its entry (a content hash).
	aliased bool
	// load reads a complete entry, or fails.
	load func(entry string) (T, error)
	// logf prints progress; it may be nil.
	logf func(format string, args ...any)
}

// keyedPlan says how to make the entry for a key that missed, once the
// lock is held.
type keyedPlan struct {
	// name is the entry's directory name.
	name string
	// build fills out, an empty directory that becomes the entry; tmp is
	// scratch space next to it. Both are removed afterwards.
	build func(ctx context.Context, tmp, out string) error
	// aliases are further keys to point at the entry.
	aliases []keyedAlias
}

// keyedAlias is an extra key for an entry.
type keyedAlias struct {
	key string
	// keep leaves a key that already names an entry as it is.
	keep bool
}

// get returns the entry that key names. A hit (unless refresh is set) is
// answered from the index alone and marked used (Touch). On a miss, get
// takes the lock, looks again (another klab may have made it meanwhile),
// removes what interrupted builds left, and asks miss for a plan: the
// entry's name and how to build it. An entry of that name already there
// is reused; otherwise plan.build fills a temporary directory, which is
// synced and renamed into place. Then the key (and plan.aliases) are
// pointed at the entry. hit reports a hit without the lock.
func (c keyedCache[T]) get(ctx context.Context, key string, refresh bool, miss func(context.Context) (keyedPlan, error)) (v T, hit bool, err error) {
	var zero T
	if !refresh {
		if v, ok := c.lookup(key); ok {
			return v, true, nil
		}
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return zero, false, fmt.Errorf("%s: %w", c.what, err)
	}
	unlock, err := flock.Lock(ctx, filepath.Join(c.dir, ".lock"), func() {
		c.printf("waiting for another klab to finish fetching into %s...", c.dir)
	})
	if err != nil {
		return zero, false, err
	}
	defer unlock()
	if !refresh {
		if v, ok := c.lookup(key); ok {
			return v, true, nil
		}
	}
	removeStaleTemps(c.dir)

	plan, err := miss(ctx)
	if err != nil {
		return zero, false, err
	}
	if !entryName(plan.name) {
		return zero, false, fmt.Errorf("%s: bad entry name %q", c.what, plan.name)
	}
	final := filepath.Join(c.dir, plan.name)
	v, err = c.load(final)
	if err != nil {
		if v, err = c.fill(ctx, final, plan.build); err != nil {
			return zero, false, err
		}
	} else {
		Touch(final)
	}
	if !c.aliased {
		return v, false, nil
	}
	if err := addAlias(c.dir, key, plan.name); err != nil {
		return zero, false, err
	}
	for _, a := range plan.aliases {
		if _, ok := readAliases(c.dir)[a.key]; ok && a.keep {
			continue
		}
		if err := addAlias(c.dir, a.key, plan.name); err != nil {
			return zero, false, err
		}
	}
	return v, false, nil
}

// lookup answers key from the directory alone.
func (c keyedCache[T]) lookup(key string) (T, bool) {
	var zero T
	name := key
	if c.aliased {
		name = readAliases(c.dir)[key]
	}
	if !entryName(name) {
		return zero, false
	}
	p := filepath.Join(c.dir, name)
	v, err := c.load(p)
	if err != nil {
		return zero, false
	}
	Touch(p)
	return v, true
}

// fill builds the entry final through a temporary directory; the caller
// holds the lock.
func (c keyedCache[T]) fill(ctx context.Context, final string, build func(ctx context.Context, tmp, out string) error) (T, error) {
	var zero T
	tmp, err := os.MkdirTemp(c.dir, ".tmp-")
	if err != nil {
		return zero, fmt.Errorf("%s: %w", c.what, err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		return zero, fmt.Errorf("%s: %w", c.what, err)
	}
	if err := build(ctx, tmp, out); err != nil {
		return zero, err
	}
	if err := os.Chmod(out, 0o755); err != nil {
		return zero, fmt.Errorf("%s: %w", c.what, err)
	}
	if err := syncTree(out); err != nil {
		return zero, fmt.Errorf("%s: %w", c.what, err)
	}
	if err := os.RemoveAll(final); err != nil { // an incomplete leftover
		return zero, fmt.Errorf("%s: %w", c.what, err)
	}
	if err := os.Rename(out, final); err != nil {
		return zero, fmt.Errorf("%s: %w", c.what, err)
	}
	if d, err := os.Open(c.dir); err == nil { // make the rename durable
		_ = d.Sync()
		d.Close()
	}
	v, err := c.load(final)
	if err != nil {
		return zero, fmt.Errorf("%s: the new entry %s: %w", c.what, final, err)
	}
	return v, nil
}

func (c keyedCache[T]) printf(format string, args ...any) {
	if c.logf != nil {
		c.logf(format, args...)
	}
}

// entryName reports whether name can name an entry of a keyed cache: not
// empty, no path separator, not hidden (temporary and lock files are).
func entryName(name string) bool {
	return name != "" && !strings.ContainsAny(name, `/\`) && !strings.HasPrefix(name, ".")
}

// The alias index: dir/aliases.json maps keys (debianRef keys, "7.3",
// "sid") to entry names.

func aliasFile(dir string) string { return filepath.Join(dir, "aliases.json") }

func readAliases(dir string) map[string]string {
	m := map[string]string{}
	if data, err := os.ReadFile(aliasFile(dir)); err == nil {
		_ = json.Unmarshal(data, &m) // a damaged index only costs a refetch
	}
	if m == nil { // the file held null
		m = map[string]string{}
	}
	return m
}

// addAlias records key -> name; the caller holds the directory lock.
func addAlias(dir, key, name string) error {
	m := readAliases(dir)
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

// removeStaleTemps removes temporary directories left by an interrupted
// build; the caller holds the lock, so no live build owns them.
func removeStaleTemps(dir string) {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".tmp-") {
			os.RemoveAll(filepath.Join(dir, de.Name()))
		}
	}
}

// RemoveKeyedEntry removes the entry name of the keyed cache directory dir
// (kernels/debian, sources/debian, libfuse-hp, libfuse) and every alias
// that points to it. The caller holds dir/.lock.
func RemoveKeyedEntry(dir, name string) error {
	if !entryName(name) {
		return fmt.Errorf("remove %s: bad entry name %q", dir, name)
	}
	if err := removeEntry(dir, name); err != nil {
		return err
	}
	m := readAliases(dir)
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

// removeEntry removes dir/name, a directory or a file: renamed out of the
// way first (to a temporary name that the next fetch or gc removes), so
// that a half-removed entry is never taken for a complete one. A missing
// entry is no error.
func removeEntry(dir, name string) error {
	p := filepath.Join(dir, name)
	tmp := filepath.Join(dir, ".tmp-rm-"+name)
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

// Touch marks a cached file or directory as used now: `klab cache gc
// --max-size` removes the least recently used entries first, by their
// modification time. Errors are ignored (a read-only cache still works).
func Touch(path string) {
	now := time.Now()
	_ = os.Chtimes(path, now, now)
}
