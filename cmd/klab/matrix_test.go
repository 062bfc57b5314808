package main

import (
	"os"
	"strings"
	"testing"
)

// TestMatrixFlagErrors: klab matrix's and klab results' bad flags are bad
// input that names the flag.
func TestMatrixFlagErrors(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(full+"/x", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	smoke := "../../matrices/smoke.yaml"
	suite := t.TempDir() + "/suite.yaml"
	if err := os.WriteFile(suite, []byte("name: s\nkernels: [debian:7.3]\nexperiments: [fstests-klab-uring]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KLAB_FSTESTS_SRC", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"matrix", "run", smoke, "--shard", "3/2"}, `--shard "3/2": want i/n with 1 <= i <= n <= 1000`},
		{[]string{"matrix", "plan", smoke, "--shard", "0/1"}, `--shard "0/1": want i/n`},
		{[]string{"matrix", "emit", smoke, "--shards", "0"}, "--shards 0: want 1..256"},
		{[]string{"matrix", "emit", smoke, "--engine", "jenkins"}, `--engine "jenkins": want one of github, gitlab`},
		{[]string{"matrix", "run", smoke, "--fstests-src", full}, "--fstests-src: ../../matrices/smoke.yaml has no suite experiment (fstests)"},
		{[]string{"matrix", "run", suite, "--out", t.TempDir() + "/o"}, "has suite experiments (fstests): no fstests source: klab builds fstests from your checkout or a tarball of one; name it with --fstests-src DIR|TARBALL (or $KLAB_FSTESTS_SRC)"},
		{[]string{"matrix", "run", suite, "--out", t.TempDir() + "/o", "--fstests-src", full + "/none"}, "has suite experiments (fstests): --fstests-src: fstests source " + full + "/none does not exist"},
		{[]string{"results", "merge", t.TempDir(), "--out", full}, "--out " + full + " exists and is not empty"},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		if code != exitBadInput || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("klab %q: status %d, stdout %q, stderr %q; want status %d and %q", tc.args, code, stdout, stderr, exitBadInput, tc.want)
		}
	}
}
