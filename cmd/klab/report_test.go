package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/experiments"
)

// refRunSpec compares 4k against 64k reads, and expects worse: the run
// that writeRefRun makes contradicts it.
const refRunSpec = `name: refrun
rounds: 4
compare: bs
params:
  bs: [4k, 64k]
setup:
  dirs: [/tmp/r]
workloads:
  - name: randread
    pattern: randread
    dir: /tmp/r
    jobs: 1
    bs: ${bs}
    size: 8M
    metric: bytes_per_sec
    expect: {direction: worse, source: wrong on purpose}
`

// writeRefRun writes a finished run of refRunSpec in which B moves twice
// A's bytes per second, and returns its directory.
func writeRefRun(t *testing.T) string {
	t.Helper()
	return writeRefRunAs(t, t.TempDir(), "20260301-101500-exp-refrun-a1b2c3")
}

// writeRefRunAs writes writeRefRun's run as the run id of the runs
// directory runs, and returns its directory.
func writeRefRunAs(t *testing.T, runs, id string) string {
	t.Helper()
	dir := filepath.Join(runs, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := experiments.Load("refrun.yaml", []byte(refRunSpec))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := experiments.MakePlan(f, experiments.PlanOptions{Kernels: []string{"debian:7.3"}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 10, 15, 0, 0, time.UTC)
	man := &experiments.Manifest{Schema: experiments.ManifestSchema, RunID: filepath.Base(dir), Experiment: "refrun", SpecFile: "refrun.yaml",
		SpecSHA256: f.SHA256, Kernels: []experiments.ManifestKernel{{Ref: "debian:7.3"}}, Axis: plan.Axis, Rounds: plan.Rounds, Order: plan.Order,
		Reuse: plan.Reuse, CPUs: 2, MemMB: 1024, AccelWanted: "auto", Accel: "kvm", Guests: []experiments.GuestRecord{},
		Start: start, End: start.Add(time.Minute), Status: experiments.StatusComplete}
	samples := &experiments.Samples{Samples: []experiments.Sample{}, Checks: []experiments.CheckResult{}}
	for round := 1; round <= 4; round++ {
		for side, v := range map[string]float64{experiments.SideA: 100, experiments.SideB: 200} {
			samples.Samples = append(samples.Samples, experiments.Sample{Side: side, Round: round, Workload: "randread", Metric: "bytes_per_sec", Value: v + float64(round)})
		}
	}
	for name, v := range map[string]any{experiments.ManifestFileName: man, experiments.PlanFileName: plan, experiments.SamplesFileName: samples} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, experiments.SpecFileName), []byte(refRunSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReportStrictReference: klab report shows a contradicted row and
// exits 0; with --strict-reference the contradiction is a failure, in
// the result line and in JUnit, and it exits 1.
func TestReportStrictReference(t *testing.T) {
	dir := writeRefRun(t)
	code, stdout, stderr := runCLI(t, "report", dir)
	if code != 0 || !strings.Contains(stdout, "randread  1.98x  worse      contradicted\n") || !strings.Contains(stdout, "result: PASS") {
		t.Errorf("klab report: status %d, stderr %q:\n%s", code, stderr, stdout)
	}
	code, stdout, _ = runCLI(t, "report", dir, "--strict-reference")
	if code != 1 || !strings.Contains(stdout, "contradicted (strict)") ||
		!strings.Contains(stdout, "result: FAIL: randread: contradicts the reference: B/A 1.98x, the reference's worse (wrong on\n    purpose)") {
		t.Errorf("klab report --strict-reference: status %d:\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "report", dir, "--strict-reference", "--format", "junit")
	if code != 1 || !strings.Contains(stdout, `<testcase classname="refrun.reference" name="reference: randread"`) || !strings.Contains(stdout, `type="reference"`) {
		t.Errorf("klab report --strict-reference --format junit: status %d:\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "report", dir, "--format", "junit")
	if code != 0 || strings.Contains(stdout, `type="reference"`) {
		t.Errorf("klab report --format junit: status %d:\n%s", code, stdout)
	}
}

// TestCompareLast: klab compare with one run compares it with the run of
// the same experiment before it (klab compare last: the last two), and
// says why with status 2 when there is no such run.
func TestCompareLast(t *testing.T) {
	runs := t.TempDir()
	compare := func(args ...string) (int, string, string) {
		return runCLI(t, append([]string{"--runs-dir", runs, "compare"}, args...)...)
	}
	code, _, stderr := compare("last")
	if want := "klab: no runs in " + runs + ", and klab compare needs two runs of one experiment\n"; code != exitBadInput || stderr != want {
		t.Errorf("no runs: status %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	first := "20260301-101500-exp-refrun-a1b2c3"
	writeRefRunAs(t, runs, first)
	code, _, stderr = compare("last")
	if want := "klab: " + first + " is the only run of experiment refrun in " + runs + ", and klab compare needs two: run it again, or name two runs (klab runs list shows them)\n"; code != exitBadInput || stderr != want {
		t.Errorf("one run: status %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	second := "20260302-101500-exp-refrun-d4e5f6"
	writeRefRunAs(t, runs, second)
	for _, args := range [][]string{{"last"}, {second}, {first, "last"}} {
		code, stdout, stderr := compare(args...)
		if code != 0 || !strings.Contains(stdout, "A: "+first+"\n") || !strings.Contains(stdout, "B: "+second+"\n") {
			t.Errorf("klab compare %s: status %d, stderr %q:\n%s", strings.Join(args, " "), code, stderr, stdout)
		}
	}
	code, _, stderr = compare(first)
	if want := "klab: no run of experiment refrun before " + first + " in " + runs + ": name the run to compare it with (klab compare RUN_A " + first + ")\n"; code != exitBadInput || stderr != want {
		t.Errorf("the first run: status %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	// A boot run is no experiment run.
	boot := filepath.Join(runs, "20260303-101500-boot-a1b2c3")
	if err := os.MkdirAll(boot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(boot, "manifest.json"), []byte(`{"schema": 1, "run_id": "20260303-101500-boot-a1b2c3"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A boot run after them is no experiment run: last skips it, and
	// naming it is an error.
	code, stdout, stderr := compare("last")
	if code != 0 || !strings.Contains(stdout, "A: "+first+"\n") || !strings.Contains(stdout, "B: "+second+"\n") {
		t.Errorf("klab compare last after a boot run: status %d, stderr %q:\n%s", code, stderr, stdout)
	}
	code, _, stderr = compare("20260303-101500-boot-a1b2c3")
	if code != exitBadInput || !strings.Contains(stderr, "is a boot run, not an experiment run") {
		t.Errorf("a boot run named: status %d, stderr %q", code, stderr)
	}
	for _, args := range [][]string{nil, {"a", "b", "c"}} {
		if code, _, stderr := compare(args...); code != exitBadInput || !strings.Contains(stderr, "accepts between 1 and 2 arg(s)") {
			t.Errorf("klab compare %s: status %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
	}
}
