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
	dir := filepath.Join(t.TempDir(), "20260301-101500-exp-refrun-a1b2c3")
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
