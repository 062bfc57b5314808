package xreport

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"klab/results/stats"
)

// hostileTitle is a splat title as a broken or malicious guest may print
// it: a terminal escape sequence and HTML.
const hostileTitle = "KASAN: slab-use-after-free in fuse_uring_cmd\x1b[31m<img src=x onerror=alert(1)>"

// hostileName is a matrix name with a terminal escape, a script and
// Markdown.
const hostileName = "nightly\x1b[2J <script>alert(1)</script> | *x*"

// hostileRow is a row name with HTML and a Markdown table cell's end.
const hostileRow = "interrupt <script>alert(2)</script> | a"

// Kernel refs of testMatrix.
const (
	base = "debian:7.3"
	fix  = "build:fix"
	old  = "debian:6.1"
)

// cell summarises values on kernel, compared against baseline values
// (nil for the baseline itself) in direction.
func cell(kernel string, values, baseline []float64, direction int, run string) Cell {
	c := Cell{Kernel: kernel, Summary: stats.Summarize(values), Run: run}
	if baseline != nil {
		ch := stats.Compare(stats.Summarize(baseline), c.Summary, direction)
		c.Change = &ch
	}
	return c
}

// missing is a cell with no value.
func missing(kernel, why string) Cell {
	return Cell{Kernel: kernel, Missing: why}
}

// testMatrix is a realistic matrix: 3 kernels (debian:7.3 the
// baseline), 2 experiments. build:fix is significantly better on
// randread and interrupt latency, worse on seqwrite, not significantly
// different on open; debian:6.1 skipped fuse-uring (no values there),
// is not significantly different on interrupt latency and worse on
// open. build:fix printed a new splat and failed a check. Names carry
// hostile strings; some cells' runs are unsafe paths.
func testMatrix(t *testing.T) *Matrix {
	t.Helper()
	const mib = 1 << 20
	randA := []float64{12100, 12350, 12280, 12420, 12190, 12300, 12260, 12330}
	seqA := []float64{512 * mib, 502 * mib, 522 * mib, 515 * mib, 509 * mib}
	latA := []float64{52000, 51000, 53500, 50500, 52500}
	openA := []float64{980, 1010, 1050, 1000, 1030}
	const why = "skipped: needs fuse-io-uring"
	m := &Matrix{
		Schema: Schema,
		Name:   hostileName,
		File:   "matrices/nightly.toml",
		SHA256: "5d41402abc4b2a76b9719d911017c592ae4c0e7d5d41402abc4b2a76b9719d91",
		Dir:    "/var/lib/klab",
		Kernels: []Kernel{
			{Ref: base, Name: "debian-7.3", Version: "6.12.43+deb13"},
			{Ref: fix, Name: "fix", Version: "6.12.43-g1a2b3c4"},
			{Ref: old, Name: "debian-6.1", Version: "6.1.0-18"},
		},
		Baseline:    base,
		Accel:       "tcg",
		Cells:       6,
		Complete:    5,
		Experiments: []string{"fuse-uring jobs=1", "fuse-interrupt"},
		Rows: []Row{
			{
				Experiment: "fuse-uring jobs=1", Name: "randread bs=4k", Metric: "ops_per_sec", Unit: "ops/s", Direction: 1,
				Cells: []Cell{
					cell(base, randA, nil, 1, "runs/20260301-101500-fuse-uring"),
					cell(fix, []float64{13700, 13850, 13620, 13910, 13780, 13760, 13820, 13690}, randA, 1, "../outside"),
					missing(old, why),
				},
			},
			{
				Experiment: "fuse-uring jobs=1", Name: "seqwrite bs=1M", Metric: "bytes_per_sec", Unit: "B/s", Direction: 1,
				Cells: []Cell{
					cell(base, seqA, nil, 1, "runs/20260301-101500-fuse-uring"),
					cell(fix, []float64{441 * mib, 452 * mib, 438 * mib, 447 * mib, 445 * mib}, seqA, 1, "../outside"),
					missing(old, why),
				},
			},
			{
				Experiment: "fuse-interrupt", Name: hostileRow, Metric: "p99_ns", Unit: "ns", Direction: -1,
				Cells: []Cell{
					cell(base, latA, nil, -1, "runs/20260301-111500-fuse-interrupt"),
					cell(fix, []float64{31000, 30500, 32000, 31500, 30800}, latA, -1, "/etc"),
					cell(old, []float64{51500, 53000, 52200, 50800, 52900}, latA, -1, "javascript:alert(1)"),
				},
			},
			{
				Experiment: "fuse-interrupt", Name: "open threads=4", Metric: "ops_per_sec", Unit: "ops/s", Direction: 1,
				Cells: []Cell{
					cell(base, openA, nil, 1, "runs/20260301-111500-fuse-interrupt"),
					cell(fix, []float64{1000, 990, 1040, 1020, 1005}, openA, 1, "/etc"),
					cell(old, []float64{610, 640, 600, 655, 620}, openA, 1, "runs/20260301-121500-fuse-interrupt"),
				},
			},
		},
		Splats: []Splat{
			{Kernel: fix, Title: hostileTitle, Type: "kasan", Count: 1, New: true},
			{Kernel: base, Title: "WARNING: at fs/fuse/dev.c:2105 fuse_dev_do_read", Type: "warning", Count: 1},
			{Kernel: fix, Title: "WARNING: at fs/fuse/dev.c:2105 fuse_dev_do_read", Type: "warning", Count: 2},
		},
		Skipped: []Problem{
			{Cell: "fuse-uring jobs=1 on debian:6.1", Kernel: old, Experiment: "fuse-uring jobs=1", Message: "needs fuse-io-uring"},
		},
		Failures: []Problem{
			{Cell: "fuse-interrupt on build:fix", Kernel: fix, Experiment: "fuse-interrupt", Message: "check fsx failed: READ BAD DATA"},
			{Cell: "fuse-uring jobs=1 on build:fix", Kernel: fix, Experiment: "fuse-uring jobs=1", Message: "new kernel splat: " + hostileTitle},
		},
		Warnings: []string{
			"accel is tcg: absolute numbers are emulator numbers, only ratios count",
			"accel is tcg: absolute numbers are emulator numbers, only ratios count",
		},
	}
	// The fixture must have what the tests look for.
	ch := func(r, k int) stats.Change { return *m.Rows[r].Cells[k].Change }
	for _, c := range []struct {
		r, k int
		want stats.Verdict
	}{{0, 1, stats.Better}, {1, 1, stats.Worse}, {2, 1, stats.Better}, {2, 2, stats.NoChange}, {3, 1, stats.NoChange}, {3, 2, stats.Worse}} {
		if got := ch(c.r, c.k); got.Verdict != c.want {
			t.Fatalf("test data: row %d kernel %d: %+v, want %s", c.r, c.k, got, c.want)
		}
	}
	return m
}

// renderAs writes m in format.
func renderAs(t *testing.T, format string, m *Matrix) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, m, format); err != nil {
		t.Fatalf("%s: %v", format, err)
	}
	return b.String()
}

// checkText checks that out is printable ASCII in lines of at most
// TextWidth columns.
func checkText(t *testing.T, out string) {
	t.Helper()
	for i, l := range strings.Split(out, "\n") {
		if len(l) > TextWidth {
			t.Errorf("line %d has %d columns: %q", i+1, len(l), l)
		}
		for _, r := range l {
			if r < ' ' || r > '~' {
				t.Errorf("line %d has %q: %q", i+1, r, l)
				break
			}
		}
	}
}

func TestText(t *testing.T) {
	m := testMatrix(t)
	out := renderAs(t, "text", m)
	t.Logf("\n%s", out)
	checkText(t, out)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	// The header wraps at 72 columns between phrases, never inside one.
	if want := []string{
		"matrix nightly[2J <script>alert(1)</script> | *x*:",
		"    3 kernels x 2 experiments, 5/6 cells complete",
		"kernels: debian:7.3 (6.12.43+deb13, baseline),",
		"    build:fix (6.12.43-g1a2b3c4), debian:6.1 (6.1.0-18); accel tcg",
	}; !slices.Equal(lines[:4], want) {
		t.Errorf("header\n%s\nwant\n%s", strings.Join(lines[:4], "\n"), strings.Join(want, "\n"))
	}
	for _, w := range []string{
		`^row +debian:7\.3 +build:fix +debian:6\.1$`,
		`^ +baseline$`,
		`^fuse-uring jobs=1 randread bs=4k +12\.3k ops/s +13\.8k ops/s \+12\.0%\* +- \[1\]$`,
		`^fuse-uring jobs=1 seqwrite bs=1M +512 MiB/s +445 MiB/s -13\.1%\* +- \[1\]$`,
		// The long label has a line of its own.
		`^fuse-interrupt interrupt <script>alert\(2\)</script> \| a \(p99_ns\)\n +52\.0 us +31\.0 us -40\.4%\* +52\.2 us ~$`,
		`^fuse-interrupt open threads=4 +1\.01k ops/s +1\.00k ops/s ~ +620 ops/s -38\.6%\*$`,
		`^\[1\] skipped: needs fuse-io-uring$`,
		`^splat on debian:7\.3: WARNING: at fs/fuse/dev\.c:2105 fuse_dev_do_read \(warning; 1x\)$`,
		`^skipped: fuse-uring jobs=1 on debian:6\.1: needs fuse-io-uring$`,
		`^FAIL fuse-interrupt on build:fix: check fsx failed: READ BAD DATA$`,
		`^warning: accel is tcg: absolute numbers are emulator numbers, only ratios count$`,
	} {
		if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
			t.Errorf("no line matching %s", w)
		}
	}
	// Long lines are wrapped: look for them with the line breaks and
	// indentation made single spaces.
	flat := strings.Join(strings.Fields(out), " ")
	for _, w := range []string{
		"kernels: debian:7.3 (6.12.43+deb13, baseline), build:fix (6.12.43-g1a2b3c4), debian:6.1 (6.1.0-18); accel tcg row",
		"changes vs the baseline debian:7.3; * significant (Mann-Whitney U, alpha 0.05); ~ no significant change; - no value [1]",
		"NEW splat on build:fix: KASAN: slab-use-after-free in fuse_uring_cmd[31m<img src=x onerror=alert(1)> (kasan; 1x) splat on build:fix:",
		"result: FAIL: fuse-interrupt on build:fix: check fsx failed: READ BAD DATA; fuse-uring jobs=1 on build:fix: new kernel splat: KASAN: slab-use-after-free in fuse_uring_cmd[31m<img src=x onerror=alert(1)>",
	} {
		if !strings.Contains(flat, w) {
			t.Errorf("no %q", w)
		}
	}
	if n := strings.Count(out, "warning: accel is tcg"); n != 1 {
		t.Errorf("the repeated warning is shown %d times", n)
	}
	// The splats come by kernel: the baseline's first.
	if i, j := strings.Index(out, "splat on debian:7.3"), strings.Index(out, "NEW splat on build:fix"); i < 0 || j < i {
		t.Errorf("splats are not in the kernels' order")
	}
	if !strings.HasSuffix(out, "\n") || strings.HasSuffix(out, "\n\n") {
		t.Errorf("not ending in one newline")
	}
}

func TestTextPass(t *testing.T) {
	m := testMatrix(t)
	m.Failures, m.Splats = nil, nil
	out := renderAs(t, "text", m)
	checkText(t, out)
	if !strings.HasSuffix(out, "\nresult: PASS\n") {
		t.Errorf("no PASS:\n%s", out)
	}
	if !strings.Contains(out, "\n"+noSplats+"\n") {
		t.Errorf("no %q", noSplats)
	}
}

// wideMatrix is testMatrix with n kernels, each like build:fix, some
// with long refs, and a long row name.
func wideMatrix(t *testing.T, n int) *Matrix {
	t.Helper()
	m := testMatrix(t)
	m.Kernels = m.Kernels[:1]
	for i := range m.Rows {
		m.Rows[i].Cells = m.Rows[i].Cells[:1]
	}
	m.Rows[3].Name = "open threads=4 with a name long enough to need a line of its own in a split table"
	for k := 1; k < n; k++ {
		ref := fmt.Sprintf("build:fix-%d", k)
		if k%3 == 0 {
			ref = fmt.Sprintf("build:/home/dev/src/linux-next-%d/arch/x86/boot/bzImage", k)
		}
		m.Kernels = append(m.Kernels, Kernel{Ref: ref, Version: fmt.Sprintf("6.13.0-rc%d", k)})
		for i := range m.Rows {
			c := testMatrix(t).Rows[i].Cells[1]
			c.Kernel = ref
			m.Rows[i].Cells = append(m.Rows[i].Cells, c)
		}
	}
	m.Cells, m.Complete = 2*n, 2*n
	return m
}

func TestTextWide(t *testing.T) {
	m := wideMatrix(t, 8)
	out := renderAs(t, "text", m)
	t.Logf("\n%s", out)
	checkText(t, out)
	headers := regexp.MustCompile(`(?m)^row +(.*)$`).FindAllStringSubmatch(out, -1)
	if len(headers) < 2 {
		t.Fatalf("%d tables, want the 8 kernels split over several", len(headers))
	}
	// Every kernel has exactly one column, in order.
	var cols []string
	for _, h := range headers {
		cols = append(cols, strings.Fields(h[1])...)
	}
	var want []string
	for _, k := range m.Kernels {
		want = append(want, cut(k.Ref, maxHeader))
	}
	if !reflect.DeepEqual(cols, want) {
		t.Errorf("columns %q, want %q", cols, want)
	}
	// Every table repeats every row: the long name on its own line.
	if n := strings.Count(out, "\nfuse-interrupt open threads=4 with a name long enough to need a line of its own in a split table\n"); n != len(headers) {
		t.Errorf("the long label is shown %d times, want one per table (%d)", n, len(headers))
	}
	if n := strings.Count(out, "fuse-uring jobs=1 randread bs=4k "); n != len(headers) {
		t.Errorf("the randread row is shown %d times, want %d", n, len(headers))
	}
	// The full refs are in the kernels line.
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "build:/home/dev/src/linux-next-3/arch/x86/boot/bzImage (6.13.0-rc3)") {
		t.Errorf("the kernels line does not name the long ref in full")
	}
}

func TestTextNarrowFitsOneTable(t *testing.T) {
	m := wideMatrix(t, 3)
	m.Kernels[2].Ref = "b"
	for i := range m.Rows {
		m.Rows[i].Cells[2].Kernel = "b"
	}
	out := renderAs(t, "text", m)
	checkText(t, out)
	if n := len(regexp.MustCompile(`(?m)^row `).FindAllString(out, -1)); n != 1 {
		t.Errorf("%d tables, want 1:\n%s", n, out)
	}
}

func TestTextNoRows(t *testing.T) {
	m := testMatrix(t)
	m.Rows = nil
	out := renderAs(t, "text", m)
	checkText(t, out)
	if !strings.Contains(out, "\nno measurements\n") {
		t.Errorf("no 'no measurements':\n%s", out)
	}
}

// unescapedPipes counts the '|' in s not escaped by a backslash.
func unescapedPipes(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '|':
			n++
		}
	}
	return n
}

func TestMarkdown(t *testing.T) {
	m := testMatrix(t)
	out := renderAs(t, "md", m)
	t.Logf("\n%s", out)
	if strings.ContainsAny(out, "\x1b\x00") {
		t.Errorf("a control character got through")
	}
	if regexp.MustCompile(`[^\\]<[A-Za-z/!?]`).MatchString(out) {
		t.Errorf("an unescaped '<': %s", regexp.MustCompile(`[^\\]<[A-Za-z/!?].{0,20}`).FindString(out))
	}
	for _, w := range []string{
		`## matrix nightly[2J \<script>alert(1)\</script> | \*x\*: 3 kernels x 2 experiments, 5/6 cells complete`,
		"| row | `debian:7.3` (baseline) | `build:fix` | `debian:6.1` |\n|:---|---:|---:|---:|\n",
		`| fuse-uring jobs=1 randread bs=4k | 12.3k ops/s | 13.8k ops/s +12.0%* | - [1] |`,
		`| fuse-interrupt interrupt \<script>alert(2)\</script> \| a (p99_ns) | 52.0 us | 31.0 us -40.4%* | 52.2 us ~ |`,
		`- [1] skipped: needs fuse-io-uring`,
		"### Kernel splats\n\n- splat on `debian:7.3`:",
		"- NEW splat on `build:fix`: KASAN: slab-use-after-free in fuse_uring_cmd[31m\\<img src=x onerror=alert(1)> (kasan; 1x)",
		"### Skipped cells\n\n- skipped: fuse-uring jobs=1 on `debian:6.1`: needs fuse-io-uring\n",
		"### Failures\n\n- FAIL fuse-interrupt on `build:fix`: check fsx failed: READ BAD DATA\n",
		"### Warnings\n\n- accel is tcg",
		"\n**result: FAIL: fuse-interrupt on `build:fix`: check fsx failed: READ BAD DATA; ",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q", w)
		}
	}
	// Every table line has a cell per kernel, whatever the names hold.
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, "|") {
			if n := unescapedPipes(l); n != len(m.Kernels)+2 {
				t.Errorf("%d cells in %q", n-1, l)
			}
		}
	}
}

func TestJSON(t *testing.T) {
	m := testMatrix(t)
	m.Schema = ""
	m.Rows[0].Cells[2].Summary.Values = nil
	out := renderAs(t, "json", m)
	if m.Schema != "" || m.Rows[0].Cells[2].Summary.Values != nil {
		t.Errorf("JSON changed the matrix")
	}
	if !strings.HasPrefix(out, "{\n  \"schema\": \"klab.matrix/v1\",\n") || !strings.HasSuffix(out, "}\n") {
		t.Errorf("not indented JSON with the schema first:\n%.200s", out)
	}
	for _, bad := range []string{`"values": null`, `"cells": null`, `"kernels": null`, `"rows": null`, `"splats": null`} {
		if strings.Contains(out, bad) {
			t.Errorf("%s in the JSON", bad)
		}
	}
	var back Matrix
	if err := json.Unmarshal([]byte(out), &back); err != nil {
		t.Fatal(err)
	}
	if back.Schema != Schema {
		t.Errorf("schema %q", back.Schema)
	}
	m.Schema = Schema
	m.Rows[0].Cells[2].Summary.Values = []float64{}
	for i := range m.Rows {
		for j := range m.Rows[i].Cells {
			if m.Rows[i].Cells[j].Summary.Values == nil {
				m.Rows[i].Cells[j].Summary.Values = []float64{}
			}
		}
	}
	if !reflect.DeepEqual(&back, m) {
		a, _ := json.Marshal(&back)
		b, _ := json.Marshal(m)
		t.Errorf("round trip differs:\n%s\n%s", a, b)
	}
	if again := renderAs(t, "json", &back); again != out {
		t.Errorf("the round trip's JSON differs")
	}

	empty := renderAs(t, "json", &Matrix{})
	for _, w := range []string{`"kernels": []`, `"rows": []`, `"splats": []`, `"schema": "klab.matrix/v1"`} {
		if !strings.Contains(empty, w) {
			t.Errorf("empty matrix: no %s in\n%s", w, empty)
		}
	}
}

// The parsed JUnit report.
type (
	xSuites struct {
		Name     string   `xml:"name,attr"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Skipped  int      `xml:"skipped,attr"`
		Suites   []xSuite `xml:"testsuite"`
	}
	xSuite struct {
		Name       string `xml:"name,attr"`
		Tests      int    `xml:"tests,attr"`
		Failures   int    `xml:"failures,attr"`
		Skipped    int    `xml:"skipped,attr"`
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []xCase `xml:"testcase"`
	}
	xCase struct {
		Classname string `xml:"classname,attr"`
		Name      string `xml:"name,attr"`
		Failure   *struct {
			Message string `xml:"message,attr"`
			Type    string `xml:"type,attr"`
		} `xml:"failure"`
		Skipped *struct {
			Message string `xml:"message,attr"`
		} `xml:"skipped"`
		SystemOut string `xml:"system-out"`
	}
)

// parseJUnit parses a JUnit report.
func parseJUnit(t *testing.T, out string) xSuites {
	t.Helper()
	var doc xSuites
	if err := xml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("parsing the JUnit report: %v\n%s", err, out)
	}
	return doc
}

func TestJUnit(t *testing.T) {
	m := testMatrix(t)
	out := renderAs(t, "junit", m)
	t.Logf("\n%s", out)
	if !strings.HasPrefix(out, xml.Header) {
		t.Errorf("no XML header")
	}
	if strings.ContainsAny(out, "\x1b\x00") {
		t.Errorf("a control character got through")
	}
	doc := parseJUnit(t, out)
	if doc.Name != "matrix nightly[2J <script>alert(1)</script> | *x*" {
		t.Errorf("name %q", doc.Name)
	}
	var names []string
	for _, s := range doc.Suites {
		names = append(names, s.Name)
	}
	if want := []string{base, fix, old}; !reflect.DeepEqual(names, want) {
		t.Fatalf("suites %q, want one per kernel %q", names, want)
	}
	type counts struct{ tests, failures, skipped int }
	want := map[string]counts{
		// 4 rows and the splats.
		base: {5, 0, 0},
		// 4 rows, 2 failures, the failing splats.
		fix: {7, 3, 0},
		// 4 rows (2 with no value), the splats, the skipped cell.
		old: {6, 0, 3},
	}
	var total counts
	for _, s := range doc.Suites {
		var got counts
		for _, c := range s.Cases {
			got.tests++
			if c.Failure != nil {
				got.failures++
			}
			if c.Skipped != nil {
				got.skipped++
			}
		}
		if got != want[s.Name] || (counts{s.Tests, s.Failures, s.Skipped}) != got {
			t.Errorf("suite %s: cases %+v, attributes %d/%d/%d, want %+v", s.Name, got, s.Tests, s.Failures, s.Skipped, want[s.Name])
		}
		total.tests += got.tests
		total.failures += got.failures
		total.skipped += got.skipped
	}
	if (counts{doc.Tests, doc.Failures, doc.Skipped}) != total {
		t.Errorf("totals %d/%d/%d, want %+v", doc.Tests, doc.Failures, doc.Skipped, total)
	}
	find := func(suite, name string) *xCase {
		for _, s := range doc.Suites {
			for i, c := range s.Cases {
				if s.Name == suite && c.Name == name {
					return &s.Cases[i]
				}
			}
		}
		t.Errorf("suite %s: no testcase %q", suite, name)
		return nil
	}
	if c := find(fix, "randread bs=4k"); c != nil {
		if c.Classname != "fuse-uring jobs=1" || c.Failure != nil || c.Skipped != nil {
			t.Errorf("randread on build:fix: %+v", *c)
		}
		if c.SystemOut != "build:fix: 13.8k ops/s (n 8, CI 13.6k ops/s to 13.8k ops/s); vs debian:7.3: +12.0% [+10% +14%] p<0.001, better" || !strings.Contains(c.SystemOut, "vs debian:7.3: +12.0% [+10% +14%] p<0.001, better") || !strings.Contains(c.SystemOut, "(n 8, CI 13.6k ops/s to 13.8k ops/s)") {
			t.Errorf("randread on build:fix says %q", c.SystemOut)
		}
	}
	if c := find(fix, "fuse-interrupt on build:fix"); c != nil && (c.Failure == nil || c.Failure.Message != "check fsx failed: READ BAD DATA" || c.Classname != "fuse-interrupt") {
		t.Errorf("the failed check: %+v", *c)
	}
	if c := find(fix, "splats"); c != nil && (c.Failure == nil || !strings.Contains(c.Failure.Message, "fuse_uring_cmd[31m<img src=x onerror=alert(1)>")) {
		t.Errorf("the new splat: %+v", *c)
	}
	if c := find(base, "splats"); c != nil && (c.Failure != nil || !strings.Contains(c.SystemOut, "WARNING: at fs/fuse/dev.c:2105")) {
		t.Errorf("the baseline's splats: %+v", *c)
	}
	if c := find(old, "fuse-uring jobs=1 on debian:6.1"); c != nil && (c.Skipped == nil || c.Skipped.Message != "needs fuse-io-uring") {
		t.Errorf("the skipped cell: %+v", *c)
	}
	if c := find(old, "seqwrite bs=1M"); c != nil && (c.Skipped == nil || c.Skipped.Message != "no value: skipped: needs fuse-io-uring") {
		t.Errorf("the missing value: %+v", *c)
	}
	if c := find(old, hostileRow+" (p99_ns)"); c != nil && (c.Skipped != nil || !strings.Contains(c.SystemOut, "52.2 us")) {
		t.Errorf("the hostile row: %+v", *c)
	}
}

func TestJUnitOtherSuite(t *testing.T) {
	m := testMatrix(t)
	m.Failures = append(m.Failures, Problem{Message: "matrix file changed during the run"})
	m.Skipped = append(m.Skipped, Problem{Cell: "fuse-uring on debian:5", Kernel: "debian:5", Message: "no such kernel"})
	doc := parseJUnit(t, renderAs(t, "junit", m))
	if len(doc.Suites) != 4 {
		t.Fatalf("%d suites, want 3 kernels and one for the rest", len(doc.Suites))
	}
	s := doc.Suites[3]
	if s.Name != "matrix" || s.Tests != 2 || s.Failures != 1 || s.Skipped != 1 {
		t.Errorf("the other suite: %+v", s)
	}
}

// tagRE matches an HTML start, end or self-closing tag.
var tagRE = regexp.MustCompile(`<(/?)([a-zA-Z][a-zA-Z0-9:-]*)(?:\s[^<>]*?)?(/?)>`)

// voidElements have no end tag.
var voidElements = map[string]bool{"meta": true, "br": true, "link": true, "img": true, "hr": true, "input": true, "col": true, "wbr": true}

// checkTags checks that page's tags nest and that every '<' starts one.
func checkTags(t *testing.T, page string) {
	t.Helper()
	body := strings.TrimPrefix(page, "<!DOCTYPE html>")
	var stack []string
	for _, m := range tagRE.FindAllStringSubmatch(body, -1) {
		closing, name, selfClosing := m[1] == "/", strings.ToLower(m[2]), m[3] == "/"
		switch {
		case selfClosing || (!closing && voidElements[name]):
		case !closing:
			stack = append(stack, name)
		case len(stack) == 0 || stack[len(stack)-1] != name:
			t.Fatalf("</%s> closes %v", name, stack)
		default:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Errorf("unclosed %v", stack)
	}
	if rest := tagRE.ReplaceAllString(body, ""); strings.Contains(rest, "<") {
		i := strings.Index(rest, "<")
		t.Errorf("a '<' outside a tag: %q", rest[max(0, i-40):min(len(rest), i+40)])
	}
}

// checkSafe checks that page runs nothing, loads nothing and shows the
// guest's text as text.
func checkSafe(t *testing.T, page string) {
	t.Helper()
	if regexp.MustCompile(`(?i)<script`).MatchString(page) {
		t.Errorf("a <script> element")
	}
	if m := regexp.MustCompile(`(?i)\b(src|href|action|poster|srcset)\s*=\s*["']?\s*(https?:)?//`).FindString(page); m != "" {
		t.Errorf("an external reference: %s", m)
	}
	if m := regexp.MustCompile(`(?i)url\(|@import|<link|<iframe|<object|<embed|<img|javascript:`).FindString(page); m != "" {
		t.Errorf("something that loads or runs: %s", m)
	}
	if !strings.Contains(page, "fuse_uring_cmd[31m&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("the guest's splat title is not shown escaped")
	}
	if strings.ContainsAny(page, "\x1b\x00") {
		t.Errorf("a control character got through")
	}
}

// rowHTML is the <tr> of the heat map whose label contains name.
func rowHTML(t *testing.T, page, name string) string {
	t.Helper()
	for tr := range strings.SplitSeq(page, "<tr>") {
		tr, _, _ = strings.Cut(tr, "</tr>")
		if strings.Contains(tr, `<th class="label">`) && strings.Contains(tr, name) {
			return tr
		}
	}
	t.Fatalf("no row %q", name)
	return ""
}

// cellsHTML are the <td> elements of a heat map row.
func cellsHTML(tr string) []string {
	return regexp.MustCompile(`<td[^>]*>.*?</td>`).FindAllString(tr, -1)
}

func TestHTML(t *testing.T) {
	m := testMatrix(t)
	page := renderAs(t, "html", m)
	if !strings.HasPrefix(page, "<!DOCTYPE html>\n<html") || !strings.HasSuffix(page, "</html>\n") {
		t.Errorf("not an HTML document:\n%.200s\n...\n%s", page, page[max(0, len(page)-200):])
	}
	checkTags(t, page)
	checkSafe(t, page)
	for _, w := range []string{
		"<title>klab: matrix nightly[2J &lt;script&gt;alert(1)&lt;/script&gt; | *x*: 3 kernels x 2 experiments, 5/6 cells complete</title>",
		"kernels: debian:7.3 (6.12.43&#43;deb13, baseline), build:fix (6.12.43-g1a2b3c4), debian:6.1 (6.1.0-18); accel tcg",
		"file matrices/nightly.toml (sha256 5d41402abc4b2a76b9719d911017c592ae4c0e7d5d41402abc4b2a76b9719d91), results in /var/lib/klab",
		`<th>debian:7.3<br><span class="sub">6.12.43&#43;deb13, baseline</span></th>`,
		`<span class="exp">fuse-interrupt</span> interrupt &lt;script&gt;alert(2)&lt;/script&gt; | a (p99_ns)`,
		"<li>[1] skipped: needs fuse-io-uring</li>",
		`<li class="fail">NEW splat on build:fix: KASAN`,
		"<li>skipped: fuse-uring jobs=1 on debian:6.1: needs fuse-io-uring</li>",
		`<li class="fail">FAIL fuse-interrupt on build:fix: check fsx failed: READ BAD DATA</li>`,
		"<li>warning: accel is tcg",
		`<p class="result fail">result: FAIL: fuse-interrupt on build:fix`,
	} {
		if !strings.Contains(page, w) {
			t.Errorf("no %q", w)
		}
	}

	style := func(v stats.Verdict, pct float64) string { return `style="` + string(heatStyle(v, pct)) + `"` }
	better, worse, ns := style(stats.Better, m.Rows[0].Cells[1].Change.Pct), style(stats.Worse, m.Rows[1].Cells[1].Change.Pct), style(stats.NoChange, 0)
	rand := cellsHTML(rowHTML(t, page, "randread bs=4k"))
	if len(rand) != 3 {
		t.Fatalf("randread: %d cells: %q", len(rand), rand)
	}
	if strings.Contains(rand[0], "style=") {
		t.Errorf("the baseline's cell is coloured: %s", rand[0])
	}
	if !strings.Contains(rand[0], `<a href="runs/20260301-101500-fuse-uring/report.html">12.3k ops/s</a>`) {
		t.Errorf("the baseline's cell has no link to its run: %s", rand[0])
	}
	if !strings.Contains(rand[1], better) || !strings.Contains(rand[1], "&#43;12.0%*") {
		t.Errorf("the improvement is not coloured %s: %s", better, rand[1])
	}
	if !strings.Contains(rand[1], `title="13.8k ops/s (n 8, CI 13.6k ops/s to 13.8k ops/s); vs debian:7.3: &#43;12.0% [&#43;10% &#43;14%] p&lt;0.001, better"`) {
		t.Errorf("the improvement has no tooltip with CI and p: %s", rand[1])
	}
	if !strings.Contains(rand[2], "- <span") || !strings.Contains(rand[2], "<sup>[1]</sup>") || !strings.Contains(rand[2], ns) {
		t.Errorf("the missing cell: %s", rand[2])
	}
	seq := cellsHTML(rowHTML(t, page, "seqwrite bs=1M"))
	if !strings.Contains(seq[1], worse) || !strings.Contains(seq[1], "-13.1%*") {
		t.Errorf("the regression is not coloured %s: %s", worse, seq[1])
	}
	lat := cellsHTML(rowHTML(t, page, "p99_ns"))
	if !strings.Contains(lat[1], style(stats.Better, m.Rows[2].Cells[1].Change.Pct)) {
		t.Errorf("a lower latency is not coloured better: %s", lat[1])
	}
	if !strings.Contains(lat[2], ns) || !strings.Contains(lat[2], ">~<") {
		t.Errorf("no significant change is not neutral: %s", lat[2])
	}

	// Only the safe runs are linked.
	links := regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(page, -1)
	var hrefs []string
	for _, l := range links {
		hrefs = append(hrefs, l[1])
	}
	slices.Sort(hrefs)
	hrefs = slices.Compact(hrefs)
	if want := []string{
		"runs/20260301-101500-fuse-uring/report.html",
		"runs/20260301-111500-fuse-interrupt/report.html",
		"runs/20260301-121500-fuse-interrupt/report.html",
	}; !reflect.DeepEqual(hrefs, want) {
		t.Errorf("links %q, want %q", hrefs, want)
	}
	if n := strings.Count(page, "<a href="); n != 5 {
		t.Errorf("%d links, want 5 (the baseline's 4 cells and one of debian:6.1)", n)
	}
}

func TestHeatColor(t *testing.T) {
	green := heatColor(stats.Better, 20)
	red := heatColor(stats.Worse, -20)
	if green.g <= green.r || green.g <= green.b {
		t.Errorf("an improvement is not green: %+v", green)
	}
	if red.r <= red.g || red.r <= red.b {
		t.Errorf("a regression is not red or orange: %+v", red)
	}
	if heatColor(stats.Better, 5) == heatColor(stats.Better, 30) {
		t.Errorf("the colour does not deepen with the change")
	}
	if heatColor(stats.Worse, -50) != heatColor(stats.Worse, -400) || heatColor(stats.Worse, -50) != worseDeep {
		t.Errorf("the colour is not capped at 50%%")
	}
	for _, v := range []stats.Verdict{stats.NoChange, stats.Differs, ""} {
		if heatColor(v, 30) != neutral {
			t.Errorf("%q is not neutral", v)
		}
	}
}

func TestRunLink(t *testing.T) {
	for run, want := range map[string]string{
		"runs/20260301-101500-fuse-uring": "runs/20260301-101500-fuse-uring/report.html",
		"20260301-101500-fuse-uring":      "20260301-101500-fuse-uring/report.html",
		"runs/a_b.c+d=e,f@g~h":            "runs/a_b.c+d=e,f@g~h/report.html",
		"":                                "",
		"/etc":                            "",
		"../outside":                      "",
		"runs/../../outside":              "",
		"runs/..":                         "",
		"./runs/x":                        "",
		"runs//x":                         "",
		"runs/x/":                         "",
		".":                               "",
		"javascript:alert(1)":             "",
		"//evil.example/x":                "",
		`runs\..\x`:                       "",
		"runs/x y":                        "",
		"runs/x?y":                        "",
		"runs/x#y":                        "",
		"runs/x\"onmouseover=y":           "",
		"runs/\x1bx":                      "",
	} {
		if got := runLink(run); got != want {
			t.Errorf("runLink(%q) = %q, want %q", run, got, want)
		}
	}
}

func TestWrite(t *testing.T) {
	m := testMatrix(t)
	for _, f := range Formats {
		if out := renderAs(t, f, m); out == "" {
			t.Errorf("%s: empty", f)
		}
	}
	err := Write(&bytes.Buffer{}, m, "pdf")
	if err == nil || !strings.Contains(err.Error(), `"pdf"`) || !strings.Contains(err.Error(), strings.Join(Formats, ", ")) {
		t.Errorf("unknown format: %v", err)
	}
}

func TestWriteAll(t *testing.T) {
	m := testMatrix(t)
	dir := filepath.Join(t.TempDir(), "matrix")
	if err := WriteAll(dir, m); err != nil {
		t.Fatal(err)
	}
	// A second time replaces the files.
	if err := WriteAll(dir, m); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"report.html", "report.json", "report.md", "report.txt", "report.xml"}; !reflect.DeepEqual(names, want) {
		t.Errorf("files %q, want %q", names, want)
	}
	for name, format := range map[string]string{"report.txt": "text", "report.md": "md", "report.json": "json", "report.xml": "junit", "report.html": "html"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != renderAs(t, format, m) {
			t.Errorf("%s is not the %s report", name, format)
		}
	}
}

func TestWriteAllError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(file, testMatrix(t)); err == nil {
		t.Errorf("writing into a file did not fail")
	}
}

func TestExperimentsFallback(t *testing.T) {
	m := testMatrix(t)
	m.Experiments = nil
	m.Skipped = append(m.Skipped, Problem{Experiment: "fsx", Kernel: old, Message: "needs a disk"})
	if got, want := experiments(m), []string{"fuse-uring jobs=1", "fuse-interrupt", "fsx"}; !reflect.DeepEqual(got, want) {
		t.Errorf("experiments %q, want %q", got, want)
	}
	if got := titleLine(m); !strings.HasSuffix(got, ": 3 kernels x 3 experiments, 5/6 cells complete") {
		t.Errorf("title %q", got)
	}
	if got := problemText(m.Skipped[1]); got != "fsx on debian:6.1: needs a disk" {
		t.Errorf("a problem without a cell reads %q", got)
	}
}

func TestCellsOutOfOrder(t *testing.T) {
	m := testMatrix(t)
	want := renderAs(t, "text", m)
	for i := range m.Rows {
		slices.Reverse(m.Rows[i].Cells)
	}
	if got := renderAs(t, "text", m); got != want {
		t.Errorf("cells out of the kernels' order change the table:\n%s\nwant:\n%s", got, want)
	}
	m.Rows[0].Cells = m.Rows[0].Cells[:1]
	out := renderAs(t, "text", m)
	checkText(t, out)
	if !regexp.MustCompile(`(?m)^fuse-uring jobs=1 randread bs=4k +- +- +- \[1\]$`).MatchString(out) {
		t.Errorf("a row with cells missing:\n%s", out)
	}
}

// TestSuites: a suite cell shows as a line in every format, a JUnit
// testcase on its kernel, and its hostile strings stay inert.
func TestSuites(t *testing.T) {
	m := testMatrix(t)
	m.Suites = []SuiteCell{
		{Experiment: "fst", Kernel: base, Suite: "fstests", Config: "ext4", Run: "cells/fst@debian_7.3/r",
			Sides: []SuiteSide{{Kernel: base, Tests: 2, Pass: 2}}},
		{Experiment: "fst", Kernel: fix, Suite: "fstests", Config: "ext4", Failed: true,
			Sides:       []SuiteSide{{Label: "A", Kernel: base, Tests: 3, Pass: 3}, {Label: "B", Kernel: fix, Tests: 3, Pass: 1, Fail: 1, Hang: 1}},
			Regressions: []SuiteTest{{Name: "generic/002", Status: "fail", BFails: 3, BRuns: 3, ARuns: 3}},
			Flaky:       []SuiteTest{{Name: "generic/<b>003", Status: "hang", BFails: 1, BRuns: 3, ARuns: 3}}},
	}
	lines := suiteLines(m)
	want := []string{
		"fst on debian:7.3 (fstests ext4): debian:7.3: 2 pass, 0 fail, 0 notrun, 0 hang, 0 crash",
		"FAIL fst on build:fix (fstests ext4): A debian:7.3: 3 pass, 0 fail, 0 notrun, 0 hang, 0 crash; B build:fix: 1 pass, 1 fail, 0 notrun, 1 hang, 0 crash; " +
			"regression generic/002 (B fails 3/3, A 0/3); flaky generic/<b>003 (B fails 1/3, A 0/3)",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("suite lines:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	text := renderAs(t, "text", m)
	checkText(t, text)
	if !strings.Contains(text, "\nfst on debian:7.3 (fstests ext4): debian:7.3: 2 pass") {
		t.Errorf("text:\n%s", text)
	}
	if md := renderAs(t, "md", m); !strings.Contains(md, "### Test suites\n\n- fst on `debian:7.3`") || !strings.Contains(md, "generic/\\<b>003") {
		t.Errorf("markdown:\n%s", md)
	}
	if h := renderAs(t, "html", m); !strings.Contains(h, "<h2>Test suites</h2>") || !strings.Contains(h, `<li class="fail">FAIL fst on build:fix`) || strings.Contains(h, "<b>") {
		t.Errorf("html:\n%s", h)
	}
	var back Matrix
	if err := json.Unmarshal([]byte(renderAs(t, "json", m)), &back); err != nil || !reflect.DeepEqual(back.Suites, m.Suites) {
		t.Errorf("json: %v, suites %+v", err, back.Suites)
	}
	junit := renderAs(t, "junit", m)
	if n := strings.Count(junit, `classname="fst" name="fstests ext4"`); n != 2 {
		t.Errorf("junit: %d suite testcases, want 2:\n%s", n, junit)
	}
}
