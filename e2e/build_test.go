package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/internal/testenv"
	"klab/results"
)

// The test patches, in e2e/testdata: fuse-hello.patch adds a pr_info at
// FUSE init; fuse-broken.patch has a hunk whose context is not in the
// tree (patch(1) would force it in with fuzz; klab must refuse it).
const (
	helloPatch  = "e2e/testdata/fuse-hello.patch"
	brokenPatch = "e2e/testdata/fuse-broken.patch"
	helloLine   = "fuse: klab-e2e: hello from a patched FUSE"
)

// runLong runs klab from the repository root like run, with a timeout long
// enough for a cold kernel build on a small machine.
func runLong(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	return runTimeout(t, t.TempDir(), timeout, args...)
}

// requiresBuildTools needs what a kernel build needs.
func requiresBuildTools(t *testing.T) {
	t.Helper()
	for _, c := range []string{"make", "gcc", "flex", "bison", "bc", "git", "patch", "tar", "xz"} {
		testenv.RequiresCommand(t, c)
	}
}

// TestBuildPatchedDebianSource builds Debian's linux-source-7.3 with the
// lab config and a patch that adds a pr_info at FUSE init (one cold build
// of about 6 minutes on 2 cores; later runs hit the cache), boots it, and
// finds the patch's line on the console.
func TestBuildPatchedDebianSource(t *testing.T) {
	testenv.E2E(t)
	requiresBuildTools(t)
	args := []string{"kernels", "build", "--source", "debian:7.3", "--config", "lab", "--patches", helloPatch, "--name", "e2e-fuse-hello"}
	r := runLong(t, 60*time.Minute, args...)
	if r.code != 0 {
		t.Fatalf("kernels build: exit %d", r.code)
	}
	if !strings.Contains(r.stdout, "build:e2e-fuse-hello") {
		t.Errorf("stdout lacks the name: %q", r.stdout)
	}
	t.Logf("build took %.1fs", r.wall.Seconds())

	// Built once, it is a cache hit.
	r = runLong(t, 5*time.Minute, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "cached") {
		t.Fatalf("second build: exit %d, stdout %q", r.code, r.stdout)
	}
	t.Logf("cache hit took %.2fs", r.wall.Seconds())
	if r.wall > 5*time.Second {
		t.Errorf("a cache hit took %v", r.wall)
	}

	show := runLong(t, time.Minute, "kernels", "show", "--json", "build:e2e-fuse-hello")
	var k struct {
		Source, ID, Version, Image, Modules string
		Build                               struct {
			Tree         string `json:"tree"`
			ConfigSHA256 string `json:"config_sha256"`
			Log          string `json:"log"`
			Patches      []struct{ Path, Subject, SHA256 string }
		}
	}
	if err := json.Unmarshal([]byte(show.stdout), &k); err != nil {
		t.Fatalf("kernels show --json: %v\n%s", err, show.stdout)
	}
	if k.Source != "build" || !strings.HasPrefix(k.Build.Tree, "debian:7.3=") || len(k.Build.Patches) != 1 ||
		k.Build.Patches[0].Subject != "[PATCH] fuse: say hello at init" || k.Modules != "" || k.Build.ConfigSHA256 == "" {
		t.Errorf("kernels show: %s", show.stdout)
	}
	if fi, err := os.Stat(k.Image); err == nil {
		t.Logf("bzImage %s: %d bytes, release %s, %s", k.Image, fi.Size(), k.Version, k.ID)
	}
	if _, err := os.Stat(k.Build.Log); err != nil {
		t.Errorf("no build log: %v", err)
	}

	runs := t.TempDir()
	boot := run(t, runs, "boot", "--kernel", "build:e2e-fuse-hello", "--console", "--", "true")
	if boot.code != 0 {
		t.Fatalf("boot: exit %d", boot.code)
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

// TestBuildBrokenPatchFails applies a patch whose hunk does not match the
// tree: the build fails at once, names the patch, its subject, the file
// and the hunk, and caches nothing.
func TestBuildBrokenPatchFails(t *testing.T) {
	testenv.E2E(t)
	requiresBuildTools(t)
	r := runLong(t, 20*time.Minute, "kernels", "build", "--source", "debian:7.3", "--config", "lab",
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
