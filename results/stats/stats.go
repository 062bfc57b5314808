// Package stats holds klab's statistics for A/B comparisons: per-side
// summaries (median with a 95% confidence interval, spread) and per-pair
// comparisons (relative change, Mann-Whitney U p-value, verdict, and the
// smallest change the comparison could have seen: MDC). It uses
// golang.org/x/perf/benchmath, the statistics benchstat uses, and adds
// the warnings a patch author needs to read the numbers honestly.
package stats

import (
	"fmt"
	"math"
	"slices"

	"golang.org/x/perf/benchmath"
)

// Confidence is the level of every confidence interval klab reports.
const Confidence = 0.95

// Alpha is the significance level of every comparison.
const Alpha = 0.05

// HighCV is the coefficient of variation above which a sample is called
// noisy.
const HighCV = 0.10

// Summary describes one side's samples.
type Summary struct {
	// N is the number of samples.
	N int `json:"n"`
	// Values are the samples in the order they were measured.
	Values []float64 `json:"values"`
	// Median is the sample median.
	Median float64 `json:"median"`
	// Lo and Hi bound the median's 95% confidence interval; they are
	// ±Inf (written as null in JSON) when there are too few samples.
	Lo *float64 `json:"ci_lo"`
	Hi *float64 `json:"ci_hi"`
	// Min and Max are the smallest and largest samples.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// Mean and CV (standard deviation over mean) describe the spread.
	Mean float64 `json:"mean"`
	CV   float64 `json:"cv"`
	// Warnings say why the numbers may mislead.
	Warnings []string `json:"warnings,omitempty"`
}

// Summarize summarises values (in measurement order). It never fails: an
// empty sample gives a zero Summary with a warning.
func Summarize(values []float64) Summary {
	s := Summary{N: len(values), Values: slices.Clone(values)}
	if len(values) == 0 {
		s.Warnings = []string{"no samples"}
		return s
	}
	sorted := slices.Clone(values)
	sm := benchmath.AssumeNothing.Summary(benchmath.NewSample(sorted, &benchmath.DefaultThresholds), Confidence)
	s.Median = sm.Center
	if !math.IsInf(sm.Lo, 0) && !math.IsInf(sm.Hi, 0) {
		lo, hi := sm.Lo, sm.Hi
		s.Lo, s.Hi = &lo, &hi
	}
	for _, w := range sm.Warnings {
		s.Warnings = append(s.Warnings, w.Error())
	}
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	var sum float64
	for _, v := range values {
		sum += v
	}
	s.Mean = sum / float64(len(values))
	if len(values) > 1 && s.Mean != 0 {
		var ss float64
		for _, v := range values {
			ss += (v - s.Mean) * (v - s.Mean)
		}
		s.CV = math.Sqrt(ss/float64(len(values)-1)) / math.Abs(s.Mean)
	}
	if s.CV > HighCV {
		s.Warnings = append(s.Warnings, fmt.Sprintf("noisy: coefficient of variation %.0f%% (above %.0f%%)", 100*s.CV, 100*HighCV))
	}
	return s
}

// Verdict is the outcome of one comparison.
type Verdict string

// Verdicts.
const (
	// Better: B differs significantly from A in the good direction.
	Better Verdict = "better"
	// Worse: B differs significantly from A in the bad direction.
	Worse Verdict = "worse"
	// NoChange: no significant difference at Alpha.
	NoChange Verdict = "no significant change"
	// Differs: significant, for a metric with no good direction or with
	// equal medians.
	Differs Verdict = "differs"
)

// Change compares B against A.
type Change struct {
	// Ratio is B's median over A's (0 when A's is 0).
	Ratio float64 `json:"ratio"`
	// Pct is the relative change of the medians, in percent.
	Pct float64 `json:"pct"`
	// PctLo and PctHi bound the change, from the two medians'
	// confidence intervals (B.Lo/A.Hi-1 .. B.Hi/A.Lo-1): a conservative
	// interval, null when either side has too few samples.
	PctLo *float64 `json:"pct_lo"`
	PctHi *float64 `json:"pct_hi"`
	// P is the Mann-Whitney U test's p-value (two-sided).
	P float64 `json:"p"`
	// Alpha is the significance level P is held against.
	Alpha float64 `json:"alpha"`
	// Significant is P <= Alpha, benchstat's reading (it prints "~" only
	// when P > Alpha).
	Significant bool `json:"significant"`
	// Verdict reads the change in the metric's direction.
	Verdict Verdict `json:"verdict"`
	// Warnings say why the comparison may mislead: a side without
	// samples, samples all of one value. Too few samples for a
	// significant change is MinP above Alpha, not a warning.
	Warnings []string `json:"warnings,omitempty"`
	// MinP is the smallest p-value these sample sizes can give (MinP);
	// above Alpha, no change can be significant.
	MinP float64 `json:"min_p"`
	// MDCPct is the minimum detectable change at this noise, in percent
	// (MDC): a change below it is unlikely to be seen as significant;
	// null when no change can be (MinP above Alpha, or a side without
	// samples).
	MDCPct *float64 `json:"mdc_pct"`
}

// Compare compares b against a. higherIsBetter is +1 when a higher value
// is better (throughput), -1 when lower is better (latency, CPU per
// operation), and 0 when neither.
func Compare(a, b Summary, direction int) Change {
	c := Change{Alpha: Alpha, MinP: MinP(a.N, b.N)}
	if mdc, ok := MDC(a, b); ok {
		c.MDCPct = &mdc
	}
	if a.Median != 0 {
		c.Ratio = b.Median / a.Median
		c.Pct = 100 * (c.Ratio - 1)
	}
	if a.Lo != nil && a.Hi != nil && b.Lo != nil && b.Hi != nil && *a.Lo > 0 && *a.Hi > 0 {
		lo, hi := 100*(*b.Lo / *a.Hi - 1), 100*(*b.Hi / *a.Lo - 1)
		c.PctLo, c.PctHi = &lo, &hi
	}
	if a.N == 0 || b.N == 0 {
		c.P, c.Verdict = 1, NoChange
		c.Warnings = []string{"a side has no samples"}
		return c
	}
	sa := benchmath.NewSample(slices.Clone(a.Values), &benchmath.DefaultThresholds)
	sb := benchmath.NewSample(slices.Clone(b.Values), &benchmath.DefaultThresholds)
	cmp := benchmath.AssumeNothing.Compare(sa, sb)
	c.P = cmp.P
	// When the U test ran (the samples are not all one value), benchmath's
	// only warning is that the samples are too few for any difference to
	// be significant. MinP and MDCPct carry that, the reports say it for
	// each row ("cannot be significant with n=3 per side"), and a run of
	// fewer rounds says it once: a second warning would say it again.
	if !oneValue(a.Values, b.Values) {
		cmp.Warnings = nil
	}
	for _, w := range cmp.Warnings {
		c.Warnings = append(c.Warnings, w.Error())
	}
	c.Significant = cmp.P <= cmp.Alpha
	switch {
	case !c.Significant:
		c.Verdict = NoChange
	case direction == 0 || b.Median == a.Median:
		// Equal medians have no direction (benchstat: "0.00%").
		c.Verdict = Differs
	case (b.Median > a.Median) == (direction > 0):
		c.Verdict = Better
	default:
		c.Verdict = Worse
	}
	return c
}

// oneValue reports whether every value of a and b is the same one.
func oneValue(a, b []float64) bool {
	all := append(slices.Clone(a), b...)
	for _, v := range all {
		if v != all[0] {
			return false
		}
	}
	return true
}

// Median returns the median of values (the middle one, or the mean of
// the two middle ones), 0 for none. It does not reorder values.
// Summary.Median, benchmath's interpolated median, can differ from it in
// the last bit for an even number of values.
func Median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	c := slices.Clone(values)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}
