package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTB records what a requirement check did to its test instead of
// ending it. The embedded testing.TB (the real test) serves every method
// fakeTB does not override.
type fakeTB struct {
	testing.TB
	failed, skipped []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = append(f.failed, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Skip(args ...any) { f.skipped = append(f.skipped, fmt.Sprint(args...)) }

func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped = append(f.skipped, fmt.Sprintf(format, args...))
}

// outcome is "fail: why", "skip: why" or "ran".
func (f *fakeTB) outcome() string {
	switch {
	case len(f.failed) > 0 && len(f.skipped) > 0:
		return fmt.Sprintf("both failed %q and skipped %q", f.failed, f.skipped)
	case len(f.failed) > 0:
		return "fail: " + strings.Join(f.failed, "; ")
	case len(f.skipped) > 0:
		return "skip: " + strings.Join(f.skipped, "; ")
	}
	return "ran"
}

// missingChecks are the requirement checks with their requirement made
// to fail on this host.
var missingChecks = map[string]func(t *testing.T, tb testing.TB){
	"Missing":         func(_ *testing.T, tb testing.TB) { Missing(tb, "widget is not installed") },
	"RequiresCommand": func(_ *testing.T, tb testing.TB) { RequiresCommand(tb, "klab-no-such-command-xyz") },
	"RequiresRoot": func(_ *testing.T, tb testing.TB) {
		defer func(old func() int) { uid = old }(uid)
		uid = func() int { return 1000 }
		RequiresRoot(tb)
	},
	"RequiresFUSE": func(t *testing.T, tb testing.TB) {
		defer func(old string) { devFUSE = old }(devFUSE)
		devFUSE = filepath.Join(t.TempDir(), "no-fuse")
		RequiresFUSE(tb)
	},
	"RequiresQEMU": func(t *testing.T, tb testing.TB) {
		t.Setenv("PATH", t.TempDir())
		RequiresQEMU(tb)
	},
}

// TestMissingSkipsOutsideCIFailsInCI runs every requirement check with its
// requirement unmet, outside CI and in CI.
func TestMissingSkipsOutsideCIFailsInCI(t *testing.T) {
	for name, check := range missingChecks {
		for _, ci := range []string{"", "true"} {
			t.Run(name+"/CI="+ci, func(t *testing.T) {
				t.Setenv("CI", ci)
				f := &fakeTB{TB: t}
				check(t, f)
				got := f.outcome()
				want := "skip: "
				if ci == "true" {
					want = "fail: CI=true but "
				}
				if !strings.HasPrefix(got, want) {
					t.Errorf("%s with CI=%q: %s, want %s...", name, ci, got, want)
				}
			})
		}
	}
}

// TestRequirementsMet checks that a met requirement neither skips nor
// fails, in CI too.
func TestRequirementsMet(t *testing.T) {
	t.Setenv("CI", "true")
	f := &fakeTB{TB: t}
	RequiresCommand(f, "sh")
	defer func(old func() int) { uid = old }(uid)
	uid = func() int { return 0 }
	RequiresRoot(f)
	if got := f.outcome(); got != "ran" {
		t.Errorf("sh in PATH and uid 0: %s", got)
	}
}

// TestDeliberateSkipsSkipInCI checks that -short and opt-in skips are not
// turned into failures in CI.
func TestDeliberateSkipsSkipInCI(t *testing.T) {
	t.Setenv("CI", "true")
	t.Setenv("KLAB_TESTENV_OPTIN", "")
	f := &fakeTB{TB: t}
	OptIn(f, "KLAB_TESTENV_OPTIN", "a long measurement")
	if got := f.outcome(); got != "skip: a long measurement: set KLAB_TESTENV_OPTIN=1 to run it" {
		t.Errorf("OptIn unset: %s", got)
	}
	t.Setenv("KLAB_TESTENV_OPTIN", "1")
	f = &fakeTB{TB: t}
	OptIn(f, "KLAB_TESTENV_OPTIN", "a long measurement")
	if got := f.outcome(); got != "ran" {
		t.Errorf("OptIn set: %s", got)
	}
	f = &fakeTB{TB: t}
	Short(f, "slow")
	want := "ran"
	if testing.Short() {
		want = "skip: slow; skipped with -short"
	}
	if got := f.outcome(); got != want {
		t.Errorf("Short: %s, want %s", got, want)
	}
}

// helperEnv makes TestHelperMissing act: it is run only as a subprocess of
// TestMissingInCIFailsTheTestBinary.
const helperEnv = "KLAB_TESTENV_HELPER"

func TestHelperMissing(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	Missing(t, "widget is not installed")
	t.Log("after Missing")
}

// TestMissingInCIFailsTheTestBinary runs a real test that lacks something
// in a child test binary, with and without CI=true: the testing package
// itself must report a failure in CI and a skip outside it, and the test
// must not go on after Missing.
func TestMissingInCIFailsTheTestBinary(t *testing.T) {
	for _, c := range []struct {
		ci, want string
		fail     bool
	}{
		{"true", "--- FAIL: TestHelperMissing", true},
		{"", "--- SKIP: TestHelperMissing", false},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestHelperMissing$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"=1", "CI="+c.ci)
		out, err := cmd.CombinedOutput()
		_, exited := err.(*exec.ExitError)
		if (err != nil) != c.fail || (err != nil && !exited) {
			t.Errorf("CI=%q: %v, want failure %v\n%s", c.ci, err, c.fail, out)
		}
		if !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "widget is not installed") {
			t.Errorf("CI=%q: output lacks %q and the reason:\n%s", c.ci, c.want, out)
		}
		if strings.Contains(string(out), "after Missing") {
			t.Errorf("CI=%q: the test went on after Missing:\n%s", c.ci, out)
		}
	}
}

func TestInCI(t *testing.T) {
	t.Setenv("CI", "true")
	if !InCI() {
		t.Fatal("CI=true not seen")
	}
	t.Setenv("CI", "")
	if InCI() {
		t.Fatal("CI unset seen as CI")
	}
}
