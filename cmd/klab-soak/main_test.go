package main

import (
	"testing"

	"klab/matrix"
)

func TestQuantile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	for _, c := range []struct{ q, want float64 }{{0, 1}, {0.1, 2}, {0.5, 6}, {0.9, 10}, {1, 11}, {0.25, 3.5}} {
		if got := quantile(s, c.q); got != c.want {
			t.Errorf("quantile(%g) = %g, want %g", c.q, got, c.want)
		}
	}
	if got := quantile([]float64{7}, 0.9); got != 7 {
		t.Errorf("quantile of one = %g", got)
	}
}

// TestSoakMatrix: the soak's matrix file is one klab plans, with the
// cells asked for, rounded up to whole rows.
func TestSoakMatrix(t *testing.T) {
	for _, c := range []struct{ cells, want int }{{40, 40}, {5, 6}, {1, 2}} {
		p, err := writeSoakMatrix(t.TempDir(), []string{"debian:6.12", "debian:7.3"}, c.cells)
		if err != nil {
			t.Fatal(err)
		}
		f, err := matrix.LoadFile(p)
		if err != nil {
			t.Fatalf("%d cells: %v", c.cells, err)
		}
		if got := len(f.Cells()); got != c.want {
			t.Errorf("%d cells asked: %d planned, want %d", c.cells, got, c.want)
		}
	}
}
