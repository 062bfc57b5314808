package experiments

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"klab/guest/proto"
	"klab/internal/option"
	"klab/internal/specfile"
	"klab/results/report"
	"klab/results/stats"
)

// ciRow is a row whose change CI is lo..hi percent, with n samples a
// side.
func ciRow(name string, n int, lo, hi *float64) report.Row {
	return report.Row{Name: name, A: stats.Summary{N: n}, B: stats.Summary{N: n}, Change: stats.Change{PctLo: lo, PctHi: hi}}
}

func pct(v float64) *float64 { return &v }

// TestAutoRoundsNext: the policy asks for a round while a row with
// samples on both sides is wider than the target or has no CI yet, and
// never past the bound.
func TestAutoRoundsNext(t *testing.T) {
	a := &AutoRounds{CITargetPct: 10, MaxRounds: 12}
	narrow := ciRow("create", 6, pct(-3), pct(15)) // ±9
	edge := ciRow("mkdir", 6, pct(0), pct(20))     // ±10: reached
	wide := ciRow("read", 6, pct(-20), pct(8.4))   // ±14.2
	none := ciRow("write", 6, nil, nil)            // no CI yet
	oneSide := ciRow("stat", 6, nil, nil)          // B measured nothing
	oneSide.B.N = 0
	for _, tc := range []struct {
		name   string
		rounds int
		rows   []report.Row
		more   bool
		wide   []string
	}{
		{"all within", 6, []report.Row{narrow, edge}, false, nil},
		{"one wide", 6, []report.Row{narrow, wide}, true, []string{"read (±14.2%)"}},
		{"no CI yet", 6, []report.Row{none, narrow}, true, []string{"write (no CI)"}},
		{"at the bound", 12, []report.Row{wide}, false, []string{"read (±14.2%)"}},
		{"past the bound", 13, []report.Row{wide}, false, []string{"read (±14.2%)"}},
		{"a side without samples asks for nothing", 6, []report.Row{oneSide, narrow}, false, []string{"stat (no CI)"}},
		{"no rows", 6, nil, false, nil},
	} {
		more, wide := a.Next(tc.rounds, tc.rows)
		if more != tc.more || !reflect.DeepEqual(wide, tc.wide) {
			t.Errorf("%s: Next = %v, %q; want %v, %q", tc.name, more, wide, tc.more, tc.wide)
		}
	}
	if got := (&AutoRounds{CITargetPct: 10, MaxRounds: 12}).startRounds(0); got != MinAutoRounds {
		t.Errorf("start with no rounds in the spec: %d, want %d", got, MinAutoRounds)
	}
	if got := (&AutoRounds{CITargetPct: 10, MaxRounds: 12}).startRounds(8); got != 8 {
		t.Errorf("start with 8 rounds in the spec: %d, want 8", got)
	}
	if got := (&AutoRounds{CITargetPct: 10, MaxRounds: 7}).startRounds(10); got != 7 {
		t.Errorf("start with 10 rounds in the spec and a bound of 7: %d, want 7", got)
	}
	for _, bad := range []AutoRounds{{0, 12}, {-1, 12}, {10, 5}, {10, 1001}} {
		var oe *option.Error
		if err := bad.check(); !errors.As(err, &oe) {
			t.Errorf("%+v: check = %v, want an option error", bad, err)
		}
	}
	if err := (&AutoRounds{CITargetPct: 2.5, MaxRounds: 6}).check(); err != nil {
		t.Errorf("check: %v", err)
	}
}

// TestPlanRoundsArePrefixes: a plan of n+1 rounds starts with the
// guests of the plan of n rounds, on every axis and order that --rounds
// auto accepts, so that adding a round keeps the rounds run and a rerun
// of n rounds repeats them.
func TestPlanRoundsArePrefixes(t *testing.T) {
	f := loadPlanSpec(t, "")
	seed := int64(7)
	for _, o := range []PlanOptions{
		{Kernels: []string{"ka", "kb"}},
		{Kernels: []string{"ka", "kb"}, Order: "random", Seed: &seed},
		{Kernels: []string{"ka"}, Compare: "transport"},
		{Kernels: []string{"ka"}, Compare: "transport", Order: "random", Seed: &seed},
	} {
		for n := 1; n < 12; n++ {
			o.Rounds = n
			p := mustPlan(t, f, o)
			o.Rounds = n + 1
			q := mustPlan(t, f, o)
			if len(q.Guests) <= len(p.Guests) || !reflect.DeepEqual(q.Guests[:len(p.Guests)], p.Guests) {
				t.Fatalf("%+v: the plan of %d rounds does not start with the plan of %d", o, n+1, n)
			}
		}
	}
}

// noise are the fake's relative deviations per round: large in the
// first rounds, small after, so that the change's CI narrows as rounds
// are added (±70% after 6 rounds, ±48% after 8, ±6% after 9, ±4.5%
// after 11).
var noise = []float64{0.3, -0.3, 0.01, -0.01, 0.02, -0.02, 0, 0.01, -0.01, 0.005, 0, 0, 0, 0, 0, 0}

// noisyOpener is a fake whose guest i (round i+1 of runSpec, one guest a
// round) measures 100 on dev and 200 on uring, off by noise.
func noisyOpener(t *testing.T) *fakeOpener {
	fake := &fakeOpener{t: t}
	fake.step = func(g *fakeGuest, st proto.Step, d *proto.Done) error {
		if _, transport := innerWorkload(st); d.Metrics != nil {
			if transport == "dev" {
				d.Metrics.OpsPerSec = 100 * (1 + noise[g.index%len(noise)])
			} else {
				d.Metrics.OpsPerSec = 200 * (1 + noise[(g.index+3)%len(noise)])
			}
		}
		return nil
	}
	return fake
}

// TestRunAutoRounds: --rounds auto starts from 6 rounds (the spec has
// 4), adds rounds in the plan's order until every row's change CI is
// within the target, or stops at the bound; the plan, the manifest and
// the report say how many rounds ran and whether the target was reached,
// and a rerun repeats exactly that many.
func TestRunAutoRounds(t *testing.T) {
	f := loadRunSpec(t, runSpec)
	for _, tc := range []struct {
		name    string
		auto    AutoRounds
		rounds  int
		reached bool
		line    string
	}{
		{"reached", AutoRounds{CITargetPct: 10, MaxRounds: 12}, 9, true, "rounds auto: every row's change CI within +-10% after 9 rounds (bound 12)"},
		{"at once", AutoRounds{CITargetPct: 100, MaxRounds: 12}, 6, true, "rounds auto: every row's change CI within +-100% after 6 rounds (bound 12)"},
		{"bound", AutoRounds{CITargetPct: 5, MaxRounds: 8}, 8, false,
			"rounds auto: 8 rounds (bound 8); change CI still wider than +-5%: create (+-48.2%), randread (+-48.2%)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := noisyOpener(t)
			o := runOptions(t, fake)
			auto := tc.auto
			o.Auto = &auto
			var progress strings.Builder
			o.Progress = &progress
			res, err := Run(context.Background(), f, o)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			t.Logf("progress:\n%s", progress.String())
			if len(fake.guests) != tc.rounds {
				t.Errorf("%d guests, want %d (one a round)", len(fake.guests), tc.rounds)
			}
			m := readManifest(t, res.Dir)
			if m.Rounds != tc.rounds || m.AutoRounds == nil || *m.AutoRounds != tc.auto || m.Status != StatusComplete {
				t.Errorf("manifest: rounds %d, auto %+v, status %s; want %d, %+v, complete", m.Rounds, m.AutoRounds, m.Status, tc.rounds, tc.auto)
			}
			saved, err := Open(res.Dir)
			if err != nil {
				t.Fatal(err)
			}
			want := mustPlan(t, f, PlanOptions{Kernels: []string{"k"}, Rounds: tc.rounds})
			if !reflect.DeepEqual(saved.Plan.Guests, want.Guests) || saved.Plan.Rounds != tc.rounds {
				t.Errorf("plan.json: %d rounds, guests %v; want the plan of %d rounds", saved.Plan.Rounds, saved.Plan.Guests, tc.rounds)
			}
			if n := len(saved.Samples.Samples); n != 2*2*tc.rounds {
				t.Errorf("%d samples, want %d", n, 2*2*tc.rounds)
			}
			r := saved.Report()
			if r.Rounds != tc.rounds || r.AutoRounds == nil || r.AutoRounds.Reached != tc.reached || r.Rows[0].A.N != tc.rounds {
				t.Errorf("report: rounds %d, auto %+v, n %d", r.Rounds, r.AutoRounds, r.Rows[0].A.N)
			}
			var text strings.Builder
			if err := report.Text(&text, r); err != nil {
				t.Fatal(err)
			}
			if flat := strings.Join(strings.Fields(text.String()), " "); !strings.Contains(flat, tc.line+" name ") {
				t.Errorf("text report: no line %q in\n%s", tc.line, text.String())
			}

			// A rerun repeats the rounds run, with no policy.
			_, ro, err := RerunOptions(saved, RunOptions{RunsDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if ro.Rounds != tc.rounds || ro.Auto != nil {
				t.Errorf("rerun options: rounds %d, auto %+v; want %d, none", ro.Rounds, ro.Auto, tc.rounds)
			}
			again := noisyOpener(t)
			ro.Opener = again
			res2, err := Run(context.Background(), saved.File, ro)
			if err != nil {
				t.Fatal(err)
			}
			if m2 := readManifest(t, res2.Dir); len(again.guests) != tc.rounds || m2.Rounds != tc.rounds || m2.AutoRounds != nil {
				t.Errorf("rerun: %d guests, %d rounds, auto %+v; want %d, %d, none", len(again.guests), m2.Rounds, m2.AutoRounds, tc.rounds, tc.rounds)
			}
		})
	}
}

// TestRunAutoRoundsBadInput: what cannot add rounds one by one is bad
// input, before any boot, and leaves no run directory.
func TestRunAutoRoundsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, spec string
		auto       AutoRounds
		kernels    []string
		single     bool
		want       string
	}{
		{"reuse guest", strings.Replace(runSpec, "rounds: 4\n", "rounds: 4\nreuse: guest\n", 1), AutoRounds{10, 12}, nil, false, "reuse: guest"},
		{"single", strings.Replace(runSpec, "compare: transport\n", "", 1), AutoRounds{10, 12}, nil, true, "a run of one kernel"},
		{"bound", runSpec, AutoRounds{10, 3}, nil, false, "3 is out of range, want 6..1000"},
		{"target", runSpec, AutoRounds{0, 12}, nil, false, "0 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := loadRunSpec(t, tc.spec)
			fake := &fakeOpener{t: t}
			o := runOptions(t, fake)
			o.Auto, o.Single = &tc.auto, tc.single
			res, err := Run(context.Background(), f, o)
			var bad *specfile.BadInputError
			if res != nil || !errors.As(err, &bad) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, %v; want bad input with %q", res, err, tc.want)
			}
			if len(fake.guests) != 0 {
				t.Errorf("%d guests booted", len(fake.guests))
			}
			if entries, _ := os.ReadDir(o.RunsDir); len(entries) != 0 {
				t.Errorf("left %s", filepath.Join(o.RunsDir, entries[0].Name()))
			}
		})
	}
}
