package xreport

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"klab/results/reference"
	"klab/results/stats"
)

// hostileSource is a reference's source with HTML, Markdown and a
// terminal escape: a spec is the user's, but reports quote it.
const hostileSource = "seed 003 <script>alert(3)</script> | *x* \x1b[31m"

// change is a B/A with its p-value, as a cell's A/B would give it.
func change(ratio, p float64) *stats.Change {
	lo, hi := 100*(ratio*0.9-1), 100*(ratio*1.1-1)
	c := stats.Change{Ratio: ratio, Pct: 100 * (ratio - 1), PctLo: &lo, PctHi: &hi, P: p, Alpha: stats.Alpha, Significant: p <= stats.Alpha}
	return &c
}

// refMatrix is testMatrix with a third experiment, fuse-transport, that
// compares transports within each cell, held against its references:
// create cannot be compared under TCG (and debian:6.1 has no verdict:
// its cell was skipped); randread-4k is reproduced on the baseline,
// strictly contradicted on build:fix (which fails the matrix) and the
// same direction but not significant on debian:6.1; a row with hostile
// names is the opposite direction, not significant, and not measured;
// the check is contradicted, not strictly, on build:fix. ext4-lazytime
// compares kernels, so it gets a note instead.
func refMatrix(t *testing.T) *Matrix {
	t.Helper()
	m := testMatrix(t)
	const exp = "fuse-transport"
	const tcg = "needs accel kvm; this run used single-threaded TCG in real time"
	m.Experiments = append(m.Experiments, exp, "ext4-lazytime")
	m.References = []Reference{
		{Experiment: exp, Name: "create", Metric: "ops_per_sec", Unit: "ops/s", Direction: 1, A: "transport=dev", B: "transport=uring",
			Expected: "better", Ratio: 2.86, Source: "seed 003, creates/s at 2 threads: 8580 -> 24524",
			MeasuredOn: &reference.MeasuredOn{CPUs: 32, Accel: "native", Note: "Xeon E5-2650 with HT"}, Needs: "accel kvm",
			Cells: []ReferenceCell{
				{Kernel: base, Change: change(0.49, 0.008), Verdict: reference.NotComparable, Reason: tcg, Run: "runs/20260301-101500-fuse-transport"},
				{Kernel: fix, Change: change(0.51, 0.008), Verdict: reference.NotComparable, Reason: tcg, Run: "../outside"},
				{Kernel: old, Missing: "skipped: needs fuse-io-uring"},
			}},
		{Experiment: exp, Name: "randread-4k", Metric: "ops_per_sec", Unit: "ops/s", Direction: 1, A: "transport=dev", B: "transport=uring",
			Expected: "better", Source: "seed 003, dio reads", Needs: "",
			Cells: []ReferenceCell{
				{Kernel: base, Change: change(1.42, 0.008), Verdict: reference.Reproduced, Strict: true},
				{Kernel: fix, Change: change(0.39, 0.029), Verdict: reference.Contradicted, Strict: true},
				{Kernel: old, Change: change(1.05, 0.4), Verdict: reference.SameNotSignificant, Strict: true},
			}},
		{Experiment: exp, Name: hostileRow, Metric: "p99_ns", Unit: "ns", Direction: -1, A: "transport=dev", B: "transport=uring",
			Expected: "no-change", Range: []float64{0.9, 1.1}, Source: hostileSource,
			Cells: []ReferenceCell{
				{Kernel: base, Change: change(0.97, 0.3), Verdict: reference.Reproduced},
				{Kernel: fix, Change: change(1.08, 0.2), Verdict: reference.Reproduced},
				{Kernel: old, Verdict: reference.NotMeasured, Reason: "no B/A: a side has no samples or A's median is 0"},
			}},
		{Experiment: exp, Name: "check killed-server", Check: true, A: "transport=dev", B: "transport=uring", Outcome: "pass",
			Source: "seed 003: a server's termination leaves no hanging mount",
			Cells: []ReferenceCell{
				{Kernel: base, Verdict: reference.Reproduced, Reason: "4 of 4 round(s) passed"},
				{Kernel: fix, Verdict: reference.Contradicted, Reason: "3 of 4 round(s) passed"},
				{Kernel: old, Verdict: reference.Reproduced, Reason: "4 of 4 round(s) passed"},
			}},
	}
	m.ReferenceNotes = []ReferenceNote{{Experiment: "ext4-lazytime", Message: "no verdict: its expectations are about an A/B of two kernels"}}
	m.Failures = append(m.Failures, Problem{Cell: exp + " on " + fix, Kernel: fix, Experiment: exp, Reference: true,
		Message: "randread-4k: contradicts the reference: B/A 0.39x, the reference's better (seed 003, dio reads)"})
	return m
}

func TestShortVerdict(t *testing.T) {
	for v, want := range map[reference.Verdict]string{
		reference.Reproduced:             "reproduced",
		reference.SameNotSignificant:     "n.s. (same)",
		reference.OppositeNotSignificant: "n.s. (opposite)",
		reference.Contradicted:           "CONTRADICTED",
		reference.NotComparable:          "not comparable",
		reference.NotMeasured:            "not measured",
		"":                               "",
		"something new\x1b[2J":           "something new[2J",
	} {
		if got := shortVerdict(v); got != want {
			t.Errorf("shortVerdict(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestReferencesText(t *testing.T) {
	m := refMatrix(t)
	out := renderAs(t, "text", m)
	t.Logf("\n%s", out)
	checkText(t, out)
	for _, w := range []string{
		// The first table and its footnote come first, unchanged.
		`^\[1\] skipped: needs fuse-io-uring\n\nagainst the reference \(the specs' expect:\): B/A within each kernel's cell, and its verdict$`,
		`^row +debian:7\.3 +build:fix +debian:6\.1$`,
		// Three kernels do not fit the width: two tables. A missing
		// verdict refers to the first table's footnote.
		`^fuse-transport create \(2\.86x better\) +0\.49x not comparable \[2\] +0\.51x not comparable \[2\]$`,
		`^fuse-transport create \(2\.86x better\) +- \[1\]$`,
		`^fuse-transport randread-4k \(better\) +1\.42x reproduced +0\.39x CONTRADICTED \[3\]$`,
		`^fuse-transport randread-4k \(better\) +1\.05x n\.s\. \(same\)$`,
		`^fuse-transport interrupt <script>alert\(2\)</script> \| a \(p99_ns\) \(0\.90x-1\.10x no-change\)\n +0\.97x reproduced +1\.08x reproduced$`,
		`^fuse-transport interrupt <script>alert\(2\)</script> \| a \(p99_ns\) \(0\.90x-1\.10x no-change\)\n +- not measured \[4\]$`,
		`^fuse-transport check killed-server \(pass\)\n +- reproduced +- CONTRADICTED \[5\]$`,
		`^\[2\] needs accel kvm; this run used single-threaded TCG in real time$`,
		`^\[3\] strict: the contradiction fails the matrix$`,
		`^\[4\] no B/A: a side has no samples or A's median is 0$`,
		`^\[5\] 3 of 4 round\(s\) passed$`,
		`^reference: ext4-lazytime: no verdict: its expectations are about an A/B of two kernels$`,
		`^FAIL fuse-transport on build:fix: randread-4k: contradicts the reference: B/A 0\.39x`,
	} {
		if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
			t.Errorf("no line matching %s", w)
		}
	}
	// The headers are over the cells' start.
	header := regexp.MustCompile(`(?m)^row +debian:7\.3 .*$`).FindAllString(out, -1)
	row := regexp.MustCompile(`(?m)^fuse-transport randread-4k .*$`).FindString(out)
	if len(header) != 2 || strings.Index(header[1], "build:fix") != strings.Index(row, "0.39x") {
		t.Errorf("the references' headers are not over their cells:\n%s\n%s", header, row)
	}
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "CONTRADICTED: significant, against the reference; not comparable: the run's mode cannot show the effect; - no verdict") {
		t.Errorf("no legend of the verdicts")
	}

	// Only a note: no table, the note still there.
	m.References = nil
	out = renderAs(t, "text", m)
	checkText(t, out)
	if strings.Contains(out, "against the reference") || !strings.Contains(out, "\nreference: ext4-lazytime: no verdict") {
		t.Errorf("a matrix with only a note:\n%s", out)
	}
	// Nothing of references: nothing shown.
	m.ReferenceNotes, m.Failures = nil, m.Failures[:2]
	if out := renderAs(t, "text", m); strings.Contains(out, "reference") {
		t.Errorf("a matrix without references mentions them:\n%s", out)
	}
}

func TestReferencesMarkdown(t *testing.T) {
	m := refMatrix(t)
	out := renderAs(t, "md", m)
	t.Logf("\n%s", out)
	if strings.ContainsAny(out, "\x1b\x00") {
		t.Errorf("a control character got through")
	}
	if regexp.MustCompile(`[^\\]<[A-Za-z/!?]`).MatchString(out) {
		t.Errorf("an unescaped '<': %s", regexp.MustCompile(`[^\\]<[A-Za-z/!?].{0,20}`).FindString(out))
	}
	for _, w := range []string{
		"\n### Against the reference\n\nagainst the reference (the specs' expect:): B/A within each kernel's cell, and its verdict\n\n| row | `debian:7.3` | `build:fix` | `debian:6.1` |\n|:---|---:|---:|---:|\n",
		`| fuse-transport randread-4k (better) | 1.42x reproduced | 0.39x CONTRADICTED [3] | 1.05x n.s. (same) |`,
		`| fuse-transport create (2.86x better) | 0.49x not comparable [2] | 0.51x not comparable [2] | - [1] |`,
		`- [3] strict: the contradiction fails the matrix`,
		"\nSources:\n\n- fuse-transport create: 2.86x better: seed 003, creates/s at 2 threads: 8580 -> 24524; measured on 32 CPUs, native, Xeon E5-2650 with HT; needs accel kvm\n",
		`seed 003 \<script>alert(3)\</script> | \*x\* [31m`,
		`- reference: ext4-lazytime: no verdict`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q", w)
		}
	}
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "|") {
			if n := unescapedPipes(l); n != len(m.Kernels)+2 {
				t.Errorf("%d cells in %q", n-1, l)
			}
		}
	}
	if i, j := strings.Index(out, "### Against the reference"), strings.Index(out, "### Kernel splats"); i < 0 || j < i {
		t.Errorf("the references are not after the table")
	}
}

func TestReferencesHTML(t *testing.T) {
	m := refMatrix(t)
	page := renderAs(t, "html", m)
	checkTags(t, page)
	checkSafe(t, page)
	if strings.Contains(page, "<script>alert(3)") || !strings.Contains(page, "seed 003 &lt;script&gt;alert(3)&lt;/script&gt; | *x* [31m") {
		t.Errorf("the hostile source is not shown escaped")
	}
	for _, w := range []string{
		"<h2>Against the reference</h2>",
		"<li>[2] needs accel kvm; this run used single-threaded TCG in real time</li>",
		"<li>reference: ext4-lazytime: no verdict: its expectations are about an A/B of two kernels</li>",
		"<li>fuse-transport create: 2.86x better: seed 003, creates/s at 2 threads: 8580 -&gt; 24524; measured on 32 CPUs, native, Xeon E5-2650 with HT; needs accel kvm</li>",
	} {
		if !strings.Contains(page, w) {
			t.Errorf("no %q", w)
		}
	}
	_, refs, _ := strings.Cut(page, "<h2>Against the reference</h2>")
	style := func(v reference.Verdict, strict bool) string { return `style="` + string(refStyle(v, strict)) + `"` }
	rr := cellsHTML(rowHTML(t, refs, "randread-4k"))
	if len(rr) != 3 {
		t.Fatalf("randread-4k: %d cells: %q", len(rr), rr)
	}
	if !strings.Contains(rr[0], style(reference.Reproduced, false)) || !strings.Contains(rr[0], ">reproduced<") {
		t.Errorf("a reproduced reference: %s", rr[0])
	}
	if !strings.Contains(rr[1], style(reference.Contradicted, true)) || !strings.Contains(rr[1], "CONTRADICTED <sup>[3]</sup>") ||
		!strings.Contains(rr[1], `title="B/A 0.39x (-61.0% [-65% -57%] p=0.029), transport=uring against transport=dev; contradicted (strict); reference better"`) {
		t.Errorf("a strict contradiction: %s", rr[1])
	}
	if !strings.Contains(rr[2], style(reference.SameNotSignificant, false)) {
		t.Errorf("not significant: %s", rr[2])
	}
	cr := cellsHTML(rowHTML(t, refs, "create"))
	if !strings.Contains(cr[0], style(reference.NotComparable, false)) || !strings.Contains(cr[0], `<a href="runs/20260301-101500-fuse-transport/report.html">0.49x</a>`) {
		t.Errorf("not comparable, linked: %s", cr[0])
	}
	if strings.Contains(cr[1], "<a ") || !strings.Contains(cr[2], "no verdict: skipped: needs fuse-io-uring") {
		t.Errorf("an unsafe run linked, or no verdict unexplained: %s %s", cr[1], cr[2])
	}
	if refStyle(reference.Contradicted, true) == refStyle(reference.Contradicted, false) || refStyle(reference.Reproduced, false) == refStyle(reference.NotComparable, false) {
		t.Errorf("the verdicts' colours do not tell them apart")
	}

	m.References = nil
	page = renderAs(t, "html", m)
	checkTags(t, page)
	if !strings.Contains(page, "<h2>Against the reference</h2>") || strings.Contains(page, "Sources:") {
		t.Errorf("a matrix with only a note: no heading, or a table")
	}
}

func TestReferencesJSON(t *testing.T) {
	m := refMatrix(t)
	m.References = append(m.References, Reference{Experiment: "x", Name: "y", Source: "z"})
	out := renderAs(t, "json", m)
	if m.References[4].Cells != nil {
		t.Errorf("JSON changed the matrix")
	}
	for _, w := range []string{`"references": [`, `"reference_notes": [`, `"verdict": "not comparable here"`, `"expected": "better"`,
		`"measured_on": {`, `"reference": true`, `"strict": true`, `"cells": []`, `"missing": "skipped: needs fuse-io-uring"`} {
		if !strings.Contains(out, w) {
			t.Errorf("no %s in the JSON", w)
		}
	}
	var back Matrix
	if err := json.Unmarshal([]byte(out), &back); err != nil {
		t.Fatal(err)
	}
	m.References[4].Cells = []ReferenceCell{}
	if !reflect.DeepEqual(back.References, m.References) || !reflect.DeepEqual(back.ReferenceNotes, m.ReferenceNotes) || !reflect.DeepEqual(back.Failures, m.Failures) {
		t.Errorf("the references' round trip differs")
	}
	// A matrix without references has no such fields: klab.matrix/v1
	// only gains fields.
	if out := renderAs(t, "json", testMatrix(t)); strings.Contains(out, "reference") {
		t.Errorf("references in the JSON of a matrix without any")
	}
}

func TestReferencesJUnit(t *testing.T) {
	m := refMatrix(t)
	doc := parseJUnit(t, renderAs(t, "junit", m))
	type result struct{ failed, skipped bool }
	got := map[string]result{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if strings.HasSuffix(c.Classname, ".reference") {
				got[s.Name+" "+c.Classname+" "+c.Name] = result{c.Failure != nil, c.Skipped != nil}
			}
			if c.Failure != nil && c.Failure.Type == "reference" && (c.Failure.Message != "contradicted (strict): B/A 0.39x, the reference's better" || !strings.Contains(c.SystemOut, "seed 003, dio reads")) {
				t.Errorf("the reference's failure: %+v", c)
			}
			if s.Name == fix && c.Name == "fuse-transport on build:fix" {
				t.Errorf("the strict contradiction fails a testcase of its cell too")
			}
		}
	}
	want := map[string]result{
		"matrix ext4-lazytime.reference reference": {skipped: true},
	}
	for _, k := range []string{base, fix, old} {
		for _, r := range []string{"create", "randread-4k", hostileRow + " (p99_ns)", "check killed-server"} {
			want[k+" fuse-transport.reference reference: "+r] = result{}
		}
	}
	want[base+" fuse-transport.reference reference: create"] = result{skipped: true}
	want[fix+" fuse-transport.reference reference: create"] = result{skipped: true}
	want[old+" fuse-transport.reference reference: create"] = result{skipped: true}
	want[fix+" fuse-transport.reference reference: randread-4k"] = result{failed: true}
	want[old+" fuse-transport.reference reference: "+hostileRow+" (p99_ns)"] = result{skipped: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reference testcases:\n%v\nwant\n%v", got, want)
	}
	// build:fix: 4 rows, 4 references, the splats and 2 failures; the
	// reference's and the 2 failures' testcases fail, and the splats'.
	for _, s := range doc.Suites {
		if s.Name == fix && (s.Tests != 11 || s.Failures != 4) {
			t.Errorf("suite %s: %d tests, %d failures", s.Name, s.Tests, s.Failures)
		}
	}

	// A reference failure without its reference's verdict in the matrix
	// keeps a testcase of its own.
	m.References = m.References[:1]
	doc = parseJUnit(t, renderAs(t, "junit", m))
	found := false
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			found = found || (s.Name == fix && c.Name == "fuse-transport on build:fix" && c.Failure != nil)
		}
	}
	if !found {
		t.Errorf("the failure is lost when no reference testcase fails for it")
	}
}
