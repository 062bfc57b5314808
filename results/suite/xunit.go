package suite

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"klab/guest/proto"
	"klab/internal/textsafe"
	"klab/results/internal/render"
	"klab/results/suite/statusline"
)

// XUnit is what check's -R xunit (or xunit-quiet) report, result.xml,
// says about one section of a run.
type XUnit struct {
	// Section is the config section the tests ran in ("global" when
	// the configuration has none).
	Section string
	// Hostname and Timestamp are the testsuite's attributes.
	Hostname, Timestamp string
	// Tests, Failures and Skipped are the counts check wrote.
	Tests, Failures, Skipped int
	// Seconds is the section's time; 0 in a report written while the
	// section was still running.
	Seconds float64
	// Properties are the report's properties (KERNEL, FSTYP,
	// MOUNT_OPTIONS, ...), cleaned to one line each.
	Properties map[string]string
	// Cases are the tests, in the order the report lists them.
	Cases []Test
}

// xunitSuite is result.xml's root element as common/report writes it.
type xunitSuite struct {
	Name       string `xml:"name,attr"`
	Failures   string `xml:"failures,attr"`
	Skipped    string `xml:"skipped,attr"`
	Tests      string `xml:"tests,attr"`
	Time       string `xml:"time,attr"`
	Hostname   string `xml:"hostname,attr"`
	Timestamp  string `xml:"timestamp,attr"`
	Properties []struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	} `xml:"properties>property"`
	Cases []xunitCase `xml:"testcase"`
}

// xunitCase is one <testcase>: no child for a pass, <skipped> for a
// test that did not run, <failure> with the test's log, its dmesg and
// its output diff for a failure.
type xunitCase struct {
	Classname string `xml:"classname,attr"`
	Name      string `xml:"name,attr"`
	Time      string `xml:"time,attr"`
	Skipped   *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Message string `xml:"message,attr"`
	} `xml:"failure"`
	SystemOut string `xml:"system-out"`
	KernelLog string `xml:"kernel-log"`
	SystemErr string `xml:"system-err"`
}

// ParseXUnit reads a result.xml that fstests' check wrote with -R xunit
// or -R xunit-quiet, at most max bytes of it. Each testcase becomes a
// Test: a pass, a notrun with the <skipped> message as its reason, or a
// fail with the <failure> message as its reason, the <system-err> diff
// as its Diff and the tail of <system-out> and <kernel-log> as its
// LogTail. Every string is cleaned of control characters and bounded.
func ParseXUnit(r io.Reader, max int64) (*XUnit, error) {
	data, err := readBounded(r, max, "xunit report")
	if err != nil {
		return nil, err
	}
	// XML forbids control characters, and check copies a test's diff
	// into the report as it is: drop them before decoding.
	d := xml.NewDecoder(strings.NewReader(strings.Map(dropControl, string(data))))
	// check writes a failure's message attribute without escaping it;
	// a stray '&' or '<' in it should not lose the whole report.
	d.Strict = false
	d.Entity = xml.HTMLEntity
	var s xunitSuite
	if err := d.Decode(&s); err != nil {
		return nil, fmt.Errorf("parsing xunit report: %w", err)
	}
	if s.Name == "" && len(s.Cases) == 0 {
		return nil, errors.New("parsing xunit report: no testsuite with testcases")
	}
	x := &XUnit{
		Hostname:   oneLine(s.Hostname),
		Timestamp:  oneLine(s.Timestamp),
		Tests:      atoi(s.Tests),
		Failures:   atoi(s.Failures),
		Skipped:    atoi(s.Skipped),
		Seconds:    atof(s.Time),
		Properties: map[string]string{},
	}
	for _, p := range s.Properties {
		x.Properties[oneLine(p.Name)] = oneLine(p.Value)
	}
	for i, c := range s.Cases {
		name := strings.TrimSpace(c.Name)
		if !statusline.ValidName(name) {
			return nil, fmt.Errorf("parsing xunit report: testcase %d: bad test name %q", i+1, oneLine(name))
		}
		if x.Section == "" {
			x.Section = oneLine(strings.TrimPrefix(c.Classname, "xfstests."))
		}
		t := Test{Name: name, Status: proto.TestPass, Seconds: atof(c.Time)}
		switch {
		case c.Failure != nil:
			t.Status = proto.TestFail
			t.Reason = oneLine(strings.TrimPrefix(strings.TrimSpace(c.Failure.Message), "- "))
			t.Diff = Head(cdata(c.SystemErr), MaxDetail)
			t.LogTail = Tail(render.JoinNonEmpty("\n", cdata(c.SystemOut), cdata(c.KernelLog)), MaxDetail)
		case c.Skipped != nil:
			t.Status = proto.TestNotRun
			t.Reason = oneLine(c.Skipped.Message)
		}
		x.Cases = append(x.Cases, t)
	}
	return x, nil
}

// cdata is an element's text as check writes it (a CDATA section on
// lines of its own), cleaned, without the lines around it.
func cdata(s string) string {
	return strings.Trim(textsafe.Clean(s), "\n\t ")
}

// dropControl maps the ASCII control characters XML forbids to nothing.
func dropControl(r rune) rune {
	if r < ' ' && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
		return -1
	}
	return r
}

// atoi is s as a non-negative int, 0 when it is not one.
func atoi(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// atof is s as a finite non-negative float, 0 when it is not one.
func atof(s string) float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 || f > 1e9 || f != f {
		return 0
	}
	return f
}

// readBounded reads r to its end, at most max bytes; what names the
// input in errors.
func readBounded(r io.Reader, max int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(bufio.NewReader(r), max+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("reading %s: larger than %d bytes", what, max)
	}
	return data, nil
}
