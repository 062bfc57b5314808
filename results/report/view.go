package report

import (
	"fmt"
	"strings"

	"klab/internal/textsafe"
	"klab/results/internal/render"
	"klab/results/stats"
)

// This file holds the lines and table cells the human-readable formats
// (Text, Markdown, HTML) share.

// fmtChange formats a row's change like benchstat: "+12.3%", or "~"
// when it is not significant.
func fmtChange(row Row) string {
	switch {
	case !row.Change.Significant:
		return "~"
	case row.A.Median == 0:
		return "n/a"
	}
	return render.FmtPct(row.Change.Pct)
}

// verdict is the row's verdict word; a regression past the row's
// threshold reads "REGRESSION".
func verdict(row Row) string {
	if row.Regression {
		return "REGRESSION"
	}
	return string(row.Change.Verdict)
}

// tableHeader are the titles of the table's columns; tableRight says
// which columns are right-aligned.
var (
	tableHeader = []string{"name", "A", "B", "B/A", "change", "CI", "p", "n", "MDC", "verdict"}
	tableRight  = []bool{false, true, true, true, true, false, false, true, true, false}
)

// tableRow returns the cells of row in the table, in the order of
// tableHeader.
func tableRow(row Row) []string {
	if row.A.N == 0 || row.B.N == 0 {
		// A side without samples (a single-kernel run of a matrix
		// cell, or every sample failed): nothing to compare.
		side := func(s stats.Summary) string {
			if s.N == 0 {
				return "-"
			}
			return render.FmtValue(s.Median, row.Unit)
		}
		return []string{textsafe.OneLine(row.Name), side(row.A), side(row.B), "-", "-", "-", "-", "-", "-", "-"}
	}
	return []string{
		textsafe.OneLine(row.Name),
		render.FmtValue(row.A.Median, row.Unit),
		render.FmtValue(row.B.Median, row.Unit),
		fmtRatio(row.Change.Ratio),
		fmtChange(row),
		render.FmtCI(row.Change),
		render.FmtP(row.Change.P),
		fmtN(row),
		fmtMDC(row.Change),
		verdict(row),
	}
}

// fmtN is a row's number of samples: "5" per side, or "5/4" (A/B) when
// the sides differ.
func fmtN(row Row) string {
	if row.A.N == row.B.N {
		return fmt.Sprint(row.A.N)
	}
	return fmt.Sprintf("%d/%d", row.A.N, row.B.N)
}

// fmtMDC is a change's minimum detectable change ("8.2%", "12%"), "-"
// when no change can be significant with its samples.
func fmtMDC(c stats.Change) string {
	switch {
	case c.MDCPct == nil:
		return "-"
	case *c.MDCPct >= 10:
		return fmt.Sprintf("%.0f%%", *c.MDCPct)
	case *c.MDCPct < 0.1:
		return "<0.1%"
	}
	return fmt.Sprintf("%.1f%%", *c.MDCPct)
}

// tableLegend explains the n and MDC columns.
const tableLegend = "n: samples per side (A/B if unequal); MDC: minimum detectable change at this noise (80% power)"

// weighLines say, for each row with samples on both sides but no
// significant change, what change it could have seen: "seqwrite: n.s.:
// a change below 4.1% cannot be seen with 5 rounds here", or that none
// can ("cannot be significant with n=3 per side").
func weighLines(r *Report) []string {
	var out []string
	for _, row := range r.Rows {
		if row.A.N == 0 || row.B.N == 0 || row.Change.Significant {
			continue
		}
		with := fmt.Sprintf("%d+%d samples", row.A.N, row.B.N)
		if row.A.N == row.B.N {
			with = fmt.Sprintf("%d samples per side", row.A.N)
			if row.A.N == r.Rounds {
				with = fmt.Sprintf("%d rounds", r.Rounds)
			}
		}
		l := textsafe.OneLine(row.Name) + ": n.s.: "
		if row.Change.MDCPct == nil {
			n := fmt.Sprintf("n=%d per side", row.A.N)
			if row.A.N != row.B.N {
				n = fmt.Sprintf("n=%d+%d", row.A.N, row.B.N)
			}
			l += fmt.Sprintf("cannot be significant with %s (the smallest p it can give is %.3f)", n, stats.MinP(row.A.N, row.B.N))
		} else {
			l += fmt.Sprintf("a change below %s cannot be seen with %s here", fmtMDC(row.Change), with)
		}
		out = append(out, l)
	}
	return out
}

// fmtRatio is B's median over A's ("1.72x"), as the seeds' gain columns
// give it, significant or not; "-" when A's median is 0.
func fmtRatio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r)
}

// titleLine names the experiment: "name: description".
func titleLine(r *Report) string {
	return strings.Join(titlePhrases(r), " ")
}

// titlePhrases are titleLine's phrases: the name with its colon, then the
// description's words.
func titlePhrases(r *Report) []string {
	name := textsafe.OneLine(r.Experiment)
	d := strings.Fields(textsafe.OneLine(r.Description))
	if len(d) == 0 {
		return []string{name}
	}
	return append([]string{name + ":"}, d...)
}

// sideLine names the two sides: "A: label (kernel)   B: label
// (kernel)". When width is not 0 and the line is wider, the kernels are
// described with less detail (see kernelDesc) until it fits.
func sideLine(r *Report, width int) string {
	var l string
	for detail := kernelFull; detail >= kernelName; detail-- {
		l = strings.Join(sidePhrases(r, detail), " ")
		if width == 0 || len(render.ToASCII(l)) <= width {
			break
		}
	}
	return l
}

// sidePhrases are sideLine's phrases, one per side: "A: label (kernel)",
// with the spaces that part it from B's, and "B: label (kernel)" (or a
// note that there is no B).
func sidePhrases(r *Report, detail int) []string {
	a := "A: " + sideDesc(r, r.A, detail) + "  "
	if r.B.Label == "" {
		return []string{a, "(one side only: a cell of a matrix, compared across kernels in the matrix's report)"}
	}
	return []string{a, "B: " + sideDesc(r, r.B, detail)}
}

// legendPhrases name, once, the kernels that rows and lines call by a
// short label (Kernel.Label) when the line naming the sides does not
// describe them (a comparison of two runs): "kernels:", then
// "debian:7.3 = debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1" for each.
// None when every kernel goes by its reference or the sides describe
// them.
func legendPhrases(r *Report) []string {
	if kernelDesc(r, r.A, kernelName) != "" {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, k := range r.Kernels {
		label, ref := textsafe.OneLine(k.Label), textsafe.OneLine(k.Ref)
		if label == "" || label == ref {
			continue
		}
		e := label + " = " + ref
		if !seen[e] {
			seen[e] = true
			out = append(out, e+",")
		}
	}
	if len(out) == 0 {
		return nil
	}
	out[len(out)-1] = strings.TrimSuffix(out[len(out)-1], ",")
	return append([]string{"kernels:"}, out...)
}

// sideDesc is a side's label with its kernel in parentheses.
func sideDesc(r *Report, s Side, detail int) string {
	label := textsafe.OneLine(s.Label)
	if k := kernelDesc(r, s, detail); k != "" {
		return label + " (" + k + ")"
	}
	return label
}

// How much kernelDesc says about a kernel.
const (
	// kernelName is the kernel's name.
	kernelName = iota + 1
	// kernelVersion adds its version.
	kernelVersion
	// kernelFull adds its short ID.
	kernelFull
)

// kernelDesc describes a side's kernel: name, version and short ID, as
// detail says. When the axis is a parameter both sides ran the run's
// only kernel.
func kernelDesc(r *Report, s Side, detail int) string {
	var k *Kernel
	for i := range r.Kernels {
		if s.Kernel != "" && (r.Kernels[i].Name == s.Kernel || r.Kernels[i].Ref == s.Kernel) {
			k = &r.Kernels[i]
			break
		}
	}
	switch {
	case k == nil && s.Kernel != "":
		return textsafe.OneLine(s.Kernel)
	case k == nil && len(r.Kernels) == 1:
		k = &r.Kernels[0]
	case k == nil:
		return ""
	}
	var parts []string
	for i, p := range []string{k.Name, k.Version, shortID(k.ID)}[:detail] {
		if i == 0 && p == s.Label {
			continue // the label names the kernel already
		}
		if i == 1 && p != "" && strings.Contains(k.Name, p) {
			continue // the name holds the version ("debian:7.3.4+deb13-cloud-amd64=7.3.4-1")
		}
		if p = textsafe.OneLine(p); p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " ")
}

// shortID shortens a kernel ID (a hash) to 8 characters, which keeps
// the line naming both sides within TextWidth.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// qemuVersion is the version number from QEMU's version line ("QEMU
// emulator version 7.2.17 (Debian 1:7.2+dfsg-7+deb12u16)" gives
// "7.2.17"); the manifest keeps the whole line.
func qemuVersion(r *Report) string {
	v, _, _ := strings.Cut(strings.TrimPrefix(textsafe.OneLine(r.QEMU), "QEMU emulator version "), " ")
	return v
}

// envLine describes where and how the run ran: "accel tcg, host ...,
// qemu ..., 2 vCPUs, 1024 MiB, 10 rounds (abba, fresh)".
// A run on the host itself (accel host) had no VM: no QEMU, no guest
// shape.
func envLine(r *Report) string {
	return strings.Join(envPhrases(r), " ")
}

// envPhrases are envLine's phrases, each with its comma: "accel tcg,",
// "host 6.1.0-18-amd64 AMD EPYC 7B13,", "1024 MiB,", "5 rounds (abba,
// fresh)".
func envPhrases(r *Report) []string {
	host := "host " + textsafe.OneLine(r.Host)
	rounds := render.JoinNonEmpty(" ", fmt.Sprintf("%d rounds", r.Rounds), paren(render.JoinNonEmpty(", ", textsafe.OneLine(r.Order), textsafe.OneLine(r.Reuse))))
	if r.Accel == "host" {
		return []string{"no VM (accel host),", host + ",", rounds}
	}
	return []string{"accel " + refMode(r) + ",", host + ",", "qemu " + qemuVersion(r) + ",",
		fmt.Sprintf("%d vCPUs,", r.CPUs), fmt.Sprintf("%d MiB,", r.MemMB), rounds}
}

// roundsLine says how --rounds auto ended: "rounds auto: every row's
// change CI within ±10% after 8 rounds", or the rows still wider at the
// bound; "" for a run with a fixed number of rounds.
func roundsLine(r *Report) string {
	return strings.Join(roundsPhrases(r), " ")
}

// roundsPhrases are roundsLine's phrases: its words, and the rows still
// wider at the bound each whole.
func roundsPhrases(r *Report) []string {
	a := r.AutoRounds
	if a == nil {
		return nil
	}
	if a.Reached {
		return strings.Fields(fmt.Sprintf("rounds auto: every row's change CI within ±%g%% after %d rounds (bound %d)", a.CITargetPct, r.Rounds, a.MaxRounds))
	}
	out := strings.Fields(fmt.Sprintf("rounds auto: %d rounds (bound %d); change CI still wider than ±%g%%:", r.Rounds, a.MaxRounds, a.CITargetPct))
	return append(out, listPhrases(a.Wide)...)
}

// listPhrases are names as the phrases of a list: each one whole, made
// one line, with a comma after all but the last.
func listPhrases(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = textsafe.OneLine(n)
		if i < len(names)-1 {
			out[i] += ","
		}
	}
	return out
}

// paren returns s in parentheses, "" for "".
func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

// checkLine is one check on one line: "FAIL fsx [cell] B round 2: message".
func checkLine(c Check) string {
	s := "FAIL "
	if c.Passed {
		s = "PASS "
	}
	s += textsafe.OneLine(c.Name)
	if cell := textsafe.OneLine(c.Cell); cell != "" {
		s += " [" + cell + "]"
	}
	if side := textsafe.OneLine(c.Side); side != "" {
		s += " " + strings.ToUpper(side)
	}
	if c.Round > 0 {
		s += fmt.Sprintf(" round %d", c.Round)
	}
	if m := textsafe.OneLine(c.Message); m != "" {
		s += ": " + m
	}
	return s
}

// outputLines are the lines of a failed check's output, cleaned of
// control characters, tabs expanded; none for a check that passed.
func outputLines(c Check) []string {
	out := strings.Trim(textsafe.Clean(c.Output), "\n")
	if c.Passed || strings.TrimSpace(out) == "" {
		return nil
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(render.ExpandTabs(l), " ")
	}
	return lines
}

// checkLines are a check's line and, for a failed one, the tail of its
// output below it, indented by indent.
func checkLines(c Check, indent string) []string {
	out := []string{checkLine(c)}
	for _, l := range outputLines(c) {
		out = append(out, indent+l)
	}
	return out
}

// skippedLine is one skipped cell: "skipped: cell: reason".
func skippedLine(s Skipped) string {
	return "skipped: " + textsafe.OneLine(s.Cell) + ": " + textsafe.OneLine(s.Reason)
}

// splatGroup is one list of the splat diff with its label.
type splatGroup struct {
	label  string
	splats []SplatCount
	// bad is set for the list that fails the run.
	bad bool
}

// splatGroups are the splat diff's lists: new in B, gone in B, in both.
func splatGroups(r *Report) []splatGroup {
	return []splatGroup{
		{"new in B: ", r.Splats.New, true},
		{"gone in B:", r.Splats.Gone, false},
		{"in both:  ", r.Splats.Both, false},
	}
}

// splatLine is one title of a splat group: "new in B:  title (kasan; A 0,
// B 1)".
func splatLine(label string, s SplatCount) string {
	counts := fmt.Sprintf("A %d, B %d", s.A, s.B)
	if t := textsafe.OneLine(s.Type); t != "" {
		counts = t + "; " + counts
	}
	return label + " " + textsafe.OneLine(s.Title) + " (" + counts + ")"
}

// noSplats is said when neither side printed a kernel report.
const noSplats = "no kernel splats"

// splatLines are the splat diff, one line per title, or noSplats.
func splatLines(r *Report) []string {
	var out []string
	for _, g := range splatGroups(r) {
		for _, s := range g.splats {
			out = append(out, splatLine(g.label, s))
		}
	}
	if len(out) == 0 {
		return []string{noSplats}
	}
	return out
}

// Sides a row's warning came from.
const (
	fromA = 1 << iota
	fromB
	fromBoth = fromA | fromB
)

// warningLines are the run's warnings, then the rows' (their sides' and
// their changes'), each message once, naming the rows it applies to.
func warningLines(r *Report) []string {
	items := warningItems(r)
	out := make([]string, len(items))
	for i, w := range items {
		out[i] = w.line()
	}
	return out
}

// warning is one warning line: its message and, for a row's warning, the
// rows it applies to ("seqwrite bs=1M A", "randread bs=4k", "and 2
// more").
type warning struct {
	msg   string
	where []string
}

// line is the warning on one line: "msg (row, row B and 2 more)".
func (w warning) line() string {
	if len(w.where) == 0 {
		return w.msg
	}
	return w.msg + " (" + strings.Join(w.where, ", ") + ")"
}

// phrases are the warning's phrases for a text line: the message's
// words, then each row whole.
func (w warning) phrases() []string {
	out := strings.Fields(w.msg)
	if len(w.where) == 0 {
		return out
	}
	where := listPhrases(w.where)
	where[0] = "(" + where[0]
	where[len(where)-1] += ")"
	return append(out, where...)
}

// warningItems are warningLines' warnings, each message once.
func warningItems(r *Report) []warning {
	var out []warning
	seen := map[string]bool{}
	add := func(w warning) {
		if l := w.line(); w.msg != "" && !seen[l] {
			seen[l] = true
			out = append(out, w)
		}
	}
	for _, w := range r.Warnings {
		add(warning{msg: textsafe.OneLine(w)})
	}
	type origin struct {
		rows  []string
		sides map[string]int
	}
	var msgs []string
	origins := map[string]*origin{}
	note := func(msg, row string, side int) {
		msg, row = textsafe.OneLine(msg), textsafe.OneLine(row)
		if msg == "" {
			return
		}
		o := origins[msg]
		if o == nil {
			o = &origin{sides: map[string]int{}}
			origins[msg] = o
			msgs = append(msgs, msg)
		}
		if _, ok := o.sides[row]; !ok {
			o.rows = append(o.rows, row)
		}
		o.sides[row] |= side
	}
	for _, row := range r.Rows {
		for _, w := range row.A.Warnings {
			note(w, row.Name, fromA)
		}
		for _, w := range row.B.Warnings {
			note(w, row.Name, fromB)
		}
		for _, w := range row.Change.Warnings {
			note(w, row.Name, fromBoth)
		}
	}
	const maxNamed = 3
	for _, msg := range msgs {
		o := origins[msg]
		var where []string
		for _, row := range o.rows[:min(len(o.rows), maxNamed)] {
			switch o.sides[row] {
			case fromA:
				row += " A"
			case fromB:
				row += " B"
			}
			where = append(where, row)
		}
		if n := len(o.rows) - maxNamed; n > 0 {
			where[len(where)-1] += fmt.Sprintf(" and %d more", n)
		}
		add(warning{msg: msg, where: where})
	}
	return out
}

// passed reports whether the run passed.
func passed(r *Report) bool {
	return len(r.Failures) == 0
}

// resultLine is the final verdict: "result: PASS" or "result: FAIL: a; b".
func resultLine(r *Report) string {
	if passed(r) {
		return "result: PASS"
	}
	fs := make([]string, len(r.Failures))
	for i, f := range r.Failures {
		fs[i] = textsafe.OneLine(f)
	}
	return "result: FAIL: " + strings.Join(fs, "; ")
}

// referenceText is the Reference without leading empty lines, trailing
// white space and control characters.
func referenceText(r *Report) string {
	return strings.TrimLeft(strings.TrimRight(textsafe.Clean(r.Reference), " \t\n"), "\n")
}

// profileTitle heads a profile's table.
func profileTitle(p Profile) string {
	return fmt.Sprintf("profile of %s (%s; samples: A %d, B %d; idle: A %s, B %s), share of busy samples with callees:",
		textsafe.OneLine(p.Row), textsafe.OneLine(p.Event), p.SamplesA, p.SamplesB, fmtShare(p.IdleA), fmtShare(p.IdleB))
}

// profileHeader are the columns of a profile's table.
var profileHeader = []string{"function", "A", "B", "B-A", "self A", "self B"}

// profileRows are a profile's table rows: the named functions, then
// the most changed ones not named, marked "*".
func profileRows(p Profile) [][]string {
	var rows [][]string
	named := map[string]bool{}
	row := func(f FuncShare, mark string) []string {
		return []string{textsafe.OneLine(f.Func) + mark, fmtShare(f.A), fmtShare(f.B), fmt.Sprintf("%+.1f pt", 100*(f.B-f.A)), fmtShare(f.SelfA), fmtShare(f.SelfB)}
	}
	for _, f := range p.Functions {
		named[f.Func] = true
		rows = append(rows, row(f, ""))
	}
	for _, f := range p.Changed {
		if !named[f.Func] {
			rows = append(rows, row(f, " *"))
		}
	}
	return rows
}

// profileNote explains the "*" of profileRows.
const profileNote = "* among the functions whose share changed most; pt = percentage points; busy = not idle"

// fmtShare formats a share (0..1) as a percentage.
func fmtShare(s float64) string {
	return fmt.Sprintf("%.1f%%", 100*s)
}
