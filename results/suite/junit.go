package suite

import (
	"io"
	"strings"

	"klab/guest/proto"
	"klab/internal/textsafe"
	"klab/results/internal/render"
)

// runJUnit writes r as JUnit XML: one testsuite named after the
// configuration, one testcase per test with the configuration as its
// classname; a failure, hang or crash is a <failure> (its type the
// status, its message the reason, its text the diff and the log's
// tail), a test that did not run is <skipped> with the reason.
func runJUnit(w io.Writer, r *Run) error {
	s := junitSuite(r)
	for _, t := range r.Tests {
		tc := junitCase(r, t)
		switch {
		case Failed(t.Status):
			tc.Failure = &render.JUnitFailure{Message: failureMessage(t), Type: t.Status, Text: failureText(t)}
		case t.Status == proto.TestNotRun:
			tc.Skipped = &render.JUnitSkipped{Message: oneLine(t.Reason)}
		}
		s.Add(tc)
	}
	return writeJUnit(w, s)
}

// verdictJUnit writes v as JUnit XML: B's tests as runJUnit does,
// except that only regressions are failures; a flaky test passes with
// its runs in system-out, a test that fails on A too or that A did not
// run is skipped, saying so.
func verdictJUnit(w io.Writer, v *Verdict) error {
	s := junitSuite(v.B)
	s.Properties = append(s.Properties, render.JUnitProperty{Name: "baseline", Value: sideName(v.A, "A")})
	class := map[string]Change{}
	for _, c := range v.NewFailures {
		class[c.Test] = c
	}
	still := map[string]Change{}
	for _, c := range v.StillFailing {
		still[c.Test] = c
	}
	for _, t := range v.B.Tests {
		tc := junitCase(v.B, t)
		c, isNew := class[t.Name]
		switch {
		case isNew && c.Class == ClassRegression:
			tc.Failure = &render.JUnitFailure{
				Message: "regression: " + changeStatus(c) + ": " + failureMessage(t),
				Type:    t.Status, Text: failureText(t)}
		case isNew:
			tc.SystemOut = "flaky: " + changeStatus(c) + ": " + failureMessage(t)
		case t.Status == proto.TestNotRun:
			tc.Skipped = &render.JUnitSkipped{Message: oneLine(t.Reason)}
		case Failed(t.Status):
			msg := "fails on B, and A did not run it"
			if sc, ok := still[t.Name]; ok {
				msg = "fails on A too: " + changeStatus(sc)
			}
			tc.Skipped = &render.JUnitSkipped{Message: msg + ": " + failureMessage(t)}
		}
		s.Add(tc)
	}
	return writeJUnit(w, s)
}

// junitSuite is the testsuite of r's tests, without them.
func junitSuite(r *Run) render.JUnitSuite {
	s := render.JUnitSuite{Name: "fstests " + oneLine(r.Config), Time: render.JUnitTime(r.Elapsed)}
	if !r.Started.IsZero() {
		s.Timestamp = r.Started.UTC().Format("2006-01-02T15:04:05")
	}
	for _, p := range [][2]string{{"kernel", oneLine(r.Kernel.Name)}, {"kernel_version", oneLine(r.Kernel.Version)},
		{"kernel_id", oneLine(r.Kernel.ID)}, {"config", oneLine(r.Config)}} {
		if p[1] != "" {
			s.Properties = append(s.Properties, render.JUnitProperty{Name: p[0], Value: p[1]})
		}
	}
	return s
}

// junitCase is t's testcase, without its outcome; system-out names its
// transport and splats.
func junitCase(r *Run, t Test) render.JUnitCase {
	tc := render.JUnitCase{Classname: oneLine(r.Config), Name: t.Name, Time: render.JUnitTime(t.Seconds)}
	out := ""
	if t.Transport != "" {
		out = "transport: " + oneLine(t.Transport)
	}
	for _, s := range t.Splats {
		out = render.JoinNonEmpty("\n", out, "splat: "+oneLine(s.String()))
	}
	tc.SystemOut = out
	return tc
}

// failureMessage is a failed test's one-line message: its reason, or
// its status.
func failureMessage(t Test) string {
	if m := oneLine(t.Reason); m != "" {
		return m
	}
	return t.Status
}

// failureText is a failure's text: the diff, then the log's tail.
func failureText(t Test) string {
	return render.JoinNonEmpty("\n", strings.TrimRight(textsafe.Clean(t.Diff), "\n"), strings.TrimRight(textsafe.Clean(t.LogTail), "\n"))
}

// writeJUnit writes one suite as a JUnit document.
func writeJUnit(w io.Writer, s render.JUnitSuite) error {
	doc := render.JUnitSuites{Name: "klab fstests", Tests: s.Tests, Failures: s.Failures, Skipped: s.Skipped,
		Time: s.Time, Suites: []render.JUnitSuite{s}}
	return render.WriteJUnit(w, doc, "junit fstests report")
}

// verdictJSON is a Verdict as its JSON report shows it: empty lists as
// [], and the verdict itself.
type verdictJSON struct {
	Regressed bool `json:"regressed"`
	*Verdict
}

// jsonView is v for its JSON report.
func (v *Verdict) jsonView() verdictJSON {
	c := *v
	c.NewFailures = render.NonNil(c.NewFailures)
	c.Fixed = render.NonNil(c.Fixed)
	c.NotRun = render.NonNil(c.NotRun)
	c.StillFailing = render.NonNil(c.StillFailing)
	c.NewSplats = render.NonNil(c.NewSplats)
	return verdictJSON{Regressed: v.Regressed(), Verdict: &c}
}
