package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/images/debian"
	imgfstests "klab/images/fstests"
	"klab/images/userspace"
	"klab/internal/paths"
	"klab/internal/testenv"
	"klab/lab"
	"klab/lab/fstests"
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

// TestFstestsExt4InGuest runs two cheap fstests tests on ext4 on brd in
// one guest of debian:7.3 (or KLAB_USERSPACE_KERNEL) and checks that each
// comes back with a status, in order, with check's result.xml.
func TestFstestsExt4InGuest(t *testing.T) {
	testenv.E2E(t)
	testenv.RequiresCommand(t, "mke2fs")
	parallelGuest(t)
	ctx := testContext(t, 30*time.Minute)
	cache := paths.CacheDir()
	built, err := imgfstests.Build(ctx, fstestsSource(t), imgfstests.Options{CacheDir: cache, Progress: &logWriter{t: t, prefix: "fstests| "}})
	if err != nil {
		if strings.Contains(err.Error(), "missing") {
			testenv.Missing(t, err.Error())
		}
		t.Fatal(err)
	}
	img, err := userspace.Build(ctx, userspace.Spec{}, userspace.Options{
		Debian: debian.Options{CacheDir: cache}, Progress: &logWriter{t: t, prefix: "userspace| "},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := &lab.Options{CacheDir: cache, RunsDir: t.TempDir(), Progress: &logWriter{t: t, prefix: "klab| "}}
	ref := os.Getenv("KLAB_USERSPACE_KERNEL")
	if ref == "" {
		ref = "debian:7.3"
	}
	k, err := o.ResolveKernel(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	tests := []string{"generic/184", "generic/236"}
	start := time.Now()
	res, err := fstests.RunGuest(ctx, o, fstests.GuestRequest{
		Kernel: k, Userspace: img, Fstests: built,
		Config:      proto.FstestsConfig{Name: "ext4", FSType: proto.FstestsExt4},
		Tests:       tests,
		TestTimeout: 10 * time.Minute,
		RamdiskMiB:  256,
		Console:     &logWriter{t: t, prefix: "console| "},
		OnTest: func(r proto.TestResult) {
			t.Logf("test %s: %s in %.1fs %s", r.Name, r.Status, r.Seconds, r.Reason)
		},
		Command: []string{"go", "test", "-run", t.Name()},
	})
	wall := time.Since(start)
	if res == nil {
		t.Fatal(err)
	}
	for _, r := range res.Tests {
		if r.Status != proto.TestPass {
			t.Logf("%s %s: %s\ndiff:\n%s\nlog tail:\n%s", r.Name, r.Status, r.Reason, r.Diff, r.LogTail)
		}
	}
	if err != nil {
		t.Fatalf("RunGuest: %v (run %s)", err, res.RunDir)
	}
	t.Logf("boot to agent %v; userspace step %v; fstests step %v; whole guest %v; run %s",
		res.BootToAgent.Round(time.Millisecond), res.Mount.Round(time.Millisecond), res.Step.Round(time.Millisecond), wall.Round(time.Millisecond), res.RunDir)
	if len(res.Tests) != len(tests) || res.Running != "" || len(res.Remaining) > 0 {
		t.Fatalf("results %+v, running %q, remaining %v; want one per test", res.Tests, res.Running, res.Remaining)
	}
	for i, r := range res.Tests {
		if r.Name != tests[i] {
			t.Errorf("result %d is %s, want %s", i, r.Name, tests[i])
		}
		switch r.Status {
		case proto.TestPass, proto.TestNotRun, proto.TestFail:
		default:
			t.Errorf("%s: status %q", r.Name, r.Status)
		}
		if !strings.Contains(res.XUnit, `name="`+r.Name+`"`) {
			t.Errorf("result.xml lacks %s:\n%s", r.Name, res.XUnit)
		}
	}
	if res.Tests[0].Status != proto.TestPass {
		t.Errorf("generic/184 (mknod on ext4) did not pass: %+v", res.Tests[0])
	}
	var ke *lab.KernelError
	if errors.As(err, &ke) {
		t.Errorf("kernel error: %v", ke)
	}
}
