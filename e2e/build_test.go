package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"klab/internal/testenv"
	"klab/results"
)

// The test patches, in e2e/testdata: fuse-hello.patch adds a pr_info at
// FUSE init; fuse-broken.patch has a hunk whose context is not in the
// tree (patch(1) would force it in with fuzz; klab must refuse it);
// fuse-mknod-rdev.patch makes FUSE's mknod of a character device lose
// its device number, so that fstests' generic/184 fails on FUSE.
const (
	helloPatch  = "e2e/testdata/fuse-hello.patch"
	brokenPatch = "e2e/testdata/fuse-broken.patch"
	mknodPatch  = "e2e/testdata/fuse-mknod-rdev.patch"
	helloLine   = "fuse: klab-e2e: hello from a patched FUSE"
)

// coldBuild bounds a cold build of Debian's 7.3 tree with the lab config:
// about 6 minutes on 2 cores alone. The build runs at a lower priority
// beside two guests for most of the e2e run, and on a host that runs
// other guests too it has been seen at 10% after 10 minutes: five times
// that still stays below make test's 50-minute package timeout.
const coldBuild = 30 * time.Minute

// runLong runs klab from the repository root like run, with a timeout long
// enough for a cold kernel build on a small machine (cut, like every
// timeout, to what the test binary's deadline leaves: see budget).
func runLong(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	return runTimeout(t, t.TempDir(), timeout, args...)
}

// buildNice is the CPU priority of the kernel builds that run beside
// guests: the guests' CPUs first, the build takes the time they leave.
const buildNice = 10

// runBuild is runLong for a kernel build that runs beside guests, at
// buildNice.
func runBuild(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	return runKlab(t, t.TempDir(), timeout, buildNice, args...)
}

// TestKernelBuilds builds kernels from Debian's linux-source-7.3 with the
// lab config and boots them, one subtest after the other: they share the
// work tree klab keeps for that source and config, whose lock each build
// takes.
//   - patched: a cold build with a patch, its cache hit, its boot;
//   - fstests-ab: an incremental build with a second patch, and an
//     fstests A/B of the two builds that must find the regression;
//   - tree: that build's output booted as a kernel tree;
//   - ext4-lazytime: two incremental builds and seed 002's experiment.
//
// It runs beside the tests that boot guests: its builds run at a lower CPU
// priority (buildNice) and fill the time the guests leave idle, and each
// subtest takes a guest slot only to boot. (As three parallel tests, the
// two that wait for the cold build would hold test slots all along.)
func TestKernelBuilds(t *testing.T) {
	testenv.E2E(t)
	requiresBuildTools(t)
	t.Parallel()
	t.Run("patched", buildPatchedDebianSource)
	t.Run("fstests-ab", fstestsABMknod)
	t.Run("tree", bootTreeKernel)
	t.Run("ext4-lazytime", seedExt4Lazytime)
}

// requiresBuildTools needs what a kernel build needs.
func requiresBuildTools(t *testing.T) {
	t.Helper()
	for _, c := range []string{"make", "gcc", "flex", "bison", "bc", "git", "patch", "tar", "xz"} {
		testenv.RequiresCommand(t, c)
	}
}

// buildPatchedDebianSource builds Debian's linux-source-7.3 with the lab
// config and a patch that adds a pr_info at FUSE init (one cold build of
// about 6 minutes on 2 cores; later runs hit the cache), boots it, and
// finds the patch's line on the console.
func buildPatchedDebianSource(t *testing.T) {
	args := []string{"kernels", "build", "--source", "debian:7.3", "--config", "lab", "--patches", helloPatch, "--name", "e2e-fuse-hello"}
	r := runBuild(t, coldBuild, args...)
	if r.code != 0 {
		t.Fatalf("kernels build: exit %d", r.code)
	}
	if !strings.Contains(r.stdout, "build:e2e-fuse-hello") {
		t.Errorf("stdout lacks the name: %q", r.stdout)
	}
	t.Logf("build took %.1fs", r.wall.Seconds())

	k := showBuilt(t, "build:e2e-fuse-hello")
	before := modTimes(t, k.Image, k.Build.Log)

	// Built once, it is a cache hit: the same kernel, and neither its
	// image nor its build log written again (which a build, even one
	// that recompiles nothing, would do).
	r = runLong(t, 5*time.Minute, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "cached") {
		t.Fatalf("second build: exit %d, stdout %q", r.code, r.stdout)
	}
	t.Logf("cache hit took %.2fs", r.wall.Seconds())
	if again := showBuilt(t, "build:e2e-fuse-hello"); again.ID != k.ID || again.Image != k.Image {
		t.Errorf("the cache hit named kernel %s at %s, want %s at %s", again.ID, again.Image, k.ID, k.Image)
	}
	if after := modTimes(t, k.Image, k.Build.Log); !slices.EqualFunc(after, before, time.Time.Equal) {
		t.Errorf("the cache hit wrote the image or the build log: modification times %v, then %v", before, after)
	}

	if k.Source != "build" || !strings.HasPrefix(k.Build.Tree, "debian:7.3=") || len(k.Build.Patches) != 1 ||
		k.Build.Patches[0].Subject != "[PATCH] fuse: say hello at init" || k.Modules != "" || k.Build.ConfigSHA256 == "" {
		t.Errorf("kernels show: %+v", k)
	}
	if fi, err := os.Stat(k.Image); err == nil {
		t.Logf("bzImage %s: %d bytes, release %s, %s", k.Image, fi.Size(), k.Version, k.ID)
	}
	if _, err := os.Stat(k.Build.Log); err != nil {
		t.Errorf("no build log: %v", err)
	}

	// The lab config builds 9p in: --share works on what it builds.
	holdGuestSlot(t)
	share := t.TempDir()
	if err := os.WriteFile(filepath.Join(share, "f"), []byte("shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	boot := run(t, runs, "boot", "--kernel", "build:e2e-fuse-hello", "--console", "--share", share+":/src", "--", "cat", "/src/f")
	if boot.code != 0 {
		t.Fatalf("boot: exit %d", boot.code)
	}
	if boot.stdout != "shared\n" {
		t.Errorf("--share on a lab build: guest printed %q", boot.stdout)
	}
	dir := onlyRun(t, runs)
	console, err := os.ReadFile(filepath.Join(dir, "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(console, []byte(helloLine)) || !strings.Contains(boot.stderr, helloLine) {
		t.Errorf("the console lacks %q", helloLine)
	}
	m, err := results.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Kernel.Source != "build" || m.Kernel.ID != k.ID || m.Kernel.Name != "build:e2e-fuse-hello" {
		t.Errorf("manifest kernel: %+v", m.Kernel)
	}
	if b := m.Kernel.Build; b == nil || b.Tree != k.Build.Tree || b.ConfigSHA256 != k.Build.ConfigSHA256 ||
		len(b.Patches) != 1 || b.Patches[0].SHA256 != k.Build.Patches[0].SHA256 || len(b.Fragments) != 1 || b.Fragments[0].Path != "lab" {
		t.Errorf("manifest kernel build: %+v", m.Kernel.Build)
	}
	t.Logf("boot-to-agent %d ms under %s", m.Times.BootToAgentMs, m.Accel)
}

// builtKernel is the part of `klab kernels show --json` for a built
// kernel that the tests read.
type builtKernel struct {
	Source, ID, Version, Image, Config, Modules string
	Build                                       struct {
		Tree         string `json:"tree"`
		ConfigSHA256 string `json:"config_sha256"`
		Log          string `json:"log"`
		Patches      []struct{ Path, Subject, SHA256 string }
	}
}

// showBuilt runs `klab kernels show --json ref`.
func showBuilt(t *testing.T, ref string) builtKernel {
	t.Helper()
	show := runLong(t, time.Minute, "kernels", "show", "--json", ref)
	var k builtKernel
	if err := json.Unmarshal([]byte(show.stdout), &k); err != nil {
		t.Fatalf("kernels show --json %s: exit %d, %v\n%s", ref, show.code, err, show.stdout)
	}
	return k
}

// modTimes returns the files' modification times.
func modTimes(t *testing.T, files ...string) []time.Time {
	t.Helper()
	var ts []time.Time
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, fi.ModTime())
	}
	return ts
}

// TestBuildBrokenPatchFails applies a patch whose hunk does not match the
// tree: the build fails at once, names the patch, its subject, the file
// and the hunk, and caches nothing. It shares its work tree with the
// cold build that TestBisect starts before the parallel tests: it runs
// beside the other parallel tests, waiting for that build's lock, and
// fails at once when it has it.
func TestBuildBrokenPatchFails(t *testing.T) {
	testenv.E2E(t)
	requiresBuildTools(t)
	t.Parallel()
	// The patch is refused before anything is compiled, but unpacking
	// the tree for it may come first: a cold build's bound.
	r := runLong(t, coldBuild, "kernels", "build", "--source", "debian:7.3", "--config", "lab",
		"--patches", brokenPatch, "--name", "e2e-broken")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1", r.code)
	}
	for _, w := range []string{
		"patch 1/1 does not apply: " + brokenPatch,
		`"[PATCH] fuse: a hunk that does not apply"`,
		"fs/fuse/inode.c: hunk #1 at line 2143 (@@ -2143,6 +2143,7 @@ static int __init fuse_init(void)) does not apply",
		"nothing was built or cached",
	} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q", w)
		}
	}
	if show := runLong(t, time.Minute, "kernels", "show", "build:e2e-broken"); show.code == 0 {
		t.Error("the broken build has a name")
	}
}
