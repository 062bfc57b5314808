package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pinnedReport is a rerun's report as a mail shows it: the sides are
// Debian kernels pinned to a release and package version, labelled
// short, on a host whose CPU has a long name.
func pinnedReport(t *testing.T) *Report {
	const a, b = "debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1", "debian:7.3.5+deb13-cloud-amd64=7.3.5-1~bpo13+1"
	r := testReport(t)
	r.A = Side{Label: "debian:7.3.4+deb13-cloud-amd64", Kernel: a}
	r.B = Side{Label: "debian:7.3.5+deb13-cloud-amd64", Kernel: b}
	r.Kernels = []Kernel{
		{Ref: a, Name: a, ID: "3f2a9c1b7e0d5a4c", Version: "7.3.4+deb13-cloud-amd64", Label: r.A.Label},
		{Ref: b, Name: b, ID: "9b8c7d6e5f4a3b2c", Version: "7.3.5+deb13-cloud-amd64", Label: r.B.Label},
	}
	r.Host = "6.12.43+deb13-amd64 Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"
	r.Checks = r.Checks[:1]
	r.Checks[0].Cell = "transport=uring on " + r.B.Label
	r.Skipped = nil
	r.Splats = SplatDiff{}
	r.Failures = nil
	return r
}

// TestPinnedGolden: the header of a rerun's text report wraps at 72
// columns between phrases, each pinned kernel name whole on its line; its
// Markdown puts them in code spans and shows no escapes. testdata/pinned.*
// hold the reports (go test -update rewrites them).
func TestPinnedGolden(t *testing.T) {
	r := pinnedReport(t)
	for _, f := range []struct{ format, file string }{{"text", "pinned.txt"}, {"md", "pinned.md"}} {
		got := renderAs(t, f.format, r)
		path := filepath.Join("testdata", f.file)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -update writes it)", err)
		}
		if got != string(want) {
			t.Errorf("%s differs from %s (go test -update rewrites it):\n%s", f.format, path, got)
		}
	}
	text := renderAs(t, "text", r)
	header, _, _ := strings.Cut(text, "\n\n")
	for _, l := range strings.Split(header, "\n") {
		if len(l) > 72 {
			t.Errorf("header line wider than 72: %q", l)
		}
	}
	for _, k := range r.Kernels {
		if !strings.Contains(header, k.Ref) {
			t.Errorf("the header does not hold %s whole on one line:\n%s", k.Ref, header)
		}
	}
	if md := renderAs(t, "md", r); strings.Contains(md, `\~`) || strings.Contains(md, `\[`) || !strings.Contains(md, "`"+r.Kernels[0].Ref+"`") {
		t.Errorf("md: escapes, or the pinned name outside a code span:\n%s", md)
	}
}
