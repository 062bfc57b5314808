package experiments

import (
	"context"
	"slices"
	"strings"
	"testing"

	"klab/results/reference"
	"klab/results/report"
)

// refSpec is runSpec with expectations: create (B twice A in the fake)
// better, as the reference found, and only under KVM; randread worse,
// which the fake contradicts; the check passing.
var refSpec = strings.NewReplacer(
	"    prepare: rm -rf /tmp/backing/c\n", `    prepare: rm -rf /tmp/backing/c
    expect:
      ratio: 2.57
      source: seed 003, creates/s
      measured_on: {cpus: 32, accel: native}
      needs: {accel: kvm}
`,
	"    prepare: rm -rf /tmp/backing/r\n", `    prepare: rm -rf /tmp/backing/r
    expect:
      - {direction: worse, source: a made-up reference}
`,
	"    run: \"true\"\n", `    run: "true"
    expect: {source: the thread}
`).Replace(runSpec)

// refRun runs refSpec against the fake and opens the run.
func refRun(t *testing.T, spec string) *Saved {
	t.Helper()
	f := loadRunSpec(t, spec)
	res, err := Run(context.Background(), f, runOptions(t, &fakeOpener{t: t}))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return saved
}

// TestReferences: each row with an expectation gets its verdict in the
// run's mode, the checks theirs; a contradiction fails the run only when
// strict (the spec's, or StrictReference); the warnings say what the
// mode cannot show.
func TestReferences(t *testing.T) {
	if !strings.Contains(refSpec, "ratio: 2.57") || !strings.Contains(refSpec, "direction: worse") || !strings.Contains(refSpec, "the thread") {
		t.Fatalf("refSpec lacks its expectations:\n%s", refSpec)
	}
	strictSpec := strings.Replace(refSpec, "source: a made-up reference}", "source: a made-up reference, strict: true}", 1)
	for _, tc := range []struct {
		name     string
		spec     string
		accel    string
		icount   string
		strict   bool
		create   reference.Verdict
		failures int
		note     string
	}{
		{name: "kvm", spec: refSpec, accel: "kvm", create: reference.Reproduced},
		{name: "tcg", spec: refSpec, accel: "tcg", create: reference.NotComparable, note: "single-threaded TCG in real time"},
		{name: "icount", spec: refSpec, accel: "tcg", icount: "shift=0", create: reference.NotComparable, note: "TCG with icount"},
		{name: "strict flag", spec: refSpec, accel: "kvm", strict: true, create: reference.Reproduced, failures: 1},
		{name: "strict spec", spec: strictSpec, accel: "tcg", create: reference.NotComparable, failures: 1, note: "single-threaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := refRun(t, tc.spec)
			saved.Manifest.Accel = tc.accel
			saved.File.Spec.VM.Icount = tc.icount
			saved.StrictReference = tc.strict
			r := saved.Report()
			if len(r.Rows) != 2 || r.Rows[0].Reference == nil || r.Rows[1].Reference == nil {
				t.Fatalf("rows %+v, want 2 with references", r.Rows)
			}
			create, randread := r.Rows[0].Reference, r.Rows[1].Reference
			if create.Verdict != tc.create || create.Direction != "better" || create.Ratio != 2.57 || create.Source != "seed 003, creates/s" ||
				create.Needs != "accel kvm" || create.MeasuredOn == nil || create.MeasuredOn.CPUs != 32 {
				t.Errorf("create's reference %+v, want %q", create, tc.create)
			}
			if tc.create == reference.NotComparable && !strings.HasPrefix(create.Reason, "needs accel kvm; this run used "+map[string]string{"": "single-threaded TCG in real time", "shift=0": "TCG with icount"}[tc.icount]) {
				t.Errorf("create's reason %q", create.Reason)
			}
			if randread.Verdict != reference.Contradicted || randread.Direction != "worse" || randread.Strict != (tc.failures > 0) {
				t.Errorf("randread's reference %+v, want contradicted, strict %v", randread, tc.failures > 0)
			}
			if len(r.CheckReferences) != 1 || r.CheckReferences[0] != (report.CheckReference{Check: "ok", Outcome: "pass", Source: "the thread",
				Verdict: reference.Reproduced, Reason: "8 of 8 round(s) passed", Strict: tc.strict}) {
				t.Errorf("check references %+v", r.CheckReferences)
			}
			if len(r.Failures) != tc.failures {
				t.Errorf("failures %q, want %d", r.Failures, tc.failures)
			}
			// Every failure here is a reference's, and ReferenceFailures
			// words them as the report does.
			if got := ReferenceFailures(r); !slices.Equal(got, r.Failures) {
				t.Errorf("ReferenceFailures %q, want the report's failures %q", got, r.Failures)
			}
			if tc.failures > 0 && !strings.HasPrefix(r.Failures[0], "randread: contradicts the reference: B/A 1.89x, the reference's worse (a made-up reference)") {
				t.Errorf("failure %q", r.Failures[0])
			}
			if r.Icount != tc.icount || r.TCGMultithread {
				t.Errorf("mode: icount %q, multi-threaded %v", r.Icount, r.TCGMultithread)
			}
			notes := slices.DeleteFunc(slices.Clone(r.Warnings), func(w string) bool { return !strings.Contains(w, "TCG") })
			switch {
			case tc.note == "" && len(notes) > 0:
				t.Errorf("notes under %s: %q", tc.accel, notes)
			case tc.note != "" && (len(notes) != 1 || !strings.HasPrefix(notes[0], tc.note)):
				t.Errorf("notes %q, want one starting %q", notes, tc.note)
			}
		})
	}
}

// TestReferencesOtherAxis: expectations hold for the spec's A/B; a run
// that compares something else gets no verdicts, and a warning says so.
func TestReferencesOtherAxis(t *testing.T) {
	saved := refRun(t, refSpec)
	saved.File.Spec.Compare = "" // as if the spec compared kernels
	r := saved.Report()
	for _, row := range r.Rows {
		if row.Reference != nil {
			t.Errorf("row %s has a reference", row.Name)
		}
	}
	if !slices.ContainsFunc(r.Warnings, func(w string) bool {
		return strings.Contains(w, "the spec's expectations are about kernel; this run compared transport")
	}) {
		t.Errorf("warnings %q", r.Warnings)
	}
}

// TestReferencesParams: an expectation with params holds for the rows
// with those values only.
func TestReferencesParams(t *testing.T) {
	spec := strings.NewReplacer(
		"  transport: [dev, uring]\n", "  transport: [dev, uring]\n  jobs: [1, 2]\n",
		"    jobs: 1\n    files: 10\n", "    jobs: ${jobs}\n    files: 10\n",
		"      ratio: 2.57\n", "      ratio: 2.57\n      params: {jobs: 2}\n",
	).Replace(refSpec)
	saved := refRun(t, spec)
	saved.Manifest.Accel = "kvm"
	r := saved.Report()
	var got []string
	for _, row := range r.Rows {
		if row.Workload == "create" {
			v := "-"
			if row.Reference != nil {
				v = string(row.Reference.Verdict)
			}
			got = append(got, row.Name+": "+v)
		}
	}
	if want := []string{"create jobs=1: -", "create jobs=2: reproduced"}; !slices.Equal(got, want) {
		t.Errorf("create rows %q, want %q", got, want)
	}
}
