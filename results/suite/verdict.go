package suite

import (
	"klab/guest/proto"
)

// Classes of a newly failing test, once Classify has seen its runs.
const (
	// ClassRegression is a test that fails repeatedly on B and never
	// on A.
	ClassRegression = "regression"
	// ClassFlaky is a test that fails on B only sometimes, or on A too.
	ClassFlaky = "flaky"
)

// DefaultReruns is how many times a newly failing test is rerun on each
// side by default: with the first run, a regression then fails at least
// 2 of 3 runs on B.
const DefaultReruns = 2

// Change is one test whose outcome differs between A and B.
type Change struct {
	// Test is the test's name.
	Test string `json:"test"`
	// A and B are the test's status on each side ("" when the side did
	// not have the test at all).
	A string `json:"a"`
	B string `json:"b"`
	// Reason is the reason of the side that did not pass: B's for a new
	// failure, A's for a fix, the not-run side's for a not-run change.
	Reason string `json:"reason,omitempty"`
	// AFails of ARuns and BFails of BRuns are the failing runs of the
	// test on each side, reruns included.
	AFails int `json:"a_fails"`
	ARuns  int `json:"a_runs"`
	BFails int `json:"b_fails"`
	BRuns  int `json:"b_runs"`
	// Class is ClassRegression or ClassFlaky, for a new failure.
	Class string `json:"class,omitempty"`
}

// SplatChange is the splats a test printed on B and not on A.
type SplatChange struct {
	// Test is the test's name, "" for splats outside any test.
	Test   string     `json:"test"`
	Splats []SplatRef `json:"splats"`
}

// Verdict is what changed between two runs of fstests, A (the
// baseline) and B.
type Verdict struct {
	A *Run `json:"a"`
	B *Run `json:"b"`
	// NewFailures are tests that fail, hang or crash on B and pass on A,
	// each classed a regression or flaky.
	NewFailures []Change `json:"new_failures"`
	// Fixed are tests that pass on B and fail, hang or crash on A.
	Fixed []Change `json:"fixed"`
	// NotRun are tests that ran on one side only: a not-run reason, an
	// expunge or a missing test on the other (a capability difference,
	// not a verdict on the change).
	NotRun []Change `json:"not_run_changes"`
	// StillFailing are tests that fail on both sides.
	StillFailing []Change `json:"still_failing"`
	// NewSplats are, per test, splats on B that A did not print in the
	// same test.
	NewSplats []SplatChange `json:"new_splats"`
}

// Compare compares the runs a and b test by test, in b's order and then
// the tests only a has. New failures are classed from the tests' runs
// (Classify): a new failure not yet rerun is a regression; NeedsRerun
// names those, and Compare again after the reruns (Run.AddRerun) says
// which stay regressions.
func Compare(a, b *Run) *Verdict {
	v := &Verdict{A: a, B: b}
	var names []string
	seen := map[string]bool{}
	for _, r := range []*Run{b, a} {
		for _, t := range r.Tests {
			if !seen[t.Name] {
				seen[t.Name] = true
				names = append(names, t.Name)
			}
		}
	}
	for _, n := range names {
		at, bt := a.Test(n), b.Test(n)
		c := change(n, at, bt)
		switch {
		case at == nil || bt == nil || (at.Status == proto.TestNotRun) != (bt.Status == proto.TestNotRun):
			c.Reason = notRunReason(at, bt)
			v.NotRun = append(v.NotRun, c)
		case !Failed(at.Status) && Failed(bt.Status) && at.Status != proto.TestNotRun:
			c.Reason = bt.Reason
			c.Class = Classify(*at, *bt)
			v.NewFailures = append(v.NewFailures, c)
		case Failed(at.Status) && bt.Status == proto.TestPass:
			c.Reason = at.Reason
			v.Fixed = append(v.Fixed, c)
		case Failed(at.Status) && Failed(bt.Status):
			c.Reason = bt.Reason
			v.StillFailing = append(v.StillFailing, c)
		}
		if bt != nil {
			var old []SplatRef
			if at != nil {
				old = at.Splats
			}
			if refs := newRefs(old, bt.Splats); len(refs) > 0 {
				v.NewSplats = append(v.NewSplats, SplatChange{Test: n, Splats: refs})
			}
		}
	}
	if refs := newRefs(a.Splats, b.Splats); len(refs) > 0 {
		v.NewSplats = append([]SplatChange{{Splats: refs}}, v.NewSplats...)
	}
	return v
}

// change is a Change for test n with each side's status and tallies.
func change(n string, at, bt *Test) Change {
	c := Change{Test: n}
	if at != nil {
		c.A = at.Status
		c.AFails, c.ARuns = at.Tally()
	}
	if bt != nil {
		c.B = bt.Status
		c.BFails, c.BRuns = bt.Tally()
	}
	return c
}

// notRunReason is the reason of the side that did not run the test,
// or says which side did not have it.
func notRunReason(at, bt *Test) string {
	switch {
	case bt == nil:
		return "not in B"
	case at == nil:
		return "not in A"
	case bt.Status == proto.TestNotRun:
		return "B: " + bt.Reason
	}
	return "A: " + at.Reason
}

// newRefs are the refs of b that a does not hold.
func newRefs(a, b []SplatRef) []SplatRef {
	var out []SplatRef
	for _, r := range b {
		if !containsRef(a, r) {
			out = append(out, r)
		}
	}
	return out
}

// Classify classes a test that newly fails on B from its runs on each
// side (Test.Tally): a regression when it never fails on A and fails on
// B in more than half of its runs and at least twice (once when it ran
// once); flaky otherwise.
func Classify(a, b Test) string {
	af, _ := a.Tally()
	bf, br := b.Tally()
	if af == 0 && bf*2 > br && bf >= min(2, br) {
		return ClassRegression
	}
	return ClassFlaky
}

// NeedsRerun names the new failures of v that have not been rerun on
// B yet: the tests to run again, on both sides, before the verdict
// stands.
func NeedsRerun(v *Verdict) []string {
	var out []string
	for _, c := range v.NewFailures {
		if c.BRuns < 2 {
			out = append(out, c.Test)
		}
	}
	return out
}

// Regressions are the new failures classed regressions.
func (v *Verdict) Regressions() []Change { return v.classed(ClassRegression) }

// Flaky are the new failures classed flaky.
func (v *Verdict) Flaky() []Change { return v.classed(ClassFlaky) }

// classed are the new failures of class c.
func (v *Verdict) classed(c string) []Change {
	var out []Change
	for _, ch := range v.NewFailures {
		if ch.Class == c {
			out = append(out, ch)
		}
	}
	return out
}

// Regressed reports whether B has a regression: the verdict a command
// exits 1 on.
func (v *Verdict) Regressed() bool { return len(v.Regressions()) > 0 }
