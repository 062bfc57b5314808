package keyed

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
func textCache(dir string) Cache[string] {
	return Cache[string]{Dir: dir, What: "test cache", Aliased: true, Load: func(entry string) (string, error) {
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
	miss := func(ctx context.Context) (Plan, error) {
		return Plan{Name: "e1", Aliases: []Alias{{Key: "also"}, {Key: "kept", Keep: true}},
			Build: func(ctx context.Context, tmp, out string) error {
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
	if err := AddAlias(dir, "kept", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if v, _, err := c.Get(t.Context(), "k", false, miss); err != nil || v != "one" {
				t.Errorf("get = %q, %v", v, err)
			}
		})
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("built %d times", n)
	}
	m := ReadAliases(dir)
	if m["k"] != "e1" || m["also"] != "e1" || m["kept"] != "elsewhere" {
		t.Errorf("aliases = %v", m)
	}

	// A hit: no plan, and the entry is marked used.
	old := time.Now().Add(-48 * time.Hour)
	os.Chtimes(filepath.Join(dir, "e1"), old, old)
	v, hit, err := c.Get(t.Context(), "also", false, func(context.Context) (Plan, error) {
		t.Error("a hit asked for a plan")
		return Plan{}, errors.New("no")
	})
	if err != nil || !hit || v != "one" {
		t.Errorf("hit = %q, %v, %v", v, hit, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "e1")); time.Since(fi.ModTime()) > time.Minute {
		t.Errorf("a hit did not mark the entry used: %v", fi.ModTime())
	}

	// A failed build leaves no entry and no temporary directory.
	_, _, err = c.Get(t.Context(), "bad", false, func(context.Context) (Plan, error) {
		return Plan{Name: "e2", Build: func(ctx context.Context, tmp, out string) error {
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
	if err := RemoveEntry(dir, "e1"); err != nil {
		t.Fatal(err)
	}
	if m := ReadAliases(dir); len(m) != 1 || m["kept"] != "elsewhere" {
		t.Errorf("aliases after removal = %v", m)
	}
	if _, ok := c.Lookup("k"); ok {
		t.Error("a removed entry answered")
	}
	if err := RemoveEntry(dir, "../x"); err == nil {
		t.Error("a path was taken for an entry name")
	}
}

// TestAliasIndexHoldingNull: an alias index that holds null (or is
// damaged) does not stop the next fetch from recording its alias.
func TestAliasIndexHoldingNull(t *testing.T) {
	for _, content := range []string{"null", "{", "[]"} {
		dir := t.TempDir()
		if err := os.WriteFile(aliasFile(dir), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := AddAlias(dir, "debian:7.3", "k-1"); err != nil {
			t.Fatalf("%s: %v", content, err)
		}
		if got := ReadAliases(dir)["debian:7.3"]; got != "k-1" {
			t.Errorf("%s: alias %q, want k-1", content, got)
		}
	}
}

// TestDiscard: a directory goes through a temporary name, a file or a
// link goes at once, and a missing entry is no error.
func TestDiscard(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("d", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"l", "d", "f", "missing"} {
		if err := Discard(dir, name); err != nil {
			t.Errorf("Discard(%s): %v", name, err)
		}
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Errorf("left %v", des)
	}
}

// TestFillReplacesLeftover: an incomplete entry of the same name is
// replaced by the new one, and the scratch space goes.
func TestFillReplacesLeftover(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "e", "half"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := Fill(t.Context(), dir, "e", "test cache", func(ctx context.Context, tmp, out string) error {
		if err := os.WriteFile(filepath.Join(tmp, "scratch"), nil, 0o644); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(out, "v"), []byte("whole"), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 1 || des[0].Name() != "e" {
		t.Errorf("entries %v, want only e", des)
	}
	if des, _ := os.ReadDir(filepath.Join(dir, "e")); len(des) != 1 || des[0].Name() != "v" {
		t.Errorf("e holds %v, want only v", des)
	}
}
