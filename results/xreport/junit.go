package xreport

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// JUnit writes m as JUnit XML for CI systems: one <testsuite> per
// kernel, named after its ref, holding
//
//   - a passing testcase per row (classname: the experiment, name: the
//     row) carrying the value and the change vs the baseline in
//     <system-out>, skipped when the kernel has no value for the row;
//   - a failed testcase per failure on the kernel, named after the
//     failure's cell;
//   - a "splats" testcase listing the kernel's splats, failing when
//     the baseline did not print one of them;
//   - a skipped testcase per skipped cell on the kernel.
//
// Failures and skipped cells of no kernel column go into one more
// suite, named "matrix".
func JUnit(w io.Writer, m *Matrix) error {
	name := "matrix " + oneLine(m.Name)
	tb := newTable(m)
	suites := make([]junitSuite, len(m.Kernels))
	for i, k := range m.Kernels {
		suites[i] = junitSuite{
			Name: oneLine(k.Ref),
			Time: junitTime(0),
			Properties: []junitProperty{
				{"matrix", oneLine(m.Name)},
				{"kernel", oneLine(k.Name)},
				{"version", oneLine(k.Version)},
				{"baseline", fmt.Sprint(i == tb.base)},
				{"accel", oneLine(m.Accel)},
				{"file", oneLine(m.File)},
				{"sha256", oneLine(m.SHA256)},
			},
		}
	}
	other := junitSuite{Name: "matrix", Time: junitTime(0)}
	suiteOf := func(kernel string) *junitSuite {
		if i := kernelIndex(m, kernel); i >= 0 {
			return &suites[i]
		}
		return &other
	}
	for _, r := range tb.rows {
		for i, c := range r.cells {
			tc := junitCase{
				Classname: r.experiment,
				Name:      r.name,
				Time:      junitTime(0),
				SystemOut: oneLine(m.Kernels[i].Ref) + ": " + c.detail,
			}
			if !c.hasValue {
				why := "no value"
				if c.note > 0 {
					why += ": " + tb.notes[c.note-1]
				}
				tc.Skipped = &junitSkipped{Message: why}
			}
			suites[i].add(tc)
		}
	}
	for _, p := range m.Failures {
		suiteOf(p.Kernel).add(junitCase{
			Classname: oneLine(p.Experiment),
			Name:      problemCell(p),
			Time:      junitTime(0),
			Failure:   &junitFailure{Message: oneLine(p.Message), Type: "failure"},
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
				titles = append(titles, oneLine(s.Title))
			}
		}
		if len(lines) == 0 {
			lines = []string{noSplats}
		}
		tc := junitCase{Classname: "splats", Name: "splats", Time: junitTime(0), SystemOut: strings.Join(lines, "\n")}
		if len(titles) > 0 {
			tc.Failure = &junitFailure{Type: "splat", Message: "new vs the baseline: " + strings.Join(titles, "; ")}
		}
		suites[i].add(tc)
	}
	for _, p := range m.Skipped {
		suiteOf(p.Kernel).add(junitCase{
			Classname: oneLine(p.Experiment),
			Name:      problemCell(p),
			Time:      junitTime(0),
			Skipped:   &junitSkipped{Message: oneLine(p.Message)},
		})
	}
	if len(other.Cases) > 0 {
		suites = append(suites, other)
	}
	doc := junitSuites{Name: name, Time: junitTime(0), Suites: suites}
	for _, s := range suites {
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Skipped += s.Skipped
	}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding junit matrix report: %w", err)
	}
	if _, err := io.WriteString(w, xml.Header+string(b)+"\n"); err != nil {
		return fmt.Errorf("writing junit matrix report: %w", err)
	}
	return nil
}

// junitTime formats seconds for a time attribute.
func junitTime(sec float64) string {
	return fmt.Sprintf("%.3f", sec)
}

// junitSuites is JUnit's root element.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

// junitSuite is one <testsuite>; add keeps its counts.
type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

// add appends tc and counts it.
func (s *junitSuite) add(tc junitCase) {
	s.Cases = append(s.Cases, tc)
	s.Tests++
	if tc.Failure != nil {
		s.Failures++
	}
	if tc.Skipped != nil {
		s.Skipped++
	}
}

// junitProperty is one <property> of a suite.
type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// junitCase is one <testcase>.
type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// junitFailure marks a failed testcase.
type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// junitSkipped marks a skipped testcase.
type junitSkipped struct {
	Message string `xml:"message,attr"`
}
