package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/internal/fileio"
	"klab/matrix"
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

// writeRefMatrix writes a matrix results tree of one cell: writeRefRun's
// run of refRunSpec (an A/B of block sizes whose expectation it
// contradicts) on debian:7.3, and returns the tree.
func writeRefMatrix(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tree")
	cell := matrix.Cell{ID: "refrun@debian_7.3", Kernel: "debian:7.3", Experiment: "refrun"}
	cellDir := filepath.Join(dir, matrix.CellsDir, cell.ID)
	if err := os.MkdirAll(cellDir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := writeRefRun(t)
	if err := os.Rename(run, filepath.Join(cellDir, filepath.Base(run))); err != nil {
		t.Fatal(err)
	}
	man := &matrix.Manifest{Schema: matrix.ManifestSchema, Name: "ref", File: "ref.yaml", Kernels: []string{"debian:7.3"},
		Experiments: []string{"refrun"}, Baseline: "debian:7.3", Cells: []matrix.Cell{cell}, Total: 1}
	res := &matrix.CellResult{Cell: cell, Status: matrix.StatusComplete, Run: filepath.Join(matrix.CellsDir, cell.ID, filepath.Base(run))}
	if err := fileio.WriteJSON(filepath.Join(dir, matrix.ManifestFile), man); err != nil {
		t.Fatal(err)
	}
	if err := fileio.WriteJSON(filepath.Join(cellDir, matrix.CellFile), res); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMatrixReportStrictReference: klab matrix report shows a cell's
// contradicted reference on its kernel and exits 0; with
// --strict-reference the contradiction fails the matrix, in the result
// line and in a JUnit reference testcase, and it exits 1.
func TestMatrixReportStrictReference(t *testing.T) {
	dir := writeRefMatrix(t)
	code, stdout, stderr := runCLI(t, "matrix", "report", dir)
	if code != 0 || !strings.Contains(stdout, "refrun randread (worse)  1.98x CONTRADICTED") || !strings.Contains(stdout, "result: PASS") {
		t.Errorf("klab matrix report: status %d, stderr %q:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = runCLI(t, "matrix", "report", dir, "--strict-reference")
	flat := strings.Join(strings.Fields(stdout), " ")
	if code != 1 || !strings.Contains(stdout, "refrun randread (worse)  1.98x CONTRADICTED [1]\n") || !strings.Contains(stdout, "\n[1] strict: the contradiction fails the matrix\n") ||
		!strings.Contains(flat, "result: FAIL: refrun on debian:7.3: randread: contradicts the reference: B/A 1.98x, the reference's worse (wrong on purpose)") {
		t.Errorf("klab matrix report --strict-reference: status %d:\n%s", code, stdout)
	}
	// The tree's reports are rewritten: the JUnit one fails the
	// reference's testcase.
	xml, err := os.ReadFile(filepath.Join(dir, "report.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(xml), `<testcase classname="refrun.reference" name="reference: randread"`) || !strings.Contains(string(xml), `type="reference"`) ||
		!strings.Contains(string(xml), `failures="1"`) {
		t.Errorf("report.xml with --strict-reference:\n%s", xml)
	}
	code, stdout, _ = runCLI(t, "matrix", "report", dir, "--format", "junit")
	if code != 0 || strings.Contains(stdout, `type="reference"`) || !strings.Contains(stdout, `name="reference: randread"`) {
		t.Errorf("klab matrix report --format junit: status %d:\n%s", code, stdout)
	}
}
