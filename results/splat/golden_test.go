package splat

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the headers of testdata/*.log from what the parser finds")

// A golden file in testdata is a header, a blank line, then a raw console
// log. The header has "# " comment lines (where the log comes from), then
// for each report the parser must find, in order:
//
//	TITLE: WARNING in fuse_dev_do_write
//	TYPE: warning
//	LINE: 3
//	FATAL: N
//	CORRUPTED: N
//
// LINE counts from the first line of the raw log. A file without TITLE
// lines must yield no report. `go test ./results/splat -update` rewrites
// the report lines from the parser's output and keeps the comments.

type golden struct {
	comments []string
	reports  []goldenReport
	log      []byte
}

type goldenReport struct {
	Title     string
	Type      Type
	Line      int
	Fatal     bool
	Corrupted bool
}

func (g goldenReport) String() string {
	return fmt.Sprintf("{%s %q line %d fatal %v corrupted %v}", g.Type, g.Title, g.Line, g.Fatal, g.Corrupted)
}

func readGolden(path string) (golden, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return golden{}, err
	}
	head, log, ok := bytes.Cut(data, []byte("\n\n"))
	if !ok {
		return golden{}, fmt.Errorf("%s: no blank line after the header", path)
	}
	g := golden{log: log}
	sc := bufio.NewScanner(bytes.NewReader(head))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, "# "); ok || line == "#" {
			g.comments = append(g.comments, c)
			continue
		}
		key, val, ok := strings.Cut(line, ": ")
		if !ok {
			return g, fmt.Errorf("%s:%d: %q is not KEY: VALUE", path, n, line)
		}
		if key == "TITLE" {
			g.reports = append(g.reports, goldenReport{Title: val})
			continue
		}
		if len(g.reports) == 0 {
			return g, fmt.Errorf("%s:%d: %s before TITLE", path, n, key)
		}
		r := &g.reports[len(g.reports)-1]
		switch key {
		case "TYPE":
			r.Type = Type(val)
		case "LINE":
			if r.Line, err = strconv.Atoi(val); err != nil {
				return g, fmt.Errorf("%s:%d: %w", path, n, err)
			}
		case "FATAL":
			r.Fatal = val == "Y"
		case "CORRUPTED":
			r.Corrupted = val == "Y"
		default:
			return g, fmt.Errorf("%s:%d: unknown key %q, want TITLE, TYPE, LINE, FATAL or CORRUPTED", path, n, key)
		}
	}
	if len(g.comments) == 0 {
		return g, fmt.Errorf("%s: the header has no '# ' line saying where the log comes from", path)
	}
	return g, nil
}

func (g golden) bytes() []byte {
	var b bytes.Buffer
	for _, c := range g.comments {
		fmt.Fprintf(&b, "# %s\n", c)
	}
	yn := map[bool]string{true: "Y", false: "N"}
	for _, r := range g.reports {
		fmt.Fprintf(&b, "TITLE: %s\nTYPE: %s\nLINE: %d\nFATAL: %s\nCORRUPTED: %s\n",
			r.Title, r.Type, r.Line, yn[r.Fatal], yn[r.Corrupted])
	}
	b.WriteString("\n")
	b.Write(g.log)
	return b.Bytes()
}

// corpusFiles returns the golden files.
func corpusFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/*.log: %v", err)
	}
	return files
}

// scanAll runs a scanner over a whole log and closes it.
func scanAll(log []byte) []Report {
	s := NewScanner()
	s.Write(log)
	s.Close()
	return s.Reports()
}

func toGolden(rs []Report) []goldenReport {
	var out []goldenReport
	for _, r := range rs {
		out = append(out, goldenReport{Title: r.Title, Type: r.Type, Line: r.Line, Fatal: r.Fatal, Corrupted: r.Corrupted})
	}
	return out
}

func TestGolden(t *testing.T) {
	for _, path := range corpusFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".log"), func(t *testing.T) {
			g, err := readGolden(path)
			if err != nil {
				t.Fatal(err)
			}
			got := toGolden(scanAll(g.log))
			if *update {
				g.reports = got
				if err := os.WriteFile(path, g.bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !reflect.DeepEqual(got, g.reports) {
				t.Errorf("reports differ (run with -update to accept)\n got:")
				for _, r := range got {
					t.Errorf("   %s", r)
				}
				t.Errorf(" want:")
				for _, r := range g.reports {
					t.Errorf("   %s", r)
				}
			}
		})
	}
}

// Every report in the corpus is well formed, whatever its title.
func TestCorpusReports(t *testing.T) {
	for _, path := range corpusFiles(t) {
		g, err := readGolden(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(g.log), "\n")
		for _, r := range scanAll(g.log) {
			name := fmt.Sprintf("%s:%d", path, r.Line)
			if r.Line < 1 || r.Line > len(lines) {
				t.Errorf("%s: line out of range", name)
				continue
			}
			// The header line is in the report's text.
			header := parseLine(lines[r.Line-1]).msg
			if !strings.Contains(r.Text, header) {
				t.Errorf("%s: text does not hold the header %q", name, header)
			}
			if r.Frames == nil {
				t.Errorf("%s: Frames is nil", name)
			}
			if r.Guilty != "" && !strings.Contains(r.Title, titleFunc(r.Guilty)) {
				t.Errorf("%s: title %q does not name the guilty frame %q", name, r.Title, r.Guilty)
			}
			if r.Corrupted != (r.CorruptedReason != "") {
				t.Errorf("%s: corrupted %v with reason %q", name, r.Corrupted, r.CorruptedReason)
			}
			if strings.Contains(r.Text, "[    ") || strings.Contains(r.Title, "0x") {
				t.Errorf("%s: a timestamp or address left in %q", name, r.Title)
			}
		}
	}
}
