package main

import "testing"

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
