package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"reflect"
	"strings"
	"testing"

	"klab/results/stats"
)

// hostileTitle is a splat title as a broken or malicious guest may print
// it: a terminal escape sequence and HTML.
const hostileTitle = "KASAN: slab-use-after-free in fuse_uring_cmd\x1b[31m<img src=x onerror=alert(1)>"

// testReport is a realistic run: a kernel patch against its base, one
// significant improvement (5+5 samples, with intervals), one row with no
// significant change (3+3 samples, no intervals), a passing and a failing
// check, a skipped cell, a new and a common splat, warnings.
func testReport(t *testing.T) *Report {
	t.Helper()
	summarize := func(values []float64, lo, hi *float64) stats.Summary {
		s := stats.Summarize(values)
		if lo != nil {
			// Pretend the interval came from more samples.
			s.Lo, s.Hi, s.Warnings = lo, hi, nil
		}
		return s
	}
	f := func(v float64) *float64 { return &v }
	const mib = 1 << 20
	improved := Row{
		Name: "randread bs=4k", Workload: "randread", Params: map[string]string{"bs": "4k"},
		Metric: "ops_per_sec", Unit: "ops/s", Direction: 1,
		A: summarize([]float64{12100, 12350, 12280, 12420, 12190}, f(12100), f(12420)),
		B: summarize([]float64{13700, 13850, 13620, 13910, 13780}, f(13620), f(13910)),
	}
	improved.Change = stats.Compare(improved.A, improved.B, improved.Direction)
	improved.Change.Warnings = nil
	same := Row{
		Name: "seqwrite bs=1M", Workload: "seqwrite", Params: map[string]string{"bs": "1M"},
		Metric: "bytes_per_sec", Unit: "B/s", Direction: 1, ThresholdPct: 5,
		A: summarize([]float64{512 * mib, 502 * mib, 522 * mib}, nil, nil),
		B: summarize([]float64{517 * mib, 497 * mib, 509 * mib}, nil, nil),
	}
	same.Change = stats.Compare(same.A, same.B, same.Direction)
	if !improved.Change.Significant || same.Change.Significant || same.A.Lo != nil || same.Change.PctLo != nil {
		t.Fatalf("test data: changes %+v and %+v", improved.Change, same.Change)
	}
	return &Report{
		Schema:      Schema,
		Experiment:  "fuse-uring",
		Description: "FUSE over io_uring against /dev/fuse",
		Reference:   "Table 2 of the series' cover letter:\n\tjob\tdev\turing\n\trandread\t12.0k\t13.9k\n",
		SpecFile:    "experiments/fuse-uring.toml",
		SpecSHA256:  "5d41402abc4b2a76b9719d911017c592ae4c0e7d5d41402abc4b2a76b9719d91",
		RunID:       "20260301-101500-fuse-uring",
		RunDir:      "/var/lib/klab/runs/20260301-101500-fuse-uring",
		Start:       "2026-03-01T10:15:00Z",
		End:         "2026-03-01T10:42:13Z",
		WallSec:     1633.4,
		Axis:        "kernel",
		A:           Side{Label: "debian:7.3", Kernel: "debian-7.3"},
		B:           Side{Label: "build:fix", Kernel: "fix"},
		Kernels: []Kernel{
			{Ref: "debian:7.3", Name: "debian-7.3", ID: "3f2a9c1b7e0d5a4c8b6e2f1d0c9b8a7f6e5d4c3b", Version: "6.12.43+deb13"},
			{Ref: "build:fix", Name: "fix", ID: "9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c", Version: "6.12.43-g1a2b3c4"},
		},
		Accel:  "tcg",
		Host:   "6.1.0-18-amd64 AMD EPYC 7B13",
		QEMU:   "QEMU emulator version 7.2.17 (Debian 1:7.2+dfsg-7+deb12u16)",
		CPUs:   2,
		MemMB:  1024,
		Rounds: 5,
		Order:  "abba",
		Reuse:  "fresh",
		Rows:   []Row{improved, same},
		Checks: []Check{
			{Name: "data-integrity", Cell: "transport=uring on build:fix", Side: "b", Round: 1, Passed: true, Message: "4096 files verified", TookSec: 2.5},
			{Name: "fsx", Cell: "transport=uring on build:fix", Side: "b", Round: 2, Message: "READ BAD DATA: offset = 0x1000,\nsize = 0x200", TookSec: 31.2},
		},
		Skipped: []Skipped{{Cell: "transport=uring jobs=8 on debian:7.3", Reason: "needs fuse-io-uring"}},
		Splats: SplatDiff{
			New:  []SplatCount{{Title: hostileTitle, Type: "kasan", B: 1}},
			Both: []SplatCount{{Title: "WARNING: at fs/fuse/dev.c:2105 fuse_dev_do_read", Type: "warning", A: 1, B: 2}},
		},
		Warnings: []string{"accel is tcg: absolute numbers are emulator numbers, only ratios count"},
		Failures: []string{
			"check fsx failed: transport=uring on build:fix B round 2",
			"new kernel splat in B: " + hostileTitle,
		},
	}
}

func renderAs(t *testing.T, format string, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, r, format); err != nil {
		t.Fatalf("%s: %v", format, err)
	}
	return b.String()
}

func TestText(t *testing.T) {
	out := renderAs(t, "text", testReport(t))
	t.Logf("\n%s", out)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		"fuse-uring: FUSE over io_uring against /dev/fuse",
		"A: debian:7.3 (debian-7.3 6.12.43+deb13 3f2a9c1b)",
		"B: build:fix (fix 6.12.43-g1a2b3c4 9b8c7d6e)",
		"accel tcg, host 6.1.0-18-amd64 AMD EPYC 7B13, qemu 7.2.17, 2 vCPUs,",
		"    1024 MiB, 5 rounds (abba, fresh)",
		"",
	}
	if len(lines) < len(want) || !reflect.DeepEqual(lines[:len(want)], want) {
		t.Errorf("header:\n%s\nwant:\n%s", strings.Join(lines[:min(len(lines), len(want))], "\n"), strings.Join(want, "\n"))
	}
	for _, w := range []string{
		"name                      A            B    B/A  change  CI            p        n   MDC  verdict",
		"randread bs=4k  12.3k ops/s  13.8k ops/s  1.12x  +12.2%  [+9.7% +15%]  p=0.008  5  1.7%  better",
		"seqwrite bs=1M    512 MiB/s    509 MiB/s  0.99x       ~                p=0.700  3     -  n.s.",
		"B/A: ratio of the medians; ~ and n.s.: no significant change (Mann-Whitney U, alpha 0.05)",
		"n: samples per side (A/B if unequal); MDC: minimum detectable change at this noise (80% power)",
		"seqwrite bs=1M: n.s.: cannot be significant with n=3 per side (the smallest p it can give is 0.100)",
		"PASS data-integrity [transport=uring on build:fix] B round 1: 4096 files verified",
		"FAIL fsx [transport=uring on build:fix] B round 2: READ BAD DATA: offset = 0x1000, size = 0x200",
		"skipped: transport=uring jobs=8 on debian:7.3: needs fuse-io-uring",
		"new in B:  KASAN: slab-use-after-free in fuse_uring_cmd[31m<img src=x onerror=alert(1)> (kasan; A 0,",
		"    B 1)",
		"in both:   WARNING: at fs/fuse/dev.c:2105 fuse_dev_do_read (warning; A 1, B 2)",
		"warning: accel is tcg: absolute numbers are emulator numbers, only ratios count",
		"warning: need >= 6 samples for confidence interval at level 0.95 (seqwrite bs=1M)",
		"reference (the table this experiment reproduces):",
		"  Table 2 of the series' cover letter:",
		"          job     dev     uring",
	} {
		if !containsLine(lines, w) {
			t.Errorf("no line %q", w)
		}
	}
	if got, want := unwrap(lines[len(lines)-3:]), "result: FAIL: check fsx failed: transport=uring on build:fix B round 2; "+
		"new kernel splat in B: KASAN: slab-use-after-free in fuse_uring_cmd[31m<img src=x onerror=alert(1)>"; got != want {
		t.Errorf("result %q, want %q", got, want)
	}
	if n := strings.Count(out, "need >= 6 samples"); n != 1 {
		t.Errorf("a row warning is listed %d times, want once", n)
	}
	checkText(t, out)
}

// checkText checks that out is printable ASCII in lines of at most
// TextWidth columns.
func checkText(t *testing.T, out string) {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if len(l) > TextWidth {
			t.Errorf("line %d has %d columns: %q", i+1, len(l), l)
		}
		for _, c := range []byte(l) {
			if c < ' ' || c > '~' {
				t.Errorf("line %d has byte %#x: %q", i+1, c, l)
				break
			}
		}
	}
}

// unwrap joins lines from the one starting with "result: " on, undoing
// Text's wrapping.
func unwrap(lines []string) string {
	for i, l := range lines {
		if strings.HasPrefix(l, "result: ") {
			var parts []string
			for _, p := range lines[i:] {
				parts = append(parts, strings.TrimSpace(p))
			}
			return strings.Join(parts, " ")
		}
	}
	return ""
}

// TestTooFewSamplesSaidOnce: a row with too few samples for any change
// to be significant is said to be so once, in its "n.s." line, not again
// as a warning in every format.
func TestTooFewSamplesSaidOnce(t *testing.T) {
	r := testReport(t)
	for _, f := range []string{"text", "md", "html"} {
		out := renderAs(t, f, r)
		if n := strings.Count(out, "cannot be significant with n=3 per side"); n != 1 {
			t.Errorf("%s: says %d times that seqwrite cannot be significant", f, n)
		}
		if strings.Contains(out, "to detect a difference") {
			t.Errorf("%s: says again, as a warning, that the samples are too few to detect a difference", f)
		}
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.TrimRight(l, " ") == want {
			return true
		}
	}
	return false
}

func TestTextWrapsLongLines(t *testing.T) {
	r := testReport(t)
	r.B = Side{Label: "build:fuse-over-io-uring-v3", Kernel: "fuse-over-io-uring-v3"}
	r.Kernels[1].Ref, r.Kernels[1].Name = r.B.Label, r.B.Kernel
	r.Host = "6.1.0-18-amd64 Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"
	r.Order = "random seed 1234567890"
	r.Rows[0].Name = "randread bs=4k jobs=4 iodepth=32 transport=uring direct=1"
	r.Checks[1].Message = strings.Repeat("0123456789", 25)
	r.Warnings = append(r.Warnings, "ünïcödé µs ± 3 — “quoted”\u202e")
	out := renderAs(t, "text", r)
	t.Logf("\n%s", out)
	checkText(t, out)
	lines := strings.Split(out, "\n")
	for _, w := range []string{
		"A: debian:7.3 (debian-7.3 6.12.43+deb13 3f2a9c1b)",
		"B: build:fuse-over-io-uring-v3 (fuse-over-io-uring-v3 6.12.43-g1a2b3c4",
		"    9b8c7d6e)",
		"accel tcg,",
		"    host 6.1.0-18-amd64 Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz,",
		"    qemu 7.2.17, 2 vCPUs, 1024 MiB,",
		"    5 rounds (random seed 1234567890, fresh)",
		"randread bs=4k jobs=4 iodepth=32 transport=uring direct=1",
		"warning: ?n?c?d? us +- 3 - \"quoted\"",
	} {
		if !containsLine(lines, w) {
			t.Errorf("no line %q", w)
		}
	}
	if !strings.Contains(strings.Join(strings.Fields(out), ""), strings.Repeat("0123456789", 25)) {
		t.Errorf("a wrapped message lost text")
	}
}

// TestMarkdown: the Markdown report escapes only what Markdown would read
// as markup ('|' in a cell, HTML), so that pasted as text it reads as
// written; kernel references are code spans.
func TestMarkdown(t *testing.T) {
	r := testReport(t)
	r.Rows[1].Name = "seqwrite bs=1M|direct"
	out := renderAs(t, "md", r)
	t.Logf("\n%s", out)
	for _, w := range []string{
		"## fuse-uring: FUSE over io_uring against /dev/fuse\n",
		"A: `debian:7.3` (debian-7.3 6.12.43+deb13 3f2a9c1b) B: `build:fix` (fix 6.12.43-g1a2b3c4 9b8c7d6e)\\\naccel tcg, ",
		"| name | A | B | B/A | change | CI | p | n | MDC | verdict |\n|:---|---:|---:|---:|---:|:---|:---|---:|---:|:---|\n",
		"| randread bs=4k | 12.3k ops/s | 13.8k ops/s | 1.12x | +12.2% | [+9.7% +15%] | p=0.008 | 5 | 1.7% | better |\n",
		"| seqwrite bs=1M\\|direct | 512 MiB/s | 509 MiB/s | 0.99x | ~ |  | p=0.700 | 3 | - | no significant change |\n",
		"### Not significant\n\n- seqwrite bs=1M|direct: n.s.: cannot be significant with n=3 per side",
		"- FAIL fsx [transport=uring on `build:fix`] B round 2: READ BAD DATA",
		"- new in B: KASAN: slab-use-after-free in fuse_uring_cmd[31m\\<img src=x onerror=alert(1)> (kasan; A 0, B 1)\n",
		"```\nTable 2 of the series' cover letter:\n\tjob\tdev\turing\n",
		"\n**result: FAIL: check fsx failed",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q", w)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape character got through")
	}
}

// TestMarkdownPinned: kernels pinned as klab rerun pins them are code
// spans in the Markdown report, nothing in them escaped, and so are the
// labels the rows and checks give them.
func TestMarkdownPinned(t *testing.T) {
	const pinned = "debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1"
	r := testReport(t)
	r.A.Kernel, r.Kernels[0].Ref, r.Kernels[0].Name, r.Kernels[0].Label = pinned, pinned, pinned, "debian:7.3"
	r.Kernels[0].Version = "7.3.4+deb13-cloud-amd64"
	r.Skipped[0].Cell = "every cell on debian:7.3"
	out := renderAs(t, "md", r)
	for _, w := range []string{
		"A: `debian:7.3` (`" + pinned + "` 3f2a9c1b) B: `build:fix`",
		"- skipped: every cell on `debian:7.3`: needs fuse-io-uring\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in\n%s", w, out)
		}
	}
	for _, bad := range []string{`\~`, `\[`, `\_`, `\]`} {
		if strings.Contains(out, bad) {
			t.Errorf("an escape %s shows when the Markdown is pasted as text:\n%s", bad, out)
		}
	}
	text := renderAs(t, "text", r)
	if !strings.Contains(text, "\nA: debian:7.3 ("+pinned+" 3f2a9c1b)\n") {
		t.Errorf("text: no line naming A by its label and its pinned kernel:\n%s", text)
	}
}

func TestJSON(t *testing.T) {
	r := testReport(t)
	out := renderAs(t, "json", r)
	if !strings.HasPrefix(out, "{\n  \"schema\": \"klab.report/v1\",\n") || !strings.HasSuffix(out, "}\n") {
		t.Errorf("not indented JSON with a newline:\n%s", out)
	}
	var back Report
	if err := json.Unmarshal([]byte(out), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Rows, r.Rows) {
		t.Errorf("rows after a round trip:\n%+v\nwant\n%+v", back.Rows, r.Rows)
	}
	want := *r
	want.Splats.Gone = []SplatCount{}
	if !reflect.DeepEqual(back, want) {
		t.Errorf("report after a round trip:\n%+v\nwant\n%+v", back, want)
	}

	empty := &Report{Experiment: "x"}
	out = renderAs(t, "json", empty)
	for _, w := range []string{`"schema": "klab.report/v1"`, `"rows": []`, `"kernels": []`, `"new": []`, `"gone": []`, `"both": []`} {
		if !strings.Contains(out, w) {
			t.Errorf("no %s in\n%s", w, out)
		}
	}
	if strings.Contains(out, "null") {
		t.Errorf("null in\n%s", out)
	}
	if empty.Schema != "" || empty.Rows != nil {
		t.Errorf("JSON changed its argument")
	}
}

// junitDoc is what TestJUnit reads back.
type junitDoc struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name     string  `xml:"name,attr"`
		Tests    int     `xml:"tests,attr"`
		Failures int     `xml:"failures,attr"`
		Skipped  int     `xml:"skipped,attr"`
		Time     float64 `xml:"time,attr"`
		Cases    []struct {
			Classname string  `xml:"classname,attr"`
			Name      string  `xml:"name,attr"`
			Time      float64 `xml:"time,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestJUnit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		regression bool
		failures   int
	}{
		{"as run", false, 2},
		{"regression", true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testReport(t)
			if tc.regression {
				r.Rows[1].Regression = true
			}
			out := renderAs(t, "junit", r)
			var doc junitDoc
			if err := xml.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("%v in\n%s", err, out)
			}
			if len(doc.Suites) != 1 {
				t.Fatalf("%d suites", len(doc.Suites))
			}
			s := doc.Suites[0]
			if s.Name != "fuse-uring" || s.Time != 1633.4 {
				t.Errorf("suite %q, time %v", s.Name, s.Time)
			}
			const tests = 2 + 2 + 1 + 1 // checks, rows, splats, skipped
			if s.Tests != tests || s.Failures != tc.failures || s.Skipped != 1 || len(s.Cases) != tests {
				t.Errorf("suite counts tests %d, failures %d, skipped %d, %d cases; want %d, %d, 1", s.Tests, s.Failures, s.Skipped, len(s.Cases), tests, tc.failures)
			}
			if doc.Tests != s.Tests || doc.Failures != s.Failures || doc.Skipped != s.Skipped {
				t.Errorf("testsuites counts %d, %d, %d", doc.Tests, doc.Failures, doc.Skipped)
			}
			failures, skipped := 0, 0
			byName := map[string]int{}
			for i, c := range s.Cases {
				byName[c.Classname+" "+c.Name] = i
				if c.Failure != nil {
					failures++
				}
				if c.Skipped != nil {
					skipped++
				}
			}
			if failures != tc.failures || skipped != 1 {
				t.Errorf("%d failed and %d skipped testcases", failures, skipped)
			}
			c := s.Cases[byName["fuse-uring.checks fsx transport=uring on build:fix b round 2"]]
			if c.Failure == nil || c.Failure.Message != "READ BAD DATA: offset = 0x1000, size = 0x200" || c.Time != 31.2 {
				t.Errorf("fsx check: %+v", c)
			}
			c = s.Cases[byName["fuse-uring.splats splats"]]
			if c.Failure == nil || !strings.Contains(c.Failure.Message, "slab-use-after-free in fuse_uring_cmd[31m<img") {
				t.Errorf("splats: %+v", c)
			}
			c = s.Cases[byName["fuse-uring.cells seqwrite bs=1M"]]
			if tc.regression != (c.Failure != nil) {
				t.Errorf("seqwrite: %+v", c)
			} else if tc.regression && !strings.Contains(c.Failure.Message, "past the 5% regression threshold") {
				t.Errorf("seqwrite failure message %q", c.Failure.Message)
			}
			c = s.Cases[byName["fuse-uring.cells transport=uring jobs=8 on debian:7.3"]]
			if c.Skipped == nil || c.Skipped.Message != "needs fuse-io-uring" {
				t.Errorf("skipped cell: %+v", c)
			}
		})
	}
}

func TestWrite(t *testing.T) {
	r := testReport(t)
	for _, f := range Formats {
		if out := renderAs(t, f, r); out == "" {
			t.Errorf("%s: no output", f)
		}
	}
	for _, empty := range []*Report{{}, {Rows: []Row{{Name: "no samples"}}}} {
		for _, f := range Formats {
			renderAs(t, f, empty)
		}
	}
	err := Write(&bytes.Buffer{}, r, "x")
	if want := `unknown report format "x", want one of text, md, json, junit, html`; err == nil || err.Error() != want {
		t.Errorf("Write(x) = %v, want %s", err, want)
	}
}
