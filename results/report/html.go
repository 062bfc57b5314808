package report

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"time"

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
		EnvLine:   envLine(r),
		Manifest:  manifestFields(r),
		Passed:    passed(r),
		Result:    resultLine(r),
		Warnings:  warningLines(r),
		Reference: referenceText(r),
	}
	for i, h := range tableHeader {
		page.Header = append(page.Header, htmlCell{h, tableRight[i]})
	}
	for _, row := range r.Rows {
		hr := htmlRow{Name: oneLine(row.Name), Class: rowClass(row)}
		for i, c := range tableRow(row) {
			hr.Cells = append(hr.Cells, htmlCell{c, tableRight[i]})
		}
		chart, err := chartSVG(r, row)
		if err != nil {
			return err
		}
		hr.Chart = chart
		page.Rows = append(page.Rows, hr)
	}
	for _, p := range r.Profiles {
		hp := htmlProfile{Title: profileTitle(p), Header: profileHeader, Rows: profileRows(p), Note: profileNote,
			LabelA: "A: " + oneLine(r.A.Label), LabelB: "B: " + oneLine(r.B.Label),
			// Icicles come from klab's own SVG writer, which escapes
			// every name in them.
			IcicleA: template.HTML(p.IcicleA), IcicleB: template.HTML(p.IcicleB)}
		page.Profiles = append(page.Profiles, hp)
	}
	for _, c := range r.Checks {
		page.Checks = append(page.Checks, htmlItem{checkLine(c), !c.Passed})
	}
	for _, s := range r.Skipped {
		page.Skipped = append(page.Skipped, skippedLine(s))
	}
	for _, g := range splatGroups(r) {
		for _, s := range g.splats {
			page.Splats = append(page.Splats, htmlItem{splatLine(g.label, s), g.bad})
		}
	}
	var b bytes.Buffer
	if err := htmlTemplate.Execute(&b, page); err != nil {
		return fmt.Errorf("rendering html report: %w", err)
	}
	if _, err := b.WriteTo(w); err != nil {
		return fmt.Errorf("writing html report: %w", err)
	}
	return nil
}

// htmlPage is what htmlTemplate shows; every string in it is escaped
// but Chart.
type htmlPage struct {
	Title, SideLine, EnvLine string
	Manifest                 []htmlField
	Header                   []htmlCell
	Rows                     []htmlRow
	Profiles                 []htmlProfile
	Checks                   []htmlItem
	Skipped                  []string
	Splats                   []htmlItem
	Warnings                 []string
	Reference                string
	Passed                   bool
	Result                   string
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
}

// htmlProfile is one profile comparison with its icicle charts.
type htmlProfile struct {
	Title, Note, LabelA, LabelB string
	Header                      []string
	Rows                        [][]string
	IcicleA, IcicleB            template.HTML
}

// htmlItem is one line of a list; Bad marks a failure.
type htmlItem struct {
	Text string
	Bad  bool
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
		{"experiment", oneLine(r.Experiment)},
		{"spec", joinNonEmpty(", sha256 ", oneLine(r.SpecFile), oneLine(r.SpecSHA256))},
		{"run", joinNonEmpty(" in ", oneLine(r.RunID), oneLine(r.RunDir))},
		{"time", joinNonEmpty(" to ", oneLine(r.Start), oneLine(r.End)) + ", " + wallTime(r.WallSec)},
		{"axis", oneLine(r.Axis)},
		{"A", sideDesc(r, r.A, kernelFull)},
		{"B", sideDesc(r, r.B, kernelFull)},
	}
	for _, k := range r.Kernels {
		f = append(f, htmlField{"kernel " + oneLine(k.Ref), joinNonEmpty(" ", oneLine(k.Name), oneLine(k.Version), "id "+oneLine(k.ID))})
	}
	return append(f,
		htmlField{"accel", oneLine(r.Accel)},
		htmlField{"host", oneLine(r.Host)},
		htmlField{"qemu", oneLine(r.QEMU)},
		htmlField{"guest", fmt.Sprintf("%d vCPUs, %d MiB", r.CPUs, r.MemMB)},
		htmlField{"rounds", joinNonEmpty(" ", strconv.Itoa(r.Rounds), paren(joinNonEmpty(", ", oneLine(r.Order), oneLine(r.Reuse))))},
	)
}

// wallTime formats the run's wall time: "wall 12m34s".
func wallTime(sec float64) string {
	return "wall " + time.Duration(sec*float64(time.Second)).Round(time.Second).String()
}

// htmlTemplate is the page. It has no script and loads nothing.
var htmlTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>klab: {{.Title}}</title>
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
figure { margin: 0; border: 1px solid #ddd; padding: 0.5em; }
figure.icicle { margin: 0.5em 0; overflow-x: auto; }
figure.icicle svg { max-width: 100%; height: auto; }
pre { background: #f6f6f6; padding: 0.7em; overflow-x: auto; }
.note { color: #666; font-size: 0.9em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="sides">{{.SideLine}}<br>{{.EnvLine}}</p>
<p class="result {{if .Passed}}pass{{else}}fail{{end}}">{{.Result}}</p>

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
<p class="note">Dots: one sample per round, left to right in the order they were measured.
Squares: the medians; whiskers: their 95% confidence intervals (none with too few samples).</p>
<div class="charts">
{{- range .Rows}}
<figure title="{{.Name}}">
{{.Chart}}
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
<li{{if .Bad}} class="fail"{{end}}>{{.Text}}</li>
{{- end}}
</ul>
{{- end}}
{{- with .Skipped}}

<h2>Skipped cells</h2>
<ul>
{{- range .}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}

<h2>Kernel splats</h2>
{{- if .Splats}}
<ul>
{{- range .Splats}}
<li{{if .Bad}} class="fail"{{end}}>{{.Text}}</li>
{{- end}}
</ul>
{{- else}}
<p>no kernel splats</p>
{{- end}}
{{- with .Warnings}}

<h2>Warnings</h2>
<ul>
{{- range .}}
<li>warning: {{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- with .Reference}}

<h2>Reference (the table this experiment reproduces)</h2>
<pre>{{.}}</pre>
{{- end}}

<p class="result {{if .Passed}}pass{{else}}fail{{end}}">{{.Result}}</p>
</body>
</html>
`))
