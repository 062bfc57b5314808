package xreport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"klab/internal/fileio"
	"klab/internal/textsafe"
	"klab/results/internal/render"
	"klab/results/reference"
	"klab/results/stats"
)

// This file holds Write and WriteAll and the lines and table cells
// every format shows.

// Formats are the formats Write takes, in the order they are listed to
// users.
var Formats = render.Formats

// Write writes m to w in format, one of Formats: "text" (Text), "md"
// (Markdown), "json" (JSON), "junit" (JUnit) or "html" (HTML).
func Write(w io.Writer, m *Matrix, format string) error {
	return render.Writers[*Matrix]{Text: Text, Markdown: Markdown, JSON: JSON, JUnit: JUnit, HTML: HTML}.Write(w, m, format, "matrix report")
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
		if err := fileio.WriteAtomic(filepath.Join(dir, f.Name), b.Bytes(), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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
	for _, c := range m.Suites {
		add(c.Experiment)
	}
	return out
}

// titleLine names the matrix and its size: "matrix nightly: 3 kernels x
// 2 experiments, 5/6 cells complete".
func titleLine(m *Matrix) string {
	return strings.Join(titlePhrases(m), " ")
}

// titlePhrases are titleLine's phrases: the name with its colon, then
// the sizes.
func titlePhrases(m *Matrix) []string {
	return []string{"matrix " + textsafe.OneLine(m.Name) + ":", fmt.Sprintf("%d kernels x %d experiments,", len(m.Kernels), len(experiments(m))),
		fmt.Sprintf("%d/%d cells complete", m.Complete, m.Cells)}
}

// kernelDesc describes a column's kernel: "debian:7.3 (6.12.43+deb13,
// baseline)", the name standing in for an unknown version.
func kernelDesc(m *Matrix, k Kernel) string {
	v := textsafe.OneLine(k.Version)
	if v == "" {
		v = textsafe.OneLine(k.Name)
	}
	if k.Ref == m.Baseline {
		v = render.JoinNonEmpty(", ", v, "baseline")
	}
	if v == "" {
		return textsafe.OneLine(k.Ref)
	}
	return textsafe.OneLine(k.Ref) + " (" + v + ")"
}

// kernelsLine lists the columns and the accelerator: "kernels: a (v1,
// baseline), b (v2); accel kvm".
func kernelsLine(m *Matrix) string {
	return strings.Join(kernelsPhrases(m), " ")
}

// kernelsPhrases are kernelsLine's phrases: "kernels:", each kernel's
// description whole with its comma (the last with a semicolon), and the
// accelerator.
func kernelsPhrases(m *Matrix) []string {
	descs := make([]string, len(m.Kernels))
	for i, k := range m.Kernels {
		descs[i] = kernelDesc(m, k)
		if i < len(descs)-1 {
			descs[i] += ","
		}
	}
	if len(descs) == 0 {
		descs = []string{"none"}
	}
	descs[len(descs)-1] += ";"
	return append(append([]string{"kernels:"}, descs...), "accel "+textsafe.OneLine(m.Accel))
}

// fileLine names the matrix file and the results tree.
func fileLine(m *Matrix) string {
	f := textsafe.OneLine(m.File)
	if s := textsafe.OneLine(m.SHA256); s != "" {
		f = render.JoinNonEmpty(" ", f, "(sha256 "+s+")")
	}
	return render.JoinNonEmpty(", ", render.JoinNonEmpty(" ", "file", f), render.JoinNonEmpty(" ", "results in", textsafe.OneLine(m.Dir)))
}

// legendLine explains the table's marks.
func legendLine(m *Matrix) string {
	base := "no baseline"
	if m.Baseline != "" {
		base = "changes vs the baseline " + textsafe.OneLine(m.Baseline)
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

// table is a rows x kernels table: the one every format shows, and the
// references' (see newRefTable).
type table struct {
	// kernels are the columns; base is the baseline's index, -1 when
	// no column is the baseline.
	kernels []Kernel
	base    int
	rows    []tableRow
	// leftHeader aligns the kernels' headers left in text, over cells
	// whose words (the verdicts) are longer than their numbers.
	leftHeader bool
	// notes are the footnotes the cells refer to, shared with the
	// report's other tables; the table's own are notes' texts from
	// noteLo to noteHi (those it added first).
	notes          *footnotes
	noteLo, noteHi int
}

// noteLines are the footnotes the table added, as noteLine shows them.
func (t *table) noteLines() []string {
	var out []string
	for i := t.noteLo; i < t.noteHi; i++ {
		out = append(out, noteLine(i+1, t.notes.texts[i]))
	}
	return out
}

// footnotes are the distinct texts the cells of a report's tables refer
// to, numbered from 1.
type footnotes struct {
	texts []string
	index map[string]int
}

// add returns the number of text's footnote, adding it when it is new;
// 0 for an empty text.
func (f *footnotes) add(text string) int {
	if text = textsafe.OneLine(text); text == "" {
		return 0
	}
	if n, ok := f.index[text]; ok {
		return n
	}
	if f.index == nil {
		f.index = map[string]int{}
	}
	f.texts = append(f.texts, text)
	f.index[text] = len(f.texts)
	return len(f.texts)
}

// text is footnote n's text, "" when there is none.
func (f *footnotes) text(n int) string {
	if n < 1 || n > len(f.texts) {
		return ""
	}
	return f.texts[n-1]
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
	// ref is, in the references' table, the cell's verdict against the
	// reference, and strict says whether a contradiction fails the
	// matrix.
	ref    reference.Verdict
	strict bool
}

// changePart is the change and the footnote mark, as the text formats
// show them next to the value.
func (c tableCell) changePart() string {
	mark := ""
	if c.note > 0 {
		mark = noteMark(c.note)
	}
	return render.JoinNonEmpty(" ", c.change, mark)
}

// text is the whole cell on one line: "13.8k ops/s +12.2%*".
func (c tableCell) text() string {
	return render.JoinNonEmpty(" ", c.value, c.changePart())
}

// defaultMetrics are the metrics a row's label does not name: an
// experiment's usual throughputs.
var defaultMetrics = map[string]bool{"": true, "ops_per_sec": true, "bytes_per_sec": true}

// rowName is a row's name, with its metric when that is not a
// throughput: "open threads=4 (p99_ns)".
func rowName(r Row) string {
	n := textsafe.OneLine(r.Name)
	if !defaultMetrics[r.Metric] && !strings.HasSuffix(r.Name, " "+r.Metric) {
		n = render.JoinNonEmpty(" ", n, "("+textsafe.OneLine(r.Metric)+")")
	}
	return n
}

// newTable builds the table of m.
func newTable(m *Matrix) *table {
	t := &table{kernels: m.Kernels, base: -1, notes: &footnotes{}}
	for i, k := range m.Kernels {
		if k.Ref == m.Baseline {
			t.base = i
			break
		}
	}
	note := t.notes.add
	for _, r := range m.Rows {
		tr := tableRow{
			name:       rowName(r),
			experiment: textsafe.OneLine(r.Experiment),
		}
		tr.label = render.JoinNonEmpty(" ", tr.experiment, tr.name)
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
				tc.value, tc.hasValue = render.FmtValue(c.Summary.Median, r.Unit), true
			}
			if ch := c.Change; ch != nil && !tc.baseline && tc.hasValue {
				switch {
				case !ch.Significant:
					tc.change = "~"
				case base != nil && base.Summary.Median == 0:
					tc.change = "n/a"
				default:
					tc.change = render.FmtPct(ch.Pct) + "*"
					tc.verdict, tc.pct = ch.Verdict, ch.Pct
				}
			}
			tc.detail = cellDetail(m, r, *c)
			tr.cells = append(tr.cells, tc)
		}
		t.rows = append(t.rows, tr)
	}
	t.noteHi = len(t.notes.texts)
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
		v := render.FmtValue(s.Median, r.Unit) + fmt.Sprintf(" (n %d", s.N)
		if s.Lo != nil && s.Hi != nil {
			v += ", CI " + render.FmtValue(*s.Lo, r.Unit) + " to " + render.FmtValue(*s.Hi, r.Unit)
		}
		parts = append(parts, v+")")
	} else {
		parts = append(parts, "no value")
	}
	if c.Kernel == m.Baseline {
		parts = append(parts, "baseline")
	} else if ch := c.Change; ch != nil {
		parts = append(parts, "vs "+textsafe.OneLine(m.Baseline)+": "+
			render.JoinNonEmpty(" ", render.FmtPct(ch.Pct), render.FmtCI(*ch), render.FmtP(ch.P))+", "+textsafe.OneLine(string(ch.Verdict)))
	}
	if why := textsafe.OneLine(c.Missing); why != "" {
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
	l := "splat on " + textsafe.OneLine(s.Kernel) + ": " + textsafe.OneLine(s.Title) + " (" +
		render.JoinNonEmpty("; ", textsafe.OneLine(s.Type), fmt.Sprintf("%dx", s.Count)) + ")"
	if s.New {
		l = "NEW " + l
	}
	return l
}

// suiteLine summarises a suite cell: "FAIL fst on b (fstests
// fuse-klab-uring): A a: 2 pass, 0 fail, 0 notrun, 0 hang, 0 crash; B
// b: ...; regression generic/184 (B fails 3/3, A 0/3)". It starts
// with FAIL when the cell fails the matrix.
func suiteLine(c SuiteCell) string {
	cell := render.JoinNonEmpty(" on ", textsafe.OneLine(c.Experiment), textsafe.OneLine(c.Kernel))
	head := cell + " (" + render.JoinNonEmpty(" ", textsafe.OneLine(c.Suite), textsafe.OneLine(c.Config)) + ")"
	var parts []string
	for _, sd := range c.Sides {
		parts = append(parts, fmt.Sprintf("%s: %d pass, %d fail, %d notrun, %d hang, %d crash",
			render.JoinNonEmpty(" ", textsafe.OneLine(sd.Label), textsafe.OneLine(sd.Kernel)), sd.Pass, sd.Fail, sd.NotRun, sd.Hang, sd.Crash))
	}
	tests := func(what string, ts []SuiteTest, ab bool) {
		if len(ts) == 0 {
			return
		}
		names := make([]string, len(ts))
		for i, t := range ts {
			names[i] = textsafe.OneLine(t.Name) + " (" + textsafe.OneLine(t.Status) + ")"
			if ab {
				names[i] = fmt.Sprintf("%s (B fails %d/%d, A %d/%d)", textsafe.OneLine(t.Name), t.BFails, t.BRuns, t.AFails, t.ARuns)
			}
		}
		parts = append(parts, what+" "+strings.Join(names, ", "))
	}
	tests("regression", c.Regressions, true)
	tests("flaky", c.Flaky, true)
	tests("failing", c.Failing, false)
	l := head + ": " + strings.Join(parts, "; ")
	if c.Failed {
		l = "FAIL " + l
	}
	return l
}

// suiteLines are the suite cells, one line each.
func suiteLines(m *Matrix) []string {
	var out []string
	for _, c := range m.Suites {
		out = append(out, suiteLine(c))
	}
	return out
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
	if c := textsafe.OneLine(p.Cell); c != "" {
		return c
	}
	return render.JoinNonEmpty(" on ", textsafe.OneLine(p.Experiment), textsafe.OneLine(p.Kernel))
}

// problemText is a problem on one line: "cell: message".
func problemText(p Problem) string {
	return render.JoinNonEmpty(": ", problemCell(p), textsafe.OneLine(p.Message))
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
		if w = textsafe.OneLine(w); w != "" && !seen[w] {
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

// bisectLines are the commands that chase the new failures: a line
// saying what each chases, then its command, shell-quoted and broken
// over lines ending in a backslash so that each fits width columns
// (less the indent) and pastes into a shell as it is.
func bisectLines(m *Matrix, width int) []string {
	var out []string
	for _, b := range m.Bisects {
		out = append(out, fmt.Sprintf("%s on %s: %s", textsafe.OneLine(b.Experiment), textsafe.OneLine(b.Kernel), textsafe.OneLine(b.Failure)))
		out = append(out, shellLines(b.Argv, "    ", width)...)
	}
	return out
}

// shellLines is argv as shell words, each quoted when it needs to be,
// joined into lines of at most width columns (a longer word gets a line
// of its own), every line but the last ending in " \\", every line
// indented by indent.
func shellLines(argv []string, indent string, width int) []string {
	var lines []string
	cur := indent
	for i, a := range argv {
		w := shellQuote(render.ToASCII(a))
		if i > 0 && len(cur)+1+len(w)+2 > width {
			lines = append(lines, cur+" \\")
			cur = indent + "  " + w
			continue
		}
		if i > 0 {
			cur += " "
		}
		cur += w
	}
	return append(lines, cur)
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// plain characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,:/@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// bisectTitle heads the commands that chase the new failures.
const bisectTitle = "To find the commit behind a new failure (the kernels are builds of one git tree), run:"

// longestRun is the longest run of c in s.
func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}
