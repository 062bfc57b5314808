package lab

import (
	"fmt"
	"math"
	"slices"

	"klab/guest/proto"
	"klab/internal/textsafe"
)

// Bounds of what a guest reports about fstests tests: the guest bounds
// them too, but it is not trusted.
const (
	// maxTestDetail bounds a test's Diff and LogTail when its step sets
	// a smaller MaxDetail or none.
	maxTestDetail = 64 << 10
	// maxTestLine bounds a test's one-line fields.
	maxTestLine = 1 << 10
	// MaxXUnit bounds Done.XUnit.
	MaxXUnit = 256 << 10
)

// testFilter takes a step's test reports: only the tests the step asked
// for, each once, with its step's ID and a status a guest may report,
// their strings cleaned of control characters and bounded.
type testFilter struct {
	id        int
	tests     []string
	maxDetail int
	seen      map[string]bool
}

func newTestFilter(st proto.Step) *testFilter {
	f := &testFilter{id: st.ID, seen: map[string]bool{}, maxDetail: maxTestDetail}
	if st.Kind == proto.StepFstests && st.Fstests != nil {
		f.tests = st.Fstests.Tests
		if m := st.Fstests.MaxDetail; m > 0 && m < f.maxDetail {
			f.maxDetail = m
		}
	}
	return f
}

// take cleans t in place, or says why it is dropped.
func (f *testFilter) take(t *proto.TestResult) string {
	switch {
	case t.Step != f.id:
		return fmt.Sprintf("step %d is not the running step %d", t.Step, f.id)
	case !slices.Contains(f.tests, t.Name):
		return fmt.Sprintf("test %q is not one of the step's", textsafe.OneLine(clip(t.Name, maxTestLine)))
	case f.seen[t.Name]:
		return fmt.Sprintf("test %s reported twice", t.Name)
	}
	switch t.Status {
	case proto.TestPass, proto.TestFail, proto.TestNotRun, proto.TestHang:
	default:
		return fmt.Sprintf("test %s: status %q is not one a guest reports", t.Name, textsafe.OneLine(clip(t.Status, 32)))
	}
	f.seen[t.Name] = true
	if math.IsNaN(t.Seconds) || t.Seconds < 0 || math.IsInf(t.Seconds, 0) {
		t.Seconds = 0
	}
	t.Reason = textsafe.OneLine(clip(t.Reason, maxTestLine))
	t.Transport = textsafe.OneLine(clip(t.Transport, maxTestLine))
	t.Diff = textsafe.Clean(clip(t.Diff, f.maxDetail))
	t.LogTail = textsafe.Clean(clipTail(t.LogTail, f.maxDetail))
	return ""
}

// boundXUnit cuts a step's Done.XUnit to MaxXUnit and cleans it.
func boundXUnit(d *proto.Done) {
	if d.XUnit != "" {
		d.XUnit = textsafe.Clean(clip(d.XUnit, MaxXUnit))
	}
}

// clip is s cut to at most max bytes.
func clip(s string, max int) string {
	if len(s) > max {
		return s[:max]
	}
	return s
}

// clipTail is the last max bytes of s.
func clipTail(s string, max int) string {
	if len(s) > max {
		return s[len(s)-max:]
	}
	return s
}
