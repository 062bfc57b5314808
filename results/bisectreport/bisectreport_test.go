package bisectreport

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/results/stats"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the reports")

const (
	shaGood = "1a2b3c4d5e6f708192a3b4c5d6e7f80918273645"
	shaBad  = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"
	shaWarn = "3f2a1b4c5d6e7f8091a2b3c4d5e6f7a8b9c0d1e2"
	shaMid  = "77aa88bb99cc00dd11ee22ff33aa44bb55cc66dd"
	shaBrk  = "abcdefabcdefabcdefabcdefabcdefabcdefabcd"
)

// splatReport is a splat bisection that found the commit, over a commit
// that does not build.
func splatReport() *Report {
	return &Report{
		Schema: Schema, RunID: "20260102-030405-bisect-fuse-transport-a1b2c3", Dir: "/runs/20260102-030405-bisect-fuse-transport-a1b2c3",
		Experiment: "fuse-transport", SpecFile: "experiments/fuse-transport.yaml", Sets: map[string]string{"transport": "dev"},
		Tree: "/src/linux", Good: Endpoint{Rev: "v7.3", Commit: shaGood, Subject: "Linux 7.3"}, Bad: Endpoint{Rev: "HEAD", Commit: shaBad, Subject: "fuse: tidy comments"},
		Commits: 8, Config: []string{"lab"}, Kind: "splat", Criterion: `a kernel splat whose title contains "__fuse_simple_request"`, Rounds: 1,
		Command: []string{"klab", "bisect", "--tree", "/src/linux", "--good", "v7.3", "--bad", "HEAD", "--splat", "__fuse_simple_request", "fuse-transport"},
		Start:   "2026-01-02T03:04:05Z", End: "2026-01-02T03:28:15Z", WallSec: 1450, Status: "complete",
		Found: true, FirstBad: &Commit{SHA: shaWarn, Subject: "fuse: warn on every request", Author: "A U Thor <author@example.org>", Date: "2026-01-02T03:04:05Z"},
		EvidenceAt: "step 2",
		Evidence: &Evidence{Splat: &Splat{Type: "warning", Title: "WARNING in __fuse_simple_request", Run: "runs/x",
			Text: "------------[ cut here ]------------\nklab-e2e: bisect target\nWARNING: CPU: 1 PID: 80 at fs/fuse/req.c:63 __fuse_simple_request+0x2a/0x40\nCall Trace:\n <TASK>\n fuse_lookup_name+0xe1/0x230\n </TASK>\n---[ end trace 0000000000000000 ]---"}},
		Steps: []Step{
			{Label: "good", Commit: shaGood, Subject: "Linux 7.3", Verdict: "good", Reason: "no kernel splat", BuildSec: 362, BuildMode: "cold", Rounds: 1, Runs: []string{"runs/20260102-030405-exp-fuse-transport-000001"}},
			{Label: "bad", Commit: shaBad, Subject: "fuse: tidy comments", Verdict: "bad", Reason: "WARNING in __fuse_simple_request", BuildSec: 71, BuildMode: "incremental", Rounds: 1, Runs: []string{"runs/r2"}},
			{Label: "1", Commit: shaBrk, Subject: "fuse: a change that does not compile", Verdict: "skip", Reason: "does not build: make bzImage failed; first errors: [...]", BuildSec: 12, BuildMode: "failed"},
			{Label: "2", Commit: shaWarn, Subject: "fuse: warn on every request", Verdict: "bad", Reason: "WARNING in __fuse_simple_request", BuildSec: 64, BuildMode: "incremental", Rounds: 1, Runs: []string{"runs/r4"}},
			{Label: "3", Commit: shaMid, Subject: "fuse: fix the build", Verdict: "good", Reason: "no kernel splat", BuildSec: 58, BuildMode: "incremental", Rounds: 1, Runs: []string{"../outside"}},
		},
	}
}

func summary(vals ...float64) *stats.Summary {
	s := stats.Summarize(vals)
	return &s
}

// metricReport is a metric bisection that found the commit.
func metricReport() *Report {
	r := splatReport()
	r.Kind, r.Criterion, r.Rounds, r.MaxRounds = "metric", `row "create transport=dev" (ops_per_sec) at the bad commit's value`, 3, 6
	good, bad, step := stats.Summarize([]float64{1010, 1004, 998, 1012, 1001, 995}), stats.Summarize([]float64{612, 605, 598, 601, 610, 607}), stats.Summarize([]float64{603, 611, 600})
	r.Separation = &Separation{Row: "create transport=dev", Metric: "ops_per_sec", Unit: "ops/s", Good: good, Bad: bad, Change: stats.Compare(good, bad, 1)}
	r.FirstBad = &Commit{SHA: shaMid, Subject: "fuse: delay every request", Author: "A U Thor <author@example.org>", Date: "2026-01-02T03:04:05Z"}
	r.EvidenceAt = "step 3"
	r.Evidence = &Evidence{Metric: &MetricEvidence{Row: "create transport=dev", Metric: "ops_per_sec", Unit: "ops/s", Good: good, Bad: bad, Step: step,
		VsGood: stats.Compare(good, step, 1), VsBad: stats.Compare(bad, step, 1)}}
	r.Steps[0].Metric, r.Steps[0].Reason = &good, "median 1.00k ops/s over 6 sample(s)"
	r.Steps[1].Metric, r.Steps[1].Reason = &bad, "median 606 ops/s over 6 sample(s)"
	r.Steps[3].Verdict, r.Steps[3].Metric, r.Steps[3].Reason = "skip", summary(800, 790, 810, 805, 795, 800), "ambiguous after 6 round(s): differs from both endpoints"
	r.Steps[4].Verdict, r.Steps[4].Metric, r.Steps[4].Reason = "bad", &step, "like the bad commit"
	return r
}

// candidatesReport ended with only skipped commits left.
func candidatesReport() *Report {
	r := splatReport()
	r.Found, r.FirstBad, r.Evidence, r.EvidenceAt = false, nil, nil, ""
	r.Candidates = []Commit{{SHA: shaBrk, Subject: "fuse: a change that does not compile"}, {SHA: shaWarn, Subject: "fuse: warn on every request"}}
	r.Reason = "only skipped commits are left to test: the first bad commit is one of 2"
	return r
}

// refusedReport: the endpoints could not be told apart.
func refusedReport() *Report {
	r := metricReport()
	r.Found, r.FirstBad, r.Evidence, r.EvidenceAt = false, nil, nil, ""
	r.Steps = r.Steps[:2]
	r.Reason = `the good and bad commits cannot be told apart on row "create transport=dev" (p=0.310, alpha 0.05): nothing to bisect`
	return r
}

// interruptedReport stopped in a step, and has hostile strings.
func interruptedReport() *Report {
	r := splatReport()
	r.Found, r.FirstBad, r.Evidence, r.EvidenceAt, r.End, r.WallSec = false, nil, nil, "", "", 0
	r.Status = "interrupted"
	r.Steps[2].Subject = "fuse: <script>alert(1)</script> | *x* \x1b[31mred"
	r.Steps = r.Steps[:3]
	r.Steps[2].Verdict = "running"
	return r
}

var reports = map[string]func() *Report{
	"splat": splatReport, "metric": metricReport, "candidates": candidatesReport, "refused": refusedReport, "interrupted": interruptedReport,
}

// TestGolden: every report in every format is its golden file
// (go test -update rewrites them).
func TestGolden(t *testing.T) {
	ext := map[string]string{"text": "txt", "md": "md", "json": "json", "junit": "xml", "html": "html"}
	for name, mk := range reports {
		for _, f := range Formats {
			var b bytes.Buffer
			if err := Write(&b, mk(), f); err != nil {
				t.Fatalf("%s %s: %v", name, f, err)
			}
			path := filepath.Join("testdata", name+"."+ext[f]+".golden")
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s in %s differs from %s (go test -update rewrites it):\n%s", name, f, path, b.String())
			}
		}
	}
}

// TestTextForMail: the text starts as a mail quotes a first bad commit,
// stays ASCII and within TextWidth, and keeps the evidence's excerpt.
func TestTextForMail(t *testing.T) {
	for name, mk := range reports {
		var b bytes.Buffer
		if err := Text(&b, mk()); err != nil {
			t.Fatal(err)
		}
		for i, l := range strings.Split(b.String(), "\n") {
			if len(l) > TextWidth {
				t.Errorf("%s: line %d is %d columns: %q", name, i+1, len(l), l)
			}
			for _, c := range l {
				if c < ' ' || c > '~' {
					t.Errorf("%s: line %d has %q", name, i+1, c)
					break
				}
			}
		}
	}
	var b bytes.Buffer
	Text(&b, splatReport())
	want := "first bad commit: 3f2a1b4c5d6e fuse: warn on every request\nAuthor: A U Thor <author@example.org>\nDate:   2026-01-02T03:04:05Z\n" +
		"evidence (step 2): WARNING in __fuse_simple_request (a warning)\n    ------------[ cut here ]------------\n"
	if !strings.HasPrefix(b.String(), want) {
		t.Errorf("text starts\n%s\nwant\n%s", b.String(), want)
	}
}

// TestJSONAndJUnitParse: the JSON reads back into a Report and the
// JUnit is well-formed, with the first bad commit a failure.
func TestJSONAndJUnitParse(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, metricReport()); err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(b.Bytes(), &r); err != nil || r.Schema != Schema || r.Evidence.Metric.Step.N != 3 || len(r.Steps) != 5 {
		t.Errorf("JSON: %v, %+v", err, r)
	}
	b.Reset()
	if err := JUnit(&b, splatReport()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil || doc.Tests != 6 || doc.Failures != 3 || doc.Skipped != 1 {
		t.Errorf("JUnit: %v, %+v", err, doc)
	}
}

// TestHTMLEscapes: strings from the bisection cannot make HTML, and a
// run outside the bisection is not linked.
func TestHTMLEscapes(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, interruptedReport()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script>") {
		t.Error("the page holds a subject's <script>")
	}
	b.Reset()
	HTML(&b, splatReport())
	if strings.Contains(b.String(), "outside") || !strings.Contains(b.String(), `href="runs/r4/report.html"`) {
		t.Error("links: want runs inside the bisection only")
	}
	b.Reset()
	HTML(&b, metricReport())
	if !strings.Contains(b.String(), "<svg") || strings.Count(b.String(), "<title>") != 5 {
		t.Errorf("the metric's chart: want a point per step with the metric")
	}
}
