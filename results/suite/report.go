package suite

import (
	"fmt"
	"io"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/internal/textsafe"
	"klab/results/internal/render"
)

// Formats are the report formats WriteRun and WriteVerdict take, in the
// order they are listed to users: text (a list to paste into a mail),
// md, json, junit and html.
var Formats = render.Formats

// TextWidth is the widest line of a text report, in columns.
const TextWidth = 100

// maxTextDiff bounds the diff lines a text or Markdown report shows
// per failure; json, JUnit and HTML show the whole Diff.
const maxTextDiff = 8

// WriteRun writes r to w in format, one of Formats.
func WriteRun(w io.Writer, r *Run, format string) error {
	return render.Writers[*Run]{
		Text:     func(w io.Writer, r *Run) error { return writeText(w, runPage(r)) },
		Markdown: func(w io.Writer, r *Run) error { return writeMarkdown(w, runPage(r)) },
		JSON:     runJSON,
		JUnit:    runJUnit,
		HTML:     func(w io.Writer, r *Run) error { return writeHTML(w, runPage(r)) },
	}.Write(w, r, format, "fstests report")
}

// WriteVerdict writes v to w in format, one of Formats.
func WriteVerdict(w io.Writer, v *Verdict, format string) error {
	return render.Writers[*Verdict]{
		Text:     func(w io.Writer, v *Verdict) error { return writeText(w, verdictPage(v)) },
		Markdown: func(w io.Writer, v *Verdict) error { return writeMarkdown(w, verdictPage(v)) },
		JSON:     func(w io.Writer, v *Verdict) error { return render.WriteJSON(w, v.jsonView(), "fstests comparison") },
		JUnit:    verdictJUnit,
		HTML:     func(w io.Writer, v *Verdict) error { return writeHTML(w, verdictPage(v)) },
	}.Write(w, v, format, "fstests comparison")
}

// page is what the text, Markdown and HTML reports show, in order.
type page struct {
	Title  string
	Lines  []string
	Passed bool
	Result string
	// Sections are the lists; one without rows is not shown.
	Sections []section
}

// section is a headed list of tests.
type section struct {
	Heading string
	Rows    []row
}

// row is one test in a section: its name, a short status ("fail", "A
// 0/3, B 3/3"), a one-line text and the detail shown under it (a diff).
type row struct {
	Test, Status, Text, Detail string
	Bad                        bool
}

// runPage is r's page.
func runPage(r *Run) page {
	c := r.Counts()
	bad := c.Fail + c.Hang + c.Crash
	p := page{
		Title: fmt.Sprintf("fstests %s on %s: %d tests, %d passed, %d failed, %d not run, %d hung, %d crashed in %s",
			oneLine(r.Config), kernelName(r), c.Tests, c.Pass, c.Fail, c.NotRun, c.Hang, c.Crash, fmtSeconds(r.Elapsed)),
		Lines:  runLines(r),
		Passed: bad == 0,
		Result: "passed: no test failed, hung or crashed",
	}
	if bad > 0 {
		p.Result = fmt.Sprintf("FAILED: %d of %d tests failed, hung or crashed", bad, c.Tests)
	}
	var failed, notrun, passed, splats section
	failed.Heading, notrun.Heading, passed.Heading, splats.Heading = "Failed", "Not run", "Passed", "Kernel splats"
	for _, t := range r.Tests {
		switch {
		case Failed(t.Status):
			failed.Rows = append(failed.Rows, row{Test: t.Name, Status: statusWithRuns(t), Text: oneLine(t.Reason), Detail: t.Diff, Bad: true})
		case t.Status == proto.TestNotRun:
			notrun.Rows = append(notrun.Rows, row{Test: t.Name, Status: t.Status, Text: oneLine(t.Reason)})
		default:
			passed.Rows = append(passed.Rows, row{Test: t.Name, Status: statusWithRuns(t), Text: fmtSeconds(t.Seconds)})
		}
	}
	splats.Rows = splatRows(r)
	p.Sections = []section{failed, splats, notrun, passed}
	return p
}

// runLines describe r's kernel, configuration and time.
func runLines(r *Run) []string {
	k := "kernel " + kernelName(r)
	if id := oneLine(r.Kernel.ID); id != "" {
		k += ", id " + id
	}
	lines := []string{k}
	if !r.Started.IsZero() {
		lines = append(lines, "started "+r.Started.UTC().Format(time.RFC3339))
	}
	return lines
}

// splatRows are r's splats, those outside any test first.
func splatRows(r *Run) []row {
	var rows []row
	for _, s := range r.Splats {
		rows = append(rows, row{Test: "(no test)", Status: oneLine(s.Type), Text: oneLine(s.Title), Bad: true})
	}
	for _, t := range r.Tests {
		for _, s := range t.Splats {
			rows = append(rows, row{Test: t.Name, Status: oneLine(s.Type), Text: oneLine(s.Title), Bad: true})
		}
	}
	return rows
}

// statusWithRuns is t's status, with its failing runs when it was rerun:
// "fail 2/3".
func statusWithRuns(t Test) string {
	if t.Runs > 1 {
		f, n := t.Tally()
		return fmt.Sprintf("%s %d/%d", t.Status, f, n)
	}
	return t.Status
}

// kernelName is r's kernel as reports name it: "debian:7.3
// (6.12.43+deb13-amd64)".
func kernelName(r *Run) string {
	name, v := oneLine(r.Kernel.Name), oneLine(r.Kernel.Version)
	switch {
	case name == "" && v == "":
		return "an unknown kernel"
	case name == "" || name == v:
		return v
	case v == "":
		return name
	}
	return name + " (" + v + ")"
}

// sideName names one side of a comparison: "A debian:7.3 (6.12.43)".
func sideName(r *Run, def string) string {
	l := oneLine(r.Label)
	if l == "" {
		l = def
	}
	return l + " " + kernelName(r)
}

// verdictPage is v's page.
func verdictPage(v *Verdict) page {
	regs := v.Regressions()
	p := page{
		Title: fmt.Sprintf("fstests %s: %s vs %s", configName(v), sideName(v.A, "A"), sideName(v.B, "B")),
		Lines: []string{
			sideCounts(v.A, "A"),
			sideCounts(v.B, "B"),
		},
		Passed: len(regs) == 0,
		Result: fmt.Sprintf("no regression: %d flaky, %d fixed, %d not-run changes, %d still failing",
			len(v.Flaky()), len(v.Fixed), len(v.NotRun), len(v.StillFailing)),
	}
	if len(regs) > 0 {
		p.Result = fmt.Sprintf("REGRESSED: %d newly failing on B (%d flaky, %d fixed)", len(regs), len(v.Flaky()), len(v.Fixed))
	}
	changeRows := func(cs []Change, bad bool, detail bool) []row {
		var rows []row
		for _, c := range cs {
			r := row{Test: c.Test, Status: changeStatus(c), Text: oneLine(c.Reason), Bad: bad}
			if detail {
				if t := v.B.Test(c.Test); t != nil {
					r.Detail = t.Diff
				}
			}
			rows = append(rows, r)
		}
		return rows
	}
	var splats []row
	for _, sc := range v.NewSplats {
		name := sc.Test
		if name == "" {
			name = "(no test)"
		}
		for _, s := range sc.Splats {
			splats = append(splats, row{Test: name, Status: oneLine(s.Type), Text: oneLine(s.Title), Bad: true})
		}
	}
	p.Sections = []section{
		{"Regressions: fail on B repeatedly, never on A", changeRows(regs, true, true)},
		{"Flaky: fail on B only sometimes, or on A too", changeRows(v.Flaky(), false, false)},
		{"New kernel splats on B", splats},
		{"Fixed on B", changeRows(v.Fixed, false, false)},
		{"Not-run changes (what each side could run)", changeRows(v.NotRun, false, false)},
		{"Failing on both", changeRows(v.StillFailing, false, false)},
	}
	return p
}

// configName is the configurations compared: one name, or "A-config
// vs B-config".
func configName(v *Verdict) string {
	a, b := oneLine(v.A.Config), oneLine(v.B.Config)
	if a == b {
		return a
	}
	return a + " vs " + b
}

// sideCounts is one side's counts: "A debian:7.3: 6 tests, 5 passed,
// ...".
func sideCounts(r *Run, def string) string {
	c := r.Counts()
	return fmt.Sprintf("%s, %s: %d tests, %d passed, %d failed, %d not run, %d hung, %d crashed in %s",
		sideName(r, def), oneLine(r.Config), c.Tests, c.Pass, c.Fail, c.NotRun, c.Hang, c.Crash, fmtSeconds(r.Elapsed))
}

// changeStatus is a change's statuses and runs: "A pass 0/3, B fail
// 3/3".
func changeStatus(c Change) string {
	side := func(l, s string, f, n int) string {
		if s == "" {
			s = "absent"
		}
		if n > 1 {
			return fmt.Sprintf("%s %s %d/%d", l, s, f, n)
		}
		return l + " " + s
	}
	return side("A", c.A, c.AFails, c.ARuns) + ", " + side("B", c.B, c.BFails, c.BRuns)
}

// fmtSeconds formats a duration in seconds: "6s", "2m3s".
func fmtSeconds(s float64) string {
	if s < 0 || s != s {
		return "-"
	}
	return (time.Duration(s+0.5) * time.Second).String()
}

// writeText writes p as text: the title, its lines and result, then
// each section as "Heading (n):" and its rows, a failure's diff head
// indented under it.
func writeText(w io.Writer, p page) error {
	t := render.TextWriter{Width: TextWidth}
	t.Line(p.Title)
	for _, l := range p.Lines {
		t.Line(l)
	}
	t.Line(p.Result)
	for _, s := range p.Sections {
		if len(s.Rows) == 0 {
			continue
		}
		t.Blank()
		t.Line(fmt.Sprintf("%s (%d):", s.Heading, len(s.Rows)))
		width := 0
		for _, r := range s.Rows {
			width = max(width, len(r.Test))
		}
		for _, r := range s.Rows {
			t.Line(fmt.Sprintf("  %-*s  %s", width, r.Test, render.JoinNonEmpty("  ", r.Status, r.Text)))
			for _, d := range diffHead(r.Detail) {
				t.Line("      " + d)
			}
		}
	}
	if _, err := io.WriteString(w, t.String()); err != nil {
		return fmt.Errorf("writing text fstests report: %w", err)
	}
	return nil
}

// diffHead is the first lines of a diff, maxTextDiff at most, with
// "..." when there are more.
func diffHead(d string) []string {
	d = strings.TrimRight(textsafe.Clean(d), "\n")
	if d == "" {
		return nil
	}
	lines := strings.Split(d, "\n")
	if len(lines) > maxTextDiff {
		lines = append(lines[:maxTextDiff:maxTextDiff], "...")
	}
	return lines
}

// writeMarkdown writes p as Markdown: a "##" title, the lines, the
// result in bold, and each section as a "###" heading over a table;
// failures' diff heads follow their table as indented code.
func writeMarkdown(w io.Writer, p page) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n", render.MDEscape(p.Title))
	for _, l := range p.Lines {
		fmt.Fprintf(&b, "- %s\n", render.MDEscape(l))
	}
	fmt.Fprintf(&b, "\n%s\n", render.MDStrong(p.Result))
	for _, s := range p.Sections {
		if len(s.Rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s (%d)\n\n", render.MDEscape(s.Heading), len(s.Rows))
		b.WriteString(render.MDTableRow([]string{"test", "status", "detail"}))
		b.WriteString("| --- | --- | --- |\n")
		for _, r := range s.Rows {
			b.WriteString(render.MDTableRow([]string{r.Test, r.Status, r.Text}))
		}
		for _, r := range s.Rows {
			if lines := diffHead(r.Detail); len(lines) > 0 {
				fmt.Fprintf(&b, "\n%s:\n\n", render.MDEscape(r.Test))
				for _, l := range lines {
					b.WriteString("    " + render.ToASCII(render.ExpandTabs(l)) + "\n")
				}
			}
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing md fstests report: %w", err)
	}
	return nil
}

// htmlPage is the page template; every string is escaped by
// html/template.
var htmlPage = render.HTMLTemplate("fstests", `{{template "head" .}}
<style>
body { font-family: sans-serif; margin: 2em; }
.pass { color: #1a7f37; } .fail { color: #cf222e; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: left; vertical-align: top; }
pre { margin: 0; font-size: 90%; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<ul>
{{- range .Lines}}
<li>{{.}}</li>
{{- end}}
</ul>
{{template "result" .}}
{{- range .Sections}}{{if .Rows}}
<h2>{{.Heading}} ({{len .Rows}})</h2>
<table>
<tr><th>test</th><th>status</th><th>detail</th></tr>
{{- range .Rows}}
<tr{{if .Bad}} class="fail"{{end}}><td>{{.Test}}</td><td>{{.Status}}</td><td>{{.Text}}{{if .Detail}}<pre>{{.Detail}}</pre>{{end}}</td></tr>
{{- end}}
</table>
{{- end}}{{end}}
</body>
</html>
`)

// writeHTML writes p as a self-contained HTML page.
func writeHTML(w io.Writer, p page) error {
	for i := range p.Sections {
		for j := range p.Sections[i].Rows {
			p.Sections[i].Rows[j].Detail = textsafe.Clean(p.Sections[i].Rows[j].Detail)
		}
	}
	return render.WriteHTML(w, htmlPage, p, "html fstests report")
}

// runJSON writes r as JSON, as Save does but indented, its empty test
// list as [].
func runJSON(w io.Writer, r *Run) error {
	c := *r
	c.Tests = render.NonNil(c.Tests)
	return render.WriteJSON(w, &c, "fstests report")
}
