package images

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// textCache is a keyed cache whose entries hold one file, "v".
func textCache(dir string) keyedCache[string] {
	return keyedCache[string]{dir: dir, what: "test cache", aliased: true, load: func(entry string) (string, error) {
		b, err := os.ReadFile(filepath.Join(entry, "v"))
		return string(b), err
	}}
}

// TestKeyedCache: a miss is built once, through a temporary directory,
// even when two callers ask at once; a hit asks nothing and marks the
// entry used; a failed build leaves nothing; extra aliases point at the
// entry, a kept one staying as it was.
func TestKeyedCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	c := textCache(dir)
	var builds atomic.Int32
	miss := func(ctx context.Context) (keyedPlan, error) {
		return keyedPlan{name: "e1", aliases: []keyedAlias{{key: "also"}, {key: "kept", keep: true}},
			build: func(ctx context.Context, tmp, out string) error {
				builds.Add(1)
				if !strings.HasPrefix(filepath.Base(tmp), ".tmp-") || filepath.Dir(tmp) != dir {
					t.Errorf("scratch %s is not a temporary directory in %s", tmp, dir)
				}
				time.Sleep(50 * time.Millisecond) // the other caller waits for the lock
				return os.WriteFile(filepath.Join(out, "v"), []byte("one"), 0o644)
			}}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := addAlias(dir, "kept", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if v, _, err := c.get(t.Context(), "k", false, miss); err != nil || v != "one" {
				t.Errorf("get = %q, %v", v, err)
			}
		})
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("built %d times", n)
	}
	m := readAliases(dir)
	if m["k"] != "e1" || m["also"] != "e1" || m["kept"] != "elsewhere" {
		t.Errorf("aliases = %v", m)
	}

	// A hit: no plan, and the entry is marked used.
	old := time.Now().Add(-48 * time.Hour)
	os.Chtimes(filepath.Join(dir, "e1"), old, old)
	v, hit, err := c.get(t.Context(), "also", false, func(context.Context) (keyedPlan, error) {
		t.Error("a hit asked for a plan")
		return keyedPlan{}, errors.New("no")
	})
	if err != nil || !hit || v != "one" {
		t.Errorf("hit = %q, %v, %v", v, hit, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "e1")); time.Since(fi.ModTime()) > time.Minute {
		t.Errorf("a hit did not mark the entry used: %v", fi.ModTime())
	}

	// A failed build leaves no entry and no temporary directory.
	_, _, err = c.get(t.Context(), "bad", false, func(context.Context) (keyedPlan, error) {
		return keyedPlan{name: "e2", build: func(ctx context.Context, tmp, out string) error {
			os.WriteFile(filepath.Join(out, "v"), []byte("half"), 0o644)
			return errors.New("compiler exploded")
		}}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "compiler exploded") {
		t.Errorf("failed build: %v", err)
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if de.Name() == "e2" || strings.HasPrefix(de.Name(), ".tmp-") {
			t.Errorf("a failed build left %s", de.Name())
		}
	}

	// Removing the entry removes the aliases that point to it.
	if err := RemoveKeyedEntry(dir, "e1"); err != nil {
		t.Fatal(err)
	}
	if m := readAliases(dir); len(m) != 1 || m["kept"] != "elsewhere" {
		t.Errorf("aliases after removal = %v", m)
	}
	if _, ok := c.lookup("k"); ok {
		t.Error("a removed entry answered")
	}
	if err := RemoveKeyedEntry(dir, "../x"); err == nil {
		t.Error("a path was taken for an entry name")
	}
}
