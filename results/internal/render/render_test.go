package render

import (
	"bytes"
	"encoding/xml"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"klab/results/stats"
)

func TestFmtValue(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		v    float64
		unit string
		want string
	}{
		{12345, "ops/s", "12.3k ops/s"},
		{1050, "ops/s", "1.05k ops/s"},
		{1.5e6, "ops/s", "1.50M ops/s"},
		{2e9, "ops/s", "2.00G ops/s"},
		{4e12, "ops/s", "4.00T ops/s"},
		{950, "ops/s", "950 ops/s"},
		{0, "ops/s", "0 ops/s"},
		{-1500, "ops/s", "-1.50k ops/s"},
		{512 << 20, "B/s", "512 MiB/s"},
		{35 * mib, "B/s", "35.0 MiB/s"},
		{1.5e9, "B/s", "1.40 GiB/s"},
		{800, "B/s", "800 B/s"},
		{2048, "MiB/s", "2.00 GiB/s"},
		{512, "MiB/s", "512 MiB/s"},
		{950, "ns", "950 ns"},
		{1250, "ns", "1.25 us"},
		{1250000, "ns", "1.25 ms"},
		{2.5e6, "ns", "2.50 ms"},
		{3e9, "ns", "3.00 s"},
		{1500, "ns/op", "1.50 us/op"},
		{0.25, "ms", "250 us"},
		{2, "µs", "2.00 us"},
		{0, "μs/op", "0 us/op"},
		{12.5, "%", "12.5%"},
		{12, "%", "12.0%"},
		{0.123, "", "0.123"},
		{0.5, "", "0.5"},
		{math.NaN(), "ops/s", "n/a"},
		{math.Inf(1), "ns", "n/a"},
	} {
		if got := FmtValue(tc.v, tc.unit); got != tc.want {
			t.Errorf("FmtValue(%v, %q) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
}

func TestScaleFor(t *testing.T) {
	for _, tc := range []struct {
		mag        float64
		unit, axis string
		div        float64
	}{
		{12345, "ops/s", "thousand ops/s", 1e3},
		{3e6, "ops/s", "million ops/s", 1e6},
		{5, "ops/s", "ops/s", 1},
		{3 << 20, "B/s", "MiB/s", 1 << 20},
		{2.5e6, "ns", "ms", 1e6},
		{0, "", "", 1},
	} {
		s := ScaleFor(tc.mag, tc.unit)
		if got := s.AxisLabel(); got != tc.axis || s.Div != tc.div {
			t.Errorf("ScaleFor(%v, %q): axis %q, div %v; want %q, %v", tc.mag, tc.unit, got, s.Div, tc.axis, tc.div)
		}
	}
}

func TestFmtChange(t *testing.T) {
	lo, hi, small := -3.04, 20.4, 9.96
	for _, tc := range []struct {
		c    stats.Change
		want string
	}{
		{stats.Change{PctLo: &lo, PctHi: &hi}, "[-3.0% +20%]"},
		{stats.Change{PctLo: &small, PctHi: &hi}, "[+10.0% +20%]"},
		{stats.Change{PctLo: &lo}, ""},
		{stats.Change{}, ""},
	} {
		if got := FmtCI(tc.c); got != tc.want {
			t.Errorf("FmtCI(%+v) = %q, want %q", tc.c, got, tc.want)
		}
	}
	for p, want := range map[float64]string{0.0286: "p=0.029", 0.0009: "p<0.001", math.NaN(): "", 1: "p=1.000"} {
		if got := FmtP(p); got != want {
			t.Errorf("FmtP(%v) = %q, want %q", p, got, want)
		}
	}
	if got := FmtPct(12.345); got != "+12.3%" {
		t.Errorf("FmtPct(12.345) = %q", got)
	}
}

func TestJoinNonEmpty(t *testing.T) {
	if got, want := JoinNonEmpty(", ", "", "a", "", "b"), "a, b"; got != want {
		t.Errorf("JoinNonEmpty = %q, want %q", got, want)
	}
	if got := NonNil[int](nil); got == nil || len(got) != 0 {
		t.Errorf("NonNil(nil) = %#v", got)
	}
}

func TestTextWriter(t *testing.T) {
	tw := TextWriter{Width: 20}
	tw.Line("title")
	tw.Section(nil)
	tw.Section([]string{"  an indented line that is too long", "x\ty µs ±1\x1b"})
	tw.Blank()
	tw.Line(strings.Repeat("0123456789", 3) + " end")
	want := "title\n" +
		"\n" +
		"  an indented line\n" +
		"      that is too\n" +
		"      long\n" +
		"x       y us +-1\n" +
		"\n" +
		"01234567890123456789\n" +
		"    0123456789 end\n"
	if got := tw.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	var nowrap TextWriter
	long := strings.Repeat("word ", 40) + " "
	nowrap.Line(long + "\n")
	if got, want := nowrap.String(), strings.TrimRight(long, " ")+"\n\n"; got != want {
		t.Errorf("Width 0 wrote %q, want %q", got, want)
	}
}

func TestToASCII(t *testing.T) {
	if got, want := ToASCII("ünï “q” — 3 µs ± 1 → \u00a0\x7f\u202e"), "?n? \"q\" - 3 us +- 1 ->  "; got != want {
		t.Errorf("ToASCII = %q, want %q", got, want)
	}
	if got, want := ExpandTabs("ab\tc\t\td"), "ab      c               d"; got != want {
		t.Errorf("ExpandTabs = %q, want %q", got, want)
	}
}

// TestMarkdown: text shows as written, rendered or pasted: escaped only
// where Markdown would read markup, kernel references in code spans.
func TestMarkdown(t *testing.T) {
	pinned := "debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1"
	for _, c := range []struct{ in, want string }{
		// Kernel references: code spans, nothing escaped in them.
		{pinned, "`" + pinned + "`"},
		{"A: debian:7.3 (" + pinned + " 3f2a9c1b)", "A: `debian:7.3` (`" + pinned + "` 3f2a9c1b)"},
		{"new kernel splat in build:fix: x", "new kernel splat in `build:fix`: x"},
		{"on tree:~/linux, and build:a`b", "on `tree:~/linux`, and ``build:a`b``"},
		// What Markdown reads as plain text stays as it is.
		{"[+9.7% +15%] ~ p99_ns fuse_uring_cmd[31m", "[+9.7% +15%] ~ p99_ns fuse_uring_cmd[31m"},
		{"seed 000, passthrough_hp: ~245 -> ~237 MiB/s", "seed 000, passthrough_hp: ~245 -> ~237 MiB/s"},
		{"a|b a * b x* -12% 1.5 a & b <0.1% \\ ! end\\", "a|b a * b x* -12% 1.5 a & b <0.1% \\ ! end\\\\"},
		// Markup is escaped.
		{"<img src=x onerror=alert(1)> </b> <!-- <?x", "\\<img src=x onerror=alert(1)> \\</b> \\<!-- \\<?x"},
		{"*x* _u_ ~s~ a*b*c", "\\*x\\* \\_u\\_ \\~s\\~ a\\*b\\*c"},
		{"`c` &amp; &#38; [l](u) [r][x] [d]: u \\*", "\\`c\\` \\&amp; \\&#38; [l\\](u) [r\\][x] [d\\]: u \\\\*"},
		// Block markers at the start of a line.
		{"# h", "\\# h"}, {"> q", "\\> q"}, {"- x", "\\- x"}, {"+ x", "\\+ x"}, {"* x", "\\* x"},
		{"12. x", "12\\. x"}, {"3) x", "3\\) x"}, {"---", "\\---"}, {"~~~", "\\~\\~\\~"}, {"[ ] t", "\\[ ] t"},
		{"title #", "title \\#"}, {"#1 of 2", "\\#1 of 2"},
	} {
		if got := MDEscape(c.in); got != c.want {
			t.Errorf("MDEscape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"a|b", "a\\|b"}, {"build:a|b", "`build:a\\|b`"}, {"- x", "- x"}, {"~", "~"}, {"+12.0%*", "+12.0%*"},
	} {
		if got := MDCell(c.in); got != c.want {
			t.Errorf("MDCell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got, want := MDStrong("result: FAIL: x* y"), "**result: FAIL: x\\* y**"; got != want {
		t.Errorf("MDStrong = %q, want %q", got, want)
	}
	if got, want := MDParagraph("a ~b", "c~ d"), "a \\~b\\\nc\\~ d"; got != want {
		t.Errorf("MDParagraph = %q, want %q", got, want)
	}
	if got, want := MDCode("``x"), "``` ``x ```"; got != want {
		t.Errorf("MDCode = %q, want %q", got, want)
	}
	if got, want := MDTableRow([]string{"a|b", "", "c"}), "| a\\|b |  | c |\n"; got != want {
		t.Errorf("MDTableRow = %q, want %q", got, want)
	}
	var b strings.Builder
	MDList(&b, "Empty", nil)
	MDList(&b, "Items", []string{"one", "<two>", "- three"})
	if got, want := b.String(), "\n### Items\n\n- one\n- \\<two>\n- \\- three\n"; got != want {
		t.Errorf("MDList = %q, want %q", got, want)
	}
}

func TestJUnit(t *testing.T) {
	s := JUnitSuite{Name: "s", Time: JUnitTime(1.5), Properties: []JUnitProperty{{"k", "v"}}}
	s.Add(JUnitCase{Classname: "c", Name: "pass", Time: JUnitTime(0)})
	s.Add(JUnitCase{Classname: "c", Name: "fail", Time: JUnitTime(0), Failure: &JUnitFailure{Message: "m", Type: "t", Text: "<x>"}})
	s.Add(JUnitCase{Classname: "c", Name: "skip", Time: JUnitTime(0), Skipped: &JUnitSkipped{Message: "why"}})
	if s.Tests != 3 || s.Failures != 1 || s.Skipped != 1 {
		t.Errorf("counts: %d tests, %d failures, %d skipped; want 3, 1, 1", s.Tests, s.Failures, s.Skipped)
	}
	var b bytes.Buffer
	if err := WriteJUnit(&b, JUnitSuites{Name: "n", Tests: s.Tests, Time: s.Time, Suites: []JUnitSuite{s}}, "junit test"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	want := xml.Header + `<testsuites name="n" tests="3" failures="0" skipped="0" time="1.500">
  <testsuite name="s" tests="3" failures="1" errors="0" skipped="1" time="1.500">
    <properties>
      <property name="k" value="v"></property>
    </properties>
    <testcase classname="c" name="pass" time="0.000"></testcase>
    <testcase classname="c" name="fail" time="0.000">
      <failure message="m" type="t">&lt;x&gt;</failure>
    </testcase>
    <testcase classname="c" name="skip" time="0.000">
      <skipped message="why"></skipped>
    </testcase>
  </testsuite>
</testsuites>
`
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	if err := WriteJUnit(failWriter{}, JUnitSuites{}, "junit test"); err == nil || !strings.HasPrefix(err.Error(), "writing junit test: ") {
		t.Errorf("a failing writer: %v", err)
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space") }

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	v := struct {
		A []int `json:"a"`
		B string
	}{A: NonNil[int](nil), B: "<x>"}
	if err := WriteJSON(&b, v, "test doc"); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "{\n  \"a\": [],\n  \"B\": \"\\u003cx\\u003e\"\n}\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := WriteJSON(&b, math.NaN(), "test doc"); err == nil || !strings.HasPrefix(err.Error(), "encoding test doc: ") {
		t.Errorf("NaN: %v", err)
	}
	if err := WriteJSON(failWriter{}, 1, "test doc"); err == nil || !strings.HasPrefix(err.Error(), "writing json test doc: ") {
		t.Errorf("a failing writer: %v", err)
	}
}

func TestHTMLTemplate(t *testing.T) {
	page := HTMLTemplate("test", `{{template "head" .}}
</head>
<body>
{{template "result" .}}
{{- template "skipped" .Skipped}}

{{template "splats" .Splats}}
{{- template "warnings" .Warnings}}
</body>`)
	type data struct {
		Title             string
		Passed            bool
		Result            string
		Skipped, Warnings []string
		Splats            []HTMLItem
	}
	for _, tc := range []struct {
		d    data
		want string
	}{
		{data{Title: "t", Passed: true, Result: "result: PASS"}, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>klab: t</title>
</head>
<body>
<p class="result pass">result: PASS</p>

<h2>Kernel splats</h2>
<p>no kernel splats</p>
</body>`},
		{data{Title: "<t>", Result: "<b>", Skipped: []string{"s&"}, Warnings: []string{"w"}, Splats: []HTMLItem{{Text: "new"}, {Text: "old", Bad: true}}}, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>klab: &lt;t&gt;</title>
</head>
<body>
<p class="result fail">&lt;b&gt;</p>

<h2>Skipped cells</h2>
<ul>
<li>s&amp;</li>
</ul>

<h2>Kernel splats</h2>
<ul>
<li>new</li>
<li class="fail">old</li>
</ul>

<h2>Warnings</h2>
<ul>
<li>warning: w</li>
</ul>
</body>`},
	} {
		var b bytes.Buffer
		if err := WriteHTML(&b, page, tc.d, "test page"); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); got != tc.want {
			t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
		}
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, page, 1, "test page"); err == nil || !strings.HasPrefix(err.Error(), "rendering test page: ") || b.Len() != 0 {
		t.Errorf("bad data: %v, wrote %q", err, b.String())
	}
	if err := WriteHTML(failWriter{}, page, data{}, "test page"); err == nil || !strings.HasPrefix(err.Error(), "writing test page: ") {
		t.Errorf("a failing writer: %v", err)
	}
}

// TestWrapPhrases: lines break between phrases only; a phrase wider
// than a line breaks at its spaces, a word never.
func TestWrapPhrases(t *testing.T) {
	env := []string{"accel tcg (icount shift=0,sleep=off),", "host 6.1.0-18-amd64 AMD EPYC 7B13,", "qemu 7.2.17,", "2 vCPUs,", "1024 MiB,", "5 rounds (abba, fresh)"}
	pinned := "debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1"
	for _, c := range []struct {
		name    string
		phrases []string
		width   int
		want    []string
	}{
		{"fits", []string{"a,", "b,", "c"}, 72, []string{"a, b, c"}},
		{"env", env, 72, []string{
			"accel tcg (icount shift=0,sleep=off), host 6.1.0-18-amd64 AMD EPYC 7B13,",
			"    qemu 7.2.17, 2 vCPUs, 1024 MiB, 5 rounds (abba, fresh)"}},
		{"sides", []string{"A: debian:7.3 (" + pinned + " 3f2a9c1b)  ", "B: build:fix (fix 6.12.43-g1a2b3c4 9b8c7d6e)"}, 72, []string{
			"A: debian:7.3 (" + pinned + " 3f2a9c1b)",
			"    B: build:fix (fix 6.12.43-g1a2b3c4 9b8c7d6e)"}},
		{"long phrase", []string{"A: debian:7.3 (" + pinned + " 7.3.4+deb13-cloud-amd64 3f2a9c1b)"}, 72, []string{
			"A: debian:7.3 (" + pinned + "",
			"    7.3.4+deb13-cloud-amd64 3f2a9c1b)"}},
		{"long word", []string{"x", pinned + pinned, "y"}, 40, []string{"x", "    " + pinned + pinned, "    y"}},
		{"n=5", []string{"seqwrite:", "n.s.:", "cannot be significant with", "n=5", "per side"}, 36, []string{
			"seqwrite: n.s.:", "    cannot be significant with n=5", "    per side"}},
		{"ascii", []string{"within ±10%"}, 72, []string{"within +-10%"}},
	} {
		got := WrapPhrases(c.phrases, c.width, "    ")
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
		for _, l := range got {
			if len(l) > c.width && !strings.Contains(l, pinned+pinned) {
				t.Errorf("%s: line %q wider than %d", c.name, l, c.width)
			}
		}
	}
}
