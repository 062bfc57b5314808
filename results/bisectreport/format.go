package bisectreport

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"klab/internal/textsafe"
	"klab/results/internal/render"
)

// This file holds the lines every format shows.

// FmtSec formats seconds as "41s", "6m02s" or "1h05m".
func FmtSec(sec float64) string {
	d := time.Duration(sec * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// one is s on one line, without control characters.
func one(s string) string { return textsafe.OneLine(s) }

// commitLine is "3f2a1b4c5d6e subject".
func commitLine(c Commit) string {
	return strings.TrimSpace(short(c.SHA) + " " + one(c.Subject))
}

// resultLine is the report's first line: the first bad commit, or why
// there is none.
func resultLine(r *Report) string {
	switch {
	case r.Found && r.FirstBad != nil:
		return "first bad commit: " + commitLine(*r.FirstBad)
	case len(r.Candidates) > 0:
		return fmt.Sprintf("no first bad commit: only skipped commits are left to test; it is one of these %d:", len(r.Candidates))
	case r.Reason != "":
		return "no first bad commit: " + one(r.Reason)
	case r.Status == "running" || r.Status == "interrupted":
		return fmt.Sprintf("bisection %s after %d step(s); continue it with: klab bisect --resume %s", r.Status, gitSteps(r), r.Dir)
	case r.Status == "failed":
		return "bisection failed: " + one(r.Message) + "; continue it with: klab bisect --resume " + r.Dir
	}
	return "no first bad commit"
}

// authorLines are the first bad commit's author and date, as git log
// shows them.
func authorLines(r *Report) []string {
	if !r.Found || r.FirstBad == nil {
		return nil
	}
	var out []string
	if r.FirstBad.Author != "" {
		out = append(out, "Author: "+one(r.FirstBad.Author))
	}
	if r.FirstBad.Date != "" {
		out = append(out, "Date:   "+one(r.FirstBad.Date))
	}
	return out
}

// candidateLines are the candidates, one a line.
func candidateLines(r *Report) []string {
	var out []string
	for _, c := range r.Candidates {
		out = append(out, commitLine(c))
	}
	return out
}

// evidenceLine says in one line what the first bad commit showed, and
// where.
func evidenceLine(r *Report) string {
	e := r.Evidence
	if e == nil {
		return ""
	}
	at := ""
	if r.EvidenceAt != "" {
		at = " (" + r.EvidenceAt + ")"
	}
	return "evidence" + at + ": " + evidenceSummary(e)
}

// evidenceSummary is what e rests on, in one line.
func evidenceSummary(e *Evidence) string {
	switch {
	case e.Splat != nil:
		return fmt.Sprintf("%s (a %s)", one(e.Splat.Title), one(e.Splat.Type))
	case e.Check != nil:
		s := fmt.Sprintf("check %s failed in round %d", one(e.Check.Name), e.Check.Round)
		if e.Check.Message != "" {
			s += ": " + one(e.Check.Message)
		}
		return s
	case e.Test != nil:
		s := fmt.Sprintf("test %s: %s", one(e.Test.Name), one(e.Test.Status))
		if e.Test.Reason != "" {
			s += ": " + one(e.Test.Reason)
		}
		return s
	case e.Metric != nil:
		m := e.Metric
		return fmt.Sprintf("row %q (%s) %s at this commit (n=%d); good %s (n=%d), bad %s (n=%d); against good %s %s, against bad %s %s",
			one(m.Row), one(m.Metric), FmtValue(m.Step.Median, m.Unit), m.Step.N, FmtValue(m.Good.Median, m.Unit), m.Good.N,
			FmtValue(m.Bad.Median, m.Unit), m.Bad.N, render.FmtPct(m.VsGood.Pct), FmtP(m.VsGood.P), render.FmtPct(m.VsBad.Pct), FmtP(m.VsBad.P))
	}
	return ""
}

// evidenceDetail is the evidence's text: the splat's report, the
// check's output, the test's diff; cleaned, empty when there is none.
func evidenceDetail(e *Evidence) string {
	if e == nil {
		return ""
	}
	var s string
	switch {
	case e.Splat != nil:
		s = e.Splat.Text
	case e.Check != nil:
		s = e.Check.Output
	case e.Test != nil:
		s = e.Test.Detail
	}
	return strings.TrimSpace(textsafe.Clean(s))
}

// revNote is " (REV)" when the revision given is not the hash itself.
func revNote(e Endpoint) string {
	if e.Rev == "" || strings.HasPrefix(e.Commit, e.Rev) {
		return ""
	}
	return " (" + one(e.Rev) + ")"
}

// contextLines say what was bisected, how, and what it took.
func contextLines(r *Report) []string {
	what := one(r.Experiment)
	if len(r.Sets) > 0 {
		var sets []string
		for _, k := range sortedKeys(r.Sets) {
			sets = append(sets, k+"="+r.Sets[k])
		}
		what += " (" + one(strings.Join(sets, " ")) + ")"
	}
	build := "config " + one(strings.Join(r.Config, ","))
	if len(r.Patches) > 0 {
		build += fmt.Sprintf(", %d patch(es) on top", len(r.Patches))
	}
	out := []string{
		fmt.Sprintf("bisected %s in %s: good %s%s .. bad %s%s, %d commit(s); %s", what, one(r.Tree),
			short(r.Good.Commit), revNote(r.Good), short(r.Bad.Commit), revNote(r.Bad), r.Commits, build),
		"bad means: " + one(r.Criterion),
	}
	if r.Separation != nil {
		out = append(out, "endpoints: "+one(r.Separation.String()))
	}
	n, skipped := gitSteps(r), 0
	modes := map[string]int{}
	for _, s := range r.Steps {
		if s.Label != "good" && s.Label != "bad" && s.Verdict == "skip" {
			skipped++
		}
		if s.BuildMode != "" {
			modes[s.BuildMode]++
		}
	}
	line := fmt.Sprintf("%d step(s) after the endpoints, %d skipped", n, skipped)
	var builds []string
	for _, m := range []string{"cold", "incremental", "cached"} {
		if modes[m] > 0 {
			builds = append(builds, fmt.Sprintf("%d %s", modes[m], m))
		}
	}
	if len(builds) > 0 {
		line += "; builds: " + strings.Join(builds, ", ")
	}
	if r.WallSec > 0 {
		line += "; wall " + FmtSec(r.WallSec)
	}
	line += "; run " + one(r.RunID)
	return append(out, line)
}

// gitSteps counts git's steps (the endpoints left out).
func gitSteps(r *Report) int {
	n := 0
	for _, s := range r.Steps {
		if s.Label != "good" && s.Label != "bad" {
			n++
		}
	}
	return n
}

// stepHeader and stepCells are the step table's.
var stepHeader = []string{"step", "commit", "subject", "verdict", "build", "reason"}

// stepCells are a step's cells; a width of 0 leaves a cell uncut.
func stepCells(s Step, subjectWidth, reasonWidth int) []string {
	build := "-"
	if s.BuildMode != "" {
		build = FmtSec(s.BuildSec) + " " + s.BuildMode
	}
	subject, reason := one(s.Subject), one(s.Reason)
	if subjectWidth > 0 {
		subject = cut(subject, subjectWidth)
	}
	if reasonWidth > 0 {
		reason = cut(reason, reasonWidth)
	}
	return []string{s.Label, short(s.Commit), subject, s.Verdict, build, reason}
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
