package cache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/images/buildstore"
	"klab/images/kerneldir"
	"klab/internal/flock"
	"klab/results"
)

// commitFake puts a built kernel of size bytes into the store through its
// commit path, named name, made from the inputs in, last used at used.
func commitFake(t *testing.T, bs *buildstore.Store, key, in, name string, size int, used time.Time) {
	t.Helper()
	_, err := bs.Commit(t.Context(), key, in, name, func(ctx context.Context, tmp, out string) error {
		if err := os.WriteFile(filepath.Join(out, "vmlinuz"), []byte(strings.Repeat("x", size)), 0o644); err != nil {
			return err
		}
		id, err := kerneldir.ID(filepath.Join(out, "vmlinuz"), "")
		if err != nil {
			return err
		}
		return kerneldir.Write(out, &results.Kernel{ID: id, Source: "build", Build: &results.KernelBuild{Key: key}})
	})
	if err != nil {
		t.Fatal(err)
	}
	os.Chtimes(bs.ResultDir(key), used, used)
}

// TestGCBuildStore is `klab kernels gc`: GC of the built kernels, their
// work trees and Debian kernel sources only, cheapest to make again
// first. Work trees and sources go first, then kernels that no name
// refers to, then named kernels, the least recently used first within
// each; a work tree that a build holds stays, and Debian kernels are not
// touched.
func TestGCBuildStore(t *testing.T) {
	f := &fakeCache{dir: t.TempDir(), now: time.Now()}
	bs := buildstore.New(f.dir)
	commitFake(t, bs, "r-old", "in-old", "old", 100<<10, f.now.Add(-3*time.Hour))
	// A second build under the name "new" leaves its first result
	// without a name.
	commitFake(t, bs, "r-orphan", "in-orphan", "new", 100<<10, f.now)
	commitFake(t, bs, "r-new", "in-new", "new", 100<<10, f.now.Add(-time.Hour))
	f.file(t, "kernels/build/work/slot1/src/big", 300, 0)
	f.file(t, "kernels/build/work/slot1/.lock", 0, 0)
	f.age(t, "kernels/build/work/slot1", 0)
	f.file(t, "kernels/build/work/slot2/src/big", 300, 0)
	f.file(t, "kernels/build/work/slot2/.lock", 0, 0)
	unlock, ok := flock.TryLock(f.p("kernels/build/work/slot2/.lock"))
	if !ok {
		t.Fatal("cannot lock")
	}
	defer unlock()
	f.file(t, "sources/debian/linux-source-7.3_1/linux-source-7.3.tar.xz", 100, 5*day)
	f.age(t, "sources/debian/linux-source-7.3_1", 5*day)
	f.file(t, "kernels/debian/linux-image-7.3_1/vmlinuz", 100, 30*day)
	f.age(t, "kernels/debian/linux-image-7.3_1", 30*day)

	o := GCOptions{Dir: f.dir, All: true, CheapFirst: true, Kinds: []Kind{WorkTree, Source, BuiltKernel}, Now: f.now}
	gc := func(max int64, dryRun bool) *GCResult {
		t.Helper()
		o.MaxSize, o.DryRun = max, dryRun
		res, err := GC(o)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	removed := func(res *GCResult) string {
		var s []string
		for _, r := range res.Removed {
			s = append(s, string(r.Kind)+":"+filepath.Base(r.Path))
		}
		return strings.Join(s, " ")
	}

	// A dry run removes nothing, and names the busy work tree.
	res := gc(0, true)
	if got := removed(res); got != "kernel-source:linux-source-7.3_1 work-tree:slot1 built-kernel:r-orphan built-kernel:r-old built-kernel:r-new" ||
		len(res.Skipped) != 1 || res.Skipped[0].Path != f.p("kernels/build/work/slot2") || !f.exists("kernels/build/work/slot1") {
		t.Fatalf("dry run: removed %s, skipped %+v", got, res.Skipped)
	}
	// Only the three kinds count: the Debian kernel is not in the sizes.
	var want int64
	l, _ := List(f.dir)
	for _, e := range l.Entries {
		if e.Kind == WorkTree || e.Kind == Source || e.Kind == BuiltKernel {
			want += e.Size
		}
	}
	if res.Before != want {
		t.Errorf("before = %d, want %d (the three kinds)", res.Before, want)
	}

	// Room for all but 400 KiB: the source and the free work tree go.
	res = gc(res.Before-400<<10, false)
	if got := removed(res); got != "kernel-source:linux-source-7.3_1 work-tree:slot1" {
		t.Errorf("removed %s, want the source and the free work tree", got)
	}
	// A little less: the kernel no name refers to, and its input link.
	res = gc(res.After-50<<10, false)
	if got := removed(res); got != "built-kernel:r-orphan" || f.exists("kernels/build/inputs/in-orphan") || f.exists("kernels/build/results/r-orphan") {
		t.Errorf("removed %s, want the unnamed kernel and its input link", got)
	}
	// A little less again: the older named kernel before the newer, and
	// its name with it.
	res = gc(res.After-50<<10, false)
	if got := removed(res); got != "built-kernel:r-old" || f.exists("kernels/build/names/old") || f.exists("kernels/build/results/r-old") || !f.exists("kernels/build/results/r-new") {
		t.Errorf("removed %s, want build:old and its name", got)
	}
	if !f.exists("kernels/build/work/slot2") || !f.exists("kernels/debian/linux-image-7.3_1") {
		t.Error("the busy work tree or the Debian kernel went")
	}
}
