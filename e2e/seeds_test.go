package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"klab/internal/testenv"
)

// runExperiment runs a shipped experiment by name with args and returns
// its JSON report, failing the test when klab fails or any sample has no
// value.
func runExperiment(t *testing.T, name string, args ...string) report {
	t.Helper()
	runs := t.TempDir()
	start := time.Now()
	r := runTimeout(t, runs, 30*time.Minute, append([]string{"run", name, "--format", "json"}, args...)...)
	t.Logf("klab run %s took %s", name, time.Since(start).Round(time.Second))
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("klab run %s: exit %d, no JSON report: %v\n%s", name, r.code, err, tail(r.stdout, 20))
	}
	if r.code != 0 {
		t.Fatalf("klab run %s: exit %d, failures %q", name, r.code, rep.Failures)
	}
	for _, row := range rep.Rows {
		t.Logf("%s: A %v B %v, %s (p=%.3f)", row.Name, row.A.Values, row.B.Values, row.Change.Verdict, row.Change.P)
		if row.A.N == 0 || row.B.N == 0 {
			t.Errorf("%s: a side has no samples", row.Name)
		}
		for _, v := range append(row.A.Values, row.B.Values...) {
			if v <= 0 {
				t.Errorf("%s: sample %v", row.Name, v)
			}
		}
	}
	return rep
}

// TestSeedFUSETimeout runs seed 000's experiment in a reduced shape: klab's
// server only, one round, default_request_timeout 0 against 500, and the
// stuck-server check on both sides. The check measures how long the stuck
// call took, so the test runs alone.
func TestSeedFUSETimeout(t *testing.T) {
	testenv.E2E(t)
	rep := runExperiment(t, "fuse-timeout", "--kernel", "debian:7.3", "--rounds", "1", "--set", "server=passthrough", "--set", "kernel_passthrough=false")
	if len(rep.Rows) != 1 || rep.A.Label != "request_timeout=0" || rep.B.Label != "request_timeout=500" {
		t.Errorf("rows %d, A %s, B %s", len(rep.Rows), rep.A.Label, rep.B.Label)
	}
	if len(rep.Checks) != 2 {
		t.Errorf("%d checks, want the stuck-server check on each side", len(rep.Checks))
	}
	for _, c := range rep.Checks {
		if !c.Passed {
			t.Errorf("check %s failed", c.Name)
		}
	}
}

// TestSeedFUSEInterrupt runs seed 004's experiment on its two kernels in a
// reduced shape: one thread count, klab's server, one round.
func TestSeedFUSEInterrupt(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	rep := runExperiment(t, "fuse-interrupt", "--kernel", "debian:6.12", "--kernel", "debian:7.3",
		"--rounds", "1", "--set", "threads=4", "--set", "server=passthrough")
	if len(rep.Rows) != 3 || !strings.HasPrefix(rep.Rows[0].Name, "futimes threads=4") {
		t.Errorf("rows: %+v", rep.Rows)
	}
	if len(rep.Checks) != 2 {
		t.Errorf("%d checks, want the interrupt check on each kernel", len(rep.Checks))
	}
	// The seed's evidence: perf record -a -g of the whole guest on both
	// kernels, and the reply path's share of it.
	if len(rep.Profiles) != 1 {
		t.Fatalf("%d profiles, want the futimes row's", len(rep.Profiles))
	}
	p := rep.Profiles[0]
	if p.SamplesA < 100 || p.SamplesB < 100 {
		t.Errorf("profile samples: A %d, B %d, want at least 100 each", p.SamplesA, p.SamplesB)
	}
	found := false
	for _, f := range p.Functions {
		if f.Func == "fuse_dev_do_write" {
			found = true
			if f.A <= 0 || f.B <= 0 || f.A >= 1 || f.B >= 1 {
				t.Errorf("fuse_dev_do_write's share: A %.3f, B %.3f, want the server's replies on both kernels", f.A, f.B)
			}
		}
	}
	if !found || len(p.Changed) == 0 {
		t.Errorf("profile: functions %+v, changed %+v", p.Functions, p.Changed)
	}
	for _, f := range p.Files {
		if _, err := os.Stat(filepath.Join(rep.RunDir, f)); err != nil {
			t.Errorf("profile file: %v", err)
		}
	}
}

// TestSeedFUSEURing runs seed 003's experiment at one job count, one
// round: every table's cell over /dev/fuse and io_uring, the bytes checked
// against the server's reads.
func TestSeedFUSEURing(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	rep := runExperiment(t, "fuse-uring", "--kernel", "debian:7.3", "--rounds", "1", "--set", "jobs=2")
	if len(rep.Rows) != 5 {
		t.Errorf("%d rows, want paged 128k and 1m, dio 1m, mmap 4k and creates", len(rep.Rows))
	}
	// The hang from the thread: a killed server leaves no client hanging,
	// over either transport.
	if len(rep.Checks) != 2 {
		t.Errorf("%d checks, want killed-server over dev and uring", len(rep.Checks))
	}
	for _, c := range rep.Checks {
		if c.Name != "killed-server" || !c.Passed {
			t.Errorf("check %+v", c)
		}
	}
}

// seedExt4Lazytime builds linux-source-7.3 with the lab config, with and
// without the revert patch (incremental builds of the work tree that
// TestKernelBuilds/patched builds in), and runs seed 002's experiment on
// them for one round.
func seedExt4Lazytime(t *testing.T) {
	for _, args := range [][]string{
		{"kernels", "build", "--source", "debian:7.3", "--config", "lab", "--name", "e2e-lab"},
		{"kernels", "build", "--source", "debian:7.3", "--config", "lab", "--name", "e2e-ext4-revert",
			"--patches", "experiments/patches/ext4-lazytime-revert.patch"},
	} {
		if r := runBuild(t, 60*time.Minute, args...); r.code != 0 {
			t.Fatalf("%v: exit %d", args, r.code)
		} else {
			t.Logf("%s took %.1fs", args[len(args)-1], r.wall.Seconds())
		}
	}
	holdGuestSlot(t)
	rep := runExperiment(t, "ext4-lazytime", "--kernel", "build:e2e-ext4-revert", "--kernel", "build:e2e-lab", "--rounds", "1")
	if len(rep.Rows) != 2 {
		t.Errorf("%d rows, want fio's and the Go engine's", len(rep.Rows))
	}
}

// TestSeedFUSEURingReviewBug is seed 003's review bug as an A/B: 7.3 built
// with the lab and debug configs, against the same tree with the patch
// that allocates the processing queue under the channel spinlock. B must
// report "BUG: sleeping function called from invalid context" as new, and
// the run must fail with it (exit 1, a JUnit failure), while A is clean.
// Its cold debug build takes about 10 minutes on 2 cores, so it runs only
// when KLAB_E2E_DEBUG_BUILD=1.
func TestSeedFUSEURingReviewBug(t *testing.T) {
	testenv.E2E(t)
	if os.Getenv("KLAB_E2E_DEBUG_BUILD") != "1" {
		t.Skip("needs a cold lab,debug kernel build (about 10 minutes on 2 cores): set KLAB_E2E_DEBUG_BUILD=1")
	}
	requiresBuildTools(t)
	for _, args := range [][]string{
		{"kernels", "build", "--source", "debian:7.3", "--config", "lab,debug", "--name", "e2e-debug"},
		{"kernels", "build", "--source", "debian:7.3", "--config", "lab,debug", "--name", "e2e-debug-uring-bug",
			"--patches", "experiments/patches/fuse-uring-alloc-under-lock.patch"},
	} {
		if r := runLong(t, 60*time.Minute, args...); r.code != 0 {
			t.Fatalf("%v: exit %d", args, r.code)
		} else {
			t.Logf("%s took %.1fs", args[len(args)-1], r.wall.Seconds())
		}
	}
	runs := t.TempDir()
	r := runTimeout(t, runs, 30*time.Minute, "run", "fuse-uring", "--format", "json", "--kernel", "build:e2e-debug", "--kernel", "build:e2e-debug-uring-bug",
		"--compare", "kernel", "--set", "transport=uring", "--set", "jobs=1", "--rounds", "1")
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("exit %d, no JSON report: %v\n%s", r.code, err, tail(r.stdout, 20))
	}
	if r.code != 1 {
		t.Errorf("exit %d, want 1 (a new splat in B)", r.code)
	}
	const title = "BUG: sleeping function called from invalid context"
	found := false
	for _, s := range rep.Splats.New {
		t.Logf("new in B: %s (A %d, B %d)", s.Title, s.A, s.B)
		if strings.HasPrefix(s.Title, title) && s.A == 0 && s.B > 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("no %q new in B: %+v", title, rep.Splats.New)
	}
	if !slices.ContainsFunc(rep.Failures, func(f string) bool { return strings.Contains(f, title) }) {
		t.Errorf("failures %q do not name the splat", rep.Failures)
	}
	junit, err := os.ReadFile(filepath.Join(rep.RunDir, "report.xml"))
	if err != nil || !strings.Contains(string(junit), "<failure") || !strings.Contains(string(junit), title) {
		t.Errorf("report.xml: %v, no failure naming the splat", err)
	}
}
