package bisect

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"klab/internal/fileio"
	"klab/results/bisectreport"
	"klab/results/stats"
)

// Report is the bisection's report, as it stands.
func (b *Bisection) Report() *bisectreport.Report {
	m := b.Manifest
	r := &bisectreport.Report{
		Schema: bisectreport.Schema, RunID: m.RunID, Dir: b.Dir,
		Experiment: m.Experiment, SpecFile: m.SpecFile, Sets: m.Sets, Tree: m.Tree,
		Good:    bisectreport.Endpoint{Rev: m.Good, Commit: m.GoodCommit},
		Bad:     bisectreport.Endpoint{Rev: m.Bad, Commit: m.BadCommit},
		Commits: m.Commits, Config: m.Config, Patches: m.Patches,
		Kind: string(m.Criterion.Kind), Criterion: m.Criterion.String(), Rounds: m.Rounds, MaxRounds: m.MaxRounds,
		Command: m.Command, Start: m.Start.Format(time.RFC3339), Status: m.Status, Message: m.Message,
		Steps: []bisectreport.Step{},
	}
	if !m.End.IsZero() {
		r.End = m.End.Format(time.RFC3339)
		r.WallSec = m.End.Sub(m.Start).Seconds()
	}
	for _, s := range b.Steps {
		rs := bisectreport.Step{Label: s.Role, Commit: s.Commit, Subject: s.Subject, Verdict: string(s.Verdict), Reason: s.Reason,
			BuildSec: s.Build.TookSec, BuildMode: s.Build.Mode, Rounds: s.Rounds, Runs: s.Runs}
		if s.Role == RoleStep {
			rs.Label = strconv.Itoa(s.N)
		}
		if !s.Done {
			rs.Verdict = "running"
		}
		if s.BuildError != "" {
			rs.BuildMode = "failed"
		}
		if len(s.Samples) > 0 {
			sum := stats.Summarize(s.Samples)
			rs.Metric = &sum
		}
		switch s.Role {
		case RoleGood:
			r.Good.Subject = s.Subject
		case RoleBad:
			r.Bad.Subject = s.Subject
		}
		r.Steps = append(r.Steps, rs)
	}
	if res := b.Result; res != nil {
		r.Found, r.FirstBad, r.Evidence, r.EvidenceAt = res.Found, res.FirstBad, res.Evidence, res.At
		r.Candidates, r.Reason, r.Separation = res.Candidates, res.Reason, res.Separation
	}
	if r.Separation == nil && m.Criterion.Kind == KindMetric && b.endpoint(RoleGood) != nil && b.endpoint(RoleBad) != nil {
		s := Separate(m.Criterion, b.baseline())
		r.Separation = &s
	}
	return r
}

// WriteReports writes the report in every format into the bisection's
// directory (report.txt, .md, .json, .xml, .html).
func (b *Bisection) WriteReports() error {
	r := b.Report()
	var errs []error
	for _, f := range bisectreport.Files {
		var sb strings.Builder
		if err := bisectreport.Write(&sb, r, f.Format); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := fileio.WriteAtomic(filepath.Join(b.Dir, f.Name), []byte(sb.String()), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
