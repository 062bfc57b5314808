package experiments

import (
	"fmt"
	"maps"

	"klab/results/reference"
	"klab/results/report"
)

// Mode is the mode the run ran in: the accelerator its guests used, and
// under TCG the spec's icount and multi-threaded TCG, with the guests'
// vCPUs.
func (s *Saved) Mode() reference.Mode {
	mode := reference.Mode{Accel: s.Manifest.Accel, CPUs: s.Manifest.CPUs}
	if vm := s.File.Spec.VM; mode.Accel == "tcg" {
		mode.Icount, mode.TCGMultithread = vm.Icount, vm.TCGMultithread
		if s.Manifest.Icount != "" || s.Manifest.TCGMultithread {
			// Run with --icount or --tcg-multithread.
			mode.Icount, mode.TCGMultithread = s.Manifest.Icount, s.Manifest.TCGMultithread
		}
	}
	return mode
}

// references sets the run's mode in r, the emulation note among its
// warnings, each row's reference and each check's, from the spec's
// expectations; a contradicted one that is strict (the spec's strict:
// true, or s.StrictReference) is a failure.
func (s *Saved) references(r *report.Report) {
	mode := s.Mode()
	r.Icount, r.TCGMultithread = mode.Icount, mode.TCGMultithread
	if note := reference.EmulationNote(mode); note != "" {
		r.Warnings = append(r.Warnings, note)
	}
	p, spec := s.Plan, s.File.Spec
	axis := spec.Compare
	if axis == "" {
		axis = "kernel"
	}
	if p.Single || !s.HasExpectations() {
		return
	}
	if p.Axis != axis {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the spec's expectations are about %s; this run compared %s, so no row is held against the reference", axis, p.Axis))
		return
	}
	checks := map[string]reference.CheckExpectation{}
	var checkOrder []string
	for ri, pr := range p.Rows {
		cell, err := s.File.Cell(p.Point(Unit{Row: ri, Side: SideA}))
		if err != nil {
			continue
		}
		for _, c := range cell.Checks {
			if _, ok := checks[c.Name]; !ok && len(c.Expect) > 0 {
				checks[c.Name] = c.Expect[0]
				checkOrder = append(checkOrder, c.Name)
			}
		}
		for wi := range cell.Workloads {
			w := &cell.Workloads[wi]
			for _, e := range w.Expect {
				metric := e.Metric
				if metric == "" {
					metric = metricName(w)
				}
				if !contains(pr.Params, e.Params) {
					continue
				}
				for i := range r.Rows {
					row := &r.Rows[i]
					if row.Workload != w.Name || row.Metric != metric || !maps.Equal(row.Params, pr.Params) {
						continue
					}
					row.Reference = s.rowReference(e, row, mode)
				}
			}
		}
	}
	for _, name := range checkOrder {
		e := checks[name]
		passed, total := 0, 0
		for _, c := range s.Samples.Checks {
			if c.Check == name {
				total++
				if c.Passed {
					passed++
				}
			}
		}
		v, reason := reference.CheckVerdict(e, passed, total, mode)
		cr := report.CheckReference{Check: name, Outcome: string(e.Want()), Source: e.Source, Needs: e.Needs.String(),
			Verdict: v, Reason: reason, Strict: e.Strict || s.StrictReference}
		r.CheckReferences = append(r.CheckReferences, cr)
	}
	r.Failures = append(r.Failures, ReferenceFailures(r)...)
}

// HasExpectations reports whether any workload or check of the spec has
// an expectation (expect:).
func (s *Saved) HasExpectations() bool {
	for _, w := range s.File.Spec.Workloads {
		if len(w.Expect) > 0 {
			return true
		}
	}
	for _, c := range s.File.Spec.Checks {
		if len(c.Expect) > 0 {
			return true
		}
	}
	return false
}

// rowReference is a row's reference and its verdict in mode.
func (s *Saved) rowReference(e reference.Expectation, row *report.Row, mode reference.Mode) *report.Reference {
	ref := &report.Reference{Direction: string(e.Expected(row.Direction)), Ratio: e.Ratio, Range: e.Range,
		Source: e.Source, Needs: e.Needs.String(), Strict: e.Strict || s.StrictReference}
	if e.MeasuredOn != (reference.MeasuredOn{}) {
		on := e.MeasuredOn
		ref.MeasuredOn = &on
	}
	c := row.Change
	if row.A.N == 0 || row.B.N == 0 {
		c.Ratio = 0 // nothing to compare
	}
	ref.Verdict, ref.Reason = reference.RowVerdict(e, c, row.Direction, mode)
	return ref
}

// ReferenceFailures are the failures among r.Failures that strict
// contradictions of references make (a row's or a check's, see
// Row.Reference and CheckReferences), worded as Report words them.
func ReferenceFailures(r *report.Report) []string {
	var out []string
	for i := range r.Rows {
		if ref := r.Rows[i].Reference; ref != nil && ref.Strict && ref.Verdict == reference.Contradicted {
			out = append(out, rowReferenceFailure(&r.Rows[i]))
		}
	}
	for _, c := range r.CheckReferences {
		if c.Strict && c.Verdict == reference.Contradicted {
			out = append(out, checkReferenceFailure(c))
		}
	}
	return out
}

// rowReferenceFailure is the failure of a row whose reference it
// contradicts, strictly.
func rowReferenceFailure(row *report.Row) string {
	return fmt.Sprintf("%s: contradicts the reference: B/A %.2fx, the reference's %s (%s)",
		row.Name, row.Change.Ratio, row.Reference.Figure(), row.Reference.Source)
}

// checkReferenceFailure is the failure of a check whose reference it
// contradicts, strictly.
func checkReferenceFailure(c report.CheckReference) string {
	return fmt.Sprintf("check %s contradicts the reference: %s, want every round to %s (%s)", c.Check, c.Reason, c.Outcome, c.Source)
}

// contains reports whether every parameter value of want is in have.
func contains(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
