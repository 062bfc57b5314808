package e2e

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/images"
	"klab/images/debian"
	"klab/internal/paths"
	"klab/internal/testenv"
	"klab/results/suite"
)

// fstestsSource is the fstests source for e2e tests: KLAB_FSTESTS_SRC, or
// the snapshot CI keeps next to the project (../shared/fstests).
func fstestsSource(t *testing.T) string {
	t.Helper()
	if src := os.Getenv("KLAB_FSTESTS_SRC"); src != "" {
		return src
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	pattern := filepath.Join(filepath.Dir(filepath.Dir(wd)), "shared", "fstests", "fstests-*.tar.gz")
	matches, _ := filepath.Glob(pattern)
	if len(matches) == 0 {
		testenv.Missingf(t, "no fstests source: set KLAB_FSTESTS_SRC to a checkout or tarball, or put the snapshot at %s", pattern)
	}
	return matches[len(matches)-1]
}

// fstestsCheapTests are two fstests tests that take seconds under TCG and
// go through FUSE's paths: mknod of every node type, and ctime updates.
var fstestsCheapTests = []string{"generic/184", "generic/236"}

// fstestsSlow is a test that runs far longer than fstestsHangTimeout
// under TCG (fsstress: about 170 s over FUSE), made to hang by it.
const (
	fstestsSlow        = "generic/013"
	fstestsHangTimeout = "40s"
)

// TestFstestsConfigs runs fstests through `klab fstests` on debian:7.3
// in each kind of configuration, one guest each, side by side: ext4 on
// brd, klab's server over /dev/fuse and over io_uring, and libfuse's
// passthrough_hp over io_uring; every test passes, and each FUSE test
// records the transport that served it. The /dev/fuse run is also the
// crash-and-continue case: a slow test made to hang by --test-timeout,
// then a fresh guest for the tests after it.
func TestFstestsConfigs(t *testing.T) {
	testenv.E2E(t)
	testenv.RequiresCommand(t, "mke2fs")
	t.Parallel()
	src := fstestsSource(t)
	// fstests and the userspace are built (or found in the cache)
	// before the subtests take guest slots.
	if r := runLong(t, coldBuild, "fstests", "build", "--src", src); r.code != 0 {
		if strings.Contains(r.stderr, "build fstests: missing ") {
			testenv.Missing(t, "fstests' build dependencies (make fstests-deps)")
		}
		t.Fatalf("fstests build: exit %d", r.code)
	}
	if r := runLong(t, coldBuild, "userspace", "build"); r.code != 0 {
		t.Fatalf("userspace build: exit %d", r.code)
	}
	for _, c := range []struct {
		config string
		// transport matches each test's proof; its group, the number
		// of requests the configured transport served.
		transport string
		hang      bool
	}{
		{config: "ext4"},
		{config: "fuse-klab-dev", transport: `^dev=([0-9]+) uring=0$`, hang: true},
		{config: "fuse-klab-uring", transport: `^dev=0 uring=([0-9]+)$`},
		{config: "fuse-hp-uring", transport: `^uring=([0-9]+)$`},
	} {
		t.Run(c.config, func(t *testing.T) {
			t.Parallel()
			if strings.HasPrefix(c.config, "fuse-hp-") {
				buildPassthroughHP(t)
			}
			holdGuestSlot(t)
			tests, args := fstestsCheapTests, []string{"--test-timeout", "5m"}
			if c.hang {
				tests = append([]string{fstestsSlow}, tests...)
				args = []string{"--test-timeout", fstestsHangTimeout}
			}
			runs := t.TempDir()
			args = append([]string{"fstests", "--kernel", "debian:7.3", "--config", c.config, "--fstests-src", src}, args...)
			r := runTimeout(t, runs, 20*time.Minute, append(args, tests...)...)
			t.Logf("%s in %.0fs; report:\n%s", c.config, r.wall.Seconds(), r.stdout)
			want := 0
			if c.hang {
				want = 1 // a test hung
			}
			if r.code != want {
				t.Errorf("exit %d, want %d", r.code, want)
			}
			dir := onlyRun(t, runs)
			run, err := suite.Load(filepath.Join(dir, "run.json"))
			if err != nil {
				t.Fatal(err)
			}
			if len(run.Tests) != len(tests) {
				t.Fatalf("run.json has %d tests, want %s: %+v", len(run.Tests), tests, run.Tests)
			}
			for i, rt := range run.Tests {
				wantStatus := proto.TestPass
				if c.hang && i == 0 {
					wantStatus = proto.TestHang
				}
				if rt.Name != tests[i] || rt.Status != wantStatus {
					t.Errorf("test %d: %s %s (%s), want %s %s\ndiff:\n%s\nlog tail:\n%s", i, rt.Name, rt.Status, rt.Reason, tests[i], wantStatus, rt.Diff, rt.LogTail)
				}
				t.Logf("%s %s in %.1fs, transport %q", rt.Name, rt.Status, rt.Seconds, rt.Transport)
				if c.transport == "" || rt.Status != proto.TestPass {
					continue
				}
				m := regexp.MustCompile(c.transport).FindStringSubmatch(rt.Transport)
				if m == nil || m[1] == "0" {
					t.Errorf("%s: transport %q, want %s with requests served", rt.Name, rt.Transport, c.transport)
				}
			}
			junit := readJUnit(t, filepath.Join(dir, "junit.xml"))
			for _, name := range tests {
				if _, ok := junit[name]; !ok {
					t.Errorf("junit.xml has no testcase %s", name)
				}
			}
			boots, _ := os.ReadDir(filepath.Join(dir, "boots"))
			if !c.hang {
				if len(boots) != 1 {
					t.Errorf("%d guests booted, want 1", len(boots))
				}
				return
			}
			// The hang: check killed at the timeout, the test marked hang
			// with why, and a second guest for the tests after it.
			if h := run.Tests[0]; !strings.Contains(h.Reason, "per-test timeout of "+fstestsHangTimeout) {
				t.Errorf("%s: reason %q, want the per-test timeout", h.Name, h.Reason)
			}
			if f := junit[fstestsSlow]; f.Failure == nil || f.Failure.Type != proto.TestHang {
				t.Errorf("junit.xml: %s is not a hang failure: %+v", fstestsSlow, f)
			}
			for _, name := range fstestsCheapTests {
				if f := junit[name]; f.Failure != nil || f.Skipped != nil {
					t.Errorf("junit.xml: %s did not pass: %+v", name, f)
				}
			}
			if len(boots) != 2 {
				t.Errorf("%d guests booted, want 2: one until %s hung, a fresh one for the rest", len(boots), fstestsSlow)
			}
		})
	}
}

// buildPassthroughHP builds libfuse's passthrough_hp into klab's cache
// (about a minute, once: later calls find it there), where klab fstests
// finds it for the fuse-hp configurations.
func buildPassthroughHP(t *testing.T) {
	t.Helper()
	for _, c := range []string{"meson", "ninja", "c++", "pkg-config"} {
		testenv.RequiresCommand(t, c)
	}
	start := time.Now()
	bin, version, err := images.BuildPassthroughHP(testContext(t, 20*time.Minute), images.PassthroughHPOptions{
		DebianOptions: debian.Options{CacheDir: paths.CacheDir(), Progress: &logWriter{t: t, prefix: "libfuse| "}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("passthrough_hp %s: %s in %v", version, bin, time.Since(start).Round(time.Millisecond))
}

// junitCase is the part of a JUnit testcase the tests read.
type junitCase struct {
	Name    string `xml:"name,attr"`
	Failure *struct {
		Type    string `xml:"type,attr"`
		Message string `xml:"message,attr"`
	} `xml:"failure"`
	Skipped   *struct{} `xml:"skipped"`
	SystemOut string    `xml:"system-out"`
}

// readJUnit reads a JUnit report's testcases, by name.
func readJUnit(t *testing.T, path string) map[string]junitCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Cases []junitCase `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]junitCase{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			out[c.Name] = c
		}
	}
	return out
}

// TestFstestsBadInput: klab fstests refuses what it cannot run, with exit
// status 2, a message naming the fix, and no run directory: an unknown
// configuration, a test of another file system than the configuration's,
// and no fstests source, or one that is not there. It boots nothing.
func TestFstestsBadInput(t *testing.T) {
	t.Setenv("KLAB_FSTESTS_SRC", "") // klab takes an empty value as unset
	runs := t.TempDir()
	missing := filepath.Join(t.TempDir(), "no-such-fstests")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown config", []string{"--config", "fuse", "generic/184"},
			[]string{`unknown fstests configuration "fuse": one of ext4, fuse-hp-dev, fuse-hp-uring, fuse-klab-dev, fuse-klab-uring`}},
		{"other file system", []string{"--config", "fuse-klab-uring", "ext4/001", "generic/184"},
			[]string{"ext4/001 does not apply to configuration fuse-klab-uring: its tests are those of generic"}},
		{"no source", []string{"--config", "ext4", "generic/184"},
			[]string{"no fstests source", "--fstests-src DIR|TARBALL", "$KLAB_FSTESTS_SRC"}},
		{"source not there", []string{"--config", "ext4", "--fstests-src", missing, "generic/184"},
			[]string{"--fstests-src", missing}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, runs, append([]string{"fstests", "--kernel", "debian:7.3"}, c.args...)...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2", r.code)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
		})
	}
	if ents, _ := os.ReadDir(runs); len(ents) != 0 {
		t.Errorf("bad input left %d run directories behind", len(ents))
	}
}

// fstestsABMknod builds the lab kernel of TestKernelBuilds/patched
// again with fuse-mknod-rdev.patch on top (an incremental build of the
// same work tree: fs/fuse only), and runs `klab fstests` with the two as A
// and B on klab's server over /dev/fuse. generic/184 (mknod) must be a
// regression of B after its rerun on both sides: in the text report,
// with a JUnit failure and exit status 1, while A passes both tests and
// generic/236 passes on both.
func fstestsABMknod(t *testing.T) {
	src := fstestsSource(t)
	r := runBuild(t, coldBuild, "kernels", "build", "--source", "debian:7.3", "--config", "lab",
		"--patches", helloPatch, "--patches", mknodPatch, "--name", "e2e-fuse-mknod-rdev")
	if r.code != 0 {
		t.Fatalf("kernels build: exit %d", r.code)
	}
	t.Logf("incremental build with %s took %.1fs", filepath.Base(mknodPatch), r.wall.Seconds())

	// A and B run side by side: a guest slot for each.
	for range min(2, guestLimit()) {
		holdGuestSlot(t)
	}
	runs := t.TempDir()
	r = runTimeout(t, runs, 20*time.Minute, append([]string{"fstests", "--kernel", "build:e2e-fuse-hello", "--kernel", "build:e2e-fuse-mknod-rdev",
		"--config", "fuse-klab-dev", "--reruns", "1", "--test-timeout", "5m", "--fstests-src", src}, fstestsCheapTests...)...)
	t.Logf("A/B in %.0fs; the text report:\n%s", r.wall.Seconds(), r.stdout)
	if r.code != 1 {
		t.Errorf("exit %d, want 1 (a regression in B)", r.code)
	}
	if !strings.Contains(r.stdout, "REGRESSED: 1 newly failing on B") || !regexp.MustCompile(`(?m)^Regressions: fail on B repeatedly, never on A \(1\):\n\s+generic/184 +A pass 0/2, B fail 2/2`).MatchString(r.stdout) {
		t.Errorf("the text report does not name generic/184 as B's regression")
	}
	dir := onlyRun(t, runs)
	sides := map[string]*suite.Run{}
	for _, side := range []string{"a", "b"} {
		run, err := suite.Load(filepath.Join(dir, side+".json"))
		if err != nil {
			t.Fatal(err)
		}
		sides[side] = run
	}
	for _, c := range []struct {
		side, test, status string
		fails, runs        int
	}{
		{"a", "generic/184", proto.TestPass, 0, 2},
		{"b", "generic/184", proto.TestFail, 2, 2},
		{"a", "generic/236", proto.TestPass, 0, 1},
		{"b", "generic/236", proto.TestPass, 0, 1},
	} {
		rt := sides[c.side].Test(c.test)
		if rt == nil {
			t.Errorf("%s.json lacks %s", c.side, c.test)
			continue
		}
		if fails, runs := rt.Tally(); rt.Status != c.status || fails != c.fails || runs != c.runs {
			t.Errorf("%s.json: %s %s, failed %d of %d runs; want %s, %d of %d", c.side, c.test, rt.Status, fails, runs, c.status, c.fails, c.runs)
		}
	}
	junit := readJUnit(t, filepath.Join(dir, "junit.xml"))
	if f := junit["generic/184"].Failure; f == nil || !strings.HasPrefix(f.Message, "regression: ") {
		t.Errorf("junit.xml: generic/184 is no regression failure: %+v", junit["generic/184"])
	}
	if c, ok := junit["generic/236"]; !ok || c.Failure != nil || c.Skipped != nil {
		t.Errorf("junit.xml: generic/236 did not pass: %+v", c)
	}
}
