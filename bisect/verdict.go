package bisect

import (
	"fmt"
	"slices"
	"strings"

	"klab/internal/textsafe"
	"klab/results/bisectreport"
	"klab/results/splat"
	"klab/results/stats"
)

// Verdict is what a step found a commit to be, in git bisect's words.
type Verdict string

// Verdicts.
const (
	// Good: the commit does not show what is chased.
	Good Verdict = "good"
	// Bad: it does.
	Bad Verdict = "bad"
	// Skip: it cannot be told (it does not build, its guest did not
	// boot, its metric sits between the endpoints).
	Skip Verdict = "skip"
	// ambiguous is a metric step that needs more rounds; it never
	// reaches git.
	ambiguous Verdict = "ambiguous"
)

// Kind is what a bisection chases.
type Kind string

// Kinds of criteria.
const (
	// KindSplat: a kernel splat appears (a title, a type, or any splat
	// the good commit did not print).
	KindSplat Kind = "splat"
	// KindCheck: one of the spec's checks fails.
	KindCheck Kind = "check"
	// KindTest: a test of the spec's suite fails.
	KindTest Kind = "test"
	// KindMetric: a row of the spec's report moves from the good
	// commit's value to the bad one's.
	KindMetric Kind = "metric"
)

// Criterion says what makes a commit bad.
type Criterion struct {
	// Kind is what is chased.
	Kind Kind `json:"kind"`
	// Splat is a substring of the titles chased (--splat); SplatType a
	// splat type (--splat-family). Neither: any splat the good commit
	// did not print.
	Splat     string `json:"splat,omitempty"`
	SplatType string `json:"splat_type,omitempty"`
	// Check is the check's name (--check); Test the test's (--test).
	Check string `json:"check,omitempty"`
	Test  string `json:"test,omitempty"`
	// Row is the report row's name (--row, resolved); Metric, Unit and
	// Direction are its metric's (Direction +1 when higher is better).
	Row       string `json:"row,omitempty"`
	Metric    string `json:"metric,omitempty"`
	Unit      string `json:"unit,omitempty"`
	Direction int    `json:"direction,omitempty"`
}

// String says what makes a commit bad.
func (c Criterion) String() string {
	switch c.Kind {
	case KindSplat:
		switch {
		case c.Splat != "":
			return fmt.Sprintf("a kernel splat whose title contains %q", c.Splat)
		case c.SplatType != "":
			return "a kernel splat of type " + c.SplatType
		}
		return "a kernel splat the good commit did not print"
	case KindCheck:
		return "check " + c.Check + " fails"
	case KindTest:
		return "test " + c.Test + " fails"
	case KindMetric:
		return fmt.Sprintf("row %q (%s) at the bad commit's value", c.Row, c.Metric)
	}
	return string(c.Kind)
}

// StepOutcome is what testing one commit gave: how it built, and what
// the experiment run on it found. It is what a Runner returns, and what
// Judge reads.
type StepOutcome struct {
	// Build is how the commit was built.
	Build Build `json:"build"`
	// BuildError is set when the commit did not build (its first
	// errors); nothing ran then.
	BuildError string `json:"build_error,omitempty"`
	// Runs are the experiment runs' directories.
	Runs []string `json:"runs,omitempty"`
	// Rounds counts the rounds run.
	Rounds int `json:"rounds,omitempty"`
	// GuestError says which guests did not boot, or died of something
	// else than the experiment (a kernel that does not fit the spec's
	// requires, an infrastructure failure); empty when every guest
	// ran.
	GuestError string `json:"guest_error,omitempty"`
	// Splats are the kernel splats the guests printed.
	Splats []Splat `json:"splats,omitempty"`
	// Checks are the checks' results, every round's.
	Checks []CheckResult `json:"checks,omitempty"`
	// Tests are the suite's tests' results.
	Tests []TestResult `json:"tests,omitempty"`
	// Samples are each report row's samples, by the row's name.
	Samples map[string][]float64 `json:"samples,omitempty"`
}

// Build is how a commit was built.
type Build struct {
	// Kernel is the kernel's ID ("k-..."); Ref what the experiment
	// booted ("build:NAME").
	Kernel string `json:"kernel,omitempty"`
	Ref    string `json:"ref,omitempty"`
	// TookSec is the build's wall time.
	TookSec float64 `json:"took_s"`
	// Mode is "cached" (a cache hit), "incremental" (a work tree moved
	// from another commit) or "cold" (a new work tree).
	Mode string `json:"mode,omitempty"`
	// Phases are the build's timed steps.
	Phases []Phase `json:"phases,omitempty"`
	// Log is the build log's path.
	Log string `json:"log,omitempty"`
}

// Phase is one timed step of a build.
type Phase struct {
	Name    string  `json:"name"`
	TookSec float64 `json:"took_s"`
}

// Build modes.
const (
	BuildCached      = "cached"
	BuildIncremental = "incremental"
	BuildCold        = "cold"
)

// The evidence and the records a report shows are the report's types.
type (
	// Commit is a commit as reports name it.
	Commit = bisectreport.Commit
	// Splat is one kernel splat a guest printed.
	Splat = bisectreport.Splat
	// CheckResult is one run of a check.
	CheckResult = bisectreport.CheckResult
	// TestResult is one test of a suite.
	TestResult = bisectreport.TestResult
	// Evidence is why a commit was judged bad: what the verdict rests
	// on.
	Evidence = bisectreport.Evidence
	// MetricEvidence is a row's samples at a step, against the
	// endpoints'.
	MetricEvidence = bisectreport.MetricEvidence
	// Separation is how far apart a metric's endpoints are: the
	// bisection starts only when they can be told apart.
	Separation = bisectreport.Separation
)

// Baseline is what the endpoints showed, which later steps are judged
// against.
type Baseline struct {
	// GoodSplats are the splat titles the good commit printed.
	GoodSplats []string `json:"good_splats,omitempty"`
	// Good and Bad are the endpoints' samples of a metric's row.
	Good []float64 `json:"good,omitempty"`
	Bad  []float64 `json:"bad,omitempty"`
}

// Judgement is a step's verdict with its reason and evidence.
type Judgement struct {
	Verdict  Verdict
	Reason   string
	Evidence *Evidence
}

// maxExcerpt bounds a splat's or a check's text kept as evidence.
const maxExcerpt = 4 << 10

// excerpt is the head of s, at most maxExcerpt bytes and 40 lines,
// cleaned for terminals.
func excerpt(s string) string {
	s = textsafe.Clean(strings.TrimSpace(s))
	lines := strings.Split(s, "\n")
	if len(lines) > 40 {
		lines = append(lines[:40], "[...]")
	}
	s = strings.Join(lines, "\n")
	if len(s) > maxExcerpt {
		s = s[:maxExcerpt] + "\n[...]"
	}
	return s
}

// tail is the end of s, at most maxExcerpt bytes, cleaned.
func tail(s string) string {
	s = textsafe.Clean(strings.TrimSpace(s))
	if len(s) > maxExcerpt {
		s = "[...]\n" + s[len(s)-maxExcerpt:]
	}
	return s
}

// Judge gives the verdict of a step's outcome o under criterion c,
// against the endpoints' baseline b. A commit that did not build is
// skipped; so is one whose guests did not run, unless what they printed
// before settles it (a splat found). A metric step that cannot be told
// from both endpoints or from neither is ambiguous: more rounds may
// settle it.
func Judge(c Criterion, b Baseline, o *StepOutcome) Judgement {
	if o.BuildError != "" {
		return Judgement{Verdict: Skip, Reason: buildReason(o.BuildError)}
	}
	switch c.Kind {
	case KindSplat:
		return judgeSplat(c, b, o)
	case KindCheck:
		return judgeCheck(c, o)
	case KindTest:
		return judgeTest(c, o)
	case KindMetric:
		return judgeMetric(c, b, o)
	}
	return Judgement{Verdict: Skip, Reason: fmt.Sprintf("unknown criterion %q", c.Kind)}
}

// buildReason is why a commit is skipped for its build error: the
// failure and, for a failed make, its first compiler error ("does not
// build: make bzImage failed: fs/fuse/req.c:12:3: error: expected ';'").
func buildReason(msg string) string {
	head, rest, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	if h, ok := strings.CutSuffix(head, "; first errors:"); ok {
		first, _, _ := strings.Cut(strings.TrimSpace(rest), "\n")
		head = h + ": " + first
	}
	return "does not build: " + textsafe.OneLine(head)
}

// guestSkip is the skip of a step whose guests did not run.
func guestSkip(o *StepOutcome) Judgement {
	return Judgement{Verdict: Skip, Reason: "guest failed: " + firstLine(o.GuestError)}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " [...]"
	}
	return textsafe.OneLine(s)
}

// matches reports whether splat s is one c chases.
func (c Criterion) matches(s Splat, b Baseline) bool {
	switch {
	case c.Splat != "":
		return strings.Contains(s.Title, c.Splat)
	case c.SplatType != "":
		return s.Type == c.SplatType
	}
	return !slices.Contains(b.GoodSplats, s.Title)
}

func judgeSplat(c Criterion, b Baseline, o *StepOutcome) Judgement {
	for _, s := range o.Splats {
		if c.matches(s, b) {
			ev := s
			ev.Text = excerpt(splat.Brief(s.Text))
			return Judgement{Verdict: Bad, Reason: textsafe.OneLine(s.Title), Evidence: &Evidence{Splat: &ev}}
		}
	}
	if o.GuestError != "" {
		return guestSkip(o)
	}
	if len(o.Splats) == 0 {
		return Judgement{Verdict: Good, Reason: "no kernel splat"}
	}
	var titles []string
	for _, s := range o.Splats {
		if t := textsafe.OneLine(s.Title); !slices.Contains(titles, t) {
			titles = append(titles, t)
		}
	}
	return Judgement{Verdict: Good, Reason: "none of its splats is chased: " + strings.Join(titles, "; ")}
}

func judgeCheck(c Criterion, o *StepOutcome) Judgement {
	ran := 0
	for _, r := range o.Checks {
		if r.Name != c.Check {
			continue
		}
		ran++
		if !r.Passed {
			ev := r
			ev.Output = tail(r.Output)
			why := "check " + c.Check + " failed"
			if r.Message != "" {
				why += ": " + firstLine(r.Message)
			}
			return Judgement{Verdict: Bad, Reason: why, Evidence: &Evidence{Check: &ev}}
		}
	}
	switch {
	case o.GuestError != "":
		return guestSkip(o)
	case ran == 0:
		return Judgement{Verdict: Skip, Reason: "check " + c.Check + " did not run"}
	}
	return Judgement{Verdict: Good, Reason: fmt.Sprintf("check %s passed (%d run(s))", c.Check, ran)}
}

func judgeTest(c Criterion, o *StepOutcome) Judgement {
	for _, t := range o.Tests {
		if t.Name != c.Test {
			continue
		}
		switch t.Status {
		case "fail", "hang", "crash":
			ev := t
			ev.Detail = excerpt(t.Detail)
			why := fmt.Sprintf("test %s: %s", t.Name, t.Status)
			if t.Reason != "" {
				why += ": " + firstLine(t.Reason)
			}
			return Judgement{Verdict: Bad, Reason: why, Evidence: &Evidence{Test: &ev}}
		case "pass":
			return Judgement{Verdict: Good, Reason: "test " + t.Name + " passed"}
		}
		why := fmt.Sprintf("test %s: %s", t.Name, t.Status)
		if t.Reason != "" {
			why += ": " + firstLine(t.Reason)
		}
		return Judgement{Verdict: Skip, Reason: why}
	}
	if o.GuestError != "" {
		return guestSkip(o)
	}
	return Judgement{Verdict: Skip, Reason: "test " + c.Test + " did not run"}
}

// judgeMetric holds the step's samples of the row against both
// endpoints' (Mann-Whitney U at stats.Alpha): the step is good when it
// cannot be told from the good commit but differs from the bad one, bad
// the other way round, and ambiguous otherwise.
func judgeMetric(c Criterion, b Baseline, o *StepOutcome) Judgement {
	vals := o.Samples[c.Row]
	if len(vals) == 0 {
		if o.GuestError != "" {
			return guestSkip(o)
		}
		return Judgement{Verdict: Skip, Reason: "no samples of row " + c.Row}
	}
	ev := MetricEvidence{Row: c.Row, Metric: c.Metric, Unit: c.Unit,
		Good: stats.Summarize(b.Good), Bad: stats.Summarize(b.Bad), Step: stats.Summarize(vals)}
	ev.VsGood = stats.Compare(ev.Good, ev.Step, c.Direction)
	ev.VsBad = stats.Compare(ev.Bad, ev.Step, c.Direction)
	j := Judgement{Evidence: &Evidence{Metric: &ev}}
	desc := fmt.Sprintf("median %s against good %s (%s) and bad %s (%s)", fmtValue(ev.Step.Median, c.Unit),
		fmtValue(ev.Good.Median, c.Unit), fmtP(ev.VsGood.P), fmtValue(ev.Bad.Median, c.Unit), fmtP(ev.VsBad.P))
	switch g, bd := ev.VsGood.Significant, ev.VsBad.Significant; {
	case !g && bd:
		j.Verdict, j.Reason = Good, "like the good commit: "+desc
	case g && !bd:
		j.Verdict, j.Reason = Bad, "like the bad commit: "+desc
	case g && bd:
		j.Verdict, j.Reason = ambiguous, "differs from both endpoints: "+desc
	default:
		j.Verdict, j.Reason = ambiguous, "cannot be told from either endpoint: "+desc
	}
	if o.GuestError != "" && j.Verdict == ambiguous {
		j.Reason += "; " + firstLine(o.GuestError)
	}
	return j
}

// Separate compares the endpoints' samples of c's row.
func Separate(c Criterion, b Baseline) Separation {
	s := Separation{Row: c.Row, Metric: c.Metric, Unit: c.Unit, Good: stats.Summarize(b.Good), Bad: stats.Summarize(b.Bad)}
	s.Change = stats.Compare(s.Good, s.Bad, c.Direction)
	return s
}

func fmtValue(v float64, unit string) string { return bisectreport.FmtValue(v, unit) }

func fmtP(p float64) string { return bisectreport.FmtP(p) }
