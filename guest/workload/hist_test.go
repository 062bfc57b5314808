package workload

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBucketsContinuous(t *testing.T) {
	prevHi := uint64(0)
	for i := 0; i < histBuckets; i++ {
		lo, hi := bucketRange(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d = [%d,%d] maps back to %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo >= 2*histSub && float64(hi-lo+1)/float64(lo) > 1.0/histSub+1e-12 {
			t.Fatalf("bucket %d = [%d,%d] is wider than 1/%d of its values", i, lo, hi, histSub)
		}
		prevHi = hi
		if hi == math.MaxUint64 {
			if i != histBuckets-1 {
				t.Fatalf("bucket %d reaches MaxUint64 before the last bucket %d", i, histBuckets-1)
			}
			return
		}
	}
	t.Fatalf("buckets end at %d, not at MaxUint64", prevHi)
}

func TestQuantilesWithinError(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	vals := make([]int64, 200_000)
	for i := range vals {
		// Log-normal-ish latencies from 1 µs to ~10 ms.
		v := int64(math.Exp(7 + 2*r.NormFloat64()))
		vals[i] = v
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := h.Quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 1.0/histSub {
			t.Errorf("q%.3f = %d, exact %d: relative error %.4f > 1/%d", q, got, exact, rel, histSub)
		}
	}
	l := h.Latency()
	if l.MinNs != vals[0] || l.MaxNs != vals[len(vals)-1] || l.Count != int64(len(vals)) {
		t.Errorf("latency %+v: min, max or count is not exact", l)
	}
}

func TestHistogramSmallAndMerge(t *testing.T) {
	var a, b Histogram
	if a.Quantile(0.5) != 0 || a.Latency().Count != 0 {
		t.Fatal("empty histogram is not zero")
	}
	for v := int64(1); v <= 100; v++ {
		a.Record(v)
	}
	b.RecordN(1000, 100)
	b.Record(-5) // counts as 0
	a.Merge(&b)
	if a.Count() != 201 {
		t.Fatalf("count %d, want 201", a.Count())
	}
	if got := a.Quantile(0.25); got != 50 {
		t.Errorf("p25 = %d, want 50 (exact below 128)", got)
	}
	if got := a.Quantile(0.9); math.Abs(float64(got-1000)) > 1000.0/histSub {
		t.Errorf("p90 = %d, want about 1000", got)
	}
	if a.Latency().MinNs != 0 || a.Latency().MaxNs != 1000 {
		t.Errorf("min/max %d/%d, want 0/1000", a.Latency().MinNs, a.Latency().MaxNs)
	}
	a.Reset()
	if a.Count() != 0 {
		t.Error("Reset left values")
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	v := int64(12345)
	for i := 0; i < b.N; i++ {
		h.Record(v)
		v = (v*1103515245 + 12345) & (1<<24 - 1)
	}
}
