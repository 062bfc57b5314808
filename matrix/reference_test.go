package matrix

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/results/reference"
	"klab/results/xreport"
)

// refSpec compares transports within each cell, with expectations: the
// fake's uring is 50 above dev (1.5x on debian:6.12, 1.38x on
// debian:7.3), better as create's reference finds too;
// create-worse's reference says the opposite; create-kvm's needs KVM,
// which the fake does not say it used; the check passes, as its
// reference says.
const refSpec = `
name: rx
rounds: 4
compare: transport
params:
  transport: [dev, uring]
server:
  kind: passthrough
  transport: ${transport}
  backing: /tmp/backing
  mountpoint: /mnt/fuse
workloads:
  - name: create
    pattern: create
    dir: /mnt/fuse/c
    jobs: 1
    files: 10
    expect: {ratio: 1.5, source: "a reference that agrees", measured_on: {cpus: 32, accel: native}}
  - name: create-worse
    pattern: create
    dir: /mnt/fuse/w
    jobs: 1
    files: 10
    expect: {direction: worse, source: "wrong on purpose"}
  - name: create-kvm
    pattern: create
    dir: /mnt/fuse/k
    jobs: 1
    files: 10
    expect: {ratio: 1.5, source: "needs hardware", needs: {accel: kvm}}
checks:
  - name: ok
    run: "true"
    expect: {source: "it passes"}
`

// kernelRefSpec is kernelSpec with an expectation: about two kernels,
// which a matrix cell of one kernel cannot hold.
var kernelRefSpec = strings.Replace(strings.Replace(kernelSpec, "name: kx", "name: kxe", 1),
	"    files: 10\n", "    files: 10\n    expect: {direction: better, source: a fix}\n", 1)

const refMatrix = `
name: r
baseline: debian:6.12
kernels:
  - debian:6.12
  - debian:7.3
experiments:
  - rx.yaml
  - kxe.yaml
`

// refVerdicts are a report's references as "experiment name: verdict
// on each kernel", a strict contradiction marked.
func refVerdicts(x *xreport.Matrix) []string {
	var out []string
	for _, r := range x.References {
		l := r.Experiment + " " + r.Name + ":"
		for _, c := range r.Cells {
			v := string(c.Verdict)
			if v == "" {
				v = "- (" + c.Missing + ")"
			}
			if c.Strict && c.Verdict == reference.Contradicted {
				v += " (strict)"
			}
			l += " " + c.Kernel + " " + v + ";"
		}
		out = append(out, l)
	}
	return out
}

// TestReportReferences: a matrix cell that runs an A/B within its kernel
// has its rows and checks held against their references on every
// kernel; an experiment that compares kernels gets a note instead; a
// contradiction fails the matrix only when strict, and JUnit fails the
// reference's testcase, not one more.
func TestReportReferences(t *testing.T) {
	if !strings.Contains(kernelRefSpec, "expect: {direction: better") {
		t.Fatalf("kernelRefSpec has no expectation:\n%s", kernelRefSpec)
	}
	f := testFile(t, refMatrix)
	o, _ := options(filepath.Join(t.TempDir(), "r"), 1, Shard{1, 1})
	tr, err := Run(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	x := tr.Report()
	want := []string{
		"rx create: debian:6.12 reproduced; debian:7.3 reproduced;",
		"rx create-worse: debian:6.12 contradicted; debian:7.3 contradicted;",
		"rx create-kvm: debian:6.12 not comparable here; debian:7.3 not comparable here;",
		"rx check ok: debian:6.12 reproduced; debian:7.3 reproduced;",
	}
	if got := refVerdicts(x); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("references:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(x.Failures) != 0 {
		t.Errorf("failures without --strict-reference: %+v", x.Failures)
	}
	r := x.References[0]
	if r.Expected != "better" || r.Ratio != 1.5 || r.Source != "a reference that agrees" || r.MeasuredOn == nil || r.MeasuredOn.CPUs != 32 ||
		r.A != "transport=dev" || r.B != "transport=uring" || r.Metric != "ops_per_sec" || r.Direction != 1 {
		t.Errorf("create's reference %+v", r)
	}
	for _, c := range r.Cells {
		if c.Change == nil || c.Change.Ratio < 1.3 || c.Change.Ratio > 1.6 || !c.Change.Significant || c.Run == "" {
			t.Errorf("create on %s: %+v, change %+v", c.Kernel, c, c.Change)
		}
	}
	if c := x.References[2].Cells[0]; !strings.HasPrefix(c.Reason, "needs accel kvm; this run used") {
		t.Errorf("create-kvm's reason %q", c.Reason)
	}
	if c := x.References[3]; !c.Check || c.Outcome != "pass" || c.Cells[0].Change != nil || c.Cells[0].Reason != "8 of 8 round(s) passed" {
		t.Errorf("the check's reference %+v", c)
	}
	if len(x.ReferenceNotes) != 1 || x.ReferenceNotes[0].Experiment != "kxe" || !strings.Contains(x.ReferenceNotes[0].Message, "needs an A/B within the cell") {
		t.Errorf("reference notes %+v, want one for kxe", x.ReferenceNotes)
	}
	var b bytes.Buffer
	if err := xreport.Write(&b, x, "text"); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	t.Logf("\n%s", text)
	for _, w := range []string{"reproduced", "CONTRADICTED", "not comparable", "reference: kxe: no verdict", "result: PASS"} {
		if !strings.Contains(text, w) {
			t.Errorf("text: no %q", w)
		}
	}

	// --strict-reference: each kernel's contradiction fails the matrix,
	// in a reference testcase of its suite.
	tr.StrictReference = true
	x = tr.Report()
	if got := refVerdicts(x); got[1] != "rx create-worse: debian:6.12 contradicted (strict); debian:7.3 contradicted (strict);" {
		t.Errorf("strict: %s", got[1])
	}
	if len(x.Failures) != 2 {
		t.Fatalf("strict: failures %+v, want one per kernel", x.Failures)
	}
	for _, p := range x.Failures {
		if !p.Reference || p.Experiment != "rx" || !strings.HasPrefix(p.Message, "create-worse: contradicts the reference: B/A 1.") {
			t.Errorf("strict: failure %+v", p)
		}
	}
	b.Reset()
	if err := xreport.Write(&b, x, "junit"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Classname string    `xml:"classname,attr"`
				Name      string    `xml:"name,attr"`
				Failure   *struct{} `xml:"failure"`
				Skipped   *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Failures != 2 {
		t.Errorf("junit: %d failures, want 2 (one reference testcase per kernel):\n%s", doc.Failures, b.String())
	}
	for _, s := range doc.Suites[:2] {
		got := map[string]string{}
		for _, c := range s.Cases {
			if c.Classname != "rx.reference" {
				continue
			}
			got[c.Name] = map[bool]string{true: "failure"}[c.Failure != nil] + map[bool]string{true: "skipped"}[c.Skipped != nil]
		}
		want := map[string]string{"reference: create": "", "reference: create-worse": "failure", "reference: create-kvm": "skipped", "reference: check ok": ""}
		if len(got) != len(want) {
			t.Errorf("junit suite %s: reference testcases %v, want %v", s.Name, got, want)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("junit suite %s: %s is %q, want %q", s.Name, k, g, v)
			}
		}
	}

	// A cell without a result: its kernel has no verdict, and says why.
	c := tr.Manifest.Cells[0]
	for _, cc := range tr.Manifest.Cells {
		if cc.Experiment == "rx" && cc.Kernel == "debian:7.3" {
			c = cc
		}
	}
	if err := os.Remove(filepath.Join(tr.Dir, CellsDir, c.ID, CellFile)); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open(tr.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := refVerdicts(reopened.Report())[0]; got != "rx create: debian:6.12 reproduced; debian:7.3 - (incomplete);" {
		t.Errorf("a cell without a result: %s", got)
	}
}
