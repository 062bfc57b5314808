package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"klab/internal/testenv"
)

// TestBundleRerun: a run on a Debian kernel and a kernel built from
// source (one round each), packed with `klab runs pack`, is rerun from the
// bundle file alone on what stands for another machine: an empty cache, an
// empty runs directory and a Debian mirror that does not answer. The rerun
// boots the same kernels (no "kernel N:" difference), placed from the
// bundle and named by the original run's labels, and prints the
// comparison of the two runs. Nothing of the Debian archive is fetched.
// A results-only bundle of the same run is read by klab report.
func TestBundleRerun(t *testing.T) {
	testenv.E2E(t)
	requiresBuildTools(t)
	t.Parallel()
	// The build TestKernelBuilds makes first (a cache hit, or a wait for
	// its work tree).
	if r := runBuild(t, coldBuild, "kernels", "build", "--source", "debian:7.3", "--config", "lab", "--patches", helloPatch, "--name", "e2e-fuse-hello"); r.code != 0 {
		t.Fatalf("kernels build: exit %d", r.code)
	}
	holdGuestSlot(t)
	runs := t.TempDir()
	r := runTimeout(t, runs, 15*time.Minute, "run", "e2e/testdata/ab.yaml", "--kernel", "debian:7.3", "--kernel", "build:e2e-fuse-hello", "--rounds", "1")
	if r.code != 0 {
		t.Fatalf("klab run: exit %d\n%s", r.code, r.stdout)
	}
	runWall := r.wall
	id := filepath.Base(onlyRun(t, runs))

	out := t.TempDir()
	file := filepath.Join(out, id+".klab.tar.zst")
	r = run(t, runs, "runs", "pack", id, "-o", file)
	if r.code != 0 || !strings.Contains(r.stdout, "with the artefacts of 2 kernel(s)") {
		t.Fatalf("runs pack: exit %d\n%s", r.code, r.stdout)
	}
	small := filepath.Join(out, "results.klab.tar.zst")
	if r := run(t, runs, "runs", "pack", id, "--results-only", "-o", small); r.code != 0 {
		t.Fatalf("runs pack --results-only: exit %d", r.code)
	}
	for _, f := range []string{file, small} {
		if st, err := os.Stat(f); err == nil {
			t.Logf("%s: %.1f MiB (%d KiB)", filepath.Base(f), float64(st.Size())/(1<<20), st.Size()>>10)
		}
	}
	// The small bundle is read as it is, with no runs directory.
	if r := run(t, t.TempDir(), "report", small); r.code != 0 || !strings.Contains(r.stdout, "seqwrite-4k") {
		t.Errorf("klab report of the results-only bundle: exit %d\n%s", r.code, tail(r.stdout, 10))
	}

	// Another machine: nothing cached, no runs, no Debian archive.
	cache, runs2 := t.TempDir(), t.TempDir()
	r = runTimeout(t, runs2, 20*time.Minute, "--cache-dir", cache, "--debian-mirror", "file:/nonexistent", "rerun", file)
	t.Logf("rerun from the bundle: exit %d in %s (the run took %s)\n%s", r.code, r.wall.Round(time.Second), runWall.Round(time.Second), r.stdout)
	if r.code != 0 {
		t.Fatalf("klab rerun FILE: exit %d", r.code)
	}
	if !regexp.MustCompile(`kernel build:e2e-fuse-hello \(k-[0-9a-f]{16}\): \S+, placed`).MatchString(r.stderr) ||
		!regexp.MustCompile(`kernel debian:7\.3 \(k-[0-9a-f]{16}\): \S+, placed`).MatchString(r.stderr) {
		t.Errorf("the rerun did not place both kernels from the bundle:\n%s", tail(r.stderr, 20))
	}
	if !strings.Contains(r.stderr, "with kernels [bundle:k-") {
		t.Errorf("the rerun did not boot the bundled kernels:\n%s", tail(r.stderr, 20))
	}
	if strings.Contains(r.stdout, "kernel 1:") || strings.Contains(r.stdout, "kernel 2:") {
		t.Errorf("the rerun used other kernels than the run:\n%s", r.stdout)
	}
	for _, want := range []string{"seqwrite-4k [debian:7.3]", "seqwrite-4k [build:e2e-fuse-hello]"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the rerun's comparison lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(cache, "kernels", "debian")); err == nil {
		t.Errorf("the rerun fetched a Debian kernel into %s", cache)
	}
	// Both runs are in the new runs directory: the bundle's and the rerun.
	ents, err := os.ReadDir(runs2)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	if len(names) != 2 || !strings.Contains(strings.Join(names, " "), id) {
		t.Errorf("runs directory after the rerun: %v, want %s and the rerun", names, id)
	}
	var m struct {
		Kernels []struct {
			Ref    string `json:"ref"`
			Kernel struct {
				ID string `json:"id"`
			} `json:"kernel"`
		} `json:"kernels"`
	}
	for _, n := range names {
		if n == id {
			continue
		}
		data, err := os.ReadFile(filepath.Join(runs2, n, "experiment.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range m.Kernels {
			if k.Ref != "bundle:"+k.Kernel.ID {
				t.Errorf("the rerun's manifest names kernel %s as %s, want bundle:<its id>", k.Kernel.ID, k.Ref)
			}
		}
	}
}
