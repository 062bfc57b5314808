package stats

import "math"

// Power is the probability of a significant result that MDC assumes:
// the change it gives is the one the test finds four times in five.
const Power = 0.80

// MinP is the smallest two-sided p-value the Mann-Whitney U test can
// give for na against nb samples: 2/C(na+nb, na), reached when every
// sample of one side is above every sample of the other (at most 1). It
// is 1 when a side has no samples. With 3 against 3 samples it is 0.1,
// so no change, however large, is significant at Alpha; with 4 against
// 4 it is 0.029.
func MinP(na, nb int) float64 {
	if na <= 0 || nb <= 0 {
		return 1
	}
	// C(na+nb, na), exact while it fits a float64's mantissa; +Inf (a
	// p-value of 0) for samples far larger than any run's.
	k := min(na, nb)
	c := 1.0
	for i := 1; i <= k; i++ {
		c = c * float64(na+nb-k+i) / float64(i)
	}
	return math.Min(1, 2/c)
}

// CanBeSignificant reports whether na against nb samples can give a
// p-value at or below Alpha at all (MinP(na, nb) <= Alpha).
func CanBeSignificant(na, nb int) bool {
	return MinP(na, nb) <= Alpha
}

// zQuantile is the standard normal distribution's quantile of p.
func zQuantile(p float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// MDC is the minimum detectable change of a comparison of a against b,
// in percent: the smallest relative change of the medians that the
// Mann-Whitney U test at Alpha (two-sided) would find with probability
// Power at the noise the samples show. It uses the normal approximation
//
//	MDC = (z(1-Alpha/2) + z(Power)) * sqrt(pi/3) * sqrt(CV_A²/n_A + CV_B²/n_B)
//
// where CV is a side's coefficient of variation, n its number of
// samples, z the standard normal quantile (1.96 + 0.84 = 2.80 here) and
// sqrt(pi/3) the Mann-Whitney test's cost against the t-test on normal
// data (its asymptotic relative efficiency is 3/pi). With few samples
// the approximation is optimistic. ok is false when the test cannot be
// significant at all with these sample sizes (CanBeSignificant), and
// when a side has no samples.
func MDC(a, b Summary) (pct float64, ok bool) {
	if a.N == 0 || b.N == 0 || !CanBeSignificant(a.N, b.N) {
		return 0, false
	}
	z := zQuantile(1-Alpha/2) + zQuantile(Power)
	return 100 * z * math.Sqrt(math.Pi/3) * math.Sqrt(a.CV*a.CV/float64(a.N)+b.CV*b.CV/float64(b.N)), true
}
