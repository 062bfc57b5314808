package report

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// JUnit writes r as JUnit XML for CI systems: one <testsuite> named
// after the experiment holding a testcase per check (classname
// "<experiment>.checks"), per row of the table ("<experiment>.cells",
// failing on a regression past its threshold), one "splats" testcase
// failing when B printed kernel reports A did not, and a skipped
// testcase per skipped cell.
func JUnit(w io.Writer, r *Report) error {
	exp := oneLine(r.Experiment)
	suite := junitSuite{
		Name:      exp,
		Time:      junitTime(r.WallSec),
		Timestamp: r.Start,
		Properties: []junitProperty{
			{"accel", oneLine(r.Accel)},
			{"host", oneLine(r.Host)},
			{"qemu", oneLine(r.QEMU)},
			{"a", sideDesc(r, r.A, kernelFull)},
			{"b", sideDesc(r, r.B, kernelFull)},
			{"spec", oneLine(r.SpecFile)},
			{"spec_sha256", r.SpecSHA256},
			{"run_dir", oneLine(r.RunDir)},
		},
	}
	for _, c := range r.Checks {
		tc := junitCase{
			Classname: exp + ".checks",
			Name:      joinNonEmpty(" ", oneLine(c.Name), oneLine(c.Cell), oneLine(c.Side), fmt.Sprintf("round %d", c.Round)),
			Time:      junitTime(c.TookSec),
		}
		if !c.Passed {
			tc.Failure = &junitFailure{Message: oneLine(c.Message), Type: "check"}
		}
		suite.add(tc)
	}
	for _, row := range r.Rows {
		cells := tableRow(row)
		tc := junitCase{
			Classname: exp + ".cells",
			Name:      oneLine(row.Name),
			Time:      junitTime(0),
			SystemOut: joinNonEmpty(", ", "A "+cells[1], "B "+cells[2], "B/A "+cells[3], joinNonEmpty(" ", "change", cells[4], cells[5]), cells[6], cells[7]),
		}
		if row.Regression {
			change := joinNonEmpty(" ", fmt.Sprintf("%+.1f%%", row.Change.Pct), cells[4], cells[5])
			tc.Failure = &junitFailure{
				Type:    "regression",
				Message: fmt.Sprintf("change %s, past the %g%% regression threshold", change, row.ThresholdPct),
				Text:    tc.SystemOut,
			}
		}
		suite.add(tc)
	}
	splats := junitCase{Classname: exp + ".splats", Name: "splats", Time: junitTime(0), SystemOut: strings.Join(splatLines(r), "\n")}
	if len(r.Splats.New) > 0 {
		titles := make([]string, len(r.Splats.New))
		for i, s := range r.Splats.New {
			titles[i] = oneLine(s.Title)
		}
		splats.Failure = &junitFailure{Type: "splat", Message: "new in B: " + strings.Join(titles, "; ")}
	}
	suite.add(splats)
	for _, s := range r.Skipped {
		suite.add(junitCase{
			Classname: exp + ".cells",
			Name:      oneLine(s.Cell),
			Time:      junitTime(0),
			Skipped:   &junitSkipped{Message: oneLine(s.Reason)},
		})
	}
	doc := junitSuites{
		Name:     exp,
		Tests:    suite.Tests,
		Failures: suite.Failures,
		Skipped:  suite.Skipped,
		Time:     suite.Time,
		Suites:   []junitSuite{suite},
	}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding junit report: %w", err)
	}
	if _, err := io.WriteString(w, xml.Header+string(b)+"\n"); err != nil {
		return fmt.Errorf("writing junit report: %w", err)
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
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
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
