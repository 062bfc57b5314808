// Command testtimes reads the output of `go test -json` and prints where
// the time went: for each package, its top-level tests sorted by time,
// longest first, with their share of the package and their result; then
// every package's own time and the total.
//
// Usage:
//
//	go test -p 1 -count=1 -json ./... > test.json
//	go run ./e2e/testtimes [-top N] [-sub] [-pkg REGEXP] test.json
//
// With no file it reads standard input. -top N keeps the N longest tests
// of each package, -sub lists subtests under their test, and -pkg keeps
// the packages whose import path matches. A test that called t.Parallel
// is marked "par": its time overlaps other tests', so a package's tests
// can add up to more than the package took. It is what `make test-times`
// runs.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// test is one test's outcome.
type test struct {
	name     string
	start    time.Time // its run event
	seconds  float64
	result   string // pass, fail, skip, or "" for one that never ended
	parallel bool
	paused   bool // it called t.Parallel and has not gone on yet
	subs     []*test
}

// pkg is one package's tests and time.
type pkg struct {
	path    string
	first   time.Time // its first event
	last    time.Time // its last event
	seconds float64
	result  string // pass, fail, skip ("no test files"), or ""
	tests   []*test
	byName  map[string]*test
}

// report is what `go test -json` streams say about time.
type report struct {
	pkgs        []*pkg
	byPath      map[string]*pkg
	first, last time.Time
}

// maxLine bounds one line of the stream: a test's output line is one
// event, and a guest can print long lines.
const maxLine = 16 << 20

// read adds a `go test -json` stream to rep. Lines that are not JSON
// events (a build failure's text, go vet's output) are skipped.
func (rep *report) read(r io.Reader) error {
	if rep.byPath == nil {
		rep.byPath = map[string]*pkg{}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Package == "" {
			continue
		}
		if !e.Time.IsZero() {
			if rep.first.IsZero() || e.Time.Before(rep.first) {
				rep.first = e.Time
			}
			if e.Time.After(rep.last) {
				rep.last = e.Time
			}
		}
		p := rep.byPath[e.Package]
		if p == nil {
			p = &pkg{path: e.Package, first: e.Time, byName: map[string]*test{}}
			rep.byPath[e.Package] = p
			rep.pkgs = append(rep.pkgs, p)
		}
		if e.Time.After(p.last) {
			p.last = e.Time
		}
		if e.Test == "" {
			switch e.Action {
			case "pass", "fail", "skip":
				p.result, p.seconds = e.Action, e.Elapsed
			}
			continue
		}
		t := p.test(e.Test)
		switch e.Action {
		case "run", "cont":
			// A parallel test's time counts from when it goes on
			// (cont), as go test's own does.
			t.start, t.paused = e.Time, false
		case "pause":
			t.parallel, t.paused = true, true
		case "pass", "fail", "skip":
			t.result, t.seconds = e.Action, e.Elapsed
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the test events: %w", err)
	}
	rep.openTimes()
	for _, p := range rep.pkgs {
		for _, t := range p.tests {
			t.addParallelSubs()
		}
	}
	return nil
}

// addParallelSubs adds to the time of each ended test the time of its
// subtests that ran in parallel: go test's time for a test ends with its
// own function, before those subtests run. (Its end event comes after
// them, but the time between also holds their waits for a slot.)
func (t *test) addParallelSubs() {
	for _, s := range t.subs {
		s.addParallelSubs()
		if s.parallel && t.result != "" {
			t.seconds += s.seconds
		}
	}
}

// openTimes gives a package or test that has not ended (the stream is of
// a run still going, or one killed at its timeout) the time from its
// start to its package's last event; a parallel test still paused has
// none.
func (rep *report) openTimes() {
	for _, p := range rep.pkgs {
		if p.result == "" && !p.first.IsZero() {
			p.seconds = p.last.Sub(p.first).Seconds()
		}
		for _, t := range p.byName {
			if t.result == "" && !t.start.IsZero() && !t.paused {
				t.seconds = p.last.Sub(t.start).Seconds()
			}
		}
	}
}

// test returns the named test (a subtest when the name has a slash),
// adding it the first time.
func (p *pkg) test(name string) *test {
	if t := p.byName[name]; t != nil {
		return t
	}
	t := &test{name: name}
	p.byName[name] = t
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		parent := p.test(name[:i])
		parent.subs = append(parent.subs, t)
	} else {
		p.tests = append(p.tests, t)
	}
	return t
}

// options say what print shows.
type options struct {
	top  int            // the longest N tests of each package; 0 for all
	subs bool           // subtests under their test
	pkg  *regexp.Regexp // only the packages that match; nil for all
}

// writeTable writes the table of rep to w.
func writeTable(w io.Writer, rep *report, o options) {
	var pkgs []*pkg
	for _, p := range rep.pkgs {
		if o.pkg == nil || o.pkg.MatchString(p.path) {
			pkgs = append(pkgs, p)
		}
	}
	total := 0.0
	for _, p := range pkgs {
		total += p.seconds
		if len(p.tests) == 0 {
			continue
		}
		tests := slices.Clone(p.tests)
		sortLongest(tests)
		sum := 0.0
		counts := map[string]int{}
		for _, t := range tests {
			sum += t.seconds
			counts[resultWord(t.result)]++
		}
		fmt.Fprintf(w, "%s: %s, %d tests (%s); the tests add up to %.1f s\n",
			p.path, clock(p.seconds), len(tests), countWords(counts), sum)
		fmt.Fprintf(w, "  %8s %6s  %-4s %-3s %s\n", "seconds", "share", "", "", "test")
		shown := tests
		if o.top > 0 && len(shown) > o.top {
			shown = shown[:o.top]
		}
		for _, t := range shown {
			row(w, t, p.seconds, 0)
			if o.subs {
				printSubs(w, t, p.seconds, 1)
			}
		}
		if left := len(tests) - len(shown); left > 0 {
			rest := 0.0
			for _, t := range tests[len(shown):] {
				rest += t.seconds
			}
			fmt.Fprintf(w, "  %8.1f %6s  %d more tests\n", rest, share(rest, p.seconds), left)
		}
		fmt.Fprintln(w)
	}
	sorted := slices.Clone(pkgs)
	slices.SortStableFunc(sorted, func(a, b *pkg) int { return cmpDesc(a.seconds, b.seconds) })
	fmt.Fprintf(w, "packages (test binaries' run time, without building them):\n")
	fmt.Fprintf(w, "  %8s %6s  %-4s %s\n", "seconds", "share", "", "package")
	for _, p := range sorted {
		fmt.Fprintf(w, "  %8.1f %6s  %-4s %s\n", p.seconds, share(p.seconds, total), resultWord(p.result), p.path)
	}
	fmt.Fprintf(w, "  %8.1f %6s  %-4s total (%s)\n", total, "", "", clock(total))
	if !rep.first.IsZero() {
		wall := rep.last.Sub(rep.first).Seconds()
		fmt.Fprintf(w, "  %8.1f %6s  %-4s first event to last (%s; building included)\n", wall, "", "", clock(wall))
	}
}

// printSubs writes t's subtests, longest first, indented by depth.
func printSubs(w io.Writer, t *test, of float64, depth int) {
	subs := slices.Clone(t.subs)
	sortLongest(subs)
	for _, s := range subs {
		row(w, s, of, depth)
		printSubs(w, s, of, depth+1)
	}
}

// row writes one test's line.
func row(w io.Writer, t *test, of float64, depth int) {
	par := ""
	if t.parallel {
		par = "par"
	}
	name := t.name
	if depth > 0 {
		name = strings.Repeat("  ", depth) + name[strings.LastIndexByte(name, '/')+1:]
	}
	fmt.Fprintf(w, "  %8.1f %6s  %-4s %-3s %s\n", t.seconds, share(t.seconds, of), resultWord(t.result), par, name)
}

func sortLongest(ts []*test) {
	slices.SortStableFunc(ts, func(a, b *test) int { return cmpDesc(a.seconds, b.seconds) })
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func resultWord(r string) string {
	if r == "" {
		return "open"
	}
	return r
}

// countWords says how many tests passed, failed, skipped or never ended.
func countWords(counts map[string]int) string {
	var parts []string
	for _, k := range []string{"pass", "fail", "skip", "open"} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	return strings.Join(parts, ", ")
}

func share(part, whole float64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*part/whole)
}

// clock gives seconds as minutes and seconds.
func clock(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

func main() {
	var o options
	var pkgRE string
	flag.IntVar(&o.top, "top", 0, "show the `N` longest tests of each package (0: all)")
	flag.BoolVar(&o.subs, "sub", false, "list subtests under their test")
	flag.StringVar(&pkgRE, "pkg", "", "only the packages whose import path matches `REGEXP`")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: testtimes [-top N] [-sub] [-pkg REGEXP] [FILE...]\n\n"+
			"Prints the time of each test and package in go test -json output (FILE, or standard input).\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if pkgRE != "" {
		re, err := regexp.Compile(pkgRE)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testtimes: -pkg: %v\n", err)
			os.Exit(2)
		}
		o.pkg = re
	}
	if err := run(os.Stdout, os.Stdin, flag.Args(), o); err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: %v\n", err)
		os.Exit(1)
	}
}

// run prints the table of the files' events together (standard input's
// when there are no files).
func run(w io.Writer, stdin io.Reader, files []string, o options) error {
	rep := &report{}
	if len(files) == 0 {
		if err := rep.read(stdin); err != nil {
			return err
		}
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = rep.read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if len(rep.pkgs) == 0 {
		return errors.New("no test events: want the output of go test -json")
	}
	writeTable(w, rep, o)
	return nil
}
