package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/internal/testenv"
)

// contradictedSpec compares random reads of 4 KiB (A) against 64 KiB
// (B) on the guest's tmpfs: B moves more bytes per second on any kernel
// and accelerator, yet its expectation says worse, so the verdict must
// be contradicted. Every round runs in one boot.
const contradictedSpec = `name: e2e-reference
description: random reads of 4 KiB against 64 KiB on tmpfs, with an expectation that says the opposite
reference: |
  none: the expectation is wrong on purpose
rounds: 4
reuse: guest
compare: bs
params:
  bs: [4k, 64k]
vm:
  cpus: 1
  memory_mb: 512
setup:
  dirs: [/tmp/r]
workloads:
  - name: randread
    pattern: randread
    dir: /tmp/r
    jobs: 1
    bs: ${bs}
    size: 8M
    runtime_s: 1
    time_based: true
    metric: bytes_per_sec
    expect:
      direction: worse
      source: wrong on purpose, for the test
`

// TestReferenceContradicted: a row whose expectation is the opposite of
// what the guest shows is contradicted in the report; klab run exits 0
// (a contradiction fails only when strict); klab report --strict-reference
// of the same run exits 1, with a failed JUnit testcase and the failure
// in the text report. One guest boots.
func TestReferenceContradicted(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	spec := filepath.Join(t.TempDir(), "e2e-reference.yaml")
	if err := os.WriteFile(spec, []byte(contradictedSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runTimeout(t, runs, 15*time.Minute, "run", spec, "--kernel", "debian:7.3", "--format", "json")
	if r.code != 0 {
		t.Fatalf("klab run: exit %d, want 0 (a contradiction is not a failure without --strict-reference)\n%s", r.code, tail(r.stdout, 40))
	}
	var rep struct {
		Accel string `json:"accel"`
		Rows  []struct {
			Name   string `json:"name"`
			Change struct {
				Ratio   float64 `json:"ratio"`
				Verdict string  `json:"verdict"`
			} `json:"change"`
			Reference *struct {
				Direction string `json:"direction"`
				Verdict   string `json:"verdict"`
				Strict    bool   `json:"strict"`
			} `json:"reference"`
		} `json:"rows"`
		Warnings []string `json:"warnings"`
		Failures []string `json:"failures"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("klab run --format json: %v\n%s", err, r.stdout)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Reference == nil {
		t.Fatalf("rows %+v, want one with a reference", rep.Rows)
	}
	row := rep.Rows[0]
	t.Logf("randread 64k/4k: B/A %.2f, %s; reference: %+v", row.Change.Ratio, row.Change.Verdict, *row.Reference)
	if row.Change.Verdict != "better" || row.Reference.Direction != "worse" || row.Reference.Verdict != "contradicted" || row.Reference.Strict {
		t.Errorf("row %+v, want better, and a reference of worse, contradicted, not strict", row)
	}
	if len(rep.Failures) != 0 {
		t.Errorf("failures %q, want none", rep.Failures)
	}
	for _, w := range rep.Warnings {
		if strings.Contains(w, "ratios are what count") {
			t.Errorf("the blanket TCG warning is back: %q", w)
		}
	}
	if rep.Accel == "tcg" && !strings.Contains(strings.Join(rep.Warnings, "\n"), "single-threaded TCG in real time: parallelism") {
		t.Errorf("under TCG, no note of what the run cannot show: %q", rep.Warnings)
	}
	id := filepath.Base(onlyRun(t, runs))

	// Without the flag, the JUnit testcase of the reference passes.
	r = run(t, runs, "report", id, "--format", "junit")
	if r.code != 0 {
		t.Fatalf("klab report --format junit: exit %d", r.code)
	}
	junit := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(junit, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, ok := readJUnit(t, junit)["reference: randread"]; !ok || c.Failure != nil {
		t.Errorf("reference testcase %+v (found %v), want one that passed", c, ok)
	}

	// With --strict-reference the same run fails: exit 1, a JUnit
	// failure, and the failure in the text report.
	r = run(t, runs, "report", id, "--strict-reference", "--format", "junit")
	if r.code != 1 {
		t.Errorf("klab report --strict-reference --format junit: exit %d, want 1", r.code)
	}
	if err := os.WriteFile(junit, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := readJUnit(t, junit)["reference: randread"]; c.Failure == nil || c.Failure.Type != "reference" || !strings.HasPrefix(c.Failure.Message, "contradicted (strict)") {
		t.Errorf("junit.xml's reference testcase %+v, want a failure of type reference", c)
	}
	r = run(t, runs, "report", id, "--strict-reference")
	if r.code != 1 || !strings.Contains(r.stdout, "randread: contradicts the reference") || !strings.Contains(r.stdout, "result: FAIL") {
		t.Errorf("klab report --strict-reference: exit %d, want 1 and the contradiction in the result:\n%s", r.code, tail(r.stdout, 20))
	}
}
