package report

import (
	"fmt"
	"slices"
	"strings"

	"klab/internal/textsafe"
	"klab/results/internal/render"
	"klab/results/reference"
)

// Reference is what the experiment's reference found for a row (the
// spec's expect:), and the row's verdict against it.
type Reference struct {
	// Direction is what the reference found for B against A: better,
	// worse or no-change (as given, or as its figure says).
	Direction string `json:"direction"`
	// Ratio is the reference's B/A, Range its bounds [lo, hi]; neither
	// when it gave only a direction.
	Ratio float64   `json:"ratio,omitempty"`
	Range []float64 `json:"range,omitempty"`
	// MeasuredOn is the machine the reference measured on, when stated.
	MeasuredOn *reference.MeasuredOn `json:"measured_on,omitempty"`
	// Source says where the figure comes from.
	Source string `json:"source"`
	// Needs is what a run needs for the row to be comparable ("accel
	// kvm"); "" for any run.
	Needs string `json:"needs,omitempty"`
	// Verdict is the row's verdict: reproduced, "same direction, not
	// significant", "opposite direction, not significant",
	// contradicted, "not comparable here" or "not measured"; Reason
	// says why a row is not comparable or not measured.
	Verdict reference.Verdict `json:"verdict"`
	Reason  string            `json:"reason,omitempty"`
	// Strict is set when a contradiction fails the run (the spec's
	// strict: true, or --strict-reference).
	Strict bool `json:"strict,omitempty"`
}

// CheckReference is a check's verdict against the outcome the
// experiment's reference saw.
type CheckReference struct {
	// Check is the check's name; Outcome the reference's (pass or
	// fail); Source where it comes from; Needs as Reference's.
	Check   string `json:"check"`
	Outcome string `json:"outcome"`
	Source  string `json:"source"`
	Needs   string `json:"needs,omitempty"`
	// Verdict is reproduced (every round had the outcome),
	// contradicted, "not comparable here" or "not measured"; Reason
	// counts the rounds, or says why there is no verdict.
	Verdict reference.Verdict `json:"verdict"`
	Reason  string            `json:"reason,omitempty"`
	// Strict is as Reference's.
	Strict bool `json:"strict,omitempty"`
}

// This part of the file holds what the human-readable formats show of
// the references.

// hasReferences reports whether a row or a check has an expectation.
func hasReferences(r *Report) bool {
	if len(r.CheckReferences) > 0 {
		return true
	}
	for _, row := range r.Rows {
		if row.Reference != nil {
			return true
		}
	}
	return false
}

// refTitle heads the references' block.
const refTitle = "against the reference (the spec's expect:), B/A measured and the reference's:"

// refHeader are the columns of the references' block; refRight says
// which are right-aligned.
var (
	refHeader = []string{"name", "B/A", "reference", "verdict"}
	refRight  = []bool{false, true, false, false}
)

// Figure is what the reference found: "2.57x better", "1.20x-3.58x
// better", "better", "0.99x no-change"; for a check "pass".
func (ref *Reference) Figure() string {
	var fig string
	switch {
	case ref.Ratio > 0:
		fig = fmtRatio(ref.Ratio)
	case len(ref.Range) == 2:
		fig = fmtRatio(ref.Range[0]) + "-" + fmtRatio(ref.Range[1])
	}
	return strings.TrimSpace(fig + " " + textsafe.OneLine(ref.Direction))
}

// refVerdict is a verdict with its reason, marked when a contradiction
// fails the run: "contradicted (strict)", "not comparable here: needs
// accel kvm; ...".
func refVerdict(v reference.Verdict, reason string, strict bool) string {
	s := textsafe.OneLine(string(v))
	if strict && v == reference.Contradicted {
		s += " (strict)"
	}
	if reason = textsafe.OneLine(reason); reason != "" {
		s += ": " + reason
	}
	return s
}

// refRows are the references' rows, in the order of refHeader: the
// table's rows with an expectation, then the checks with one.
func refRows(r *Report) [][]string {
	var out [][]string
	for _, row := range r.Rows {
		if ref := row.Reference; ref != nil {
			out = append(out, []string{textsafe.OneLine(row.Name), fmtRatio(row.Change.Ratio), ref.Figure(), refVerdict(ref.Verdict, ref.Reason, ref.Strict)})
		}
	}
	for _, c := range r.CheckReferences {
		out = append(out, []string{"check " + textsafe.OneLine(c.Check), "-", textsafe.OneLine(c.Outcome), refVerdict(c.Verdict, c.Reason, c.Strict)})
	}
	return out
}

// refDetail is where a row's or check's reference comes from and what
// it needs: "seed 003, creates/s; measured on 32 CPUs, native; needs
// accel kvm".
func refDetail(source string, on *reference.MeasuredOn, needs string) string {
	parts := []string{textsafe.OneLine(source)}
	if on != nil {
		if m := textsafe.OneLine(on.String()); m != "" {
			parts = append(parts, "measured on "+m)
		}
	}
	if needs = textsafe.OneLine(needs); needs != "" {
		parts = append(parts, "needs "+needs)
	}
	return strings.Join(parts, "; ")
}

// refLabel is the line under a row's chart: "reference 2.57x better
// (B/A 0.49x): not comparable here: ...".
func refLabel(row Row) string {
	ref := row.Reference
	return fmt.Sprintf("reference %s, measured %s: %s", ref.Figure(), fmtRatio(row.Change.Ratio), refVerdict(ref.Verdict, ref.Reason, ref.Strict))
}

// refClass is the CSS class of a verdict.
func refClass(v reference.Verdict, strict bool) string {
	switch v {
	case reference.Reproduced:
		return "better"
	case reference.Contradicted:
		if strict {
			return "fail"
		}
		return "worse"
	}
	return "muted"
}

// refMode describes the run's accelerator with its TCG options: "tcg
// (icount shift=0,sleep=off)", "tcg (multi-threaded)", "kvm".
func refMode(r *Report) string {
	a := textsafe.OneLine(r.Accel)
	switch {
	case r.Icount != "":
		a += " (icount " + textsafe.OneLine(r.Icount) + ")"
	case r.TCGMultithread:
		a += " (multi-threaded)"
	}
	return a
}

// refBlock adds the references' block to a text report: the title, then
// refHeader's columns aligned, the verdict last (wrapped when long).
func (t *textWriter) refBlock(r *Report) {
	cells := append([][]string{refHeader}, refRows(r)...)
	widths := make([]int, len(refHeader))
	for _, c := range cells {
		for i := range c {
			c[i] = render.ToASCII(c[i])
			widths[i] = max(widths[i], len(c[i]))
		}
	}
	// A long name gets the room the other columns leave, at most.
	widths[0] = min(widths[0], max(8, TextWidth/3))
	t.Blank()
	t.Line(refTitle)
	for _, c := range cells {
		var b strings.Builder
		b.WriteString(" ")
		for i, cell := range c {
			b.WriteString(" ")
			if i > 0 {
				b.WriteString(" ")
			}
			if i == 0 && len(cell) > widths[0] {
				cell = cell[:widths[0]-2] + ".."
			}
			pad := strings.Repeat(" ", max(0, widths[i]-len(cell)))
			switch {
			case i == len(c)-1:
				b.WriteString(cell)
			case refRight[i]:
				b.WriteString(pad + cell)
			default:
				b.WriteString(cell + pad)
			}
		}
		t.Line(b.String())
	}
}

// refDetails are refDetail of each of refRows' rows, in their order.
func refDetails(r *Report) []string {
	var out []string
	for _, row := range r.Rows {
		if ref := row.Reference; ref != nil {
			out = append(out, refDetail(ref.Source, ref.MeasuredOn, ref.Needs))
		}
	}
	for _, c := range r.CheckReferences {
		out = append(out, refDetail(c.Source, nil, c.Needs))
	}
	return out
}

// refMarkdown adds the references' table to a Markdown report, with
// where each reference comes from.
func refMarkdown(b *strings.Builder, r *Report) {
	fmt.Fprintf(b, "\n### Against the reference\n\n")
	b.WriteString(render.MDTableRow(append(slices.Clone(refHeader), "source")))
	b.WriteString("|:---|---:|:---|:---|:---|\n")
	details := refDetails(r)
	for i, row := range refRows(r) {
		b.WriteString(render.MDTableRow(append(row, details[i])))
	}
}

// refJUnit adds a testcase per row and check with an expectation
// (classname "<experiment>.reference", name "reference: <row>"): it
// fails when the verdict is contradicted and strict, and is skipped
// when the run cannot show the row (not comparable here, not measured).
func refJUnit(suite *render.JUnitSuite, r *Report, exp string) {
	details := refDetails(r)
	add := func(i int, name string, v reference.Verdict, strict bool, row []string) {
		tc := render.JUnitCase{
			Classname: exp + ".reference",
			Name:      "reference: " + name,
			Time:      render.JUnitTime(0),
			SystemOut: render.JoinNonEmpty(", ", "B/A "+row[1], "reference "+row[2], row[3]) + "\n" + details[i],
		}
		switch {
		case v == reference.Contradicted && strict:
			tc.Failure = &render.JUnitFailure{Type: "reference", Message: row[3] + ": B/A " + row[1] + ", the reference's " + row[2], Text: tc.SystemOut}
		case v == reference.NotComparable || v == reference.NotMeasured:
			tc.Skipped = &render.JUnitSkipped{Message: row[3]}
		}
		suite.Add(tc)
	}
	rows, i := refRows(r), 0
	for _, row := range r.Rows {
		if ref := row.Reference; ref != nil {
			add(i, textsafe.OneLine(row.Name), ref.Verdict, ref.Strict, rows[i])
			i++
		}
	}
	for _, c := range r.CheckReferences {
		add(i, "check "+textsafe.OneLine(c.Check), c.Verdict, c.Strict, rows[i])
		i++
	}
}

// htmlRefRow is one row of the HTML table against the reference.
type htmlRefRow struct {
	Class string
	Cells []string
}

// refHTML is the HTML table against the reference: refHeader with the
// source, and a row per row and check with an expectation.
func refHTML(r *Report) ([]string, []htmlRefRow) {
	if !hasReferences(r) {
		return nil, nil
	}
	var verdicts []htmlRefRow
	for _, row := range r.Rows {
		if ref := row.Reference; ref != nil {
			verdicts = append(verdicts, htmlRefRow{Class: refClass(ref.Verdict, ref.Strict)})
		}
	}
	for _, c := range r.CheckReferences {
		verdicts = append(verdicts, htmlRefRow{Class: refClass(c.Verdict, c.Strict)})
	}
	details := refDetails(r)
	for i, row := range refRows(r) {
		verdicts[i].Cells = append(row, details[i])
	}
	return append(slices.Clone(refHeader), "source"), verdicts
}

// referenceLead is the line a report opens with when rows with an
// expectation cannot be compared with their reference in this run: "not
// comparable here: create, randread-4k (needs accel kvm; this run used
// single-threaded TCG in real time); the verdicts below are this
// emulator's, not the reference's". It is "" when every row with an
// expectation is comparable.
func referenceLead(r *Report) string {
	return strings.Join(leadPhrases(r), " ")
}

// leadPhrases are referenceLead's phrases: its words, each row's name
// whole, each reason whole.
func leadPhrases(r *Report) []string {
	var names []string
	reasons := map[string]bool{}
	var reasonList []string
	comparable := 0
	for _, row := range r.Rows {
		ref := row.Reference
		if ref == nil {
			continue
		}
		if ref.Verdict != reference.NotComparable {
			comparable++
			continue
		}
		names = append(names, textsafe.OneLine(row.Name))
		if rs := textsafe.OneLine(ref.Reason); rs != "" && !reasons[rs] {
			reasons[rs] = true
			reasonList = append(reasonList, rs)
		}
	}
	if len(names) == 0 {
		return nil
	}
	out := append([]string{"not comparable here:"}, listPhrases(names)...)
	if len(reasonList) > 0 {
		for i, rs := range reasonList {
			switch {
			case i == 0 && len(reasonList) == 1:
				rs = "(" + rs + ")"
			case i == 0:
				rs = "(" + rs + ";"
			case i == len(reasonList)-1:
				rs += ")"
			default:
				rs += ";"
			}
			out = append(out, rs)
		}
	}
	out[len(out)-1] += ";"
	if comparable == 0 {
		return append(out, strings.Fields("the verdicts below are this run's, not evidence for or against the reference")...)
	}
	return append(out, strings.Fields("those rows' verdicts are this run's, not evidence for or against the reference")...)
}
