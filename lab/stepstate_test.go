package lab

import (
	"testing"
	"time"
)

// TestStepState: a step is hung only past its time and silent, and
// stopped past the absolute limit however much the guest prints.
func TestStepState(t *testing.T) {
	const limit, grace = 10 * time.Second, 5 * time.Second
	for _, tc := range []struct {
		elapsed, silence time.Duration
		want             int
	}{
		{9 * time.Second, time.Hour, stepRunning},       // within its time
		{16 * time.Second, time.Second, stepRunning},    // late, but the guest talks
		{16 * time.Second, 6 * time.Second, stepHung},   // late and silent
		{limit + grace + HardGrace, 0, stepOverrun},     // a WARNING storm that never ends
		{2 * time.Hour, 0, stepOverrun},                 // long past
		{limit + grace + HardGrace - 1, 0, stepRunning}, // just before the limit
	} {
		if got := stepState(tc.elapsed, tc.silence, limit, grace); got != tc.want {
			t.Errorf("stepState(%v, %v) = %d, want %d", tc.elapsed, tc.silence, got, tc.want)
		}
	}
}
