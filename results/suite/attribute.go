package suite

import (
	"bytes"
	"slices"
	"strings"

	"klab/results/splat"
	"klab/results/suite/statusline"
)

// Attribute finds the kernel splats on a console log (results/splat's
// scanner) and gives each one to the test that was running when the
// kernel printed it: the test of the last marker check wrote to the
// kernel log before the splat's header line. Splats before any marker
// (boot, setting up the configuration) are under "".
func Attribute(console []byte) map[string][]splat.Report {
	s := splat.NewScanner()
	s.Write(console)
	s.Close()
	reports := s.Reports()
	if len(reports) == 0 {
		return map[string][]splat.Report{}
	}
	// markers[i] is the test running from console line lines[i] on.
	var lines []int
	var markers []string
	ln := 0
	for rest := console; len(rest) > 0; {
		ln++
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if name, ok := Marker(line); ok {
			lines = append(lines, ln)
			markers = append(markers, name)
		}
	}
	out := map[string][]splat.Report{}
	m := 0
	for _, r := range reports {
		for m < len(lines) && lines[m] < r.Line {
			m++
		}
		test := ""
		if m > 0 {
			test = markers[m-1]
		}
		out[test] = append(out[test], r)
	}
	return out
}

// Marker returns the test named by a console line that holds check's
// marker ("[   12.345678] run fstests generic/013 at 2025-01-02
// 03:04:05"), and whether the line holds one.
func Marker(line []byte) (string, bool) {
	return statusline.Marker(string(line))
}

// Refs names reports by type and title, each once, in order.
func Refs(reports []splat.Report) []SplatRef {
	var out []SplatRef
	for _, r := range reports {
		out = appendNew(out, SplatRef{Type: string(r.Type), Title: oneLine(r.Title)})
	}
	return out
}

// AttachSplats adds the splats Attribute found to r: each test's to the
// test, and those of "" and of tests r does not have to r.Splats, the
// latter titled with the test's name. Call it once r has all its tests.
func (r *Run) AttachSplats(byTest map[string][]splat.Report) {
	r.Splats = appendNew(r.Splats, Refs(byTest[""])...)
	for name, reps := range byTest {
		if name == "" {
			continue
		}
		if t := r.Test(name); t != nil {
			t.Splats = appendNew(t.Splats, Refs(reps)...)
		}
	}
	// Splats of tests r does not have, in name order for a stable result.
	var others []string
	for name := range byTest {
		if name != "" && r.Test(name) == nil {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	for _, name := range others {
		for _, ref := range Refs(byTest[name]) {
			ref.Title = strings.TrimSpace(ref.Title + " (during " + name + ")")
			r.Splats = appendNew(r.Splats, ref)
		}
	}
}
