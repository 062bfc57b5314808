package bisectreport

import (
	"fmt"
	"io"

	"klab/results/internal/render"
)

// JUnit writes r as JUnit XML: one suite, "klab bisect EXPERIMENT",
// with a testcase per commit tested (a bad commit is a failure, a
// skipped one skipped, with the reason) and a testcase "first bad
// commit" that fails with the first bad commit and its evidence when
// one was found, and is skipped with the reason when none was.
func JUnit(w io.Writer, r *Report) error {
	suite := render.JUnitSuite{Name: "klab bisect " + one(r.Experiment), Time: render.JUnitTime(r.WallSec), Timestamp: r.Start,
		Properties: []render.JUnitProperty{
			{Name: "tree", Value: one(r.Tree)}, {Name: "good", Value: r.Good.Commit}, {Name: "bad", Value: r.Bad.Commit},
			{Name: "criterion", Value: one(r.Criterion)}, {Name: "run", Value: one(r.RunID)},
		}}
	class := "bisect." + one(r.Experiment)
	for _, s := range r.Steps {
		name := s.Label
		if s.Label != "good" && s.Label != "bad" {
			name = "step " + s.Label
		}
		tc := render.JUnitCase{Classname: class, Name: fmt.Sprintf("%s %s %s", name, short(s.Commit), one(s.Subject)), Time: render.JUnitTime(s.BuildSec)}
		switch s.Verdict {
		case "bad":
			tc.Failure = &render.JUnitFailure{Message: one(s.Reason), Type: "bad"}
		case "skip":
			tc.Skipped = &render.JUnitSkipped{Message: one(s.Reason)}
		case "good":
			tc.SystemOut = one(s.Reason)
		default:
			tc.Skipped = &render.JUnitSkipped{Message: "not finished"}
		}
		suite.Add(tc)
	}
	res := render.JUnitCase{Classname: class, Name: "first bad commit", Time: render.JUnitTime(r.WallSec)}
	if r.Found && r.FirstBad != nil {
		text := evidenceLine(r)
		if d := evidenceDetail(r.Evidence); d != "" {
			text += "\n" + d
		}
		res.Failure = &render.JUnitFailure{Message: resultLine(r), Type: "first-bad-commit", Text: text}
	} else {
		res.Skipped = &render.JUnitSkipped{Message: resultLine(r)}
	}
	suite.Add(res)
	doc := render.JUnitSuites{Name: "klab bisect", Tests: suite.Tests, Failures: suite.Failures, Skipped: suite.Skipped, Time: suite.Time,
		Suites: []render.JUnitSuite{suite}}
	return render.WriteJUnit(w, doc, "junit bisection report")
}
