package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"klab/results/reference"
)

var update = flag.Bool("update", false, "rewrite testdata/reference.* from the reports")

// refReport is testReport with a reference on each row, in each verdict
// a row can have, and on two checks, in a run under TCG with icount.
func refReport(t *testing.T) *Report {
	t.Helper()
	r := testReport(t)
	r.Icount = "shift=0,sleep=off"
	r.Warnings = []string{reference.EmulationNote(reference.Mode{Accel: "tcg", Icount: r.Icount})}
	on := &reference.MeasuredOn{CPUs: 32, Accel: "native", Note: "Xeon E5-2650"}
	r.Rows[0].Reference = &Reference{Direction: "better", Ratio: 1.72, MeasuredOn: on, Source: "seed 003, paged reads 128K, 1 job: 1117 -> 1921 MB/s",
		Verdict: reference.Reproduced}
	r.Rows[1].Reference = &Reference{Direction: "worse", Range: []float64{0.9, 0.97}, Source: "seed 000, passthrough_hp: ~245 -> ~237 MiB/s",
		Verdict: reference.OppositeNotSignificant}
	// The same rows again, with the other verdicts.
	more := []struct {
		name string
		ref  Reference
	}{
		{"randread bs=4k p99_ns", Reference{Direction: "better", Ratio: 2.57, MeasuredOn: on, Source: "seed 003, creates/s", Needs: "accel kvm",
			Verdict: reference.NotComparable, Reason: "needs accel kvm; this run used TCG with icount"}},
		{"randread bs=4k hostile", Reference{Direction: "worse", Source: "made up <b>" + hostileTitle, Verdict: reference.Contradicted, Strict: true}},
		{"seqwrite bs=1M cpu", Reference{Direction: "no-change", Ratio: 0.99, Source: "seed 000", Verdict: reference.Contradicted}},
		{"seqwrite bs=1M server", Reference{Direction: "better", Source: "s", Verdict: reference.SameNotSignificant}},
		{"seqwrite bs=1M none", Reference{Direction: "better", Source: "s", Verdict: reference.NotMeasured, Reason: "no B/A: a side has no samples or A's median is 0"}},
	}
	for i, m := range more {
		row := r.Rows[i%2]
		row.Name, row.Reference = m.name, &m.ref
		if m.ref.Verdict == reference.NotMeasured {
			row.B.N, row.Change.Ratio = 0, 0
		}
		r.Rows = append(r.Rows, row)
	}
	r.CheckReferences = []CheckReference{
		{Check: "data-integrity", Outcome: "pass", Source: "the thread", Verdict: reference.Reproduced, Reason: "1 of 1 round(s) passed"},
		{Check: "fsx", Outcome: "pass", Source: "seed 003", Needs: "accel kvm", Verdict: reference.Contradicted, Reason: "0 of 1 round(s) passed", Strict: true},
	}
	r.Failures = append(r.Failures, "randread bs=4k hostile: contradicts the reference: B/A 1.12x, the reference's worse (made up)")
	return r
}

// svgRe matches a chart, which TestHTML checks; the golden HTML file
// leaves it out.
var svgRe = regexp.MustCompile(`(?s)<svg.*?</svg>`)

// TestReferenceGolden renders refReport in every format and compares
// with testdata/reference.* (go test -update rewrites them).
func TestReferenceGolden(t *testing.T) {
	r := refReport(t)
	for _, f := range []struct{ format, file string }{
		{"text", "reference.txt"}, {"md", "reference.md"}, {"json", "reference.json"}, {"junit", "reference.xml"}, {"html", "reference.html"},
	} {
		got := renderAs(t, f.format, r)
		if f.format == "html" {
			got = svgRe.ReplaceAllString(got, "<svg/>")
		}
		path := filepath.Join("testdata", f.file)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -update writes it)", err)
		}
		if got != string(want) {
			t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", f.format, path, got)
		}
	}
}

// TestReferenceText: the block under the table names each row with its
// B/A, the reference's and the verdict, in lines of at most TextWidth,
// and the emulation note fits two lines.
func TestReferenceText(t *testing.T) {
	out := renderAs(t, "text", refReport(t))
	for _, l := range strings.Split(out, "\n") {
		if len(l) > TextWidth {
			t.Errorf("line of %d columns: %q", len(l), l)
		}
	}
	for _, w := range []string{
		"accel tcg (icount shift=0,sleep=off), host",
		refTitle,
		"  name                      B/A  reference          verdict",
		"  randread bs=4k          1.12x  1.72x better       reproduced",
		"  seqwrite bs=1M          0.99x  0.90x-0.97x worse  opposite direction, not significant",
		"  randread bs=4k p99_ns   1.12x  2.57x better       not comparable here: needs accel kvm; this run\n      used TCG with icount",
		"  randread bs=4k hostile  0.99x  worse              contradicted (strict)",
		"  seqwrite bs=1M cpu      1.12x  0.99x no-change    contradicted\n",
		"  seqwrite bs=1M none         -  better             not measured: no B/A",
		"  check fsx                   -  pass               contradicted (strict): 0 of 1 round(s) passed",
		"warning: TCG with icount: emulator numbers; guest time counts instructions, so per-operation\n    instruction cost carries",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in:\n%s", w, out)
		}
	}
	// Under single-threaded TCG the note takes two lines.
	r := refReport(t)
	r.Icount = ""
	r.Warnings = []string{reference.EmulationNote(reference.Mode{Accel: "tcg"})}
	_, note, _ := strings.Cut(renderAs(t, "text", r), "\nwarning: single-threaded TCG")
	if note, _, _ = strings.Cut(note, "\nwarning: "); strings.Count(note, "\n") != 1 {
		t.Errorf("the note takes more than two lines:\nwarning: single-threaded TCG%s", note)
	}
	// Without references, no block.
	if out := renderAs(t, "text", testReport(t)); strings.Contains(out, refTitle) {
		t.Errorf("a report without references has the block:\n%s", out)
	}
}

// TestReferenceJSON: the references are fields of the rows, the checks'
// of the report, with the run's mode; fields only added.
func TestReferenceJSON(t *testing.T) {
	var back struct {
		Icount string `json:"icount"`
		Rows   []struct {
			Reference *struct {
				Direction  string    `json:"direction"`
				Ratio      float64   `json:"ratio"`
				Range      []float64 `json:"range"`
				MeasuredOn *struct {
					CPUs int `json:"cpus"`
				} `json:"measured_on"`
				Verdict string `json:"verdict"`
				Strict  bool   `json:"strict"`
			} `json:"reference"`
		} `json:"rows"`
		CheckReferences []struct {
			Check, Verdict string
		} `json:"check_references"`
	}
	if err := json.Unmarshal([]byte(renderAs(t, "json", refReport(t))), &back); err != nil {
		t.Fatal(err)
	}
	if back.Icount != "shift=0,sleep=off" || len(back.Rows) != 7 || len(back.CheckReferences) != 2 {
		t.Fatalf("%+v", back)
	}
	if ref := back.Rows[0].Reference; ref == nil || ref.Direction != "better" || ref.Ratio != 1.72 || ref.MeasuredOn == nil || ref.MeasuredOn.CPUs != 32 || ref.Verdict != "reproduced" {
		t.Errorf("row 0's reference %+v", ref)
	}
	if ref := back.Rows[1].Reference; ref == nil || len(ref.Range) != 2 || ref.MeasuredOn != nil {
		t.Errorf("row 1's reference %+v", ref)
	}
	if ref := back.Rows[3].Reference; ref == nil || ref.Verdict != "contradicted" || !ref.Strict {
		t.Errorf("row 3's reference %+v", ref)
	}
	if c := back.CheckReferences[1]; c.Check != "fsx" || c.Verdict != "contradicted" {
		t.Errorf("check reference %+v", c)
	}
	if out := renderAs(t, "json", testReport(t)); strings.Contains(out, `"reference": {`) || strings.Contains(out, "check_references") || strings.Contains(out, "icount") {
		t.Errorf("a report without references has their fields")
	}
}

// TestReferenceJUnit: a testcase per row and check with an expectation;
// only a strict contradiction fails, a row the run cannot show is
// skipped.
func TestReferenceJUnit(t *testing.T) {
	var doc struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Skipped  int `xml:"skipped,attr"`
			Props    []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"properties>property"`
			Cases []struct {
				Classname string `xml:"classname,attr"`
				Name      string `xml:"name,attr"`
				Failure   *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
				} `xml:"failure"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(renderAs(t, "junit", refReport(t))), &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Suites[0]
	got := map[string]string{}
	for _, c := range s.Cases {
		if c.Classname != "fuse-uring.reference" {
			continue
		}
		switch {
		case c.Failure != nil:
			got[c.Name] = "failure " + c.Failure.Type + ": " + c.Failure.Message
		case c.Skipped != nil:
			got[c.Name] = "skipped: " + c.Skipped.Message
		default:
			got[c.Name] = "ok"
		}
	}
	want := map[string]string{
		"reference: randread bs=4k":         "ok",
		"reference: seqwrite bs=1M":         "ok",
		"reference: randread bs=4k p99_ns":  "skipped: not comparable here: needs accel kvm; this run used TCG with icount",
		"reference: randread bs=4k hostile": "failure reference: contradicted (strict): B/A 0.99x, the reference's worse",
		"reference: seqwrite bs=1M cpu":     "ok", // contradicted, not strict
		"reference: seqwrite bs=1M server":  "ok",
		"reference: seqwrite bs=1M none":    "skipped: not measured: no B/A: a side has no samples or A's median is 0",
		"reference: check data-integrity":   "ok",
		"reference: check fsx":              "failure reference: contradicted (strict): 0 of 1 round(s) passed: B/A -, the reference's pass",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("reference testcases %q", got)
	}
	found := false
	for _, p := range s.Props {
		found = found || (p.Name == "icount" && p.Value == "shift=0,sleep=off")
	}
	if !found {
		t.Errorf("properties %+v lack icount", s.Props)
	}
}

// TestReferenceHTML: a label under each chart with the verdict and the
// reference's ratio, and the table against the reference, escaped.
func TestReferenceHTML(t *testing.T) {
	page := renderAs(t, "html", refReport(t))
	checkTags(t, page)
	checkSafe(t, page)
	for _, w := range []string{
		`<figcaption class="ref better">reference 1.72x better, measured 1.12x: reproduced</figcaption>`,
		`<figcaption class="ref fail">reference worse, measured 0.99x: contradicted (strict)</figcaption>`,
		`<figcaption class="ref worse">reference 0.99x no-change, measured 1.12x: contradicted</figcaption>`,
		`<figcaption class="ref muted">reference 2.57x better, measured 1.12x: not comparable here: needs accel kvm; this run used TCG with icount</figcaption>`,
		`<tr class="fail"><td>check fsx</td><td>-</td><td>pass</td><td>contradicted (strict): 0 of 1 round(s) passed</td><td>seed 003; needs accel kvm</td></tr>`,
		`<td>seed 003, paged reads 128K, 1 job: 1117 -&gt; 1921 MB/s; measured on 32 CPUs, native, Xeon E5-2650</td>`,
		`<tr><th>accel</th><td>tcg (icount shift=0,sleep=off)</td></tr>`,
	} {
		if !strings.Contains(page, w) {
			t.Errorf("no %q", w)
		}
	}
	if n := strings.Count(page, "<figcaption class=\"ref"); n != 7 {
		t.Errorf("%d reference labels, want 7", n)
	}
	if bytes.Contains([]byte(page), []byte("<b>")) {
		t.Errorf("a source's HTML is not escaped")
	}
}
