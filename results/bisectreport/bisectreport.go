// Package bisectreport holds a bisection's report: the first bad commit
// with its author and the evidence (a splat's report, a failing check's
// output, a metric at the step against both endpoints), the endpoints'
// separation for a metric, and every step with its verdict, build time
// and reason. It renders it as text (for a mail), Markdown, JSON (Schema
// "klab.bisect/v1", a stable interface: fields are only ever added),
// JUnit and HTML. Package bisect fills it; the evidence types are shared
// with it.
package bisectreport

import (
	"fmt"
	"io"
	"strings"

	"klab/results/internal/render"
	"klab/results/stats"
)

// Schema names the JSON schema of Report.
const Schema = "klab.bisect/v1"

// Report is one bisection.
type Report struct {
	// Schema is always Schema.
	Schema string `json:"schema"`
	// RunID and Dir are the bisection's run.
	RunID string `json:"run_id"`
	Dir   string `json:"dir"`
	// Experiment is the spec's name, SpecFile the file given, Sets the
	// --set overrides.
	Experiment string            `json:"experiment"`
	SpecFile   string            `json:"spec_file"`
	Sets       map[string]string `json:"sets,omitempty"`
	// Tree is the git tree; Good and Bad the endpoints; Commits counts
	// good..bad.
	Tree    string   `json:"tree"`
	Good    Endpoint `json:"good"`
	Bad     Endpoint `json:"bad"`
	Commits int      `json:"commits"`
	// Config and Patches are what every commit was built with.
	Config  []string `json:"config"`
	Patches []string `json:"patches,omitempty"`
	// Kind is what was chased (splat, check, test, metric); Criterion
	// says what made a commit bad.
	Kind      string `json:"kind"`
	Criterion string `json:"criterion"`
	// Rounds is a step's rounds, MaxRounds the most an ambiguous metric
	// step got.
	Rounds    int `json:"rounds"`
	MaxRounds int `json:"max_rounds,omitempty"`
	// Command is klab's argv.
	Command []string `json:"command"`
	// Start and End are RFC 3339; WallSec the wall time.
	Start   string  `json:"start"`
	End     string  `json:"end,omitempty"`
	WallSec float64 `json:"wall_s,omitempty"`
	// Status is running, complete, interrupted or failed; Message says
	// more.
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	// Found is set when the first bad commit was found: FirstBad, with
	// the Evidence found at EvidenceAt ("step 2", "bad endpoint").
	Found      bool      `json:"found"`
	FirstBad   *Commit   `json:"first_bad,omitempty"`
	Evidence   *Evidence `json:"evidence,omitempty"`
	EvidenceAt string    `json:"evidence_at,omitempty"`
	// Candidates are the commits one of which is the first bad one, when
	// only skipped commits were left; Reason says why none was found.
	Candidates []Commit `json:"candidates,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	// Separation is a metric's endpoints, compared.
	Separation *Separation `json:"separation,omitempty"`
	// Steps are the commits tested, in order: the endpoints, then git's
	// steps.
	Steps []Step `json:"steps"`
}

// Endpoint is the good or the bad commit.
type Endpoint struct {
	// Rev is the revision as given; Commit what it named.
	Rev     string `json:"rev"`
	Commit  string `json:"commit"`
	Subject string `json:"subject,omitempty"`
}

// Step is one commit tested.
type Step struct {
	// Label is "good" or "bad" for an endpoint, the step's number for
	// one of git's steps.
	Label string `json:"label"`
	// Commit and Subject are the commit.
	Commit  string `json:"commit"`
	Subject string `json:"subject"`
	// Verdict is good, bad or skip; "running" for a step klab stopped
	// in. Reason says why.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
	// BuildSec is the build's wall time and BuildMode how it built
	// (cached, incremental, cold; failed when it did not; empty when it
	// has not yet).
	BuildSec  float64 `json:"build_s"`
	BuildMode string  `json:"build_mode,omitempty"`
	// Rounds are the rounds run; Runs the experiment runs, relative to
	// the bisection's directory.
	Rounds int      `json:"rounds,omitempty"`
	Runs   []string `json:"runs,omitempty"`
	// Metric summarises the metric row's samples, for a metric.
	Metric *stats.Summary `json:"metric,omitempty"`
}

// Commit is a commit as reports name it.
type Commit struct {
	// SHA is the full hash.
	SHA string `json:"sha"`
	// Subject is the first line of its message.
	Subject string `json:"subject"`
	// Author is "Name <email>"; Date the author date (RFC 3339).
	Author string `json:"author,omitempty"`
	Date   string `json:"date,omitempty"`
}

// Splat is one kernel splat a guest printed.
type Splat struct {
	// Type and Title are as results/splat gives them.
	Type  string `json:"type"`
	Title string `json:"title"`
	// Text is the report's console text (bounded).
	Text string `json:"text,omitempty"`
	// Run is the experiment run it came from.
	Run string `json:"run,omitempty"`
}

// CheckResult is one run of a check.
type CheckResult struct {
	Name    string `json:"name"`
	Round   int    `json:"round"`
	Passed  bool   `json:"passed"`
	Message string `json:"message,omitempty"`
	// Output is the tail of what a failed check printed.
	Output string `json:"output,omitempty"`
}

// TestResult is one test of a suite.
type TestResult struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Detail is the head of the diff, or the log's tail, of a failure.
	Detail string `json:"detail,omitempty"`
}

// Evidence is why a commit was judged bad: what the verdict rests on.
type Evidence struct {
	// Splat is the splat found, with an excerpt of its report.
	Splat *Splat `json:"splat,omitempty"`
	// Check is the failing check, with its output's tail.
	Check *CheckResult `json:"check,omitempty"`
	// Test is the failing test.
	Test *TestResult `json:"test,omitempty"`
	// Metric is the row at the step against both endpoints.
	Metric *MetricEvidence `json:"metric,omitempty"`
}

// MetricEvidence is a row's samples at a step, against the endpoints'.
type MetricEvidence struct {
	// Row, Metric and Unit name the row.
	Row    string `json:"row"`
	Metric string `json:"metric"`
	Unit   string `json:"unit"`
	// Good, Bad and Step summarise the samples.
	Good stats.Summary `json:"good"`
	Bad  stats.Summary `json:"bad"`
	Step stats.Summary `json:"step"`
	// VsGood and VsBad compare the step (B) against each endpoint (A).
	VsGood stats.Change `json:"vs_good"`
	VsBad  stats.Change `json:"vs_bad"`
}

// Separation is how far apart a metric's endpoints are.
type Separation struct {
	Row    string        `json:"row"`
	Metric string        `json:"metric"`
	Unit   string        `json:"unit"`
	Good   stats.Summary `json:"good"`
	Bad    stats.Summary `json:"bad"`
	// Change is the bad commit against the good one.
	Change stats.Change `json:"change"`
}

// Separable reports whether the endpoints can be told apart.
func (s Separation) Separable() bool { return s.Change.Significant }

// String is one paragraph: both endpoints' means, medians with their
// 95% CIs and sample counts, and the change with its p-value.
func (s Separation) String() string {
	side := func(name string, x stats.Summary) string {
		ci := "no CI"
		if x.Lo != nil && x.Hi != nil {
			ci = fmt.Sprintf("95%% CI %s..%s", render.FmtValue(*x.Lo, s.Unit), render.FmtValue(*x.Hi, s.Unit))
		}
		return fmt.Sprintf("%s: mean %s, median %s (%s, n=%d)", name, render.FmtValue(x.Mean, s.Unit), render.FmtValue(x.Median, s.Unit), ci, x.N)
	}
	return fmt.Sprintf("row %q (%s): %s; %s; change %s, %s (Mann-Whitney U, alpha %.2f)",
		s.Row, s.Metric, side("good", s.Good), side("bad", s.Bad), render.FmtPct(s.Change.Pct), render.FmtP(s.Change.P), stats.Alpha)
}

// FmtValue formats a metric's value with its unit, scaled ("1.23k
// ops/s", "4.5 MiB/s").
func FmtValue(v float64, unit string) string { return render.FmtValue(v, unit) }

// FmtP formats a p-value as the reports do: "p=0.029", "p<0.001".
func FmtP(p float64) string { return render.FmtP(p) }

// Formats are the formats Write takes, in the order they are listed to
// users.
var Formats = render.Formats

// Write writes r to w in format, one of Formats.
func Write(w io.Writer, r *Report, format string) error {
	return render.Writers[*Report]{Text: Text, Markdown: Markdown, JSON: JSON, JUnit: JUnit, HTML: HTML}.Write(w, r, format, "bisection report")
}

// Files are the report files a bisection's directory keeps, with their
// formats.
var Files = []struct{ Name, Format string }{
	{"report.txt", "text"},
	{"report.md", "md"},
	{"report.json", "json"},
	{"report.xml", "junit"},
	{"report.html", "html"},
}

// short is a commit hash's first 12 digits.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// cut is s cut to n bytes, with "..." when cut.
func cut(s string, n int) string {
	if len(s) > n {
		return strings.TrimSpace(s[:n]) + "..."
	}
	return s
}
