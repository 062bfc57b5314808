// Package benchstat summarises the repeated timings of klab's end-to-end
// benchmarks: median and range.
package benchstat

import (
	"fmt"
	"sort"
)

// Stats are repeated measurements in seconds (or any one unit).
type Stats []float64

// Median returns the median, 0 for no samples.
func (s Stats) Median() float64 {
	c := append(Stats(nil), s...)
	sort.Float64s(c)
	if len(c) == 0 {
		return 0
	}
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// String is the median and the range in seconds, with the count.
func (s Stats) String() string {
	c := append(Stats(nil), s...)
	sort.Float64s(c)
	if len(c) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fs (min %.2f, max %.2f, n=%d)", s.Median(), c[0], c[len(c)-1], len(c))
}
