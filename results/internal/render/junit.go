package render

import (
	"encoding/xml"
	"fmt"
	"io"
)

// JUnitTime formats seconds for a JUnit time attribute: "1.500".
func JUnitTime(sec float64) string {
	return fmt.Sprintf("%.3f", sec)
}

// JUnitSuites is JUnit's root element, <testsuites>.
type JUnitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is one <testsuite>; Add keeps its counts.
type JUnitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []JUnitProperty `xml:"properties>property,omitempty"`
	Cases      []JUnitCase     `xml:"testcase"`
}

// Add appends tc to the suite and counts it in Tests, Failures and
// Skipped.
func (s *JUnitSuite) Add(tc JUnitCase) {
	s.Cases = append(s.Cases, tc)
	s.Tests++
	if tc.Failure != nil {
		s.Failures++
	}
	if tc.Skipped != nil {
		s.Skipped++
	}
}

// JUnitProperty is one <property> of a suite.
type JUnitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitCase is one <testcase>.
type JUnitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *JUnitFailure `xml:"failure,omitempty"`
	Skipped   *JUnitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// JUnitFailure marks a failed testcase.
type JUnitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// JUnitSkipped marks a skipped testcase.
type JUnitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes doc to w as indented XML after the XML header,
// ending in a newline. what names the document in errors ("junit
// report": "encoding junit report: ...", "writing junit report: ...").
func WriteJUnit(w io.Writer, doc JUnitSuites, what string) error {
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding %s: %w", what, err)
	}
	if _, err := io.WriteString(w, xml.Header+string(b)+"\n"); err != nil {
		return fmt.Errorf("writing %s: %w", what, err)
	}
	return nil
}
