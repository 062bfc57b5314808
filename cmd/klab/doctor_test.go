package main

import (
	"strings"
	"testing"

	"klab/lab"
)

// TestPrintChecks: a warning is marked "warn" and does not fail; a
// failure does; every check is one line, whatever its detail holds.
func TestPrintChecks(t *testing.T) {
	checks := []lab.Check{
		{Name: "qemu", OK: true, Detail: "/usr/bin/qemu-system-x86_64: QEMU emulator version 10.0.0"},
		{Name: "kvm", OK: true, Warn: true, Detail: "TCG is several times slower than KVM; guest failed:\nqemu: line 1\n  line 2"},
	}
	var stdout, stderr strings.Builder
	if err := printChecks(&stdout, &stderr, checks); err != nil {
		t.Fatalf("warnings failed doctor: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ok   qemu ") || !strings.HasPrefix(lines[1], "warn kvm                      TCG is several") ||
		!strings.HasSuffix(lines[1], "guest failed: qemu: line 1 line 2") {
		t.Errorf("doctor printed %q", stdout.String())
	}
	if stderr.String() != "klab: all checks passed (1 warning(s))\n" {
		t.Errorf("stderr %q", stderr.String())
	}
	stdout.Reset()
	checks = append(checks, lab.Check{Name: "go", Detail: "not found"})
	err := printChecks(&stdout, &stderr, checks)
	if ee, ok := err.(*exitError); !ok || ee.code != 1 || ee.msg != "1 check(s) failed (1 warning(s))" || !strings.Contains(stdout.String(), "FAIL go ") {
		t.Errorf("a failed check: %v, %q", err, stdout.String())
	}
}

// TestDoctorProbeFlag: no --probe uses a recent cached verdict, --probe
// proves KVM afresh, --probe=false never boots.
func TestDoctorProbeFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want lab.ProbePolicy
	}{
		{nil, lab.ProbeIfStale},
		{[]string{"--probe"}, lab.ProbeAlways},
		{[]string{"--probe=true"}, lab.ProbeAlways},
		{[]string{"--probe=false"}, lab.ProbeNever},
	} {
		cmd := newDoctorCommand(&globalOptions{})
		if err := cmd.ParseFlags(c.args); err != nil {
			t.Fatal(err)
		}
		o := &doctorOptions{}
		o.probe, _ = cmd.Flags().GetBool("probe")
		if got := o.policy(cmd.Flags().Changed("probe")); got != c.want {
			t.Errorf("doctor %q: policy %v, want %v", c.args, got, c.want)
		}
	}
}
