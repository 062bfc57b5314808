package report

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"klab/internal/textsafe"
	"klab/results/internal/render"
	"klab/results/stats"
)

// HTML writes r as one self-contained HTML page: no scripts, no external
// assets, the style inline and a chart per row of the table drawn as
// inline SVG. Besides Text's content it shows the run's manifest in
// full. Every string from the report is escaped by html/template.
func HTML(w io.Writer, r *Report) error {
	page := htmlPage{
		Title:     titleLine(r),
		SideLine:  sideLine(r, 0),
		Kernels:   strings.Join(legendPhrases(r), " "),
		EnvLine:   envLine(r),
		Manifest:  manifestFields(r),
		Passed:    passed(r),
		Result:    resultLine(r),
		Warnings:  warningLines(r),
		Reference: referenceText(r),
		Legend:    tableLegend,
		Rounds:    roundsLine(r),
		Weigh:     weighLines(r),
	}
	for i, h := range tableHeader {
		page.Header = append(page.Header, htmlCell{h, tableRight[i]})
	}
	for _, row := range r.Rows {
		hr := htmlRow{Name: textsafe.OneLine(row.Name), Class: rowClass(row)}
		for i, c := range tableRow(row) {
			hr.Cells = append(hr.Cells, htmlCell{c, tableRight[i]})
		}
		chart, err := chartSVG(r, row)
		if err != nil {
			return err
		}
		hr.Chart = chart
		if row.Reference != nil {
			hr.Ref, hr.RefClass = refLabel(row), refClass(row.Reference.Verdict, row.Reference.Strict)
		}
		page.Rows = append(page.Rows, hr)
	}
	page.RefHeader, page.RefRows = refHTML(r)
	page.Lead = referenceLead(r)
	for _, p := range r.Profiles {
		hp := htmlProfile{Title: profileTitle(p), Header: profileHeader, Rows: profileRows(p), Note: profileNote,
			LabelA: "A: " + textsafe.OneLine(r.A.Label), LabelB: "B: " + textsafe.OneLine(r.B.Label),
			// Icicles come from klab's own SVG writer, which escapes
			// every name in them.
			IcicleA: template.HTML(p.IcicleA), IcicleB: template.HTML(p.IcicleB)}
		page.Profiles = append(page.Profiles, hp)
	}
	for _, c := range r.Checks {
		page.Checks = append(page.Checks, render.HTMLItem{Text: checkLine(c), Bad: !c.Passed, Detail: strings.Join(outputLines(c), "\n")})
	}
	for _, s := range r.Skipped {
		page.Skipped = append(page.Skipped, skippedLine(s))
	}
	for _, g := range splatGroups(r) {
		for _, s := range g.splats {
			page.Splats = append(page.Splats, render.HTMLItem{Text: splatLine(g.label, s), Bad: g.bad})
		}
	}
	return render.WriteHTML(w, htmlTemplate, page, "html report")
}

// htmlPage is what htmlTemplate shows; every string in it is escaped
// but Chart.
type htmlPage struct {
	Title, SideLine, EnvLine string
	// Kernels names the kernels behind short labels (legendPhrases); ""
	// when the side line describes them.
	Kernels   string
	Manifest  []htmlField
	Header    []htmlCell
	Rows      []htmlRow
	Profiles  []htmlProfile
	Checks    []render.HTMLItem
	Skipped   []string
	Splats    []render.HTMLItem
	Warnings  []string
	Reference string
	Passed    bool
	Result    string
	// Lead says which rows cannot be compared with their reference here
	// (referenceLead); "" when none.
	Lead string
	// RefHeader and RefRows are the table against the reference.
	RefHeader []string
	RefRows   []htmlRefRow
	// Legend explains the table's n and MDC; Weigh says what each row
	// without a significant change could have seen.
	Legend string
	Weigh  []string
	// Rounds says how --rounds auto ended, "" for fixed rounds.
	Rounds string
}

// htmlField is one line of the manifest summary.
type htmlField struct {
	Name, Value string
}

// htmlCell is one cell of the table.
type htmlCell struct {
	Text  string
	Right bool
}

// htmlRow is one row of the table with its chart.
type htmlRow struct {
	Name  string
	Class string
	Cells []htmlCell
	// Chart is the <svg> element chartSVG drew.
	Chart template.HTML
	// Ref is the row's verdict against its reference, under its chart;
	// RefClass its colour.
	Ref, RefClass string
}

// htmlProfile is one profile comparison with its icicle charts.
type htmlProfile struct {
	Title, Note, LabelA, LabelB string
	Header                      []string
	Rows                        [][]string
	IcicleA, IcicleB            template.HTML
}

// rowClass is the CSS class of a row: its verdict's colour.
func rowClass(row Row) string {
	switch {
	case row.Regression:
		return "fail"
	case row.Change.Verdict == stats.Better:
		return "better"
	case row.Change.Verdict == stats.Worse:
		return "worse"
	}
	return ""
}

// manifestFields summarise the run's manifest.
func manifestFields(r *Report) []htmlField {
	f := []htmlField{
		{"experiment", textsafe.OneLine(r.Experiment)},
		{"spec", render.JoinNonEmpty(", sha256 ", textsafe.OneLine(r.SpecFile), textsafe.OneLine(r.SpecSHA256))},
		{"run", render.JoinNonEmpty(" in ", textsafe.OneLine(r.RunID), textsafe.OneLine(r.RunDir))},
		{"time", render.JoinNonEmpty(" to ", textsafe.OneLine(r.Start), textsafe.OneLine(r.End)) + ", " + wallTime(r.WallSec)},
		{"axis", textsafe.OneLine(r.Axis)},
		{"A", sideDesc(r, r.A, kernelFull)},
		{"B", sideDesc(r, r.B, kernelFull)},
	}
	for _, k := range r.Kernels {
		f = append(f, htmlField{"kernel " + textsafe.OneLine(k.Ref), render.JoinNonEmpty(" ", textsafe.OneLine(k.Name), textsafe.OneLine(k.Version), "id "+textsafe.OneLine(k.ID))})
	}
	return append(f,
		htmlField{"accel", refMode(r)},
		htmlField{"host", textsafe.OneLine(r.Host)},
		htmlField{"qemu", textsafe.OneLine(r.QEMU)},
		htmlField{"guest", fmt.Sprintf("%d vCPUs, %d MiB", r.CPUs, r.MemMB)},
		htmlField{"rounds", render.JoinNonEmpty(" ", strconv.Itoa(r.Rounds), paren(render.JoinNonEmpty(", ", textsafe.OneLine(r.Order), textsafe.OneLine(r.Reuse))))},
	)
}

// wallTime formats the run's wall time: "wall 12m34s".
func wallTime(sec float64) string {
	return "wall " + time.Duration(sec*float64(time.Second)).Round(time.Second).String()
}

// htmlTemplate is the page, with the sections render.HTMLTemplate
// adds. It has no script and loads nothing.
var htmlTemplate = render.HTMLTemplate("report", `{{template "head" .}}
<style>
body { font-family: sans-serif; margin: 1.5em auto; max-width: 75em; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
p.sides { font-family: monospace; white-space: pre-wrap; }
table { border-collapse: collapse; }
th, td { padding: 0.2em 0.7em; text-align: left; vertical-align: top; }
table.results th, table.results td { border-bottom: 1px solid #ddd; font-family: monospace; white-space: nowrap; }
table.manifest th { font-weight: normal; color: #666; white-space: nowrap; }
table.manifest td { font-family: monospace; overflow-wrap: anywhere; }
.right { text-align: right; }
tr.better td { background: #e8f5e9; }
tr.worse td { background: #fff3e0; }
tr.fail td, li.fail { background: #ffebee; }
ul { padding-left: 1.2em; }
li { font-family: monospace; margin: 0.15em 0; }
li.fail { color: #b71c1c; }
p.result { font-family: monospace; font-weight: bold; padding: 0.4em 0.7em; }
p.result.pass { background: #e8f5e9; color: #1b5e20; }
p.result.fail { background: #ffebee; color: #b71c1c; }
div.charts { display: flex; flex-wrap: wrap; gap: 1em; }
figcaption.ref { font-family: monospace; font-size: 0.85em; max-width: 29em; padding: 0.2em 0.4em; }
.better { background: #e8f5e9; }
.worse { background: #fff3e0; }
figcaption.fail { background: #ffebee; color: #b71c1c; }
.muted { color: #666; }
figure { margin: 0; border: 1px solid #ddd; padding: 0.5em; }
figure.icicle { margin: 0.5em 0; overflow-x: auto; }
figure.icicle svg { max-width: 100%; height: auto; }
pre { background: #f6f6f6; padding: 0.7em; overflow-x: auto; }
li pre { color: #222; margin: 0.3em 0; }
.note { color: #666; font-size: 0.9em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="sides">{{.SideLine}}{{with .Kernels}}<br>{{.}}{{end}}<br>{{.EnvLine}}{{with .Rounds}}<br>{{.}}{{end}}</p>
{{with .Lead}}<p class="lead"><strong>{{.}}</strong></p>
{{end}}{{template "result" .}}

<h2>Run</h2>
<table class="manifest">
{{- range .Manifest}}
<tr><th>{{.Name}}</th><td>{{.Value}}</td></tr>
{{- end}}
</table>

<h2>Results</h2>
{{- if .Rows}}
<table class="results">
<thead><tr>{{range .Header}}<th{{if .Right}} class="right"{{end}}>{{.Text}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr{{with .Class}} class="{{.}}"{{end}}>{{range .Cells}}<td{{if .Right}} class="right"{{end}}>{{.Text}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
<p class="note">{{.Legend}}.</p>
{{- with .Weigh}}
<ul>
{{- range .}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- if .RefRows}}
<p>Against the reference (the spec's expect:), B/A measured and the reference's:</p>
<table class="results">
<thead><tr>{{range .RefHeader}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{- range .RefRows}}
<tr class="{{.Class}}">{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
{{- end}}
<p class="note">Dots: one sample per round, left to right in the order they were measured.
Squares: the medians; whiskers: their 95% confidence intervals (none with too few samples).</p>
<div class="charts">
{{- range .Rows}}
<figure title="{{.Name}}">
{{.Chart}}
{{- if .Ref}}
<figcaption class="ref {{.RefClass}}">{{.Ref}}</figcaption>
{{- end}}
</figure>
{{- end}}
</div>
{{- else}}
<p>no measurements</p>
{{- end}}
{{- with .Profiles}}

<h2>Profiles</h2>
{{- range .}}
<p>{{.Title}}</p>
<table class="results">
<thead><tr>{{range $i, $h := .Header}}<th{{if $i}} class="right"{{end}}>{{$h}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr>{{range $i, $c := .}}<td{{if $i}} class="right"{{end}}>{{$c}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
<p class="note">{{.Note}}. Icicle charts: the callers at the top, what they call below, each frame as wide as its share of the samples.</p>
{{- if .IcicleA}}
<figure class="icicle"><figcaption>{{.LabelA}}</figcaption>
{{.IcicleA}}
</figure>
{{- end}}
{{- if .IcicleB}}
<figure class="icicle"><figcaption>{{.LabelB}}</figcaption>
{{.IcicleB}}
</figure>
{{- end}}
{{- end}}
{{- end}}
{{- with .Checks}}

<h2>Checks</h2>
<ul>
{{- range .}}
<li{{if .Bad}} class="fail"{{end}}>{{.Text}}{{with .Detail}}<pre>{{.}}</pre>{{end}}</li>
{{- end}}
</ul>
{{- end}}
{{- template "skipped" .Skipped}}

{{template "splats" .Splats}}
{{- template "warnings" .Warnings}}
{{- with .Reference}}

<h2>Reference (the table this experiment reproduces)</h2>
<pre>{{.}}</pre>
{{- end}}

{{template "result" .}}
</body>
</html>
`)
