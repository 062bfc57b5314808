// Package testenv holds the requirement checks that tests share. Outside CI
// a missing requirement skips the test and says why; in CI (CI=true) it
// fails the test instead, because CI must install everything the tests need.
//
// Every test that depends on the host (a command, root, a device, a kernel
// feature) goes through Missing or one of the Requires helpers, never
// through a bare t.Skip. Tests that are left out on purpose (-short, or an
// opt-in variable for a long measurement) say so with Short and OptIn,
// which skip in CI too: they are not requirements.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing reports that the host lacks what t needs: outside CI it skips t
// with why; in CI it fails t, since CI must provide it.
func Missing(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true but %s: the Makefile must install it", why)
		return // t.Fatalf does not return, except on a fake testing.TB
	}
	t.Skip(why)
}

// Missingf is Missing with a format.
func Missingf(t testing.TB, format string, args ...any) {
	t.Helper()
	Missing(t, fmt.Sprintf(format, args...))
}

// RequiresQEMU needs qemu-system-x86_64 in PATH.
func RequiresQEMU(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		Missing(t, "qemu-system-x86_64 is not installed")
	}
}

// uid is os.Getuid, replaced by this package's tests.
var uid = os.Getuid

// RequiresRoot needs uid 0 (for /dev/fuse mounts, module loading, ...).
// CI runs as root.
func RequiresRoot(t testing.TB) {
	t.Helper()
	if uid() != 0 {
		Missing(t, "the test needs root")
	}
}

// devFUSE is the FUSE device RequiresFUSE checks, replaced by this
// package's tests.
var devFUSE = "/dev/fuse"

// RequiresFUSE needs root and the FUSE device, to mount FUSE file systems.
func RequiresFUSE(t testing.TB) {
	t.Helper()
	RequiresRoot(t)
	if _, err := os.Stat(devFUSE); err != nil {
		Missingf(t, "%s is missing (the fuse module): %v", devFUSE, err)
	}
}

// RequiresCommand needs a host command in PATH.
func RequiresCommand(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		Missing(t, name+" is not installed")
	}
}

// Short skips t under -short, in CI too: what is skipped ran too long for
// a quick pass, and it is no missing requirement.
func Short(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip(why + "; skipped with -short")
	}
}

// OptIn skips t unless the environment variable env is "1", in CI too:
// the test is a long measurement that a user asks for, not a requirement.
func OptIn(t testing.TB, env, what string) {
	t.Helper()
	if os.Getenv(env) != "1" {
		t.Skipf("%s: set %s=1 to run it", what, env)
	}
}

// E2E marks an end-to-end test: it boots real kernels, so -short skips it.
func E2E(t testing.TB) {
	t.Helper()
	Short(t, "end-to-end test: boots real kernels under QEMU")
	RequiresQEMU(t)
}
