// Package suite owns fstests results: what a run of the test suite
// produced (a Run of per-test Test results, read from check's result.xml,
// check.log and status lines, or built from the guest's reports), how
// the tests to run are chosen (fstests' groups and exclusions, the
// expunge files kept with klab, sharding over guests by earlier times),
// which test a console splat belongs to, and what changed between two
// runs (Compare's Verdict, with reruns telling a regression from a flaky
// test), written in every report format klab has.
package suite

import (
	"fmt"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/internal/fileio"
	"klab/internal/textsafe"
	"klab/results"
	"klab/results/suite/statusline"
)

// MaxDetail bounds a Test's Diff and LogTail when klab bounds them (in
// FromProto and the parsers): 8 KiB.
const MaxDetail = 8 << 10

// Test is one fstests test's outcome in a Run.
type Test struct {
	// Name is the test (generic/013).
	Name string `json:"name"`
	// Status is proto.TestPass, TestFail, TestNotRun, TestHang or
	// TestCrash; for a test run more than once, the first run's.
	Status string `json:"status"`
	// Seconds is the test's wall time (its first run's).
	Seconds float64 `json:"seconds"`
	// Reason is why the test did not run, or a one-line reason for a
	// failure, a hang or a crash.
	Reason string `json:"reason,omitempty"`
	// Diff is the head of the output's diff against the golden output,
	// for a failure.
	Diff string `json:"diff,omitempty"`
	// LogTail is the tail of the test's log (.full, .dmesg), for a
	// failure, a hang or a crash.
	LogTail string `json:"log_tail,omitempty"`
	// Transport, for FUSE configurations, is what served the test's
	// mounts (dev=N uring=M).
	Transport string `json:"transport,omitempty"`
	// Splats are the kernel splats printed while the test ran.
	Splats []SplatRef `json:"splats,omitempty"`
	// Runs is how many times the test ran, reruns included; 0 means once.
	Runs int `json:"runs,omitempty"`
	// Fails is how many of those runs failed, hung or crashed; it is read
	// only when Runs is set (Status says it otherwise).
	Fails int `json:"fails,omitempty"`
}

// SplatRef names a kernel splat: its type and one-line title.
type SplatRef struct {
	Type  string `json:"type"`
	Title string `json:"title"`
}

// String is "type: title".
func (s SplatRef) String() string { return s.Type + ": " + s.Title }

// Failed reports whether status is a failing one: fail, hang or crash.
func Failed(status string) bool {
	return status == proto.TestFail || status == proto.TestHang || status == proto.TestCrash
}

// Tally returns how many times t ran and how many of those failed,
// hung or crashed.
func (t Test) Tally() (fails, runs int) {
	if t.Runs > 0 {
		return min(t.Fails, t.Runs), t.Runs
	}
	if Failed(t.Status) {
		return 1, 1
	}
	return 0, 1
}

// Run is what one run of fstests produced: one configuration on one
// kernel, its tests in the order they ran. Its JSON form is stable
// (Save, Load).
type Run struct {
	// Label names the run in an A/B ("A", "B"), or is empty.
	Label string `json:"label,omitempty"`
	// Kernel is the kernel the tests ran on.
	Kernel results.Kernel `json:"kernel"`
	// Config is the configuration's name (ext4, fuse-klab-uring).
	Config string `json:"config"`
	// Tests are the results, in the order the tests ran.
	Tests []Test `json:"tests"`
	// Splats are splats printed before the first test (at boot or
	// while the configuration was set up).
	Splats []SplatRef `json:"splats,omitempty"`
	// Started is when the run started; Elapsed its wall time in seconds.
	Started time.Time `json:"started"`
	Elapsed float64   `json:"elapsed_seconds"`
}

// Test returns the test named name, or nil.
func (r *Run) Test(name string) *Test {
	for i := range r.Tests {
		if r.Tests[i].Name == name {
			return &r.Tests[i]
		}
	}
	return nil
}

// AddRerun counts t, a rerun of one of r's tests, in that test's Runs
// and Fails; the first run's status, reason and details stay. A test r
// does not have yet is added.
func (r *Run) AddRerun(t Test) {
	old := r.Test(t.Name)
	if old == nil {
		r.Tests = append(r.Tests, t)
		return
	}
	fails, runs := old.Tally()
	f, n := t.Tally()
	old.Fails, old.Runs = fails+f, runs+n
	old.Splats = appendNew(old.Splats, t.Splats...)
}

// appendNew appends to refs those of more it does not hold yet.
func appendNew(refs []SplatRef, more ...SplatRef) []SplatRef {
	for _, m := range more {
		if !containsRef(refs, m) {
			refs = append(refs, m)
		}
	}
	return refs
}

// containsRef reports whether refs holds r.
func containsRef(refs []SplatRef, r SplatRef) bool {
	for _, x := range refs {
		if x == r {
			return true
		}
	}
	return false
}

// Counts are a run's tests by status.
type Counts struct {
	Tests, Pass, Fail, NotRun, Hang, Crash int
}

// Counts counts r's tests by status.
func (r *Run) Counts() Counts {
	var c Counts
	for _, t := range r.Tests {
		c.Tests++
		switch t.Status {
		case proto.TestPass:
			c.Pass++
		case proto.TestFail:
			c.Fail++
		case proto.TestNotRun:
			c.NotRun++
		case proto.TestHang:
			c.Hang++
		case proto.TestCrash:
			c.Crash++
		}
	}
	return c
}

// Save writes r to path as JSON, atomically.
func (r *Run) Save(path string) error {
	if err := fileio.WriteJSON(path, r); err != nil {
		return fmt.Errorf("saving fstests results: %w", err)
	}
	return nil
}

// Load reads a Run that Save wrote, and checks it (Validate).
func Load(path string) (*Run, error) {
	var r Run
	if err := fileio.ReadJSON(path, &r); err != nil {
		return nil, fmt.Errorf("loading fstests results: %w", err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("loading fstests results %s: %w", path, err)
	}
	return &r, nil
}

// Validate checks that every test has a valid name and a known status,
// and that no test is there twice.
func (r *Run) Validate() error {
	seen := map[string]bool{}
	for i, t := range r.Tests {
		if !statusline.ValidName(t.Name) {
			return fmt.Errorf("test %d: bad name %q", i+1, textsafe.OneLine(t.Name))
		}
		if !validStatus(t.Status) {
			return fmt.Errorf("test %s: unknown status %q, want pass, fail, notrun, hang or crash", t.Name, textsafe.OneLine(t.Status))
		}
		if seen[t.Name] {
			return fmt.Errorf("test %s is there twice", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// validStatus reports whether s is one of the proto.Test* statuses.
func validStatus(s string) bool {
	switch s {
	case proto.TestPass, proto.TestFail, proto.TestNotRun, proto.TestHang, proto.TestCrash:
		return true
	}
	return false
}

// FromProto makes a Test of a guest's report, its strings cleaned and
// bounded: Reason and Transport to one line, Diff to its first
// MaxDetail bytes and LogTail to its last.
func FromProto(r proto.TestResult) Test {
	return Test{
		Name:      textsafe.OneLine(r.Name),
		Status:    r.Status,
		Seconds:   r.Seconds,
		Reason:    oneLine(r.Reason),
		Diff:      Head(textsafe.Clean(r.Diff), MaxDetail),
		LogTail:   Tail(textsafe.Clean(r.LogTail), MaxDetail),
		Transport: oneLine(r.Transport),
	}
}

// maxLine bounds a one-line field (a reason, a transport).
const maxLine = 1 << 10

// oneLine is s on one line, at most maxLine bytes.
func oneLine(s string) string {
	return Head(textsafe.OneLine(s), maxLine)
}

// Head returns s's first max bytes, cut at a line end when one is in
// the second half, and cut back to whole UTF-8 characters.
func Head(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for i := len(s) - 1; i >= max/2; i-- {
		if s[i] == '\n' {
			return s[:i+1]
		}
	}
	return strings.ToValidUTF8(s, "")
}

// Tail returns s's last max bytes, starting at a line start when one is
// in the first half, and at a whole UTF-8 character.
func Tail(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[len(s)-max:]
	for i := 0; i < max/2 && i < len(s); i++ {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return strings.ToValidUTF8(s, "")
}
