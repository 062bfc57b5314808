package xreport

import (
	"fmt"
	"strings"

	"klab/internal/textsafe"
	"klab/results/internal/render"
	"klab/results/reference"
)

// This file holds what every format shows of the references: a table
// with a row per row and check held against its reference, a column per
// kernel with the B/A measured within the kernel's cell and the verdict.

// refTitle heads the references' table.
const refTitle = "against the reference (the specs' expect:): B/A within each kernel's cell, and its verdict"

// refLegend explains the references' verdicts.
const refLegend = "reproduced: the reference's direction, significant; n.s. (same), n.s. (opposite): not significant, " +
	"B/A on the reference's side of 1 or not; CONTRADICTED: significant, against the reference; " +
	"not comparable: the run's mode cannot show the effect; - no verdict"

// hasReferences reports whether the matrix says anything of references.
func hasReferences(m *Matrix) bool {
	return len(m.References) > 0 || len(m.ReferenceNotes) > 0
}

// shortVerdict is a verdict as a table cell shows it: "reproduced", "n.s.
// (same)", "n.s. (opposite)", "CONTRADICTED", "not comparable", "not
// measured"; another verdict as it is, "" for none.
func shortVerdict(v reference.Verdict) string {
	switch v {
	case reference.Reproduced:
		return "reproduced"
	case reference.SameNotSignificant:
		return "n.s. (same)"
	case reference.OppositeNotSignificant:
		return "n.s. (opposite)"
	case reference.Contradicted:
		return "CONTRADICTED"
	case reference.NotComparable:
		return "not comparable"
	case reference.NotMeasured:
		return "not measured"
	}
	return textsafe.OneLine(string(v))
}

// fmtRatio is a B/A: "0.49x", "-" for none.
func fmtRatio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r)
}

// refFigure is what the reference found: "2.86x better", "1.20x-3.58x
// better", "better"; for a check "pass".
func refFigure(r Reference) string {
	if r.Check {
		return textsafe.OneLine(r.Outcome)
	}
	var fig string
	switch {
	case r.Ratio > 0:
		fig = fmtRatio(r.Ratio)
	case len(r.Range) == 2:
		fig = fmtRatio(r.Range[0]) + "-" + fmtRatio(r.Range[1])
	}
	return render.JoinNonEmpty(" ", fig, textsafe.OneLine(r.Expected))
}

// refName is a reference's row with its metric when that is not a
// throughput, as rowName.
func refName(r Reference) string {
	if r.Check {
		return textsafe.OneLine(r.Name)
	}
	return rowName(Row{Name: r.Name, Metric: r.Metric})
}

// refSource says where a reference comes from and what it needs:
// "fuse-transport create: 2.86x better: seed 003, creates/s; measured
// on 32 CPUs, native; needs accel kvm".
func refSource(r Reference) string {
	parts := []string{textsafe.OneLine(r.Source)}
	if r.MeasuredOn != nil {
		if on := textsafe.OneLine(r.MeasuredOn.String()); on != "" {
			parts = append(parts, "measured on "+on)
		}
	}
	if n := textsafe.OneLine(r.Needs); n != "" {
		parts = append(parts, "needs "+n)
	}
	label := render.JoinNonEmpty(" ", textsafe.OneLine(r.Experiment), refName(r))
	return label + ": " + render.JoinNonEmpty(": ", refFigure(r), render.JoinNonEmpty("; ", parts...))
}

// refSourceLines are refSource of every reference.
func refSourceLines(m *Matrix) []string {
	var out []string
	for _, r := range m.References {
		out = append(out, refSource(r))
	}
	return out
}

// refNoteLines are the experiments whose expectations get no verdict:
// "reference: kx: why".
func refNoteLines(m *Matrix) []string {
	var out []string
	for _, n := range m.ReferenceNotes {
		out = append(out, "reference: "+render.JoinNonEmpty(": ", textsafe.OneLine(n.Experiment), textsafe.OneLine(n.Message)))
	}
	return out
}

// refVerdictText is a cell's verdict in full: "contradicted (strict)",
// "not comparable here: needs accel kvm; ...".
func refVerdictText(c ReferenceCell) string {
	s := textsafe.OneLine(string(c.Verdict))
	if c.Strict && c.Verdict == reference.Contradicted {
		s += " (strict)"
	}
	return render.JoinNonEmpty(": ", s, textsafe.OneLine(c.Reason))
}

// refCellNote is the footnote of a cell: why it has no verdict or is not
// comparable or measured; for a contradiction, a check's rounds and
// whether it fails the matrix; "" otherwise.
func refCellNote(c ReferenceCell) string {
	switch {
	case c.Verdict == "":
		return c.Missing
	case c.Verdict == reference.NotComparable || c.Verdict == reference.NotMeasured:
		return c.Reason
	case c.Verdict == reference.Contradicted:
		strict := ""
		if c.Strict {
			strict = "strict: the contradiction fails the matrix"
		}
		return render.JoinNonEmpty("; ", c.Reason, strict)
	}
	return ""
}

// refCellDetail describes a cell in full: "B/A 0.49x (-50.7% [-55%
// -46%] p=0.008), transport=uring against transport=dev; not comparable
// here: needs accel kvm; ...; reference 2.86x better".
func refCellDetail(r Reference, c ReferenceCell) string {
	var parts []string
	if ch := c.Change; ch != nil && !r.Check {
		ab := "B/A " + fmtRatio(ch.Ratio) + " (" + render.JoinNonEmpty(" ", render.FmtPct(ch.Pct), render.FmtCI(*ch), render.FmtP(ch.P)) + ")"
		if a, b := textsafe.OneLine(r.A), textsafe.OneLine(r.B); a != "" && b != "" {
			ab += ", " + b + " against " + a
		}
		parts = append(parts, ab)
	}
	if c.Verdict == "" {
		parts = append(parts, render.JoinNonEmpty(": ", "no verdict", textsafe.OneLine(c.Missing)))
	} else {
		parts = append(parts, refVerdictText(c))
	}
	parts = append(parts, "reference "+refFigure(r))
	return strings.Join(parts, "; ")
}

// refCellOf returns r's cell for kernel ref, the i-th column, as cellOf
// does for rows.
func refCellOf(r Reference, i int, ref string) *ReferenceCell {
	if i < len(r.Cells) && r.Cells[i].Kernel == ref {
		return &r.Cells[i]
	}
	for j := range r.Cells {
		if r.Cells[j].Kernel == ref {
			return &r.Cells[j]
		}
	}
	return nil
}

// newRefTable builds the references' table of m, its footnotes after
// those already in notes: a row per reference labelled with what the
// reference found ("fuse-transport create (2.86x better)"), a cell per
// kernel with the B/A and the short verdict. No column is the baseline:
// each cell is an A/B of its own.
func newRefTable(m *Matrix, notes *footnotes) *table {
	t := &table{kernels: m.Kernels, base: -1, leftHeader: true, notes: notes, noteLo: len(notes.texts)}
	for _, r := range m.References {
		tr := tableRow{name: refName(r), experiment: textsafe.OneLine(r.Experiment)}
		if fig := refFigure(r); fig != "" {
			tr.name += " (" + fig + ")"
		}
		tr.label = render.JoinNonEmpty(" ", tr.experiment, tr.name)
		for i, k := range m.Kernels {
			tc := tableCell{value: "-"}
			c := refCellOf(r, i, k.Ref)
			if c == nil {
				tc.detail = "no verdict"
				tr.cells = append(tr.cells, tc)
				continue
			}
			if c.Change != nil && !r.Check {
				tc.value, tc.hasValue = fmtRatio(c.Change.Ratio), c.Change.Ratio != 0
			}
			tc.change = shortVerdict(c.Verdict)
			tc.note = notes.add(refCellNote(*c))
			tc.ref, tc.strict = c.Verdict, c.Strict
			tc.detail = refCellDetail(r, *c)
			tc.run = c.Run
			tr.cells = append(tr.cells, tc)
		}
		t.rows = append(t.rows, tr)
	}
	t.noteHi = len(notes.texts)
	return t
}
