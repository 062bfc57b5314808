package suite

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"klab/guest/proto"
	"klab/results/suite/statusline"
)

// CheckLog is one run's summary in check.log, which check appends to at
// the end of every run (its _wrapup).
type CheckLog struct {
	// Kernel is the "Kernel version:" line's version; Date the line
	// after it.
	Kernel, Date string
	// Ran, NotRun and Failures are the tests of the "Ran:", "Not run:"
	// and "Failures:" lines.
	Ran, NotRun, Failures []string
	// Passed is set by a "Passed all N tests" line.
	Passed bool
	// Interrupted is set by an "Interrupted!" line.
	Interrupted bool
}

// Tests are the summary's tests in the order of its Ran line, each a
// pass, a fail (in Failures) or a notrun (in NotRun), without times or
// reasons; the tests only NotRun lists come after them.
func (c CheckLog) Tests() []Test {
	status := map[string]string{}
	for _, n := range c.NotRun {
		status[n] = proto.TestNotRun
	}
	for _, n := range c.Failures {
		status[n] = proto.TestFail
	}
	var out []Test
	seen := map[string]bool{}
	for _, lists := range [][]string{c.Ran, c.NotRun} {
		for _, n := range lists {
			if seen[n] {
				continue
			}
			seen[n] = true
			s := status[n]
			if s == "" {
				s = proto.TestPass
			}
			out = append(out, Test{Name: n, Status: s})
		}
	}
	return out
}

// ParseCheckLog reads check.log, at most max bytes of it, and returns
// each run's summary, oldest first. A run starts at its "Kernel
// version:" line; lines that belong to no summary are skipped.
func ParseCheckLog(r io.Reader, max int64) ([]CheckLog, error) {
	data, err := readBounded(r, max, "check.log")
	if err != nil {
		return nil, err
	}
	var out []CheckLog
	cur := func() *CheckLog {
		if len(out) == 0 {
			out = append(out, CheckLog{})
		}
		return &out[len(out)-1]
	}
	afterKernel := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \r")
		wasAfterKernel := afterKernel
		afterKernel = false
		switch {
		case strings.HasPrefix(line, "Kernel version:"):
			out = append(out, CheckLog{Kernel: oneLine(strings.TrimPrefix(line, "Kernel version:"))})
			afterKernel = true
		case wasAfterKernel:
			// check writes date(1)'s output right after the version.
			cur().Date = oneLine(line)
		case strings.HasPrefix(line, "Ran:"):
			cur().Ran = testNames(line[len("Ran:"):])
		case strings.HasPrefix(line, "Not run:"):
			cur().NotRun = testNames(line[len("Not run:"):])
		case strings.HasPrefix(line, "Failures:"):
			cur().Failures = testNames(line[len("Failures:"):])
		case strings.HasPrefix(line, "Passed all ") && strings.HasSuffix(line, " tests"):
			cur().Passed = true
		case line == "Interrupted!":
			cur().Interrupted = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading check.log: %w", err)
	}
	return out, nil
}

// testNames are the valid test names among s's fields.
func testNames(s string) []string {
	var out []string
	for _, f := range strings.Fields(s) {
		if statusline.ValidName(f) {
			out = append(out, f)
		}
	}
	return out
}

// ParseCheckTime reads check.time, at most max bytes of it: one line
// per test that passed, "generic/001 6", its seconds in the last run
// that passed it. The times feed Balance.
func ParseCheckTime(r io.Reader, max int64) (map[string]float64, error) {
	data, err := readBounded(r, max, "check.time")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for i, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 || !statusline.ValidName(f[0]) {
			return nil, fmt.Errorf("check.time:%d: want \"TEST SECONDS\", got %q", i+1, oneLine(line))
		}
		sec, err := strconv.ParseFloat(f[1], 64)
		if err != nil || sec < 0 || sec > 1e9 {
			return nil, fmt.Errorf("check.time:%d: bad seconds %q", i+1, oneLine(f[1]))
		}
		out[f[0]] = sec
	}
	return out, nil
}

// ParseStatusLine reads one line of check's standard output; see
// statusline.Parse, which the guest agent uses directly.
func ParseStatusLine(line string) (name, status string, seconds float64, reason string, ok bool) {
	return statusline.Parse(line)
}
