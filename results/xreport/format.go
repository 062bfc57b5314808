package xreport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"klab/results"
	"klab/results/report"
	"klab/results/stats"
)

// This file holds Write and WriteAll and what the formats share: the
// sanitising of untrusted strings, the formatting of numbers, and the
// lines and table cells every format shows.

// Formats are the formats Write takes, in the order they are listed to
// users.
var Formats = []string{"text", "md", "json", "junit", "html"}

// Write writes m to w in format, one of Formats: "text" (Text), "md"
// (Markdown), "json" (JSON), "junit" (JUnit) or "html" (HTML).
func Write(w io.Writer, m *Matrix, format string) error {
	switch format {
	case "text":
		return Text(w, m)
	case "md":
		return Markdown(w, m)
	case "json":
		return JSON(w, m)
	case "junit":
		return JUnit(w, m)
	case "html":
		return HTML(w, m)
	}
	return fmt.Errorf("unknown matrix report format %q, want one of %s", format, strings.Join(Formats, ", "))
}

// files are the files WriteAll writes, with their formats.
var files = []struct{ Name, Format string }{
	{"report.txt", "text"},
	{"report.md", "md"},
	{"report.json", "json"},
	{"report.xml", "junit"},
	{"report.html", "html"},
}

// WriteAll writes m into dir in every format, one file each:
// report.txt, report.md, report.json, report.xml (JUnit) and
// report.html, creating dir when it does not exist. Each file is replaced atomically:
// a reader sees the old report or the new one, never a mix. A file that
// fails does not stop the others; the errors are joined.
func WriteAll(dir string, m *Matrix) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing matrix reports: %w", err)
	}
	var errs []error
	for _, f := range files {
		var b bytes.Buffer
		if err := Write(&b, m, f.Format); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := results.WriteFileAtomic(filepath.Join(dir, f.Name), b.Bytes(), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// oneLine is s without control and format characters (report.Clean) on
// one line, runs of white space made one space.
func oneLine(s string) string {
	return strings.Join(strings.Fields(report.Clean(s)), " ")
}

// joinNonEmpty joins the non-empty parts with sep.
func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// scale says how to show values of one unit: divided by div, followed
// by prefix ("k") and, after a space, unit.
type scale struct {
	div    float64
	prefix string
	unit   string
}

// format formats v (in the unscaled unit) with three significant digits.
func (s scale) format(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	num := sig(v/s.div) + s.prefix
	if s.unit == "" || s.unit == "%" {
		return num + s.unit
	}
	return num + " " + s.unit
}

// binaryUnits are the byte units, each 1024 times the one before.
var binaryUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}

// timeUnits are the time units with their length in nanoseconds.
var timeUnits = []struct {
	name string
	ns   float64
}{{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}}

// decimalPrefixes scale every other unit.
var decimalPrefixes = []struct {
	div    float64
	prefix string
}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}}

// scaleFor returns the scale that shows magnitudes around mag in unit
// readably: bytes ("B", "MiB/s") in KiB, MiB, GiB; times ("ns", "ms",
// "ns/op") in ns, us, ms, s; anything else with k, M, G, T.
func scaleFor(mag float64, unit string) scale {
	mag = math.Abs(mag)
	base, per, hasPer := strings.Cut(unit, "/")
	if hasPer {
		per = "/" + per
	}
	if base == "µs" || base == "μs" {
		base = "us"
	}
	if mag == 0 || math.IsNaN(mag) || math.IsInf(mag, 0) {
		return scale{div: 1, unit: base + per}
	}
	for i, b := range binaryUnits {
		if b != base {
			continue
		}
		bytes := mag * math.Pow(1024, float64(i))
		k := 0
		for k+1 < len(binaryUnits) && bytes >= math.Pow(1024, float64(k+1)) {
			k++
		}
		return scale{div: math.Pow(1024, float64(k-i)), unit: binaryUnits[k] + per}
	}
	for _, b := range timeUnits {
		if b.name != base {
			continue
		}
		ns := mag * b.ns
		t := timeUnits[0]
		for _, u := range timeUnits {
			if ns >= u.ns {
				t = u
			}
		}
		return scale{div: t.ns / b.ns, unit: t.name + per}
	}
	for _, p := range decimalPrefixes {
		if mag >= p.div {
			return scale{div: p.div, prefix: p.prefix, unit: unit}
		}
	}
	return scale{div: 1, unit: unit}
}

// fmtValue formats v of unit readably: "12.3k ops/s", "512 MiB/s",
// "1.25 ms".
func fmtValue(v float64, unit string) string {
	return scaleFor(v, unit).format(v)
}

// sig formats x with about three significant digits.
func sig(x float64) string {
	switch a := math.Abs(x); {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

// fmtPct formats a relative change: "+12.3%".
func fmtPct(p float64) string {
	return fmt.Sprintf("%+.1f%%", p)
}

// fmtCI formats a change's confidence interval ("[-3.0% +20%]"), ""
// when it is not known.
func fmtCI(c stats.Change) string {
	if c.PctLo == nil || c.PctHi == nil {
		return ""
	}
	short := func(v float64) string {
		if math.Abs(v) >= 10 {
			return fmt.Sprintf("%+.0f%%", v)
		}
		return fmt.Sprintf("%+.1f%%", v)
	}
	return "[" + short(*c.PctLo) + " " + short(*c.PctHi) + "]"
}

// fmtP formats a p-value: "p=0.029", "p<0.001".
func fmtP(p float64) string {
	switch {
	case math.IsNaN(p):
		return ""
	case p < 0.001:
		return "p<0.001"
	}
	return fmt.Sprintf("p=%.3f", p)
}

// experiments are the matrix's experiment labels: Experiments, or when
// that is empty the distinct experiments of the rows, skipped cells and
// failures in the order they first appear.
func experiments(m *Matrix) []string {
	if len(m.Experiments) > 0 {
		return m.Experiments
	}
	var out []string
	seen := map[string]bool{}
	add := func(e string) {
		if e != "" && !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	for _, r := range m.Rows {
		add(r.Experiment)
	}
	for _, p := range m.Skipped {
		add(p.Experiment)
	}
	for _, p := range m.Failures {
		add(p.Experiment)
	}
	return out
}

// titleLine names the matrix and its size: "matrix nightly: 3 kernels x
// 2 experiments, 5/6 cells complete".
func titleLine(m *Matrix) string {
	return fmt.Sprintf("matrix %s: %d kernels x %d experiments, %d/%d cells complete",
		oneLine(m.Name), len(m.Kernels), len(experiments(m)), m.Complete, m.Cells)
}

// kernelDesc describes a column's kernel: "debian:7.3 (6.12.43+deb13,
// baseline)", the name standing in for an unknown version.
func kernelDesc(m *Matrix, k Kernel) string {
	v := oneLine(k.Version)
	if v == "" {
		v = oneLine(k.Name)
	}
	if k.Ref == m.Baseline {
		v = joinNonEmpty(", ", v, "baseline")
	}
	if v == "" {
		return oneLine(k.Ref)
	}
	return oneLine(k.Ref) + " (" + v + ")"
}

// kernelsLine lists the columns and the accelerator: "kernels: a (v1,
// baseline), b (v2); accel kvm".
func kernelsLine(m *Matrix) string {
	descs := make([]string, len(m.Kernels))
	for i, k := range m.Kernels {
		descs[i] = kernelDesc(m, k)
	}
	if len(descs) == 0 {
		descs = []string{"none"}
	}
	return "kernels: " + strings.Join(descs, ", ") + "; accel " + oneLine(m.Accel)
}

// fileLine names the matrix file and the results tree.
func fileLine(m *Matrix) string {
	f := oneLine(m.File)
	if s := oneLine(m.SHA256); s != "" {
		f = joinNonEmpty(" ", f, "(sha256 "+s+")")
	}
	return joinNonEmpty(", ", joinNonEmpty(" ", "file", f), joinNonEmpty(" ", "results in", oneLine(m.Dir)))
}

// legendLine explains the table's marks.
func legendLine(m *Matrix) string {
	base := "no baseline"
	if m.Baseline != "" {
		base = "changes vs the baseline " + oneLine(m.Baseline)
	}
	return fmt.Sprintf("%s; * significant (Mann-Whitney U, alpha %.2f); ~ no significant change; - no value",
		base, stats.Alpha)
}

// noteLine is footnote n: "[2] skipped: needs fuse-io-uring".
func noteLine(n int, text string) string {
	return noteMark(n) + " " + text
}

// noteMark refers to footnote n: "[2]".
func noteMark(n int) string {
	return "[" + strconv.Itoa(n) + "]"
}

// table is the rows x kernels table every format shows.
type table struct {
	// kernels are the columns; base is the baseline's index, -1 when
	// no column is the baseline.
	kernels []Kernel
	base    int
	rows    []tableRow
	// notes are the footnotes' texts, note n at notes[n-1].
	notes []string
}

// tableRow is one row of the table.
type tableRow struct {
	// label is the experiment and the row's name (Experiment + " " +
	// name); name is the name alone; experiment the experiment.
	label, name, experiment string
	cells                   []tableCell
}

// tableCell is one row's value on one kernel.
type tableCell struct {
	// value is the median with its unit, "-" when there is none;
	// hasValue is set when there is one.
	value    string
	hasValue bool
	// change is the change vs the baseline ("+12.3%*", "~"), "" for the
	// baseline and when there is nothing to compare.
	change string
	// note is the footnote saying why the value is missing, 0 for none.
	note int
	// baseline is set in the baseline's column.
	baseline bool
	// verdict is the change's verdict when it is significant, "" else;
	// pct is the change in percent.
	verdict stats.Verdict
	pct     float64
	// detail describes the cell in full: samples, interval, change, p.
	detail string
	// run is the cell's run directory.
	run string
}

// changePart is the change and the footnote mark, as the text formats
// show them next to the value.
func (c tableCell) changePart() string {
	mark := ""
	if c.note > 0 {
		mark = noteMark(c.note)
	}
	return joinNonEmpty(" ", c.change, mark)
}

// text is the whole cell on one line: "13.8k ops/s +12.2%*".
func (c tableCell) text() string {
	return joinNonEmpty(" ", c.value, c.changePart())
}

// defaultMetrics are the metrics a row's label does not name: an
// experiment's usual throughputs.
var defaultMetrics = map[string]bool{"": true, "ops_per_sec": true, "bytes_per_sec": true}

// rowName is a row's name, with its metric when that is not a
// throughput: "open threads=4 (p99_ns)".
func rowName(r Row) string {
	n := oneLine(r.Name)
	if !defaultMetrics[r.Metric] && !strings.HasSuffix(r.Name, " "+r.Metric) {
		n = joinNonEmpty(" ", n, "("+oneLine(r.Metric)+")")
	}
	return n
}

// newTable builds the table of m.
func newTable(m *Matrix) *table {
	t := &table{kernels: m.Kernels, base: -1}
	for i, k := range m.Kernels {
		if k.Ref == m.Baseline {
			t.base = i
			break
		}
	}
	notes := map[string]int{}
	note := func(text string) int {
		if text = oneLine(text); text == "" {
			return 0
		}
		if n, ok := notes[text]; ok {
			return n
		}
		t.notes = append(t.notes, text)
		notes[text] = len(t.notes)
		return len(t.notes)
	}
	for _, r := range m.Rows {
		tr := tableRow{
			name:       rowName(r),
			experiment: oneLine(r.Experiment),
		}
		tr.label = joinNonEmpty(" ", tr.experiment, tr.name)
		var base *Cell
		if t.base >= 0 {
			base = cellOf(r, t.base, m.Kernels[t.base].Ref)
		}
		for i, k := range m.Kernels {
			c := cellOf(r, i, k.Ref)
			tc := tableCell{value: "-", baseline: i == t.base}
			if c == nil {
				tc.detail = "no value"
				tr.cells = append(tr.cells, tc)
				continue
			}
			tc.note = note(c.Missing)
			tc.run = c.Run
			if c.Summary.N > 0 {
				tc.value, tc.hasValue = fmtValue(c.Summary.Median, r.Unit), true
			}
			if ch := c.Change; ch != nil && !tc.baseline && tc.hasValue {
				switch {
				case !ch.Significant:
					tc.change = "~"
				case base != nil && base.Summary.Median == 0:
					tc.change = "n/a"
				default:
					tc.change = fmtPct(ch.Pct) + "*"
					tc.verdict, tc.pct = ch.Verdict, ch.Pct
				}
			}
			tc.detail = cellDetail(m, r, *c)
			tr.cells = append(tr.cells, tc)
		}
		t.rows = append(t.rows, tr)
	}
	return t
}

// cellOf returns row's cell for kernel ref, the i-th column: Cells[i]
// when it is that kernel's, else the cell naming ref; nil when there is
// none.
func cellOf(r Row, i int, ref string) *Cell {
	if i < len(r.Cells) && r.Cells[i].Kernel == ref {
		return &r.Cells[i]
	}
	for j := range r.Cells {
		if r.Cells[j].Kernel == ref {
			return &r.Cells[j]
		}
	}
	return nil
}

// cellDetail describes a cell in full: "13.8k ops/s (n 5, CI 13.6k
// ops/s to 13.9k ops/s); vs debian:7.3: +12.2% [+9.7% +15%] p=0.008,
// better; no value: why".
func cellDetail(m *Matrix, r Row, c Cell) string {
	var parts []string
	if s := c.Summary; s.N > 0 {
		v := fmtValue(s.Median, r.Unit) + fmt.Sprintf(" (n %d", s.N)
		if s.Lo != nil && s.Hi != nil {
			v += ", CI " + fmtValue(*s.Lo, r.Unit) + " to " + fmtValue(*s.Hi, r.Unit)
		}
		parts = append(parts, v+")")
	} else {
		parts = append(parts, "no value")
	}
	if c.Kernel == m.Baseline {
		parts = append(parts, "baseline")
	} else if ch := c.Change; ch != nil {
		parts = append(parts, "vs "+oneLine(m.Baseline)+": "+
			joinNonEmpty(" ", fmtPct(ch.Pct), fmtCI(*ch), fmtP(ch.P))+", "+oneLine(string(ch.Verdict)))
	}
	if why := oneLine(c.Missing); why != "" {
		parts = append(parts, "missing: "+why)
	}
	return strings.Join(parts, "; ")
}

// runLink is the relative link to a cell's own report,
// "<run>/report.html", or "" when run is not a plain relative path: it
// must be made of letters, digits and "._-+=,@~/", not start with '/',
// have no empty, "." or ".." element.
func runLink(run string) string {
	if run == "" || strings.HasPrefix(run, "/") || path.Clean(run) != run {
		return ""
	}
	for _, r := range run {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-+=,@~/", r)
		if !ok {
			return ""
		}
	}
	for el := range strings.SplitSeq(run, "/") {
		if el == "" || el == "." || el == ".." {
			return ""
		}
	}
	return run + "/report.html"
}

// splatLine is one splat: "NEW splat on build:fix: title (kasan; 1x)".
func splatLine(s Splat) string {
	l := "splat on " + oneLine(s.Kernel) + ": " + oneLine(s.Title) + " (" +
		joinNonEmpty("; ", oneLine(s.Type), fmt.Sprintf("%dx", s.Count)) + ")"
	if s.New {
		l = "NEW " + l
	}
	return l
}

// noSplats is said when no kernel printed a kernel report.
const noSplats = "no kernel splats"

// sortedSplats are the splats ordered by their kernel's column (splats
// of kernels that are no column last), in their order otherwise.
func sortedSplats(m *Matrix) []Splat {
	var out []Splat
	for _, k := range m.Kernels {
		for _, s := range m.Splats {
			if s.Kernel == k.Ref {
				out = append(out, s)
			}
		}
	}
	for _, s := range m.Splats {
		if kernelIndex(m, s.Kernel) < 0 {
			out = append(out, s)
		}
	}
	return out
}

// kernelIndex is the column of the kernel ref, -1 when it has none.
func kernelIndex(m *Matrix, ref string) int {
	for i, k := range m.Kernels {
		if k.Ref == ref {
			return i
		}
	}
	return -1
}

// splatLines are the splats, one line each, or noSplats.
func splatLines(m *Matrix) []string {
	var out []string
	for _, s := range sortedSplats(m) {
		out = append(out, splatLine(s))
	}
	if len(out) == 0 {
		return []string{noSplats}
	}
	return out
}

// problemCell names a problem's cell: its Cell, or "experiment on
// kernel".
func problemCell(p Problem) string {
	if c := oneLine(p.Cell); c != "" {
		return c
	}
	return joinNonEmpty(" on ", oneLine(p.Experiment), oneLine(p.Kernel))
}

// problemText is a problem on one line: "cell: message".
func problemText(p Problem) string {
	return joinNonEmpty(": ", problemCell(p), oneLine(p.Message))
}

// skippedLines are the skipped cells: "skipped: cell: reason".
func skippedLines(m *Matrix) []string {
	var out []string
	for _, p := range m.Skipped {
		out = append(out, "skipped: "+problemText(p))
	}
	return out
}

// failureLines are the failures: "FAIL cell: message".
func failureLines(m *Matrix) []string {
	var out []string
	for _, p := range m.Failures {
		out = append(out, "FAIL "+problemText(p))
	}
	return out
}

// warningLines are the matrix's warnings, each once.
func warningLines(m *Matrix) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range m.Warnings {
		if w = oneLine(w); w != "" && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// passed reports whether the matrix passed.
func passed(m *Matrix) bool {
	return len(m.Failures) == 0
}

// resultLine is the final verdict: "result: PASS" or "result: FAIL: a;
// b".
func resultLine(m *Matrix) string {
	if passed(m) {
		return "result: PASS"
	}
	fs := make([]string, len(m.Failures))
	for i, f := range m.Failures {
		fs[i] = problemText(f)
	}
	return "result: FAIL: " + strings.Join(fs, "; ")
}
