package fstests

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"klab/guest/proto"
)

// Guest runs tests, in order, in one fresh guest, iterations times over
// (1 or less: once). It returns what the guest reported before it
// stopped; an error is a failure of klab or of the host, not of a test.
type Guest func(ctx context.Context, tests []string, iterations int) (*Outcome, error)

// Outcome is what one guest reported.
type Outcome struct {
	// Results are the tests that ended, in the order they ended.
	Results []proto.TestResult
	// XUnit is check's result.xml, when check finished.
	XUnit string
	// Stopped is the test that was running when the guest stopped before
	// the end of its list: it hung (StoppedStatus proto.TestHang) or the
	// kernel crashed or the guest died (proto.TestCrash). Empty when the
	// list ended, or when the guest stopped before any test started.
	Stopped string
	// StoppedStatus is proto.TestHang or proto.TestCrash.
	StoppedStatus string
	// StoppedReason says what happened, in one line.
	StoppedReason string
	// RunDir is the boot's run directory: its console and manifest.
	RunDir string
}

// maxEmptyBoots is how many guests in a row may stop before any test ends
// or starts before a shard gives up: the kernel does not get that far.
const maxEmptyBoots = 2

// Progress receives one line per test that ends and per guest booted.
type Progress func(format string, args ...any)

// RunShard runs tests through fresh guests until each has a result, and
// returns the results in the order of tests (iterations per test when
// over 1) and the run directories of the guests it booted. A test that
// hung or crashed its guest gets that status, and the next guest starts
// with the test after it: nothing that ended is lost. label names the
// shard in progress lines.
func RunShard(ctx context.Context, label string, tests []string, iterations int, g Guest, progress Progress) ([]proto.TestResult, []string, error) {
	if iterations < 1 {
		iterations = 1
	}
	if progress == nil {
		progress = func(string, ...any) {}
	}
	var got []proto.TestResult
	var boots []string
	remaining := tests
	empty := 0
	for len(remaining) > 0 {
		if err := ctx.Err(); err != nil {
			return got, boots, err
		}
		progress("%s: booting a guest for %d test(s), from %s", label, len(remaining), remaining[0])
		out, err := g(ctx, remaining, iterations)
		if out != nil && out.RunDir != "" {
			boots = append(boots, out.RunDir)
		}
		if err != nil {
			return got, boots, err
		}
		for _, r := range out.Results {
			progress("%s: %s %s %.0fs%s", label, r.Name, r.Status, r.Seconds, reasonSuffix(r.Reason))
		}
		got = append(got, out.Results...)
		done := ended(out.Results)
		if out.Stopped != "" {
			st := out.StoppedStatus
			if st != proto.TestHang {
				st = proto.TestCrash
			}
			r := proto.TestResult{Name: out.Stopped, Status: st, Reason: out.StoppedReason}
			progress("%s: %s %s%s", label, r.Name, r.Status, reasonSuffix(r.Reason))
			got = append(got, r)
			done[out.Stopped] = iterations
		}
		next := remaining[:0:0]
		for _, t := range remaining {
			if done[t] < iterations {
				next = append(next, t)
			}
		}
		if len(next) == len(remaining) {
			empty++
			if empty >= maxEmptyBoots {
				why := out.StoppedReason
				if why == "" {
					why = "no test started"
				}
				return got, boots, fmt.Errorf("%s: %d guests in a row stopped before %s ended: %s", label, empty, remaining[0], why)
			}
		} else {
			empty = 0
		}
		// A test that was partly iterated before a stop starts over in
		// the next guest, with the tests after it.
		remaining = next
	}
	return order(got, tests), boots, nil
}

// ended counts the results per test.
func ended(rs []proto.TestResult) map[string]int {
	n := make(map[string]int, len(rs))
	for _, r := range rs {
		n[r.Name]++
	}
	return n
}

// order returns rs sorted by the position of their test in tests, each
// test's results in the order they came.
func order(rs []proto.TestResult, tests []string) []proto.TestResult {
	pos := make(map[string]int, len(tests))
	for i, t := range tests {
		if _, ok := pos[t]; !ok {
			pos[t] = i
		}
	}
	byTest := make([][]proto.TestResult, len(tests))
	var extra []proto.TestResult
	for _, r := range rs {
		if i, ok := pos[r.Name]; ok {
			byTest[i] = append(byTest[i], r)
		} else {
			extra = append(extra, r)
		}
	}
	out := make([]proto.TestResult, 0, len(rs))
	for _, b := range byTest {
		out = append(out, b...)
	}
	return append(out, extra...)
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

// ShardResult is one shard's outcome.
type ShardResult struct {
	Tests   []string
	Results []proto.TestResult
	Boots   []string
	Err     error
}

// RunShards runs each shard through its own guests, all shards at once,
// and returns their results in shard order. guest returns the Guest for a
// shard (each shard boots guests of its own). The error joins the shards'
// errors; the results of the shards that worked are kept.
func RunShards(ctx context.Context, shards [][]string, iterations int, guest func(shard int) Guest, progress Progress) ([]ShardResult, error) {
	out := make([]ShardResult, len(shards))
	var wg sync.WaitGroup
	var mu sync.Mutex
	locked := func(format string, args ...any) {
		if progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		progress(format, args...)
	}
	for i, tests := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			label := "fstests"
			if len(shards) > 1 {
				label = fmt.Sprintf("fstests shard %d/%d", i+1, len(shards))
			}
			rs, boots, err := RunShard(ctx, label, tests, iterations, guest(i), locked)
			out[i] = ShardResult{Tests: tests, Results: rs, Boots: boots, Err: err}
		}()
	}
	wg.Wait()
	var errs []error
	for _, s := range out {
		if s.Err != nil {
			errs = append(errs, s.Err)
		}
	}
	return out, errors.Join(errs...)
}
