package report

import (
	"strings"
	"testing"

	"klab/results/reference"
)

func TestReferenceLead(t *testing.T) {
	nc := func(name, reason string) Row {
		return Row{Name: name, Reference: &Reference{Verdict: reference.NotComparable, Reason: reason}}
	}
	ok := Row{Name: "ok", Reference: &Reference{Verdict: reference.Reproduced}}
	plain := Row{Name: "plain"}
	reason := "needs accel kvm; this run used single-threaded TCG in real time"
	for _, c := range []struct {
		name string
		rows []Row
		want string
	}{
		{"no expectations", []Row{plain}, ""},
		{"all comparable", []Row{ok, plain}, ""},
		{"none comparable", []Row{nc("create", reason), nc("randread-4k", reason), plain},
			"not comparable here: create, randread-4k (" + reason + "); the verdicts below are this run's"},
		{"some comparable", []Row{ok, nc("create", reason)},
			"not comparable here: create (" + reason + "); those rows' verdicts"},
		{"hostile name", []Row{nc("a\x1b[31mb\nc", "")}, "not comparable here: a"},
	} {
		got := referenceLead(&Report{Rows: c.rows})
		if c.want == "" && got != "" || !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want it to begin %q", c.name, got, c.want)
		}
		if strings.ContainsAny(got, "\x1b\n") {
			t.Errorf("%s: control characters in %q", c.name, got)
		}
	}
}
