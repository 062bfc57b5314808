package reference

import (
	"fmt"
	"strings"
	"testing"

	"klab/results/stats"
)

// Modes the tests run in.
var (
	kvm      = Mode{Accel: "kvm", CPUs: 2}
	host     = Mode{Accel: "host", CPUs: 8}
	tcg      = Mode{Accel: "tcg", CPUs: 2}
	icount   = Mode{Accel: "tcg", Icount: "shift=0,sleep=off", CPUs: 2}
	mttcg    = Mode{Accel: "tcg", TCGMultithread: true, CPUs: 2}
	allModes = []Mode{kvm, host, tcg, icount, mttcg}
)

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{
		kvm: "KVM", host: "the host itself", tcg: "single-threaded TCG in real time",
		icount: "TCG with icount", mttcg: "multi-threaded TCG", {}: "an unknown accelerator",
	} {
		if got := m.String(); got != want {
			t.Errorf("%+v: %q, want %q", m, got, want)
		}
	}
}

// TestComparable: every need against every mode, with the reason naming
// what the run lacked.
func TestComparable(t *testing.T) {
	for _, tc := range []struct {
		needs Needs
		mode  Mode
		// reason is "" when comparable.
		reason string
	}{
		{Needs{}, tcg, ""},
		{Needs{}, kvm, ""},
		{Needs{Accel: "kvm"}, kvm, ""},
		{Needs{Accel: "kvm"}, host, ""},
		{Needs{Accel: "kvm"}, tcg, "needs accel kvm; this run used single-threaded TCG in real time"},
		{Needs{Accel: "kvm"}, icount, "needs accel kvm; this run used TCG with icount"},
		{Needs{Accel: "kvm"}, mttcg, "needs accel kvm; this run used multi-threaded TCG"},
		{Needs{Icount: true}, icount, ""},
		{Needs{Icount: true}, kvm, ""},
		{Needs{Icount: true}, host, ""},
		{Needs{Icount: true}, tcg, "needs icount; this run used single-threaded TCG in real time"},
		{Needs{Icount: true}, mttcg, "needs icount; this run used multi-threaded TCG"},
		{Needs{TCGMultithread: true}, mttcg, ""},
		{Needs{TCGMultithread: true}, kvm, ""},
		{Needs{TCGMultithread: true}, tcg, "needs multi-threaded TCG; this run used single-threaded TCG in real time"},
		{Needs{TCGMultithread: true}, icount, "needs multi-threaded TCG; this run used TCG with icount"},
		{Needs{MinCPUs: 2}, tcg, ""},
		{Needs{MinCPUs: 4}, tcg, "needs 4 vCPUs; this run had 2"},
		{Needs{MinCPUs: 4}, kvm, "needs 4 vCPUs; this run had 2"},
		{Needs{MinCPUs: 4}, host, ""},
		{Needs{TCGMultithread: true, MinCPUs: 4}, mttcg, "needs 4 vCPUs; this run had 2"},
		{Needs{Accel: "kvm", MinCPUs: 4}, icount, "needs accel kvm and 4 vCPUs; this run used TCG with icount with 2 vCPUs"},
		{Needs{Accel: "kvm"}, Mode{}, "needs accel kvm; this run used an unknown accelerator"},
	} {
		ok, reason := Comparable(Expectation{Needs: tc.needs}, tc.mode)
		if ok != (tc.reason == "") || reason != tc.reason {
			t.Errorf("needs %+v in %s: %v %q, want %q", tc.needs, tc.mode, ok, reason, tc.reason)
		}
	}
}

// change is a Change with B/A ratio and significance.
func change(ratio float64, significant bool) stats.Change {
	mdc := 5.0
	c := stats.Change{Ratio: ratio, Pct: 100 * (ratio - 1), Significant: significant, P: 0.5, Alpha: stats.Alpha, MDCPct: &mdc}
	if significant {
		c.P = 0.01
	}
	return c
}

// TestRowVerdict: every expected direction (given, or from a ratio or a
// range) against B/A on each side of 1, significant or not, for metrics
// of both good directions, in a mode that can and one that cannot show
// the row.
func TestRowVerdict(t *testing.T) {
	type measured struct {
		ratio       float64
		significant bool
	}
	up, upS := measured{1.3, false}, measured{1.3, true}
	down, downS := measured{0.7, false}, measured{0.7, true}
	flat := measured{1, false}
	for _, tc := range []struct {
		exp  Expectation
		dir  int
		want map[measured]Verdict
	}{
		{Expectation{Direction: Better}, 1, map[measured]Verdict{upS: Reproduced, up: SameNotSignificant, down: OppositeNotSignificant, downS: Contradicted, flat: OppositeNotSignificant}},
		{Expectation{Direction: Better}, -1, map[measured]Verdict{downS: Reproduced, down: SameNotSignificant, up: OppositeNotSignificant, upS: Contradicted}},
		{Expectation{Direction: Worse}, 1, map[measured]Verdict{downS: Reproduced, down: SameNotSignificant, up: OppositeNotSignificant, upS: Contradicted, flat: OppositeNotSignificant}},
		{Expectation{Direction: Worse}, -1, map[measured]Verdict{upS: Reproduced, up: SameNotSignificant, down: OppositeNotSignificant, downS: Contradicted}},
		{Expectation{Direction: NoChange}, 1, map[measured]Verdict{up: Reproduced, down: Reproduced, flat: Reproduced, upS: Contradicted, downS: Contradicted}},
		{Expectation{Direction: NoChange}, -1, map[measured]Verdict{up: Reproduced, upS: Contradicted, downS: Contradicted}},
		// The direction from the figure alone.
		{Expectation{Ratio: 2.57}, 1, map[measured]Verdict{upS: Reproduced, up: SameNotSignificant, down: OppositeNotSignificant, downS: Contradicted}},
		{Expectation{Ratio: 2.57}, -1, map[measured]Verdict{downS: Contradicted, upS: Reproduced}},
		{Expectation{Ratio: 0.97}, 1, map[measured]Verdict{downS: Reproduced, upS: Contradicted}},
		{Expectation{Ratio: 1}, 1, map[measured]Verdict{up: Reproduced, upS: Contradicted}},
		{Expectation{Range: []float64{1.2, 3.6}}, 1, map[measured]Verdict{upS: Reproduced, downS: Contradicted, down: OppositeNotSignificant}},
		{Expectation{Range: []float64{0.3, 0.8}}, -1, map[measured]Verdict{upS: Contradicted, downS: Reproduced}},
		{Expectation{Range: []float64{0.95, 1.05}}, 1, map[measured]Verdict{up: Reproduced, downS: Contradicted}},
	} {
		for m, want := range tc.want {
			c := change(m.ratio, m.significant)
			for _, mode := range allModes {
				got, reason := RowVerdict(tc.exp, c, tc.dir, mode)
				if got != want || reason != "" {
					t.Errorf("%+v dir %d, B/A %g significant %v in %s: %q %q, want %q", tc.exp, tc.dir, m.ratio, m.significant, mode, got, reason, want)
				}
				e := tc.exp
				e.Needs = Needs{Accel: "kvm"}
				got, reason = RowVerdict(e, c, tc.dir, mode)
				switch {
				case mode.hardware() && got != want:
					t.Errorf("%+v in %s: %q, want %q", e, mode, got, want)
				case !mode.hardware() && (got != NotComparable || !strings.HasPrefix(reason, "needs accel kvm; this run used ")):
					t.Errorf("%+v in %s: %q %q, want %q", e, mode, got, reason, NotComparable)
				}
			}
		}
	}
}

func TestRowVerdictNotMeasured(t *testing.T) {
	for _, tc := range []struct {
		exp Expectation
		c   stats.Change
		dir int
	}{
		{Expectation{Direction: Better}, change(0, false), 1},
		{Expectation{Ratio: 2}, change(1.5, true), 0}, // no good direction
	} {
		if got, reason := RowVerdict(tc.exp, tc.c, tc.dir, kvm); got != NotMeasured || reason == "" {
			t.Errorf("%+v %+v: %q %q, want %q with a reason", tc.exp, tc.c, got, reason, NotMeasured)
		}
	}
	// Needs unmet come first.
	if got, _ := RowVerdict(Expectation{Direction: Better, Needs: Needs{Accel: "kvm"}}, change(0, false), 1, tcg); got != NotComparable {
		t.Errorf("unmet needs without samples: %q", got)
	}
}

func TestCheckVerdict(t *testing.T) {
	for _, tc := range []struct {
		exp           CheckExpectation
		passed, total int
		mode          Mode
		want          Verdict
		reason        string
	}{
		{CheckExpectation{}, 6, 6, tcg, Reproduced, "6 of 6 round(s) passed"},
		{CheckExpectation{Outcome: Pass}, 5, 6, tcg, Contradicted, "5 of 6 round(s) passed"},
		{CheckExpectation{Outcome: Fail}, 0, 4, tcg, Reproduced, "4 of 4 round(s) failed"},
		{CheckExpectation{Outcome: Fail}, 1, 4, tcg, Contradicted, "3 of 4 round(s) failed"},
		{CheckExpectation{}, 0, 0, tcg, NotMeasured, "the check did not run"},
		{CheckExpectation{Needs: Needs{Accel: "kvm"}}, 6, 6, icount, NotComparable, "needs accel kvm; this run used TCG with icount"},
		{CheckExpectation{Needs: Needs{Accel: "kvm"}}, 1, 6, kvm, Contradicted, "1 of 6 round(s) passed"},
	} {
		got, reason := CheckVerdict(tc.exp, tc.passed, tc.total, tc.mode)
		if got != tc.want || reason != tc.reason {
			t.Errorf("%+v %d/%d in %s: %q %q, want %q %q", tc.exp, tc.passed, tc.total, tc.mode, got, reason, tc.want, tc.reason)
		}
	}
}

func TestExpected(t *testing.T) {
	for _, tc := range []struct {
		exp  Expectation
		dir  int
		want Direction
	}{
		{Expectation{Direction: Worse, Ratio: 0.5}, 1, Worse},
		{Expectation{Ratio: 2.57}, 1, Better},
		{Expectation{Ratio: 2.57}, -1, Worse},
		{Expectation{Ratio: 1}, 1, NoChange},
		{Expectation{Range: []float64{0.9, 1.1}}, 1, NoChange},
		{Expectation{Range: []float64{1.2, 1.7}}, -1, Worse},
		{Expectation{Range: []float64{0.2, 0.7}}, -1, Better},
		{Expectation{Ratio: 2}, 0, ""},
		{Expectation{}, 1, ""},
	} {
		if got := tc.exp.Expected(tc.dir); got != tc.want {
			t.Errorf("%+v dir %d: %q, want %q", tc.exp, tc.dir, got, tc.want)
		}
	}
}

func TestAgrees(t *testing.T) {
	for _, tc := range []struct {
		exp Expectation
		dir int
		// err is a part of the error, "" for none.
		err string
	}{
		{Expectation{Direction: Better, Ratio: 2.57}, 1, ""},
		{Expectation{Direction: Better, Ratio: 0.5}, -1, ""},
		{Expectation{Direction: Better, Ratio: 0.5}, 1, "ratio 0.5 does not agree with better: where higher is better, better is a B/A above 1"},
		{Expectation{Direction: Worse, Ratio: 1.5}, 1, "ratio 1.5 does not agree with worse: where higher is better, worse is a B/A below 1"},
		{Expectation{Direction: Worse, Ratio: 0.5}, -1, "where lower is better, worse is a B/A above 1"},
		{Expectation{Direction: Worse, Ratio: 0.97}, 1, ""},
		{Expectation{Direction: Better, Ratio: 1}, 1, "does not agree with better"},
		{Expectation{Direction: Better, Range: []float64{1, 1.7}}, 1, ""},
		{Expectation{Direction: Better, Range: []float64{0.9, 1.7}}, 1, "range [0.9, 1.7] does not agree with better"},
		{Expectation{Direction: NoChange, Ratio: 0.99}, 1, ""},
		{Expectation{Direction: NoChange, Ratio: 1.2}, 1, "ratio 1.2 does not agree with no-change: want a ratio within 10% of 1"},
		{Expectation{Direction: NoChange, Range: []float64{0.97, 1.02}}, 1, ""},
		{Expectation{Direction: NoChange, Range: []float64{1.02, 1.05}}, 1, "want a range that holds 1"},
		{Expectation{Direction: Better, Ratio: 2}, 0, "the metric has no good direction"},
		{Expectation{Direction: Better}, 1, ""},
		{Expectation{Ratio: 0.3}, 1, ""},
	} {
		err := tc.exp.Agrees(tc.dir)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v dir %d: %v, want %q", tc.exp, tc.dir, err, tc.err)
		}
	}
}

// TestEmulationNote: what a run can show, per mode, in at most two
// lines of a report.
func TestEmulationNote(t *testing.T) {
	for _, tc := range []struct {
		mode Mode
		has  []string
		not  []string
	}{
		{kvm, nil, nil},
		{host, nil, nil},
		{Mode{}, nil, nil},
		{tcg, []string{"single-threaded TCG in real time", "parallelism and wake-up costs across vCPUs do not carry", "lock contention with fewer vCPUs than the reference", "wall time on a loaded host"}, []string{"ratios are what count"}},
		{icount, []string{"icount", "guest time counts instructions", "per-operation instruction cost carries", "not parallelism"}, nil},
		{mttcg, []string{"multi-threaded TCG", "vCPUs run in parallel but at emulator speed", "wall time on a loaded host is still noisy"}, nil},
	} {
		note := EmulationNote(tc.mode)
		if (note == "") != (len(tc.has) == 0) {
			t.Errorf("%s: note %q", tc.mode, note)
		}
		// "warning: " and the note, in two lines of a 100-column report.
		if len("warning: "+note) > 2*100 {
			t.Errorf("%s: note of %d characters, want at most two lines: %q", tc.mode, len(note), note)
		}
		for _, s := range tc.has {
			if !strings.Contains(note, s) {
				t.Errorf("%s: note %q lacks %q", tc.mode, note, s)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(note, s) {
				t.Errorf("%s: note %q has %q", tc.mode, note, s)
			}
		}
	}
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{MeasuredOn{CPUs: 32, Accel: "native", Note: "Xeon E5-2650"}.String(), "32 CPUs, native, Xeon E5-2650"},
		{MeasuredOn{}.String(), ""},
		{Needs{Accel: "kvm", Icount: true, TCGMultithread: true, MinCPUs: 8}.String(), "accel kvm, icount, multi-threaded TCG, 8 vCPUs"},
		{fmt.Sprint(CheckExpectation{}.Want()), "pass"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}

// TestNoChangeNeedsPower: "no significant change" reproduces an
// expectation of no change only when the run could have seen a change
// the size of the reference's tolerance.
func TestNoChangeNeedsPower(t *testing.T) {
	exp := Expectation{Direction: NoChange, Ratio: 0.99}
	tcg := Mode{Accel: "tcg", CPUs: 2}
	wide, precise := 22.0, 4.0
	for _, tc := range []struct {
		mdc    *float64
		want   Verdict
		reason string
	}{
		{&precise, Reproduced, ""},
		{&wide, SameNotSignificant, "only a change above 22% could be seen here"},
		{nil, SameNotSignificant, "none could be significant"},
	} {
		c := stats.Change{Ratio: 0.98, Alpha: stats.Alpha, P: 0.9, MDCPct: tc.mdc}
		v, reason := RowVerdict(exp, c, 1, tcg)
		if v != tc.want || !strings.Contains(reason, tc.reason) {
			t.Errorf("MDC %v: %s %q, want %s %q", tc.mdc, v, reason, tc.want, tc.reason)
		}
	}
}
