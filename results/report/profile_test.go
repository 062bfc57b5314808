package report

import (
	"regexp"
	"strings"
	"testing"
)

// profiled is testReport with one profile comparison.
func profiled(t *testing.T) *Report {
	r := testReport(t)
	r.Profiles = []Profile{{
		Row: "futimes threads=4", Event: "cpu-clock", SamplesA: 6000, SamplesB: 5990, IdleA: 0.412, IdleB: 0.4081,
		Functions: []FuncShare{{Func: "do_writev", A: 0.201, B: 0.1824, SelfA: 0, SelfB: 0.001}},
		Changed: []FuncShare{
			{Func: "queued_spin_lock_slowpath", A: 0.031, B: 0.08, SelfA: 0.031, SelfB: 0.08},
			{Func: "do_writev", A: 0.201, B: 0.1824},
			{Func: "<script>x</script>", A: 0.02, B: 0.01},
		},
		IcicleA: `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>`,
	}}
	return r
}

func TestProfileSections(t *testing.T) {
	r := profiled(t)
	text := renderAs(t, "text", r)
	for _, w := range []string{
		"profile of futimes threads=4 (cpu-clock; samples: A 6000, B 5990; idle: A 41.2%, B 40.8%), share of\n    busy samples with callees:",
		"do_writev                    20.1%  18.2%  -1.9 pt    0.0%    0.1%",
		"queued_spin_lock_slowpath *   3.1%   8.0%  +4.9 pt    3.1%    8.0%",
		profileNote,
	} {
		if !strings.Contains(text, w) {
			t.Errorf("text: no %q in\n%s", w, text)
		}
	}
	// do_writev is named, so it is not listed again among the changed.
	if n := strings.Count(text, "do_writev"); n != 1 {
		t.Errorf("text: do_writev %d times, want once", n)
	}
	md := renderAs(t, "md", r)
	for _, w := range []string{
		"| function | A | B | B-A | self A | self B |",
		"|:---|---:|---:|---:|---:|---:|",
		`| do_writev | 20.1% | 18.2% | -1.9 pt | 0.0% | 0.1% |`,
		"profile of futimes threads=4 (cpu-clock; samples: A 6000, B 5990; idle: A 41.2%, B 40.8%), share of busy samples with callees:",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("markdown: no %q in\n%s", w, md)
		}
	}
	if regexp.MustCompile(`(^|[^\\])<script>`).MatchString(md) {
		t.Errorf("markdown: a function name's HTML is not escaped")
	}
	page := renderAs(t, "html", r)
	checkTags(t, page)
	checkSafe(t, page)
	for _, w := range []string{
		"<h2>Profiles</h2>",
		`<td>queued_spin_lock_slowpath *</td><td class="right">3.1%</td>`,
		"<figcaption>A: debian:7.3</figcaption>",
		`<rect width="10" height="10"/>`,
	} {
		if !strings.Contains(page, w) {
			t.Errorf("html: no %q", w)
		}
	}
	if strings.Contains(page, "<figcaption>B:") {
		t.Errorf("html: an icicle figure for B, which has none")
	}
}
