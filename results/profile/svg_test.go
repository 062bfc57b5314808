package profile

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
)

// checkXML fails unless b is one well-formed <svg> element.
func checkXML(t testing.TB, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, b)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
				if tok.Name.Local != "svg" {
					t.Fatalf("root element %q", tok.Name.Local)
				}
			}
			switch tok.Name.Local {
			case "svg", "g", "title", "rect", "text":
			default:
				t.Fatalf("unexpected element %q", tok.Name.Local)
			}
			for _, a := range tok.Attr {
				if strings.Contains(strings.ToLower(a.Name.Local), "href") || strings.HasPrefix(strings.ToLower(a.Name.Local), "on") {
					t.Fatalf("attribute %q", a.Name.Local)
				}
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.ProcInst, xml.Directive:
			t.Fatalf("unexpected %T", tok)
		}
	}
	if roots != 1 {
		t.Fatalf("%d root elements", roots)
	}
}

// icicle draws p with o and checks the output is well-formed.
func icicle(t testing.TB, p *Profile, o IcicleOptions) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Icicle(&buf, p, o); err != nil {
		t.Fatal(err)
	}
	checkXML(t, buf.Bytes())
	return buf.String()
}

// frame is one drawn frame of an icicle chart.
type frame struct {
	tooltip string
	x, y, w string
	fill    string
	label   string
}

var frameRE = regexp.MustCompile(`<g><title>([^<]*)</title><rect x="([^"]*)" y="([^"]*)" width="([^"]*)" height="15" fill="([^"]*)"/>(?:<text [^>]*>([^<]*)</text>)?</g>`)

// frames returns the frames of an icicle chart, in drawing order.
func frames(svg string) []frame {
	var out []frame
	for _, m := range frameRE.FindAllStringSubmatch(svg, -1) {
		out = append(out, frame{tooltip: m[1], x: m[2], y: m[3], w: m[4], fill: m[5], label: m[6]})
	}
	return out
}

func TestIcicleLayout(t *testing.T) {
	p := profileOf(
		"sh;main;b", 30,
		"sh;main;a", 10,
		"sh;main;a", 10, // merged with the above
		"sh;main", 20,
		"cc;main;c", 30,
	)
	svg := icicle(t, p, IcicleOptions{Width: 1020, Title: "T"})
	got := frames(svg)
	want := []frame{
		{"all: 100 samples (100.0%)", "10", "28", "1000", "#c8c8c8", "all"},
		{"cc: 30 samples (30.0%)", "10", "44", "300", "", "cc"},
		{"main: 30 samples (30.0%)", "10", "60", "300", "", "main"},
		{"c: 30 samples (30.0%)", "10", "76", "300", "", "c"},
		{"sh: 70 samples (70.0%)", "310", "44", "700", "", "sh"},
		{"main: 70 samples (70.0%)", "310", "60", "700", "", "main"},
		{"a: 20 samples (20.0%)", "310", "76", "200", "", "a"},
		{"b: 30 samples (30.0%)", "510", "76", "300", "", "b"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d frames, want %d:\n%s", len(got), len(want), svg)
	}
	for i := range want {
		g, w := got[i], want[i]
		if w.fill == "" {
			w.fill = g.fill
		}
		if g != w {
			t.Errorf("frame %d: %+v, want %+v", i, g, w)
		}
	}
	if !strings.HasPrefix(svg, `<svg xmlns="http://www.w3.org/2000/svg" width="1020" height="102"`) {
		t.Errorf("header: %.100s", svg)
	}
	if !strings.Contains(svg, `>T</text>`) {
		t.Error("no title")
	}
	// The same function has the same colour everywhere.
	if got[2].fill != got[5].fill || got[2].fill == got[3].fill {
		t.Errorf("colours of main %s, %s, of c %s", got[2].fill, got[5].fill, got[3].fill)
	}
	// The output is deterministic.
	if again := icicle(t, p, IcicleOptions{Width: 1020, Title: "T"}); again != svg {
		t.Error("output differs between runs")
	}
}

func TestIcicleEscapes(t *testing.T) {
	// Stacks set directly, not sanitized by Add.
	p := &Profile{Stacks: map[string]int64{
		"sh;<script>alert(1)</script>;a&b\"c'd": 5,
		"sh;ctl\x01\x1b[31m\u0085x;\xff\xfe":    5,
	}}
	svg := icicle(t, p, IcicleOptions{Title: "<b>title</b>\x00", Width: 2000})
	for _, bad := range []string{"<script", "<b>", "\x00", "\x01", "\x1b", "\u0085", "\xff"} {
		if strings.Contains(svg, bad) {
			t.Errorf("output holds %q", bad)
		}
	}
	for _, good := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;: 5 samples (50.0%)",
		"a&amp;b&#34;c&#39;d: 5 samples (50.0%)",
		"ctl[31mx: 5 samples (50.0%)",
		"\ufffd\ufffd: 5 samples (50.0%)",
		"&lt;b&gt;title&lt;/b&gt;</text>",
	} {
		if !strings.Contains(svg, good) {
			t.Errorf("output lacks %q", good)
		}
	}
}

func TestIcicleMinFrac(t *testing.T) {
	p := profileOf("p;big", 9990, "p;small;under", 10) // small is 0.1%
	svg := icicle(t, p, IcicleOptions{})
	if strings.Contains(svg, "small") || strings.Contains(svg, "under") {
		t.Error("default MinFrac draws a frame of 0.1%")
	}
	if !strings.Contains(svg, "big: 9990 samples (99.9%)") {
		t.Error("no tooltip for big")
	}
	svg = icicle(t, p, IcicleOptions{MinFrac: 0.0005})
	if !strings.Contains(svg, "small: 10 samples (0.1%)") || !strings.Contains(svg, "under: 10 samples (0.1%)") {
		t.Error("MinFrac 0.0005 leaves out a frame of 0.1%")
	}
	// The number of frames per row is bounded by 1/MinFrac.
	q := New()
	for i := range 10000 {
		q.Add("p;f"+strings.Repeat("x", i%50)+string(rune('a'+i%26))+";g", 1)
	}
	n := len(frames(icicle(t, q, IcicleOptions{MinFrac: 0.01})))
	if n > 2+2*100 {
		t.Errorf("%d frames with MinFrac 0.01", n)
	}
}

func TestIcicleMaxDepth(t *testing.T) {
	p := profileOf("p;a;b;c;d;e", 1)
	got := frames(icicle(t, p, IcicleOptions{MaxDepth: 3}))
	if len(got) != 4 || got[3].tooltip != "b: 1 samples (100.0%)" {
		t.Errorf("MaxDepth 3: %+v", got)
	}
	if got := frames(icicle(t, p, IcicleOptions{})); len(got) != 7 {
		t.Errorf("default MaxDepth: %d frames, want 7", len(got))
	}
}

func TestIcicleLabels(t *testing.T) {
	long := "a_very_long_function_name_that_does_not_fit"
	p := profileOf("p;"+long, 50, "p;ééééééééééé", 48, "p;xy", 2)
	got := frames(icicle(t, p, IcicleOptions{Width: 220})) // 2 pixels a sample
	labels := map[string]string{}
	for _, f := range got {
		name, _, _ := strings.Cut(f.tooltip, ":")
		labels[name] = f.label
	}
	// 100 pixels: (100-3)/7 = 13 characters; 96 pixels: 13; 4 pixels: none.
	want := map[string]string{
		"all":         "all",
		"p":           "p",
		long:          "a_very_long..",
		"ééééééééééé": "ééééééééééé",
		"xy":          "",
	}
	for name, w := range want {
		if g, ok := labels[name]; !ok || g != w {
			t.Errorf("label of %s: %q, want %q", name, g, w)
		}
	}
}

func TestIcicleHighlight(t *testing.T) {
	p := profileOf("p;hot;cold", 1)
	got := frames(icicle(t, p, IcicleOptions{Highlight: []string{"hot"}}))
	blue := regexp.MustCompile(`^#[0-5][0-9a-f][6-9ab][0-9a-f][d-f][0-9a-f]$`)
	warm := regexp.MustCompile(`^#[c-f][0-9a-f][0-9a-f]{2}[0-3][0-9a-f]$`)
	if len(got) != 4 || !blue.MatchString(got[2].fill) || !warm.MatchString(got[3].fill) || !warm.MatchString(got[1].fill) {
		t.Errorf("colours: %+v", got)
	}
}

func TestIcicleEmpty(t *testing.T) {
	for _, p := range []*Profile{nil, New()} {
		svg := icicle(t, p, IcicleOptions{Title: "empty"})
		if !strings.Contains(svg, "no samples") || len(frames(svg)) != 0 {
			t.Errorf("empty profile:\n%s", svg)
		}
	}
}

func TestIcicleWriteError(t *testing.T) {
	boom := errors.New("boom")
	if err := Icicle(errWriter{boom}, profileOf("a;b", 1), IcicleOptions{}); !errors.Is(err, boom) {
		t.Errorf("error %v, want %v", err, boom)
	}
}

func TestIcicleCompact(t *testing.T) {
	p := profileOf("p;a", 1, "p;b", 2)
	svg := icicle(t, p, IcicleOptions{Width: 1000})
	if m := regexp.MustCompile(`="-?[0-9]+\.[0-9]{2,}`).FindString(svg); m != "" {
		t.Errorf("coordinate with more than one decimal: %s", m)
	}
	if !strings.Contains(svg, `width="326.7"`) {
		t.Errorf("a third of 980 pixels is not 326.7:\n%s", svg)
	}
}

func BenchmarkIcicle(b *testing.B) {
	p := benchProfile(4000)
	b.ReportAllocs()
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := Icicle(&buf, p, IcicleOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "bytes")
}
