package agent

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"klab/guest/proto"
	"klab/results/suite/statusline"
)

// statusLine is what one line of fstests' ./check output says about a
// test: check prints the test's name, then, when it ends, its time
// (passed), "[not run] REASON", or what failed.
type statusLine struct {
	Name    string
	Status  string
	Seconds float64
	Reason  string
}

// testNameRe is an fstests test name: a test directory and a test
// (generic/013, ext4/001).
var testNameRe = regexp.MustCompile(`^[a-z0-9_]+/[0-9A-Za-z_.-]+$`)

// secondsRe is the time check prints after a test that passed ("4s"; an
// earlier run's time may come before it: "3s ...  4s").
var secondsRe = regexp.MustCompile(`(?:^|\s)([0-9]+)s$`)

// parseStatusLine reads a line of ./check's output that starts with a
// test's name. Other lines (the header, diff lines, the summary) are not
// status lines.
func parseStatusLine(line string) (statusLine, bool) {
	line = strings.TrimRight(line, "\r\n")
	if line == "" || line[0] == ' ' || line[0] == '\t' {
		return statusLine{}, false
	}
	name, rest, _ := strings.Cut(line, " ")
	if !testNameRe.MatchString(name) {
		return statusLine{}, false
	}
	rest = strings.TrimSpace(rest)
	st := statusLine{Name: name}
	switch {
	case strings.Contains(rest, "[not run]"):
		_, reason, _ := strings.Cut(rest, "[not run]")
		st.Status, st.Reason = proto.TestNotRun, strings.TrimSpace(reason)
	case strings.Contains(rest, "[expunged]"):
		st.Status, st.Reason = proto.TestNotRun, "expunged"
	case rest == "- no such test?":
		st.Status, st.Reason = proto.TestNotRun, "no such test"
	default:
		if m := secondsRe.FindStringSubmatch(rest); m != nil && !strings.Contains(rest, "[failed") {
			st.Status = proto.TestPass
			st.Seconds, _ = strconv.ParseFloat(m[1], 64)
			break
		}
		st.Status, st.Reason = proto.TestFail, rest
		if st.Reason == "" {
			st.Reason = "failed without a message"
		}
	}
	return st, true
}

// checkSummary reports whether a line of ./check's output is its summary
// at the end of a run: no test's lines come after it.
func checkSummary(line string) bool {
	for _, p := range []string{"Ran:", "Not run:", "Failures:", "Failed ", "Passed all ", "Interrupted!"} {
		if strings.HasPrefix(line, p) {
			return true
		}
	}
	return false
}

// kmsgMarker returns the test a /dev/kmsg record ("6,812,1234567,-;run
// fstests generic/013 at 2024-01-02 03:04:05") marks as starting: ./check
// writes one before each test.
func kmsgMarker(record string) (string, bool) {
	_, msg, ok := strings.Cut(record, ";")
	if !ok {
		msg = record
	}
	msg, _, _ = strings.Cut(msg, "\n")
	return statusline.Marker(msg)
}

// ext4LocalConfig is local.config for fstests on ext4: TEST_DEV and
// SCRATCH_DEV are two ram disks, with the configuration's mkfs and mount
// options.
func ext4LocalConfig(c *proto.FstestsConfig, testDev, scratchDev string) []string {
	lines := []string{
		"export FSTYP=ext4",
		"export TEST_DEV=" + shellQuote(testDev),
		"export TEST_DIR=" + fstestsTestDir,
		"export SCRATCH_DEV=" + shellQuote(scratchDev),
		"export SCRATCH_MNT=" + fstestsScratchMnt,
	}
	if c.MkfsOptions != "" {
		lines = append(lines, "export MKFS_OPTIONS="+shellQuote(c.MkfsOptions))
	}
	if c.MountOptions != "" {
		lines = append(lines, "export MOUNT_OPTIONS="+shellQuote("-o "+c.MountOptions))
	}
	return lines
}

// renderLocalConfig is the text of local.config: its lines ("export
// KEY=VALUE", as fstests' own examples write them) after a header.
func renderLocalConfig(lines []string) string {
	var b strings.Builder
	b.WriteString("# written by klab's agent for this run\n")
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/_.,:=+-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// validEnv checks the step's extra KEY=VALUE pairs for check.
func validEnv(env []string) error {
	keyRe := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	for _, kv := range env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !keyRe.MatchString(k) {
			return fmt.Errorf("env %q: want KEY=VALUE", kv)
		}
	}
	return nil
}

// headBytes is the first max bytes of s, cut at a line's end when there
// is one, with a note of what was left out.
func headBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := s[:max]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i+1]
	}
	return cut + fmt.Sprintf("[... %d more bytes]\n", len(s)-len(cut))
}

// tailBytes is the last max bytes of s, from a line's start when there is
// one, with a note of what was left out.
func tailBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := s[len(s)-max:]
	if i := strings.IndexByte(cut, '\n'); i >= 0 && i < len(cut)-1 {
		cut = cut[i+1:]
	}
	return fmt.Sprintf("[... %d bytes before]\n", len(s)-len(cut)) + cut
}
