package report

import (
	"slices"
	"strings"
	"testing"

	"klab/results/stats"
)

// TestOneSideOnly: a row whose B side has no samples shows A's value and
// "-" for everything compared, and the side line says why there is no B.
func TestOneSideOnly(t *testing.T) {
	row := Row{Name: "futimes", Unit: "ops/s", A: stats.Summarize([]float64{589}), B: stats.Summarize(nil)}
	if got, want := tableRow(row), []string{"futimes", "589 ops/s", "-", "-", "-", "-", "-", "-", "-", "-"}; !slices.Equal(got, want) {
		t.Errorf("tableRow = %q, want %q", got, want)
	}
	r := &Report{A: Side{Label: "debian:6.12"}}
	if l := sideLine(r, 0); !strings.Contains(l, "one side only") || strings.Contains(l, "B:") {
		t.Errorf("sideLine = %q", l)
	}
}
