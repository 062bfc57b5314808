// Package testenv holds the requirement checks that tests share. Outside CI
// a missing requirement skips the test and says why; in CI (CI=true) it
// fails the test instead, because CI must install everything the tests need.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run in CI.
func InCI() bool { return os.Getenv("CI") == "true" }

// skipOrFail skips outside CI and fails in CI.
func skipOrFail(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("CI=true but %s: the Makefile must install it", why)
	}
	t.Skip(why)
}

// RequiresQEMU needs qemu-system-x86_64 in PATH.
func RequiresQEMU(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		skipOrFail(t, "qemu-system-x86_64 is not installed")
	}
}

// RequiresRoot needs uid 0 (for /dev/fuse mounts, module loading, ...).
func RequiresRoot(t testing.TB) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
}

// RequiresCommand needs a host command in PATH.
func RequiresCommand(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		skipOrFail(t, name+" is not installed")
	}
}

// E2E marks an end-to-end test: it boots real kernels, so -short skips it.
func E2E(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: boots real kernels under QEMU; skipped with -short")
	}
	RequiresQEMU(t)
}
