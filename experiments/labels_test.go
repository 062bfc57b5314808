package experiments

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"klab/results"
	"klab/results/report"
)

// Pinned references as klab rerun gives them.
const (
	pinned734  = "debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1"
	pinned734b = "debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+2"
	pinned735  = "debian:7.3.5+deb13-cloud-amd64=7.3.5-1"
)

// TestKernelLabel: a pinned Debian kernel goes by its series, or by its
// release when the series does not tell the two kernels apart, or by its
// side when nothing short does; other references are their own labels.
func TestKernelLabel(t *testing.T) {
	long := "/home/user/.cache/klab/kernels/build/results/0123456789abcdef/bzImage"
	for _, c := range []struct {
		kernels []string
		want    [2]string
	}{
		{[]string{pinned734, "build:fix"}, [2]string{"debian:7.3", "build:fix"}},
		{[]string{pinned734, pinned735}, [2]string{"debian:7.3.4+deb13-cloud-amd64", "debian:7.3.5+deb13-cloud-amd64"}},
		{[]string{pinned734, pinned734b}, [2]string{"kernel A", "kernel B"}},
		{[]string{"debian:7.3", "debian:6.12"}, [2]string{"debian:7.3", "debian:6.12"}},
		{[]string{"./bzImage", long}, [2]string{"./bzImage", "kernel B"}},
		{[]string{"debian:6.12.43+deb13-cloud-amd64=6.12.43-1", pinned734}, [2]string{"debian:6.12", "debian:7.3"}},
	} {
		p := &Plan{Axis: "kernel", Kernels: c.kernels, A: c.kernels[0], B: c.kernels[1]}
		if a, b := p.Label(SideA), p.Label(SideB); a != c.want[0] || b != c.want[1] {
			t.Errorf("%q: labels %q, %q; want %q", c.kernels, a, b, c.want)
		}
	}
	one := &Plan{Axis: "transport", Kernels: []string{pinned734}, A: "transport=dev", B: "transport=uring"}
	if a, b, k := one.Label(SideA), one.Label(SideB), one.KernelLabel(0); a != "transport=dev" || b != "transport=uring" || k != "debian:7.3" {
		t.Errorf("a parameter's sides: %q, %q, kernel %q", a, b, k)
	}
	single := &Plan{Axis: "kernel", Single: true, Kernels: []string{pinned734}, A: pinned734}
	if a, b := single.Label(SideA), single.Label(SideB); a != "debian:7.3" || b != "" {
		t.Errorf("a single kernel: %q, %q", a, b)
	}
}

// TestPinnedLabelsInReports: a run of two pinned kernels (as klab rerun
// runs them) reports them by short labels in every format, the full
// pinned name once in the line naming the sides; the comparison of two
// such runs labels its rows short too, and no text table line is broken.
func TestPinnedLabelsInReports(t *testing.T) {
	fake := &fakeOpener{t: t, kernels: map[string]*results.Kernel{
		pinned734:   {Name: pinned734, ID: "3f2a9c1b7e0d", Version: "7.3.4+deb13-cloud-amd64"},
		"build:fix": {Name: "fix", ID: "9b8c7d6e5f4a", Version: "7.3.4-g1a2b3c4"},
	}}
	o := runOptions(t, fake, pinned734, "build:fix")
	o.Compare = "kernel"
	res, err := Run(context.Background(), loadRunSpec(t, runSpec), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	saved, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	r := saved.Report()
	if r.A.Label != "debian:7.3" || r.B.Label != "build:fix" || r.A.Kernel != pinned734 {
		t.Errorf("sides %+v, %+v", r.A, r.B)
	}
	render := func(r *report.Report, format string) string {
		t.Helper()
		var b bytes.Buffer
		if err := report.Write(&b, r, format); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	text := render(r, "text")
	t.Logf("\n%s", text)
	if !strings.Contains(text, "A: debian:7.3 ("+pinned734+" 3f2a9c1b)\n") || strings.Count(text, pinned734) != 1 {
		t.Errorf("text: want the pinned name once, in the line naming side A")
	}
	if !strings.Contains(text, "PASS ok [transport=dev on debian:7.3] A round 1") {
		t.Errorf("text: the checks do not name the kernel by its label")
	}
	md := render(r, "md")
	if !strings.Contains(md, "A: `debian:7.3` (`"+pinned734+"` 3f2a9c1b)") || strings.Count(md, pinned734) != 1 ||
		!strings.Contains(md, "- PASS ok [transport=dev on `debian:7.3`] A round 1") {
		t.Errorf("md: want the pinned name once, in a code span in the line naming the sides, and the checks by label:\n%s", md)
	}
	// HTML names the pinned kernel again in its manifest's list of kernels.
	if html := render(r, "html"); !strings.Contains(html, "PASS ok [transport=dev on debian:7.3] A round 1") {
		t.Errorf("html: the checks do not name the kernel by its label")
	}
	var j struct {
		A, B struct{ Label, Kernel string }
	}
	if err := json.Unmarshal([]byte(render(r, "json")), &j); err != nil || j.A.Label != "debian:7.3" || j.A.Kernel != pinned734 {
		t.Errorf("json sides %+v, %v", j, err)
	}

	cmp, err := CompareRuns(saved, saved)
	if err != nil {
		t.Fatal(err)
	}
	text = render(cmp, "text")
	t.Logf("\n%s", text)
	// The rows go by the short labels; one line names the kernels behind
	// them, each once.
	if !strings.Contains(text, "\ncreate transport=dev [build:fix]  ") || !strings.Contains(text, "\ncreate transport=dev [debian:7.3]") ||
		strings.Count(text, pinned734) != 1 || !strings.Contains(text, "\nkernels: debian:7.3 = "+pinned734+"\n") {
		t.Errorf("compare: rows not labelled short, or the pinned name not named once in a legend")
	}
	if md := render(cmp, "md"); strings.Count(md, pinned734) != 1 {
		t.Errorf("compare: md names the pinned kernel %d times, want once", strings.Count(md, pinned734))
	}
}
