package suite

import (
	"slices"
	"sort"
)

// DefaultSeconds is the time Balance assumes for a test when no test
// has an earlier time.
const DefaultSeconds = 60

// Balance splits tests over n shards so that the shards take about the
// same time, by times, each test's seconds in earlier runs: the longest
// test first goes to the shard with the least time so far (longest
// processing time first). A test without a time counts as the median of
// the known times, or DefaultSeconds when none is known. Each shard
// keeps the tests in the order of tests; ties go to the lower shard, so
// the result depends on nothing but the arguments. It returns at most n
// shards and no empty one (fewer when there are fewer tests); n below 1
// is taken as 1.
func Balance(tests []string, times map[string]float64, n int) [][]string {
	if len(tests) == 0 {
		return nil
	}
	n = max(1, min(n, len(tests)))
	est := estimates(tests, times)
	order := make([]int, len(tests))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return est[order[a]] > est[order[b]] })
	load := make([]float64, n)
	shardOf := make([]int, len(tests))
	for _, i := range order {
		s := 0
		for j := 1; j < n; j++ {
			if load[j] < load[s] {
				s = j
			}
		}
		load[s] += est[i]
		shardOf[i] = s
	}
	out := make([][]string, n)
	for i, t := range tests {
		out[shardOf[i]] = append(out[shardOf[i]], t)
	}
	return out
}

// estimates are the seconds Balance counts for each of tests.
func estimates(tests []string, times map[string]float64) []float64 {
	var known []float64
	for _, t := range tests {
		if s, ok := times[t]; ok && s >= 0 {
			known = append(known, s)
		}
	}
	def := float64(DefaultSeconds)
	if len(known) > 0 {
		slices.Sort(known)
		def = known[len(known)/2]
		if len(known)%2 == 0 {
			def = (known[len(known)/2-1] + known[len(known)/2]) / 2
		}
	}
	est := make([]float64, len(tests))
	for i, t := range tests {
		if s, ok := times[t]; ok && s >= 0 {
			est[i] = s
		} else {
			est[i] = def
		}
	}
	return est
}
