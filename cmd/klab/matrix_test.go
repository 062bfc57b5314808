package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/experiments"
	"klab/internal/fileio"
	"klab/matrix"
	"klab/results/splat"
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

// writeShards writes the two shard trees of a matrix of refrun on
// debian:6.12 (the baseline, shard 1/2) and debian:7.3 (shard 2/2), each
// cell a finished run of refRunSpec, as klab matrix run --shard leaves
// them in a CI job, and returns their directories. edit, when set, may
// change each cell's result and its run's manifest before they are
// written.
func writeShards(t *testing.T, edit func(c matrix.Cell, r *matrix.CellResult, m *experiments.Manifest)) []string {
	t.Helper()
	root := t.TempDir()
	kernels := []string{"debian:6.12", "debian:7.3"}
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var dirs []string
	for i, k := range kernels {
		dir := filepath.Join(root, fmt.Sprintf("results-%d", i+1))
		c := matrix.Cell{ID: "refrun@" + strings.ReplaceAll(k, ":", "_"), Kernel: k, Experiment: "refrun"}
		cellDir := filepath.Join(dir, matrix.CellsDir, c.ID)
		run := writeRefRunAs(t, cellDir, "20260301-101500-exp-refrun-a1b2c3")
		p := filepath.Join(run, experiments.ManifestFileName)
		var m experiments.Manifest
		data, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(data, &m)
		}
		if err != nil {
			t.Fatal(err)
		}
		m.Kernels[0].Ref = k
		r := &matrix.CellResult{Cell: c, Status: matrix.StatusComplete, Run: filepath.Join(matrix.CellsDir, c.ID, filepath.Base(run)), Start: start, End: start}
		if edit != nil {
			edit(c, r, &m)
		}
		man := &matrix.Manifest{Schema: matrix.ManifestSchema, Name: "smoke", File: "matrices/smoke.yaml", SHA256: strings.Repeat("a", 64),
			Kernels: kernels, Experiments: []string{"refrun"}, Baseline: kernels[0], Shard: fmt.Sprintf("%d/2", i+1),
			Cells: []matrix.Cell{c}, Total: 2, Start: start}
		for file, v := range map[string]any{p: &m, filepath.Join(cellDir, matrix.CellFile): r, filepath.Join(dir, matrix.ManifestFile): man} {
			if err := fileio.WriteJSON(file, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, matrix.FileCopy), []byte("name: smoke\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

// TestResultsMergeExitStatus: klab results merge, the last job of an
// emitted CI pipeline, exits 1 when a shard's cell failed or a kernel
// printed a splat that the baseline did not, and 0 otherwise (a splat the
// baseline printed too is no regression); its report.xml, the JUnit report
// the pipeline publishes, fails the same cells.
func TestResultsMergeExitStatus(t *testing.T) {
	splat := func(title string) []experiments.GuestRecord {
		return []experiments.GuestRecord{{Dir: "g-1", Splats: []splat.Report{{Type: splat.TypeWarning, Title: title}}}}
	}
	for _, tc := range []struct {
		name string
		edit func(c matrix.Cell, r *matrix.CellResult, m *experiments.Manifest)
		code int
		want string // in the Markdown report and a JUnit failure
	}{
		{name: "pass"},
		{name: "failed-cell", edit: func(c matrix.Cell, r *matrix.CellResult, m *experiments.Manifest) {
			if c.Kernel == "debian:7.3" {
				r.Status, r.Run, r.Message = matrix.StatusError, "", "kernel panic: Oops in fuse_dev_do_read"
			}
		}, code: 1, want: "kernel panic: Oops in fuse_dev_do_read"},
		{name: "new-splat", edit: func(c matrix.Cell, r *matrix.CellResult, m *experiments.Manifest) {
			if c.Kernel == "debian:7.3" {
				m.Guests = splat("WARNING in fuse_request_end")
			}
		}, code: 1, want: "new kernel splat (not on debian:6.12): WARNING in fuse_request_end"},
		{name: "baseline-splat", edit: func(c matrix.Cell, r *matrix.CellResult, m *experiments.Manifest) {
			m.Guests = splat("WARNING in fuse_request_end")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs := writeShards(t, tc.edit)
			out := filepath.Join(t.TempDir(), "merged")
			code, stdout, stderr := runCLI(t, append([]string{"results", "merge", "--out", out, "--format", "md"}, dirs...)...)
			md := strings.ReplaceAll(strings.Join(strings.Fields(stdout), " "), "`", "")
			if code != tc.code || !strings.Contains(md, tc.want) || strings.Contains(md, "result: FAIL") != (tc.code != 0) {
				t.Errorf("results merge: status %d, want %d with %q; stderr %q:\n%s", code, tc.code, tc.want, stderr, stdout)
			}
			data, err := os.ReadFile(filepath.Join(out, "report.xml"))
			if err != nil {
				t.Fatal(err)
			}
			var junit struct {
				Failures int `xml:"failures,attr"`
			}
			if err := xml.Unmarshal(data, &junit); err != nil {
				t.Fatal(err)
			}
			if (junit.Failures > 0) != (tc.code != 0) || (tc.want != "" && !strings.Contains(string(data), `<failure message="`+tc.want)) {
				t.Errorf("report.xml: %d failures, want them with status %d, with %q:\n%s", junit.Failures, tc.code, tc.want, data)
			}
		})
	}
}
