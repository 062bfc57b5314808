package xreport

import (
	"fmt"
	"io"
	"strings"

	"klab/internal/textsafe"
	"klab/results/internal/render"
	"klab/results/reference"
)

// JUnit writes m as JUnit XML for CI systems: one <testsuite> per
// kernel, named after its ref, holding
//
//   - a passing testcase per row (classname: the experiment, name: the
//     row) carrying the value and the change vs the baseline in
//     <system-out>, skipped when the kernel has no value for the row;
//   - a passing testcase per suite cell on the kernel (classname: the
//     experiment, name: the suite and its configuration) with the
//     cell's summary in <system-out> (the cell's run has its own JUnit
//     report, a testcase per test); a failing suite cell is a failure
//     too;
//   - a testcase per row and check held against its reference on the
//     kernel (classname: the experiment and ".reference", name:
//     "reference: " and the row), failing only when the kernel's cell
//     contradicts the reference and the contradiction is strict, skipped
//     when it has no verdict or is not comparable or not measured;
//   - a failed testcase per failure on the kernel, named after the
//     failure's cell, but for a strict contradiction, which fails its
//     reference's testcase;
//   - a "splats" testcase listing the kernel's splats, failing when
//     the baseline did not print one of them;
//   - a skipped testcase per skipped cell on the kernel.
//
// Failures and skipped cells of no kernel column, and a skipped
// testcase per experiment whose expectations get no verdict
// (ReferenceNotes), go into one more suite, named "matrix".
func JUnit(w io.Writer, m *Matrix) error {
	name := "matrix " + textsafe.OneLine(m.Name)
	tb := newTable(m)
	suites := make([]render.JUnitSuite, len(m.Kernels))
	for i, k := range m.Kernels {
		suites[i] = render.JUnitSuite{
			Name: textsafe.OneLine(k.Ref),
			Time: render.JUnitTime(0),
			Properties: []render.JUnitProperty{
				{Name: "matrix", Value: textsafe.OneLine(m.Name)},
				{Name: "kernel", Value: textsafe.OneLine(k.Name)},
				{Name: "version", Value: textsafe.OneLine(k.Version)},
				{Name: "baseline", Value: fmt.Sprint(i == tb.base)},
				{Name: "accel", Value: textsafe.OneLine(m.Accel)},
				{Name: "file", Value: textsafe.OneLine(m.File)},
				{Name: "sha256", Value: textsafe.OneLine(m.SHA256)},
			},
		}
	}
	other := render.JUnitSuite{Name: "matrix", Time: render.JUnitTime(0)}
	suiteOf := func(kernel string) *render.JUnitSuite {
		if i := kernelIndex(m, kernel); i >= 0 {
			return &suites[i]
		}
		return &other
	}
	for _, r := range tb.rows {
		for i, c := range r.cells {
			tc := render.JUnitCase{
				Classname: r.experiment,
				Name:      r.name,
				Time:      render.JUnitTime(0),
				SystemOut: textsafe.OneLine(m.Kernels[i].Ref) + ": " + c.detail,
			}
			if !c.hasValue {
				why := "no value"
				if c.note > 0 {
					why += ": " + tb.notes.text(c.note)
				}
				tc.Skipped = &render.JUnitSkipped{Message: why}
			}
			suites[i].Add(tc)
		}
	}
	for _, c := range m.Suites {
		suiteOf(c.Kernel).Add(render.JUnitCase{
			Classname: textsafe.OneLine(c.Experiment),
			Name:      render.JoinNonEmpty(" ", textsafe.OneLine(c.Suite), textsafe.OneLine(c.Config)),
			Time:      render.JUnitTime(0),
			SystemOut: suiteLine(c),
		})
	}
	covered := refJUnit(m, suiteOf, &other)
	for _, p := range m.Failures {
		if p.Reference && covered[[2]string{p.Experiment, p.Kernel}] {
			continue // the reference's testcase fails
		}
		suiteOf(p.Kernel).Add(render.JUnitCase{
			Classname: textsafe.OneLine(p.Experiment),
			Name:      problemCell(p),
			Time:      render.JUnitTime(0),
			Failure:   &render.JUnitFailure{Message: textsafe.OneLine(p.Message), Type: "failure"},
		})
	}
	for i, k := range m.Kernels {
		var lines, titles []string
		for _, s := range m.Splats {
			if s.Kernel != k.Ref {
				continue
			}
			lines = append(lines, splatLine(s))
			if s.New {
				titles = append(titles, textsafe.OneLine(s.Title))
			}
		}
		if len(lines) == 0 {
			lines = []string{noSplats}
		}
		tc := render.JUnitCase{Classname: "splats", Name: "splats", Time: render.JUnitTime(0), SystemOut: strings.Join(lines, "\n")}
		if len(titles) > 0 {
			tc.Failure = &render.JUnitFailure{Type: "splat", Message: "new vs the baseline: " + strings.Join(titles, "; ")}
		}
		suites[i].Add(tc)
	}
	for _, p := range m.Skipped {
		suiteOf(p.Kernel).Add(render.JUnitCase{
			Classname: textsafe.OneLine(p.Experiment),
			Name:      problemCell(p),
			Time:      render.JUnitTime(0),
			Skipped:   &render.JUnitSkipped{Message: textsafe.OneLine(p.Message)},
		})
	}
	if len(other.Cases) > 0 {
		suites = append(suites, other)
	}
	doc := render.JUnitSuites{Name: name, Time: render.JUnitTime(0), Suites: suites}
	for _, s := range suites {
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Skipped += s.Skipped
	}
	return render.WriteJUnit(w, doc, "junit matrix report")
}

// refJUnit adds the references' testcases (see JUnit) to the kernels'
// suites through suiteOf, and those of ReferenceNotes to other; it
// returns the pairs of experiment and kernel whose contradiction fails
// a testcase.
func refJUnit(m *Matrix, suiteOf func(kernel string) *render.JUnitSuite, other *render.JUnitSuite) map[[2]string]bool {
	covered := map[[2]string]bool{}
	for _, r := range m.References {
		exp := textsafe.OneLine(r.Experiment)
		for i, k := range m.Kernels {
			tc := render.JUnitCase{
				Classname: exp + ".reference",
				Name:      "reference: " + refName(r),
				Time:      render.JUnitTime(0),
			}
			c := refCellOf(r, i, k.Ref)
			if c == nil {
				tc.SystemOut = textsafe.OneLine(k.Ref) + ": no verdict\n" + refSource(r)
				tc.Skipped = &render.JUnitSkipped{Message: "no verdict"}
				suiteOf(k.Ref).Add(tc)
				continue
			}
			tc.SystemOut = textsafe.OneLine(k.Ref) + ": " + refCellDetail(r, *c) + "\n" + refSource(r)
			switch c.Verdict {
			case reference.Contradicted:
				if c.Strict {
					ratio := "-"
					if c.Change != nil {
						ratio = fmtRatio(c.Change.Ratio)
					}
					msg := refVerdictText(*c) + ": B/A " + ratio + ", the reference's " + refFigure(r)
					if r.Check {
						msg = refVerdictText(*c) + ", the reference's " + refFigure(r)
					}
					tc.Failure = &render.JUnitFailure{Type: "reference", Message: msg, Text: tc.SystemOut}
					covered[[2]string{r.Experiment, k.Ref}] = true
				}
			case reference.Reproduced, reference.SameNotSignificant, reference.OppositeNotSignificant:
			default:
				why := refVerdictText(*c)
				if c.Verdict == "" {
					why = render.JoinNonEmpty(": ", "no verdict", textsafe.OneLine(c.Missing))
				}
				tc.Skipped = &render.JUnitSkipped{Message: why}
			}
			suiteOf(k.Ref).Add(tc)
		}
	}
	for _, n := range m.ReferenceNotes {
		other.Add(render.JUnitCase{
			Classname: textsafe.OneLine(n.Experiment) + ".reference",
			Name:      "reference",
			Time:      render.JUnitTime(0),
			Skipped:   &render.JUnitSkipped{Message: textsafe.OneLine(n.Message)},
		})
	}
	return covered
}
