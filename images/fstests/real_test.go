package fstests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"klab/internal/testenv"
)

// sourceEnv names an fstests source (a checkout or a tarball) for the
// tests that build the real thing. Unset, they take the snapshot that CI
// keeps next to the project: ../shared/fstests/fstests-*.tar.gz from the
// project's root.
const sourceEnv = "KLAB_FSTESTS_SRC"

// testSource returns the fstests source for real builds, or skips (fails
// in CI) when there is none.
func testSource(t *testing.T) string {
	t.Helper()
	if src := os.Getenv(sourceEnv); src != "" {
		return src
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pattern := filepath.Join(filepath.Dir(root), "shared", "fstests", "fstests-*.tar.gz")
	matches, _ := filepath.Glob(pattern)
	if len(matches) == 0 {
		testenv.Missingf(t, "no fstests source: set %s to a checkout or tarball, or put the snapshot at %s", sourceEnv, pattern)
	}
	return matches[len(matches)-1]
}

// moduleRoot returns the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// TestBuildRealFstests builds the fstests snapshot cold into an empty
// cache, then asks again (a cache hit), and checks the tree a guest gets.
func TestBuildRealFstests(t *testing.T) {
	testenv.Short(t, "builds fstests from source (about a minute on 2 idle cores)")
	src := testSource(t)
	if err := checkDeps(); err != nil {
		testenv.Missing(t, err.Error())
	}
	ctx := context.Background()
	o := Options{CacheDir: t.TempDir()}
	start := time.Now()
	b, err := Build(ctx, src, o)
	if err != nil {
		t.Fatal(err)
	}
	cold := time.Since(start)
	start = time.Now()
	again, err := Build(ctx, src, o)
	if err != nil {
		t.Fatal(err)
	}
	hit := time.Since(start)
	t.Logf("fstests from %s: cold build %.1fs (make's steps %.1fs), cache hit %.3fs; %d programs, libs %v",
		src, cold.Seconds(), b.Descriptor.BuildSeconds, hit.Seconds(), b.Descriptor.Programs, b.Descriptor.Libs)
	if b.Hit || !again.Hit || again.Dir != b.Dir {
		t.Fatalf("hits %v then %v, dirs %s and %s; want a miss then a hit of the same tree", b.Hit, again.Hit, b.Dir, again.Dir)
	}
	for _, p := range []string{"check", "common/rc", "common/config", "tests/generic/001", "tests/generic/001.out",
		"tests/generic/group.list", "tests/ext4/001", "ltp/fsstress", "ltp/fsx", "src/xfsctl"} {
		if _, err := os.Stat(filepath.Join(b.Dir, p)); err != nil {
			t.Errorf("the tree lacks %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "tests/xfs")); err == nil {
		t.Errorf("the tree keeps tests/xfs")
	}
	d := b.Descriptor
	if d.Programs < 100 || !contains(d.Libs, "libc.so.6") || d.Toolchain.Compiler == "" || d.Source.ID == "" {
		t.Errorf("descriptor = %+v", d)
	}
}
