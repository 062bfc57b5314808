package report

import (
	"fmt"
	"io"
	"strings"

	"klab/internal/textsafe"
	"klab/results/internal/render"
)

// JUnit writes r as JUnit XML for CI systems: one <testsuite> named
// after the experiment holding a testcase per check (classname
// "<experiment>.checks"), per row of the table ("<experiment>.cells",
// failing on a regression past its threshold), one "splats" testcase
// failing when B printed kernel reports A did not, a skipped testcase
// per skipped cell, and a testcase per row and check with an expectation
// ("<experiment>.reference", see refJUnit).
func JUnit(w io.Writer, r *Report) error {
	exp := textsafe.OneLine(r.Experiment)
	suite := render.JUnitSuite{
		Name:      exp,
		Time:      render.JUnitTime(r.WallSec),
		Timestamp: r.Start,
		Properties: []render.JUnitProperty{
			{Name: "accel", Value: textsafe.OneLine(r.Accel)},
			{Name: "host", Value: textsafe.OneLine(r.Host)},
			{Name: "qemu", Value: textsafe.OneLine(r.QEMU)},
			{Name: "a", Value: sideDesc(r, r.A, kernelFull)},
			{Name: "b", Value: sideDesc(r, r.B, kernelFull)},
			{Name: "spec", Value: textsafe.OneLine(r.SpecFile)},
			{Name: "spec_sha256", Value: r.SpecSHA256},
			{Name: "run_dir", Value: textsafe.OneLine(r.RunDir)},
		},
	}
	if l := roundsLine(r); l != "" {
		suite.Properties = append(suite.Properties, render.JUnitProperty{Name: "rounds_auto", Value: l})
	}
	for _, c := range r.Checks {
		tc := render.JUnitCase{
			Classname: exp + ".checks",
			Name:      render.JoinNonEmpty(" ", textsafe.OneLine(c.Name), textsafe.OneLine(c.Cell), textsafe.OneLine(c.Side), fmt.Sprintf("round %d", c.Round)),
			Time:      render.JUnitTime(c.TookSec),
		}
		if !c.Passed {
			tc.Failure = &render.JUnitFailure{Message: textsafe.OneLine(c.Message), Type: "check", Text: strings.Join(outputLines(c), "\n")}
		}
		suite.Add(tc)
	}
	for _, row := range r.Rows {
		cells := tableRow(row)
		tc := render.JUnitCase{
			Classname: exp + ".cells",
			Name:      textsafe.OneLine(row.Name),
			Time:      render.JUnitTime(0),
			SystemOut: render.JoinNonEmpty(", ", "A "+cells[1], "B "+cells[2], "B/A "+cells[3], render.JoinNonEmpty(" ", "change", cells[4], cells[5]), cells[6],
				"n "+cells[7], "MDC "+cells[8], cells[9]),
		}
		if row.Regression {
			change := render.JoinNonEmpty(" ", render.FmtPct(row.Change.Pct), cells[4], cells[5])
			tc.Failure = &render.JUnitFailure{
				Type:    "regression",
				Message: fmt.Sprintf("change %s, past the %g%% regression threshold", change, row.ThresholdPct),
				Text:    tc.SystemOut,
			}
		}
		suite.Add(tc)
	}
	if r.Icount != "" {
		suite.Properties = append(suite.Properties, render.JUnitProperty{Name: "icount", Value: textsafe.OneLine(r.Icount)})
	}
	if r.TCGMultithread {
		suite.Properties = append(suite.Properties, render.JUnitProperty{Name: "tcg_multithread", Value: "true"})
	}
	refJUnit(&suite, r, exp)
	splats := render.JUnitCase{Classname: exp + ".splats", Name: "splats", Time: render.JUnitTime(0), SystemOut: strings.Join(splatLines(r), "\n")}
	if len(r.Splats.New) > 0 {
		titles := make([]string, len(r.Splats.New))
		for i, s := range r.Splats.New {
			titles[i] = textsafe.OneLine(s.Title)
		}
		splats.Failure = &render.JUnitFailure{Type: "splat", Message: "new in B: " + strings.Join(titles, "; ")}
	}
	suite.Add(splats)
	for _, s := range r.Skipped {
		suite.Add(render.JUnitCase{
			Classname: exp + ".cells",
			Name:      textsafe.OneLine(s.Cell),
			Time:      render.JUnitTime(0),
			Skipped:   &render.JUnitSkipped{Message: textsafe.OneLine(s.Reason)},
		})
	}
	doc := render.JUnitSuites{
		Name:     exp,
		Tests:    suite.Tests,
		Failures: suite.Failures,
		Skipped:  suite.Skipped,
		Time:     suite.Time,
		Suites:   []render.JUnitSuite{suite},
	}
	return render.WriteJUnit(w, doc, "junit report")
}
