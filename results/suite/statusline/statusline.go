// Package statusline reads the lines fstests' check prints on its
// standard output as each test ends: the test's name, then its time, its
// not-run reason or why it failed. It depends on nothing but the
// standard library and guest/proto's status names, so that the guest
// agent can follow a running check with it.
package statusline

import (
	"strconv"
	"strings"

	"klab/guest/proto"
)

// Parse reads one line of check's output. ok is false for a line that
// is not a finished test's status line (a header, a diff line, a test
// still running). For a finished test it returns the test's name
// (generic/013), its status (proto.TestPass, TestFail or TestNotRun),
// its seconds (for a pass; 0 otherwise) and a reason (the not-run
// reason, or what check said about a failure). The strings returned
// are parts of line: Parse allocates nothing.
//
// The forms check prints, after the name padded to a column:
//
//	generic/001 5s ...  6s                      pass; "5s ... " is the previous run's time
//	generic/001        6s                       pass, no previous time
//	generic/002       [not run] reason          not run
//	generic/003 4s ... - output mismatch (see F)
//	generic/004       [failed, exit status 1]- output mismatch (see F)
//	generic/005 3s ... _check_dmesg: something found in dmesg (see F)
//	generic/006       [expunged]                reported as not run, reason "expunged"
//
// With check -T, "[HH:MM:SS]" stamps come before the result; they are
// skipped.
func Parse(line string) (name, status string, seconds float64, reason string, ok bool) {
	line = strings.TrimRight(line, " \t\r\n")
	sp := strings.IndexByte(line, ' ')
	if sp < 0 {
		return "", "", 0, "", false
	}
	name, rest := line[:sp], line[sp:]
	if !ValidName(name) {
		return "", "", 0, "", false
	}
	rest = skipPrefixes(rest)
	switch {
	case rest == "":
		return "", "", 0, "", false
	case strings.HasPrefix(rest, "[not run]"):
		return name, proto.TestNotRun, 0, strings.TrimSpace(rest[len("[not run]"):]), true
	case rest == "[expunged]":
		return name, proto.TestNotRun, 0, "expunged", true
	case rest == "- no such test?":
		return name, proto.TestNotRun, 0, "no such test", true
	case isFailure(rest):
		return name, proto.TestFail, 0, strings.TrimPrefix(rest, "- "), true
	}
	if n, ok := parseSeconds(rest); ok {
		return name, proto.TestPass, n, "", true
	}
	return "", "", 0, "", false
}

// failureMarks are what check prints, alone or together, for a failed
// test: its exit status, a core dump, an output mismatch, a missing
// golden output, and the post-test checks (_check_dmesg,
// _check_kmemleak, a file-system check).
var failureMarks = [...]string{"[failed, exit status", "[dumped core]", "- output mismatch", "no qualified output", "_check_"}

// isFailure reports whether rest, the part of a status line after the
// test's name and time, says the test failed.
func isFailure(rest string) bool {
	for _, m := range failureMarks {
		if strings.HasPrefix(rest, m) {
			return true
		}
	}
	return false
}

// skipPrefixes drops from rest the leading spaces, the previous run's
// time ("5s ... ") and -T's time stamps ("[12:00:01]").
func skipPrefixes(rest string) string {
	for {
		rest = strings.TrimLeft(rest, " \t")
		if i := strings.Index(rest, " ... "); i > 0 {
			if _, ok := parseSeconds(rest[:i]); ok {
				rest = rest[i+len(" ... "):]
				continue
			}
		}
		if len(rest) >= 10 && rest[0] == '[' && rest[9] == ']' && isClock(rest[1:9]) {
			rest = rest[10:]
			continue
		}
		return rest
	}
}

// isClock reports whether s is "HH:MM:SS".
func isClock(s string) bool {
	for i := 0; i < len(s); i++ {
		if i%3 == 2 {
			if s[i] != ':' {
				return false
			}
		} else if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// parseSeconds parses check's "6s".
func parseSeconds(s string) (float64, bool) {
	num, ok := strings.CutSuffix(s, "s")
	if !ok || num == "" || len(num) > 9 {
		return 0, false
	}
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(num)
	return float64(n), err == nil
}

// ValidName reports whether s is an fstests test name as check names
// tests: a test directory ([a-z0-9_-]+), a slash, three digits and
// optionally a dash and letters, digits or dashes (generic/013,
// ext4/001, xfs/123-name), as common/test_names' VALID_TEST_NAME says.
func ValidName(s string) bool {
	dir, id, ok := strings.Cut(s, "/")
	if !ok || dir == "" || len(dir) > 64 || len(id) < 3 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(dir); i++ {
		c := dir[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		digit := c >= '0' && c <= '9'
		if i < 3 && !digit || i >= 3 && !digit && !isAlpha(c) && c != '-' {
			return false
		}
	}
	return true
}

// isAlpha reports whether c is an ASCII letter.
func isAlpha(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// markerPrefix starts the line check writes to /dev/kmsg before each
// test: "run fstests generic/013 at 2024-01-02 03:04:05".
const markerPrefix = "run fstests "

// Marker returns the test that line (a console line, or a kernel log
// message) marks as starting: check writes "run fstests NAME at DATE" to
// /dev/kmsg before each test. The name must be a valid test name.
func Marker(line string) (string, bool) {
	i := strings.Index(line, markerPrefix)
	if i < 0 {
		return "", false
	}
	name, _, ok := strings.Cut(line[i+len(markerPrefix):], " at ")
	if !ok || !ValidName(name) {
		return "", false
	}
	return name, true
}
