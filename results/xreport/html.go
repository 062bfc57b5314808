package xreport

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"klab/internal/textsafe"
	"klab/results/internal/render"
	"klab/results/reference"
	"klab/results/stats"
)

// HTML writes m as one self-contained HTML page: no scripts, no
// external assets, the style inline. Besides Text's content it shows
// the matrix file and the table as a heat map: each cell's background
// says how the kernel compares with the baseline (green for a
// significant improvement in the metric's direction, orange to red for
// a significant regression, deeper the larger the change up to 50%;
// grey-white when there is no significant change; the baseline's
// column uncoloured). A cell's tooltip gives its samples, confidence
// intervals and p-value, and its value links to the cell's own report,
// "<Run>/report.html" relative to the page, when Run is a plain
// relative path (see runLink): the links work when the page is in the
// results tree. The references' table ("Against the reference") has the
// same shape, each cell coloured by its verdict (see refStyle), with the
// references' sources below it. Suite cells get a line each, as in
// Text. Every string
// from the matrix is escaped by html/template.
func HTML(w io.Writer, m *Matrix) error {
	tb := newTable(m)
	page := htmlPage{
		Title:    titleLine(m),
		Kernels:  kernelsLine(m),
		File:     fileLine(m),
		Legend:   legendLine(m),
		Skipped:  skippedLines(m),
		Failures: failureLines(m),
		Warnings: warningLines(m),
		Bisects:  htmlBisects(m),
		Passed:   passed(m),
		Result:   resultLine(m),
		Swatches: []htmlSwatch{
			{"regression of 50% or more", heatStyle(stats.Worse, 50)},
			{"regression of 10%", heatStyle(stats.Worse, 10)},
			{"no significant change", heatStyle(stats.NoChange, 0)},
			{"improvement of 10%", heatStyle(stats.Better, 10)},
			{"improvement of 50% or more", heatStyle(stats.Better, 50)},
		},
	}
	page.Notes = tb.noteLines()
	for i, k := range tb.kernels {
		h := htmlHeader{Ref: textsafe.OneLine(k.Ref), Version: textsafe.OneLine(k.Version), Baseline: i == tb.base}
		if h.Version == "" {
			h.Version = textsafe.OneLine(k.Name)
		}
		page.Header = append(page.Header, h)
	}
	for _, r := range tb.rows {
		hr := htmlRow{Experiment: r.experiment, Name: r.name}
		for _, c := range r.cells {
			hc := newHTMLCell(c)
			if !c.baseline {
				hc.Style = heatStyle(c.verdict, c.pct)
			}
			hr.Cells = append(hr.Cells, hc)
		}
		page.Rows = append(page.Rows, hr)
	}
	page.references(m, tb.notes)
	for _, c := range m.Suites {
		page.Suites = append(page.Suites, render.HTMLItem{Text: suiteLine(c), Bad: c.Failed})
	}
	for _, s := range sortedSplats(m) {
		page.Splats = append(page.Splats, render.HTMLItem{Text: splatLine(s), Bad: s.New})
	}
	return render.WriteHTML(w, htmlTemplate, page, "html matrix report")
}

// newHTMLCell is a table cell's value, change, footnote mark, tooltip
// and link, uncoloured.
func newHTMLCell(c tableCell) htmlCell {
	hc := htmlCell{Value: c.value, Change: c.change, Detail: c.detail, Href: runLink(c.run)}
	if c.note > 0 {
		hc.Note = noteMark(c.note)
	}
	return hc
}

// references adds the references' section to the page: the table, each
// cell coloured by its verdict (see refStyle), its legend, footnotes and
// sources, and the experiments whose expectations get no verdict.
func (p *htmlPage) references(m *Matrix, notes *footnotes) {
	p.RefOther = refNoteLines(m)
	rt := newRefTable(m, notes)
	if len(rt.rows) == 0 {
		return
	}
	p.RefTitle, p.RefLegend, p.RefNotes, p.RefSources = refTitle, refLegend, rt.noteLines(), refSourceLines(m)
	for _, k := range rt.kernels {
		h := htmlHeader{Ref: textsafe.OneLine(k.Ref), Version: textsafe.OneLine(k.Version)}
		if h.Version == "" {
			h.Version = textsafe.OneLine(k.Name)
		}
		p.RefHeader = append(p.RefHeader, h)
	}
	for _, r := range rt.rows {
		hr := htmlRow{Experiment: r.experiment, Name: r.name}
		for _, c := range r.cells {
			hc := newHTMLCell(c)
			hc.Style = refStyle(c.ref, c.strict)
			hr.Cells = append(hr.Cells, hc)
		}
		p.RefRows = append(p.RefRows, hr)
	}
	p.RefSwatches = []htmlSwatch{
		{"reproduced", refStyle(reference.Reproduced, false)},
		{"n.s.", refStyle(reference.SameNotSignificant, false)},
		{"CONTRADICTED", refStyle(reference.Contradicted, false)},
		{"CONTRADICTED, strict: fails the matrix", refStyle(reference.Contradicted, true)},
		{"not comparable, not measured, no verdict", refStyle(reference.NotComparable, false)},
	}
}

// muted is the background of a reference's cell without a verdict that
// says anything: not comparable, not measured, or none.
var muted = rgb{0xe0, 0xe0, 0xe0}

// refStyle is the background of a reference's cell with verdict v:
// green when reproduced, orange when contradicted (red when the
// contradiction is strict), neutral when not significant, grey
// otherwise.
func refStyle(v reference.Verdict, strict bool) template.CSS {
	c := muted
	switch v {
	case reference.Reproduced:
		c = heatColor(stats.Better, heatCap/2)
	case reference.Contradicted:
		c = heatColor(stats.Worse, heatCap/2)
		if strict {
			c = worseDeep
		}
	case reference.SameNotSignificant, reference.OppositeNotSignificant:
		c = neutral
	}
	// Made of numbers only: nothing from the matrix gets into the CSS.
	return template.CSS(fmt.Sprintf("background-color: #%02x%02x%02x", c.r, c.g, c.b))
}

// htmlPage is what htmlTemplate shows; every string in it is escaped
// but the cells' styles.
type htmlPage struct {
	Title, Kernels, File, Legend string
	Header                       []htmlHeader
	Rows                         []htmlRow
	Swatches                     []htmlSwatch
	Notes                        []string
	// The references' section: RefRows under RefHeader, RefTitle above
	// them, RefLegend, RefSwatches, RefNotes and RefSources below, and
	// RefOther for the experiments whose expectations get no verdict.
	RefTitle, RefLegend            string
	RefHeader                      []htmlHeader
	RefRows                        []htmlRow
	RefSwatches                    []htmlSwatch
	RefNotes, RefSources, RefOther []string
	Suites, Splats                 []render.HTMLItem
	Skipped, Failures, Warnings    []string
	// Bisects are the commands that chase the new failures.
	Bisects []htmlBisect
	Passed  bool
	Result  string
}

// htmlHeader heads a kernel's column.
type htmlHeader struct {
	Ref, Version string
	Baseline     bool
}

// htmlRow is one row of the heat map.
type htmlRow struct {
	Experiment, Name string
	Cells            []htmlCell
}

// htmlCell is one cell of the heat map: the value (linking to Href when
// it is set), the change, the footnote mark, the tooltip and the
// background.
type htmlCell struct {
	Value, Change, Note, Detail, Href string
	Style                             template.CSS
}

// htmlSwatch shows one colour of the heat map in the legend.
type htmlSwatch struct {
	Text  string
	Style template.CSS
}

// rgb is a colour.
type rgb struct{ r, g, b uint8 }

// The heat map's colours: a significant change goes from the light
// colour (no change) to the deep one (a change of heatCap percent or
// more); no significant change is neutral.
var (
	betterLight = rgb{0xe8, 0xf5, 0xe9}
	betterDeep  = rgb{0x66, 0xbb, 0x6a}
	worseLight  = rgb{0xff, 0xf3, 0xe0}
	worseDeep   = rgb{0xef, 0x53, 0x50}
	neutral     = rgb{0xf5, 0xf5, 0xf5}
)

// heatCap is the change, in percent, that gets the deepest colour.
const heatCap = 50

// heatColor is the background of a cell whose change has verdict
// (stats.Better or stats.Worse when significant) and is pct percent.
func heatColor(verdict stats.Verdict, pct float64) rgb {
	t := math.Min(math.Abs(pct), heatCap) / heatCap
	if math.IsNaN(t) {
		t = 0
	}
	mix := func(a, b rgb) rgb {
		m := func(x, y uint8) uint8 { return uint8(math.Round(float64(x) + t*(float64(y)-float64(x)))) }
		return rgb{m(a.r, b.r), m(a.g, b.g), m(a.b, b.b)}
	}
	switch verdict {
	case stats.Better:
		return mix(betterLight, betterDeep)
	case stats.Worse:
		return mix(worseLight, worseDeep)
	}
	return neutral
}

// heatStyle is heatColor as a style attribute's value.
func heatStyle(verdict stats.Verdict, pct float64) template.CSS {
	c := heatColor(verdict, pct)
	// Made of numbers only: nothing from the matrix gets into the CSS.
	return template.CSS(fmt.Sprintf("background-color: #%02x%02x%02x", c.r, c.g, c.b))
}

// htmlTemplate is the page, with the sections render.HTMLTemplate
// adds. It has no script and loads nothing.
var htmlTemplate = render.HTMLTemplate("matrix", `{{template "head" .}}
<style>
body { font-family: sans-serif; margin: 1.5em auto; max-width: 90em; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
p.kernels { font-family: monospace; white-space: pre-wrap; }
div.scroll { overflow-x: auto; }
table { border-collapse: collapse; }
th, td { padding: 0.25em 0.7em; text-align: left; vertical-align: top; }
table.heat th, table.heat td { border: 1px solid #ddd; font-family: monospace; white-space: nowrap; }
table.heat thead th { text-align: right; vertical-align: bottom; }
table.heat td.cell { text-align: right; }
table.heat th.label { font-weight: normal; text-align: left; }
table.heat span.exp { color: #666; }
table.heat a { color: inherit; }
span.change { display: inline-block; min-width: 4.5em; }
span.sub { color: #666; font-weight: normal; font-size: 0.85em; }
table.legend td { font-size: 0.85em; border: 1px solid #ddd; }
ul { padding-left: 1.2em; }
li { font-family: monospace; margin: 0.15em 0; }
li.fail { color: #b71c1c; background: #ffebee; }
p.result { font-family: monospace; font-weight: bold; padding: 0.4em 0.7em; }
p.result.pass { background: #e8f5e9; color: #1b5e20; }
p.result.fail { background: #ffebee; color: #b71c1c; }
.note { color: #666; font-size: 0.9em; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="kernels">{{.Kernels}}</p>
<p class="note">{{.File}}</p>
{{template "result" .}}

<h2>Results</h2>
{{- if .Rows}}
<div class="scroll">
<table class="heat">
<thead><tr><th class="label">row</th>{{range .Header}}<th>{{.Ref}}{{if or .Version .Baseline}}<br><span class="sub">{{.Version}}{{if .Baseline}}{{if .Version}}, {{end}}baseline{{end}}</span>{{end}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr><th class="label"><span class="exp">{{.Experiment}}</span> {{.Name}}</th>
{{- range .Cells}}{{template "cell" .}}{{end}}</tr>
{{- end}}
</tbody>
</table>
</div>
{{- else}}
<p>no measurements</p>
{{- end}}
<p class="note">{{.Legend}}. Hover over a cell for its samples, intervals and p-value; a value links to its run's report.</p>
<table class="legend"><tr>
{{- range .Swatches}}<td style="{{.Style}}">{{.Text}}</td>{{end -}}
</tr></table>
{{- with .Notes}}
<ul>
{{- range .}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- if or .RefRows .RefOther}}

<h2>Against the reference</h2>
{{- if .RefRows}}
<p class="note">{{.RefTitle}}</p>
<div class="scroll">
<table class="heat">
<thead><tr><th class="label">row</th>{{range .RefHeader}}<th>{{.Ref}}{{with .Version}}<br><span class="sub">{{.}}</span>{{end}}</th>{{end}}</tr></thead>
<tbody>
{{- range .RefRows}}
<tr><th class="label"><span class="exp">{{.Experiment}}</span> {{.Name}}</th>
{{- range .Cells}}{{template "cell" .}}{{end}}</tr>
{{- end}}
</tbody>
</table>
</div>
<p class="note">{{.RefLegend}}. Hover over a cell for its change, p-value and verdict in full; a value links to its run's report.</p>
<table class="legend"><tr>
{{- range .RefSwatches}}<td style="{{.Style}}">{{.Text}}</td>{{end -}}
</tr></table>
{{- with .RefNotes}}
<ul>
{{- range .}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
<p class="note">Sources:</p>
<ul>
{{- range .RefSources}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- with .RefOther}}
<ul>
{{- range .}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- end}}
{{- with .Suites}}

<h2>Test suites</h2>
<ul>
{{- range .}}
<li{{if .Bad}} class="fail"{{end}}>{{.Text}}</li>
{{- end}}
</ul>
{{- end}}

{{template "splats" .Splats}}
{{- template "skipped" .Skipped}}
{{- with .Failures}}

<h2>Failures</h2>
<ul>
{{- range .}}
<li class="fail">{{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- with .Bisects}}

<h2>Find the commit</h2>
<p class="note">`+bisectTitle+`</p>
{{- range .}}
<p>{{.What}}</p>
<pre>{{.Command}}</pre>
{{- end}}
{{- end}}
{{- template "warnings" .Warnings}}

{{template "result" .}}
</body>
</html>
{{define "cell"}}<td class="cell"{{with .Style}} style="{{.}}"{{end}} title="{{.Detail}}">{{if .Href}}<a href="{{.Href}}">{{.Value}}</a>{{else}}{{.Value}}{{end}} <span class="change">{{.Change}}{{with .Note}} <sup>{{.}}</sup>{{end}}</span></td>{{end}}`)

// htmlBisect is a command that chases a new failure, and what it
// chases.
type htmlBisect struct {
	What, Command string
}

func htmlBisects(m *Matrix) []htmlBisect {
	var out []htmlBisect
	for _, b := range m.Bisects {
		out = append(out, htmlBisect{
			What:    fmt.Sprintf("%s on %s: %s", textsafe.OneLine(b.Experiment), textsafe.OneLine(b.Kernel), textsafe.OneLine(b.Failure)),
			Command: strings.Join(shellLines(b.Argv, "", TextWidth), "\n"),
		})
	}
	return out
}
