package bisectreport

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"path"
	"path/filepath"
	"strings"

	"klab/results/internal/render"
)

// HTML writes r as one self-contained HTML page (no scripts, no
// external assets): the result, the author, the evidence with its
// excerpt, what was bisected, a chart of the metric's row per step for
// a metric bisection (each step's median with its 95% CI and samples,
// against the endpoints' medians), and the step table, each step
// linking to its experiment run's report. Every string from the
// bisection is escaped.
func HTML(w io.Writer, r *Report) error {
	p := htmlPage{
		Title:      "bisect " + one(r.Experiment),
		Result:     resultLine(r),
		Found:      r.Found,
		Candidates: candidateLines(r),
		Author:     authorLines(r),
		Evidence:   evidenceLine(r),
		Detail:     evidenceDetail(r.Evidence),
		Context:    contextLines(r),
		Chart:      metricSVG(r),
	}
	for _, s := range r.Steps {
		c := stepCells(s, 80, 400)
		row := htmlStep{Cells: c, Class: s.Verdict}
		if len(s.Runs) > 0 && runLink(s.Runs[0]) {
			row.Link = path.Join(filepath.ToSlash(s.Runs[0]), "report.html")
		}
		p.Steps = append(p.Steps, row)
	}
	return render.WriteHTML(w, htmlTemplate, p, "html bisection report")
}

// runLink reports whether run is a plain relative path, safe to link.
func runLink(run string) bool {
	return filepath.IsLocal(run) && !strings.ContainsAny(run, "\\:?#%")
}

type htmlPage struct {
	Title, Result string
	Found         bool
	Candidates    []string
	Author        []string
	Evidence      string
	Detail        string
	Context       []string
	Chart         template.HTML
	Steps         []htmlStep
}

type htmlStep struct {
	Cells []string
	Class string
	Link  string
}

var htmlTemplate = render.HTMLTemplate("bisect", `{{template "head" .}}
<style>
body { font-family: sans-serif; margin: 1.5em auto; max-width: 90em; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
p.result { font-family: monospace; font-weight: bold; padding: 0.4em 0.7em; background: #eef; }
p.result.found { background: #ffebee; color: #b71c1c; }
p.mono, li { font-family: monospace; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; }
table { border-collapse: collapse; }
th, td { padding: 0.25em 0.7em; text-align: left; vertical-align: top; border: 1px solid #ddd; font-family: monospace; }
tr.bad td { background: #ffebee; }
tr.good td { background: #e8f5e9; }
tr.skip td { color: #666; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="result{{if .Found}} found{{end}}">{{.Result}}</p>
{{- with .Candidates}}
<ul>
{{- range .}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- end}}
{{- range .Author}}
<p class="mono">{{.}}</p>
{{- end}}
{{- if .Evidence}}
<p class="mono">{{.Evidence}}</p>
{{- with .Detail}}
<pre>{{.}}</pre>
{{- end}}
{{- end}}

<h2>Bisection</h2>
<ul>
{{- range .Context}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- with .Chart}}

<h2>Metric per step</h2>
{{.}}
{{- end}}

<h2>Steps</h2>
<table>
<thead><tr><th>step</th><th>commit</th><th>subject</th><th>verdict</th><th>build</th><th>reason</th><th>report</th></tr></thead>
<tbody>
{{- range .Steps}}
<tr class="{{.Class}}">{{range .Cells}}<td>{{.}}</td>{{end}}<td>{{with .Link}}<a href="{{.}}">run</a>{{end}}</td></tr>
{{- end}}
</tbody>
</table>
</body>
</html>
`)

// The chart's size and margins, in pixels.
const (
	svgW, svgH         = 720, 260
	svgLeft, svgRight  = 90, 20
	svgTop, svgBottom  = 20, 40
	svgSampleR, svgMed = 2.5, 5
)

// verdictColor is a step's colour by verdict.
var verdictColor = map[string]string{"good": "#2e7d32", "bad": "#c62828", "skip": "#9e9e9e"}

// metricSVG draws the metric's row per step, in the order tested: each
// step's samples as small dots, its median as a larger one with its 95%
// CI as a whisker, coloured by verdict, and the endpoints' medians as
// dashed lines across. Empty when no step has the metric.
func metricSVG(r *Report) template.HTML {
	var steps []Step
	for _, s := range r.Steps {
		if s.Metric != nil && s.Metric.N > 0 {
			steps = append(steps, s)
		}
	}
	if len(steps) == 0 {
		return ""
	}
	unit := ""
	if r.Separation != nil {
		unit = r.Separation.Unit
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	extend := func(v float64) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	for _, s := range steps {
		for _, v := range s.Metric.Values {
			extend(v)
		}
		if s.Metric.Lo != nil && s.Metric.Hi != nil {
			extend(*s.Metric.Lo)
			extend(*s.Metric.Hi)
		}
	}
	if math.IsInf(lo, 0) {
		return ""
	}
	if hi == lo {
		hi, lo = hi+1, lo-1
	}
	pad := (hi - lo) * 0.08
	lo, hi = lo-pad, hi+pad
	plotW, plotH := float64(svgW-svgLeft-svgRight), float64(svgH-svgTop-svgBottom)
	y := func(v float64) float64 { return float64(svgTop) + plotH*(hi-v)/(hi-lo) }
	x := func(i int) float64 { return float64(svgLeft) + plotW*(float64(i)+0.5)/float64(len(steps)) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`, svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#ccc"/>`, svgLeft, svgTop, plotW, plotH)
	for i := 0; i <= 4; i++ {
		v := lo + (hi-lo)*float64(i)/4
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, svgLeft-6, y(v)+4, html.EscapeString(FmtValue(v, unit)))
	}
	if sep := r.Separation; sep != nil {
		for _, e := range []struct {
			name string
			v    float64
		}{{"good", sep.Good.Median}, {"bad", sep.Bad.Median}} {
			if e.v < lo || e.v > hi {
				continue
			}
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="5,4"/>`, svgLeft, svgW-svgRight, y(e.v), y(e.v), verdictColor[e.name])
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="%s">%s</text>`, svgW-svgRight-4, y(e.v)-4, verdictColor[e.name], e.name)
		}
	}
	for i, s := range steps {
		col := verdictColor[s.Verdict]
		if col == "" {
			col = "#555"
		}
		for j, v := range s.Metric.Values {
			dx := (float64(j)/math.Max(1, float64(len(s.Metric.Values)-1)) - 0.5) * 16
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="%g" fill="%s" fill-opacity="0.45"/>`, x(i)-14+dx, y(v), svgSampleR, col)
		}
		if s.Metric.Lo != nil && s.Metric.Hi != nil {
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s"/>`, x(i)+8, x(i)+8, y(*s.Metric.Lo), y(*s.Metric.Hi), col)
		}
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="%g" fill="%s"><title>%s %s: median %s, n=%d, %s</title></circle>`, x(i)+8, y(s.Metric.Median), float64(svgMed), col,
			html.EscapeString(s.Label), html.EscapeString(short(s.Commit)), html.EscapeString(FmtValue(s.Metric.Median, unit)), s.Metric.N, html.EscapeString(s.Verdict))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x(i), svgH-svgBottom+16, html.EscapeString(s.Label))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#666">%s</text>`, x(i), svgH-svgBottom+30, html.EscapeString(short(s.Commit)[:min(7, len(short(s.Commit)))]))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
