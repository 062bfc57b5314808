package stats

import (
	"fmt"
	"slices"
)

// Seconds formats repeated timings in seconds (or any one unit) as the
// median and the range with the count: "2.00s (min 1.00, max 3.00, n=3)",
// "-" for none. It does not reorder values.
func Seconds(values []float64) string {
	if len(values) == 0 {
		return "-"
	}
	c := slices.Clone(values)
	slices.Sort(c)
	return fmt.Sprintf("%.2fs (min %.2f, max %.2f, n=%d)", Median(values), c[0], c[len(c)-1], len(c))
}
