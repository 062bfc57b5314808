package stats

import (
	"math"
	"testing"
)

// TestMinP holds MinP against the p-values the test itself gives for
// samples that do not overlap: its floor for those sample sizes.
func TestMinP(t *testing.T) {
	for _, n := range [][2]int{{3, 3}, {4, 4}, {3, 4}, {3, 5}, {2, 5}, {2, 8}, {5, 5}, {1, 30}, {6, 9}} {
		var a, b []float64
		for i := range n[0] {
			a = append(a, float64(i))
		}
		for i := range n[1] {
			b = append(b, float64(100+i))
		}
		c := Compare(Summarize(a), Summarize(b), 1)
		if got := MinP(n[0], n[1]); math.Abs(got-c.P) > 1e-12 || c.MinP != got {
			t.Errorf("MinP(%d, %d) = %g, Change.MinP %g; the test gives %g", n[0], n[1], got, c.MinP, c.P)
		}
	}
	for _, tc := range []struct {
		na, nb int
		can    bool
	}{
		{3, 3, false}, {3, 4, false}, {4, 4, true}, {3, 5, true}, {2, 7, false}, {2, 8, true}, {0, 10, false}, {1, 1000, true},
	} {
		if got := CanBeSignificant(tc.na, tc.nb); got != tc.can {
			t.Errorf("CanBeSignificant(%d, %d) = %v (MinP %g), want %v", tc.na, tc.nb, got, MinP(tc.na, tc.nb), tc.can)
		}
	}
	if MinP(0, 5) != 1 || MinP(1, 1) != 1 {
		t.Errorf("MinP of no samples %g, of 1 against 1 %g; want 1, 1", MinP(0, 5), MinP(1, 1))
	}
	if p := MinP(500, 500); p < 0 || p > 1e-100 {
		t.Errorf("MinP(500, 500) = %g, want (next to) 0", p)
	}
}

// TestMDC: the formula's value for known CVs, its growth with noise and
// its shrinking with samples, and no MDC where the test cannot reach
// Alpha.
func TestMDC(t *testing.T) {
	side := func(n int, cv float64) Summary { return Summary{N: n, CV: cv} }
	// 2.8016 * sqrt(pi/3) * sqrt(2 * 0.1^2 / 5) = 2.8016 * 1.0233 * 0.06325
	got, ok := MDC(side(5, 0.10), side(5, 0.10))
	if !ok || math.Abs(got-18.13) > 0.01 {
		t.Errorf("MDC at CV 10%%, 5+5 = %.3f%% (ok %v), want 18.13%%", got, ok)
	}
	more, _ := MDC(side(20, 0.10), side(20, 0.10))
	if math.Abs(more-got/2) > 1e-9 {
		t.Errorf("MDC at 20+20 = %.3f%%, want half of 5+5's %.3f%%", more, got)
	}
	noisier, _ := MDC(side(5, 0.10), side(5, 0.30))
	if noisier <= got {
		t.Errorf("MDC with a noisier B %.3f%%, want above %.3f%%", noisier, got)
	}
	if z, ok := MDC(side(6, 0), side(6, 0)); !ok || z != 0 {
		t.Errorf("MDC without noise = %g (ok %v), want 0", z, ok)
	}
	for _, n := range [][2]int{{3, 3}, {3, 4}, {0, 8}, {8, 0}} {
		if v, ok := MDC(side(n[0], 0.1), side(n[1], 0.1)); ok {
			t.Errorf("MDC at %d+%d = %g, want none: the test cannot reach p <= %g", n[0], n[1], v, Alpha)
		}
	}
	// Compare fills it in.
	c := Compare(Summarize([]float64{100, 102, 98, 101, 99}), Summarize([]float64{100, 103, 97, 101, 99}), 1)
	if c.MDCPct == nil || *c.MDCPct <= 0 || *c.MDCPct > 10 {
		t.Errorf("Compare's MDC %v, want a few percent", c.MDCPct)
	}
	if c := Compare(Summarize([]float64{1, 2, 3}), Summarize([]float64{4, 5, 6}), 1); c.MDCPct != nil || c.MinP != 0.1 {
		t.Errorf("3+3: MDC %v, MinP %g; want none, 0.1", c.MDCPct, c.MinP)
	}
}
