package workload

import (
	"math"
	"math/bits"

	"klab/guest/proto"
)

// Histogram layout: values below 2*histSub are counted exactly; above,
// each power-of-two range [2^k, 2^(k+1)) is split into histSub equal
// buckets, so a bucket is at most 1/histSub of its values wide (HDR-like
// log-linear buckets, as fio's own latency histogram uses).
const (
	histSubBits = 6
	histSub     = 1 << histSubBits // 64 buckets per power of two
	// histBuckets covers every uint64: shift up to 64-histSubBits-1.
	histBuckets = (64-histSubBits)*histSub + histSub
)

// Histogram counts non-negative values (latencies in nanoseconds) in
// log-linear buckets with a relative error under 1/64, and tracks the
// exact count, sum, minimum and maximum. The zero value is empty and ready.
// A Histogram is not safe for concurrent use; give each job its own and
// Merge them.
type Histogram struct {
	counts [histBuckets]uint64
	n      int64
	sum    int64 // integer: no floating point in the hot path
	min    int64
	max    int64
}

// bucketOf returns the bucket index of v.
func bucketOf(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1 // v>>shift is in [histSub, 2*histSub)
	return shift*histSub + int(v>>uint(shift))
}

// bucketRange returns the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < 2*histSub {
		return uint64(i), uint64(i)
	}
	shift := i/histSub - 1
	m := uint64(i - shift*histSub)
	lo = m << uint(shift)
	hi = lo + (1 << uint(shift)) - 1
	return lo, hi
}

// Record adds one value. Negative values count as 0.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(uint64(v))]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

// RecordN adds the value v n times.
func (h *Histogram) RecordN(v int64, n uint64) {
	if n == 0 {
		return
	}
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(uint64(v))] += n
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n += int64(n)
	h.sum += v * int64(n)
}

// Merge adds every value of o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Reset empties h.
func (h *Histogram) Reset() { *h = Histogram{} }

// Count returns the number of values recorded.
func (h *Histogram) Count() int64 { return h.n }

// Mean returns the exact mean, 0 when empty.
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return float64(h.sum) / float64(h.n)
}

// Quantile returns the value at quantile q (0..1): the midpoint of the
// bucket that holds the ceil(q*n)-th smallest value, clamped to the exact
// minimum and maximum. It returns 0 when h is empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			v := int64(lo + (hi-lo)/2)
			return max(h.min, min(v, h.max))
		}
	}
	return h.max
}

// Latency summarises h as proto.Latency.
func (h *Histogram) Latency() proto.Latency {
	return proto.Latency{
		Count:  h.n,
		MinNs:  h.min,
		MaxNs:  h.max,
		MeanNs: int64(math.Round(h.Mean())),
		P50Ns:  h.Quantile(0.50),
		P90Ns:  h.Quantile(0.90),
		P99Ns:  h.Quantile(0.99),
		P999Ns: h.Quantile(0.999),
	}
}
