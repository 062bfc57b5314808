package stats

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// The expectations below came from benchstat itself, not from this
// package: each case's samples were written one per line in Go benchmark
// format ("BenchmarkClear5 1 100 things/op", A's samples in old.txt, B's
// in new.txt) and compared with
//
//	go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da old.txt new.txt
//
// (and with -format csv, which prints the medians unrounded). Its output:
//
//	           │    old.txt     │                new.txt                  │
//	           │   things/op    │  things/op    vs base                   │
//	Identical    102.5 ±  2%     102.5 ± 2%          ~ (p=1.000 n=6)
//	Clear5       101.0 ±   ∞ ¹   111.0 ±  ∞ ¹   +9.90% (p=0.008 n=5)
//	Three        101.0 ±   ∞ ¹   121.0 ±  ∞ ¹        ~ (p=0.100 n=3)   ²
//	Noisy        102.5 ± 32%     100.0 ± 3%          ~ (p=0.720 n=8)
//	Unequal      200.5 ±  1%     182.0 ± 2%     -9.23% (p=0.000 n=6+9)
//	Single      100.00 ±   ∞ ¹   90.00 ±  ∞ ¹        ~ (p=1.000 n=1)   ²
//	Clear10      50.50 ±  3%     45.00 ± 2%    -10.89% (p=0.000 n=10)
//	Fraction     1.241 ±  5%     1.243 ± 5%          ~ (p=1.000 n=7)
//	¹ need >= 6 samples for confidence interval at level 0.95
//	² need >= 4 samples to detect a difference at alpha level 0.05
//
//	,things/op,CI,things/op,CI,vs base,P
//	Identical,102.5,2%,102.5,2%,~,p=1.000 n=6
//	Clear5,101,∞,111,∞,+9.90%,p=0.008 n=5
//	Three,101,∞,121,∞,~,p=0.100 n=3
//	Noisy,102.5,32%,100,3%,~,p=0.720 n=8
//	Unequal,200.5,1%,182,2%,-9.23%,p=0.000 n=6+9
//	Single,100,∞,90,∞,~,p=1.000 n=1
//	Clear10,50.5,3%,45,2%,-10.89%,p=0.000 n=10
//	Fraction,1.241,5%,1.243,5%,~,p=1.000 n=7
//
// and, for two edge cases run the same way:
//
//	Boundary     3.000 ± ∞ ¹   2.000 ± 50%  -33.33% (p=0.050 n=3+7)
//	SameMedian   2.000 ± ∞ ¹   2.000 ± 50%    0.00% (p=0.042 n=4+7)
//
// benchstat prints "~" only when p > 0.05, so p=0.050 is a difference;
// and it prints "0.00%" for a significant difference of equal medians.
type benchstatCase struct {
	name string
	a, b []float64
	// Medians (from the CSV), "± x%" of each (or "∞"), the delta
	// column ("~" or the percent), p to 3 decimals and n, as printed.
	medA, medB float64
	ciA, ciB   string
	delta      string
	p          string
	n          string
	// cmpWarn is the comparison's footnote, if any.
	cmpWarn string
	// exactP, when not 0, is the p-value worked out by hand (complete
	// separation, no ties across the samples: 2/C(n1+n2, n1)); benchstat
	// prints it rounded as p above.
	exactP float64
}

const (
	ciWarn  = "need >= 6 samples for confidence interval at level 0.95"
	cmpWarn = "need >= 4 samples to detect a difference at alpha level 0.05"
)

var benchstatCases = []benchstatCase{
	{name: "Identical", a: []float64{100, 101, 102, 103, 104, 105}, b: []float64{100, 101, 102, 103, 104, 105},
		medA: 102.5, medB: 102.5, ciA: "2%", ciB: "2%", delta: "~", p: "1.000", n: "6"},
	{name: "Clear5", a: []float64{100, 102, 101, 103, 99}, b: []float64{110, 111, 109, 112, 113},
		medA: 101, medB: 111, ciA: "∞", ciB: "∞", delta: "+9.90%", p: "0.008", n: "5", exactP: 2.0 / 252},
	{name: "Three", a: []float64{100, 101, 102}, b: []float64{120, 121, 122},
		medA: 101, medB: 121, ciA: "∞", ciB: "∞", delta: "~", p: "0.100", n: "3", cmpWarn: cmpWarn, exactP: 2.0 / 20},
	{name: "Noisy", a: []float64{100, 130, 80, 120, 95, 70, 140, 105}, b: []float64{101, 99, 100, 102, 98, 100, 103, 97},
		medA: 102.5, medB: 100, ciA: "32%", ciB: "3%", delta: "~", p: "0.720", n: "8"},
	{name: "Unequal", a: []float64{200, 202, 198, 201, 199, 203}, b: []float64{180, 185, 178, 182, 184, 181, 179, 183, 186},
		medA: 200.5, medB: 182, ciA: "1%", ciB: "2%", delta: "-9.23%", p: "0.000", n: "6+9", exactP: 2.0 / 5005},
	{name: "Single", a: []float64{100}, b: []float64{90},
		medA: 100, medB: 90, ciA: "∞", ciB: "∞", delta: "~", p: "1.000", n: "1", cmpWarn: cmpWarn},
	{name: "Clear10", a: []float64{50, 51, 52, 49, 50, 53, 48, 51, 50, 52}, b: []float64{45, 46, 44, 45, 47, 43, 46, 45, 44, 46},
		medA: 50.5, medB: 45, ciA: "3%", ciB: "2%", delta: "-10.89%", p: "0.000", n: "10", exactP: 2.0 / 184756},
	{name: "Fraction", a: []float64{1.234, 1.301, 1.187, 1.256, 1.222, 1.275, 1.241}, b: []float64{1.198, 1.264, 1.211, 1.305, 1.243, 1.229, 1.252},
		medA: 1.241, medB: 1.243, ciA: "5%", ciB: "5%", delta: "~", p: "1.000", n: "7"},
	{name: "Boundary", a: []float64{3, 3, 3}, b: []float64{1, 1, 2, 2, 2, 3, 3},
		medA: 3, medB: 2, ciA: "∞", ciB: "50%", delta: "-33.33%", p: "0.050", n: "3+7"},
	{name: "SameMedian", a: []float64{2, 2, 2, 3}, b: []float64{1, 1, 1, 2, 2, 2, 2},
		medA: 2, medB: 2, ciA: "∞", ciB: "50%", delta: "0.00%", p: "0.042", n: "4+7"},
}

// ciPct is benchstat's "± x%" column: the larger distance from the median
// to an end of its confidence interval, in percent.
func ciPct(s Summary) string {
	if s.Lo == nil || s.Hi == nil {
		return "∞"
	}
	return fmt.Sprintf("%.0f%%", 100*math.Max(*s.Hi/s.Median-1, 1-*s.Lo/s.Median))
}

// deltaCol is benchstat's "vs base" column.
func deltaCol(a, b Summary, c Change) string {
	switch {
	case !c.Significant:
		return "~"
	case a.Median == b.Median:
		return "0.00%"
	}
	return fmt.Sprintf("%+.2f%%", c.Pct)
}

func nCol(a, b Summary) string {
	if a.N == b.N {
		return fmt.Sprint(a.N)
	}
	return fmt.Sprintf("%d+%d", a.N, b.N)
}

func TestAgainstBenchstat(t *testing.T) {
	for _, tc := range benchstatCases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := Summarize(tc.a), Summarize(tc.b)
			c := Compare(a, b, -1)
			if a.Median != tc.medA || b.Median != tc.medB {
				t.Errorf("medians %v, %v; benchstat %v, %v", a.Median, b.Median, tc.medA, tc.medB)
			}
			if got := ciPct(a); got != tc.ciA {
				t.Errorf("A's CI ± %s; benchstat ± %s", got, tc.ciA)
			}
			if got := ciPct(b); got != tc.ciB {
				t.Errorf("B's CI ± %s; benchstat ± %s", got, tc.ciB)
			}
			for _, s := range []struct {
				side string
				sum  Summary
				ci   string
			}{{"A", a, tc.ciA}, {"B", b, tc.ciB}} {
				if want := s.ci == "∞"; slices.Contains(s.sum.Warnings, ciWarn) != want {
					t.Errorf("%s's warnings %q: want %q %v", s.side, s.sum.Warnings, ciWarn, want)
				}
				if (s.sum.Lo == nil) != (s.ci == "∞") || (s.sum.Hi == nil) != (s.ci == "∞") {
					t.Errorf("%s's Lo, Hi %v, %v for ± %s", s.side, s.sum.Lo, s.sum.Hi, s.ci)
				}
			}
			if got := fmt.Sprintf("%.3f", c.P); got != tc.p {
				t.Errorf("p=%s (%v); benchstat p=%s", got, c.P, tc.p)
			}
			if tc.exactP != 0 && math.Abs(c.P-tc.exactP) > 1e-12 {
				t.Errorf("p=%v, want %v", c.P, tc.exactP)
			}
			if got := nCol(a, b); got != tc.n {
				t.Errorf("n=%s; benchstat n=%s", got, tc.n)
			}
			if got := deltaCol(a, b, c); got != tc.delta {
				t.Errorf("delta %s (significant %v, verdict %q); benchstat %s", got, c.Significant, c.Verdict, tc.delta)
			}
			if (tc.delta == "~") != (c.Verdict == NoChange) {
				t.Errorf("verdict %q for benchstat's %s", c.Verdict, tc.delta)
			}
			if c.Alpha != 0.05 {
				t.Errorf("alpha %v", c.Alpha)
			}
			// benchstat's footnote that the samples are too few is MinP
			// above Alpha here, not a warning: the reports say it once.
			if len(c.Warnings) != 0 || (tc.cmpWarn != "") != (c.MinP > c.Alpha) {
				t.Errorf("comparison warnings %q, MinP %v; benchstat's footnote %q", c.Warnings, c.MinP, tc.cmpWarn)
			}
		})
	}
}

// TestCompareOneValue: when every sample is the same value the U test
// cannot run, and the comparison says so.
func TestCompareOneValue(t *testing.T) {
	c := Compare(Summarize([]float64{5, 5, 5, 5}), Summarize([]float64{5, 5, 5, 5}), 1)
	if c.P != 1 || c.Significant || !slices.Equal(c.Warnings, []string{"all samples are equal"}) {
		t.Errorf("one value: %+v", c)
	}
}

func caseByName(t *testing.T, name string) (Summary, Summary) {
	t.Helper()
	for _, tc := range benchstatCases {
		if tc.name == name {
			return Summarize(tc.a), Summarize(tc.b)
		}
	}
	t.Fatalf("no case %s", name)
	return Summary{}, Summary{}
}

// ptr prints an optional bound.
func ptr(p *float64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestSummarizeSpread(t *testing.T) {
	// Noisy A: mean 840/8 = 105, squared deviations 4050, sd sqrt(4050/7).
	a, b := caseByName(t, "Noisy")
	if !near(a.Mean, 105) || !near(a.CV, math.Sqrt(4050.0/7)/105) {
		t.Errorf("noisy A mean %v CV %v", a.Mean, a.CV)
	}
	if a.Min != 70 || a.Max != 140 || a.N != 8 {
		t.Errorf("noisy A min %v max %v n %d", a.Min, a.Max, a.N)
	}
	if want := "noisy: coefficient of variation 23% (above 10%)"; !slices.Contains(a.Warnings, want) {
		t.Errorf("noisy A warnings %q, want %q", a.Warnings, want)
	}
	// Noisy B: mean 100, squared deviations 28, sd 2: CV 2%, no warning.
	if !near(b.Mean, 100) || !near(b.CV, 0.02) {
		t.Errorf("noisy B mean %v CV %v", b.Mean, b.CV)
	}
	for _, w := range b.Warnings {
		if strings.HasPrefix(w, "noisy") {
			t.Errorf("quiet B warned %q", w)
		}
	}

	// One sample: no interval, no spread.
	s, _ := caseByName(t, "Single")
	if s.N != 1 || s.Median != 100 || s.Lo != nil || s.Hi != nil || s.Min != 100 || s.Max != 100 || s.Mean != 100 || s.CV != 0 {
		t.Errorf("single %+v", s)
	}
	if !slices.Equal(s.Warnings, []string{ciWarn}) {
		t.Errorf("single warnings %q", s.Warnings)
	}

	// The interval's ends are order statistics (n=10: the 2nd and 9th,
	// which give benchstat's ± 3% and ± 2% for Clear10).
	a, b = caseByName(t, "Clear10")
	if a.Lo == nil || b.Lo == nil || *a.Lo != 49 || *a.Hi != 52 || *b.Lo != 44 || *b.Hi != 46 {
		t.Errorf("Clear10 intervals [%v, %v], [%v, %v]", ptr(a.Lo), ptr(a.Hi), ptr(b.Lo), ptr(b.Hi))
	}

	e := Summarize(nil)
	if e.N != 0 || e.Median != 0 || e.Lo != nil || !slices.Equal(e.Warnings, []string{"no samples"}) {
		t.Errorf("empty %+v", e)
	}
}

func TestSummarizeKeepsOrder(t *testing.T) {
	in := []float64{3, 1, 2, 5, 4, 0}
	orig := slices.Clone(in)
	s := Summarize(in)
	if !slices.Equal(in, orig) {
		t.Errorf("Summarize reordered the caller's slice: %v", in)
	}
	if !slices.Equal(s.Values, orig) {
		t.Errorf("Values %v, want %v in the given order", s.Values, orig)
	}
	in[0] = 99
	if s.Values[0] != 3 {
		t.Error("Values shares the caller's array")
	}
	b := Summarize([]float64{9, 7, 8, 6, 10, 11})
	Compare(s, b, -1)
	if !slices.Equal(s.Values, orig) || !slices.Equal(b.Values, []float64{9, 7, 8, 6, 10, 11}) {
		t.Errorf("Compare reordered Values: %v, %v", s.Values, b.Values)
	}
	if m := Median(in); m != 3 || !slices.Equal(in, []float64{99, 1, 2, 5, 4, 0}) {
		t.Errorf("Median %v, or reordered %v", m, in)
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		name      string
		direction int
		want      Verdict
	}{
		// B higher (Clear5: +9.90%).
		{"Clear5", +1, Better},
		{"Clear5", -1, Worse},
		{"Clear5", 0, Differs},
		// B lower (Clear10: -10.89%).
		{"Clear10", +1, Worse},
		{"Clear10", -1, Better},
		{"Clear10", 0, Differs},
		// Not significant, whatever the direction.
		{"Identical", +1, NoChange},
		{"Identical", -1, NoChange},
		{"Identical", 0, NoChange},
		{"Three", -1, NoChange},
		{"Noisy", +1, NoChange},
		// p exactly alpha: benchstat shows the change.
		{"Boundary", +1, Worse},
		{"Boundary", -1, Better},
		// Significant with equal medians: no direction to judge.
		{"SameMedian", +1, Differs},
		{"SameMedian", -1, Differs},
		{"SameMedian", 0, Differs},
	} {
		a, b := caseByName(t, tc.name)
		c := Compare(a, b, tc.direction)
		if c.Verdict != tc.want {
			t.Errorf("%s direction %+d: %q, want %q", tc.name, tc.direction, c.Verdict, tc.want)
		}
		if c.Significant != (tc.want != NoChange) {
			t.Errorf("%s: significant %v at p=%v", tc.name, c.Significant, c.P)
		}
	}
}

func TestRatioPct(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ratio, pct float64
	}{
		{"Clear5", 111.0 / 101, 100 * (111.0/101 - 1)},       // +9.90%
		{"Clear10", 45 / 50.5, 100 * (45/50.5 - 1)},          // -10.89%
		{"Unequal", 182 / 200.5, 100 * (182/200.5 - 1)},      // -9.23%
		{"Identical", 1, 0},                                  // 0
		{"Single", 0.9, -10},                                 // ~, yet the medians' change
		{"Boundary", 2.0 / 3, 100 * (2.0/3 - 1)},             // -33.33%
		{"Fraction", 1.243 / 1.241, 100 * (1.243/1.241 - 1)}, // ~
	} {
		a, b := caseByName(t, tc.name)
		c := Compare(a, b, 0)
		if !near(c.Ratio, tc.ratio) || !near(c.Pct, tc.pct) {
			t.Errorf("%s: ratio %v pct %v, want %v %v", tc.name, c.Ratio, c.Pct, tc.ratio, tc.pct)
		}
	}
	// A's median 0: no ratio.
	c := Compare(Summarize([]float64{0, 0, 0}), Summarize([]float64{1, 2, 3}), -1)
	if c.Ratio != 0 || c.Pct != 0 {
		t.Errorf("zero base: ratio %v pct %v", c.Ratio, c.Pct)
	}
}

func TestChangeCI(t *testing.T) {
	// Clear10: A's interval [49, 52], B's [44, 46] (see
	// TestSummarizeSpread): the change lies in 44/52-1 .. 46/49-1.
	a, b := caseByName(t, "Clear10")
	c := Compare(a, b, -1)
	if c.PctLo == nil || c.PctHi == nil || !near(*c.PctLo, 100*(44.0/52-1)) || !near(*c.PctHi, 100*(46.0/49-1)) {
		t.Errorf("Clear10 change interval %v .. %v", ptr(c.PctLo), ptr(c.PctHi))
	} else if !(*c.PctLo <= c.Pct && c.Pct <= *c.PctHi) {
		t.Errorf("change %v outside its interval [%v, %v]", c.Pct, *c.PctLo, *c.PctHi)
	}
	// Identical: [100, 105] both sides: 100/105-1 .. 105/100-1.
	a, b = caseByName(t, "Identical")
	c = Compare(a, b, -1)
	if c.PctLo == nil || c.PctHi == nil || !near(*c.PctLo, 100*(100.0/105-1)) || !near(*c.PctHi, 5) {
		t.Errorf("Identical change interval %v .. %v", ptr(c.PctLo), ptr(c.PctHi))
	}
	// An infinite interval on either side: no change interval.
	for _, name := range []string{"Clear5", "Single", "Boundary"} {
		a, b := caseByName(t, name)
		if c := Compare(a, b, -1); c.PctLo != nil || c.PctHi != nil {
			t.Errorf("%s: change interval %v .. %v, want none", name, ptr(c.PctLo), ptr(c.PctHi))
		}
	}
	// A's interval reaching 0 or below: no ratio interval.
	a = Summarize([]float64{-1, 0, 1, 2, 3, 4})
	b = Summarize([]float64{1, 2, 3, 4, 5, 6})
	if c := Compare(a, b, -1); c.PctLo != nil || c.PctHi != nil {
		t.Errorf("non-positive base: change interval %v .. %v, want none", ptr(c.PctLo), ptr(c.PctHi))
	}
}

func TestCompareEmpty(t *testing.T) {
	c := Compare(Summarize(nil), Summarize([]float64{1, 2, 3}), -1)
	if c.P != 1 || c.Verdict != NoChange || c.Significant || len(c.Warnings) != 1 {
		t.Errorf("empty side: %+v", c)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 2, 3}, 2.5},
		// The mean of the two middle values, to the last bit, as
		// internal/benchstat's Stats.Median computed it
		// (0.39999999999999997; benchmath's interpolated median,
		// Summary.Median, is 0.4).
		{[]float64{0.7, 0.1}, 0.39999999999999997},
	} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestSeconds(t *testing.T) {
	in := []float64{2, 1, 3}
	if s := Seconds(in); s != "2.00s (min 1.00, max 3.00, n=3)" {
		t.Errorf("Seconds %q", s)
	}
	if !slices.Equal(in, []float64{2, 1, 3}) {
		t.Errorf("Seconds reordered %v", in)
	}
	if s := Seconds([]float64{4.5, 1.25, 2, 3}); s != "2.50s (min 1.25, max 4.50, n=4)" {
		t.Errorf("Seconds %q", s)
	}
	if Seconds(nil) != "-" {
		t.Error("empty Seconds")
	}
}

func BenchmarkCompare(b *testing.B) {
	x := Summarize([]float64{50, 51, 52, 49, 50, 53, 48, 51, 50, 52})
	y := Summarize([]float64{45, 46, 44, 45, 47, 43, 46, 45, 44, 46})
	for b.Loop() {
		Compare(x, y, -1)
	}
}
