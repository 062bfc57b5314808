package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// stream is a shortened `go test -json` run of two packages: one with a
// parallel test, subtests, a skip and a failure; one with no test files;
// and a line of build output that is not an event.
const stream = `# klab/x
{"Time":"2026-12-03T10:00:00Z","Action":"start","Package":"klab/e2e"}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"klab/e2e","Test":"TestA"}
{"Time":"2026-12-03T10:00:00Z","Action":"output","Package":"klab/e2e","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Time":"2026-12-03T10:00:00Z","Action":"pause","Package":"klab/e2e","Test":"TestA"}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"klab/e2e","Test":"TestB"}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"klab/e2e","Test":"TestB/one"}
{"Time":"2026-12-03T10:00:00Z","Action":"pass","Package":"klab/e2e","Test":"TestB/one","Elapsed":2}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"klab/e2e","Test":"TestB/two"}
{"Time":"2026-12-03T10:00:00Z","Action":"fail","Package":"klab/e2e","Test":"TestB/two","Elapsed":30}
{"Time":"2026-12-03T10:00:00Z","Action":"fail","Package":"klab/e2e","Test":"TestB","Elapsed":32}
{"Time":"2026-12-03T10:00:00Z","Action":"cont","Package":"klab/e2e","Test":"TestA"}
{"Time":"2026-12-03T10:00:00Z","Action":"pass","Package":"klab/e2e","Test":"TestA","Elapsed":60}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"klab/e2e","Test":"TestD"}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"klab/e2e","Test":"TestD/one"}
{"Time":"2026-12-03T10:00:00Z","Action":"pause","Package":"klab/e2e","Test":"TestD/one"}
{"Time":"2026-12-03T10:00:01Z","Action":"cont","Package":"klab/e2e","Test":"TestD/one"}
{"Time":"2026-12-03T10:00:05Z","Action":"pass","Package":"klab/e2e","Test":"TestD/one","Elapsed":4}
{"Time":"2026-12-03T10:00:05Z","Action":"pass","Package":"klab/e2e","Test":"TestD","Elapsed":1}
{"Time":"2026-12-03T10:00:05Z","Action":"run","Package":"klab/e2e","Test":"TestC"}
{"Time":"2026-12-03T10:00:00Z","Action":"skip","Package":"klab/e2e","Test":"TestC","Elapsed":0}
{"Time":"2026-12-03T10:01:40Z","Action":"fail","Package":"klab/e2e","Elapsed":100}
{"Time":"2026-12-03T10:01:50Z","Action":"skip","Package":"klab/none","Elapsed":0}
`

func TestTable(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, strings.NewReader(stream), nil, options{subs: true}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	t.Logf("\n%s", got)
	for _, want := range []string{
		"klab/e2e: 1m40s, 4 tests (2 pass, 1 fail, 1 skip); the tests add up to 97.0 s\n",
		// Longest first, with its share of the package, its result and
		// whether it ran in parallel; subtests under their test.
		"      60.0  60.0%  pass par TestA\n      32.0  32.0%  fail     TestB\n      30.0  30.0%  fail       two\n       2.0   2.0%  pass       one\n",
		// A test with parallel subtests takes until its last one
		// ended, not just its own function's second.
		"       5.0   5.0%  pass     TestD\n       4.0   4.0%  pass par   one\n       0.0   0.0%  skip     TestC\n",
		"     100.0 100.0%  fail klab/e2e\n       0.0   0.0%  skip klab/none\n",
		"     100.0              total (1m40s)\n",
		"     110.0              first event to last (1m50s; building included)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks\n%s", want)
		}
	}
	if strings.Contains(got, "klab/none:") {
		t.Errorf("a package without tests has a test table")
	}
}

func TestTableTopAndPackage(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, strings.NewReader(stream), nil, options{top: 1, pkg: regexp.MustCompile(`e2e$`)}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "pass par TestA\n      37.0  37.0%  3 more tests\n") {
		t.Errorf("-top 1 does not sum up the rest:\n%s", got)
	}
	if strings.Contains(got, "klab/none") || strings.Contains(got, "  one\n") {
		t.Errorf("-pkg or the subtests filter let more through:\n%s", got)
	}
}

func TestNoEvents(t *testing.T) {
	if err := run(&bytes.Buffer{}, strings.NewReader("ok  klab/e2e 1.0s\n"), nil, options{}); err == nil {
		t.Error("text output that is not go test -json gave no error")
	}
}

// A run still going (or killed at its timeout) has no end events: its
// package and its open test count up to the last event.
func TestTableOpen(t *testing.T) {
	const open = `{"Time":"2026-12-03T10:00:00Z","Action":"start","Package":"klab/e2e"}
{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"klab/e2e","Test":"TestA"}
{"Time":"2026-12-03T10:00:10Z","Action":"pass","Package":"klab/e2e","Test":"TestA","Elapsed":10}
{"Time":"2026-12-03T10:00:10Z","Action":"run","Package":"klab/e2e","Test":"TestB"}
{"Time":"2026-12-03T10:01:10Z","Action":"output","Package":"klab/e2e","Test":"TestB","Output":"still going\n"}
`
	var out bytes.Buffer
	if err := run(&out, strings.NewReader(open), nil, options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"klab/e2e: 1m10s, 2 tests (1 pass, 1 open)",
		"      60.0  85.7%  open     TestB\n      10.0  14.3%  pass     TestA\n",
		"      70.0 100.0%  open klab/e2e\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks\n%s\n%s", want, out.String())
		}
	}
}
