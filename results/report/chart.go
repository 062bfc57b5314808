package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"klab/internal/textsafe"
	"klab/results/internal/render"
	"klab/results/stats"
)

// The size of a row's chart.
const (
	chartWidth  = 4 * vg.Inch
	chartHeight = 3 * vg.Inch
)

// Where a side's glyphs go, relative to the side's position on the X
// axis: the samples spread over sampleSpread around sampleX, in
// measurement order from left to right; the median at medianX.
const (
	sampleX      = -0.1
	sampleSpread = 0.24
	medianX      = 0.22
)

// sideColors are A's and B's colours; samples are drawn translucent
// (sampleAlpha) so that equal samples show darker.
var sideColors = [2]color.NRGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	{R: 0xd6, G: 0x5f, B: 0x00, A: 0xff},
}

const sampleAlpha = 0x99

// chartSVG draws a row's two sides as an inline <svg> element: each
// sample as a dot, the median as a square with its 95% confidence
// interval as whiskers (just the square when the interval is unknown).
// The Y axis is in the row's unit, scaled to the values ("MiB/s",
// "thousand ops/s").
func chartSVG(r *Report, row Row) (template.HTML, error) {
	sides := [2]stats.Summary{row.A, row.B}
	lo, hi := math.Inf(1), math.Inf(-1)
	extend := func(v float64) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	for _, s := range sides {
		extend(s.Median)
		for _, v := range s.Values {
			extend(v)
		}
		if s.Lo != nil && s.Hi != nil {
			extend(*s.Lo)
			extend(*s.Hi)
		}
	}
	if lo > hi {
		lo, hi = 0, 1
	}
	sc := render.ScaleFor(math.Max(math.Abs(lo), math.Abs(hi)), row.Unit)

	p := plot.New()
	p.Title.Text = textsafe.OneLine(row.Name)
	p.Y.Label.Text = sc.AxisLabel()
	if p.Y.Label.Text == "" {
		p.Y.Label.Text = textsafe.OneLine(row.Metric)
	}
	p.X.Label.Text = textsafe.OneLine(r.Axis)
	p.NominalX(chartLabel("A", r.A), chartLabel("B", r.B))
	p.X.Min, p.X.Max = -0.6, 1.6
	pad := (hi - lo) / 10
	if pad == 0 {
		pad = math.Max(math.Abs(hi)/20, 1e-9)
	}
	p.Y.Min, p.Y.Max = (lo-pad)/sc.Div, (hi+pad)/sc.Div

	for i, s := range sides {
		x := float64(i)
		col := sideColors[i]
		var samples plotter.XYs
		for j, v := range s.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			dx := 0.0
			if n := len(s.Values); n > 1 {
				dx = sampleSpread * (float64(j)/float64(n-1) - 0.5)
			}
			samples = append(samples, plotter.XY{X: x + sampleX + dx, Y: v / sc.Div})
		}
		if len(samples) > 0 {
			dots, err := plotter.NewScatter(samples)
			if err != nil {
				return "", fmt.Errorf("charting samples of %s: %w", row.Name, err)
			}
			light := col
			light.A = sampleAlpha
			dots.GlyphStyle = draw.GlyphStyle{Shape: draw.CircleGlyph{}, Radius: vg.Points(3), Color: light}
			p.Add(dots)
		}
		if s.N == 0 || math.IsNaN(s.Median) || math.IsInf(s.Median, 0) {
			continue
		}
		m := plotter.XYs{{X: x + medianX, Y: s.Median / sc.Div}}
		if s.Lo != nil && s.Hi != nil {
			bars, err := plotter.NewYErrorBars(ciPoint{m, plotter.YErrors{{Low: (s.Median - *s.Lo) / sc.Div, High: (*s.Hi - s.Median) / sc.Div}}})
			if err != nil {
				return "", fmt.Errorf("charting the interval of %s: %w", row.Name, err)
			}
			bars.LineStyle.Color = col
			bars.LineStyle.Width = vg.Points(1.5)
			p.Add(bars)
		}
		median, err := plotter.NewScatter(m)
		if err != nil {
			return "", fmt.Errorf("charting the median of %s: %w", row.Name, err)
		}
		median.GlyphStyle = draw.GlyphStyle{Shape: draw.BoxGlyph{}, Radius: vg.Points(4), Color: col}
		p.Add(median)
	}

	c := vgsvg.New(chartWidth, chartHeight)
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", fmt.Errorf("writing the chart of %s: %w", row.Name, err)
	}
	svg := b.String()
	start := strings.Index(svg, "<svg")
	if start < 0 {
		return "", fmt.Errorf("chart of %s: no <svg> element", row.Name)
	}
	// The SVG is klab's own drawing; its only text (title, labels) was
	// escaped by vgsvg.
	return template.HTML(strings.TrimSpace(svg[start:])), nil
}

// ciPoint is a median with its confidence interval, for YErrorBars.
type ciPoint struct {
	plotter.XYs
	plotter.YErrors
}

// chartLabel labels a side on the X axis: "A: label", shortened.
func chartLabel(name string, s Side) string {
	const maxLen = 24
	l := []rune(textsafe.OneLine(s.Label))
	if len(l) > maxLen {
		l = append(l[:maxLen-1], '…')
	}
	return name + ": " + string(l)
}
