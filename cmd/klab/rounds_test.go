package main

import (
	"strings"
	"testing"

	experimentsfstests "klab/experiments/fstests"
)

// TestRunRoundsAutoFlags: --rounds takes a number or auto, and
// --ci-target and --max-rounds go with auto; wrong values are bad input
// (status 2) naming the flag, before any guest boots.
func TestRunRoundsAutoFlags(t *testing.T) {
	t.Setenv(experimentsfstests.SrcEnv, "")
	a := "/nonexistent/a/bzImage"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fuse-transport", "-k", a, "--rounds", "many"}, `invalid argument "many" for "--rounds" flag: want a number of rounds or auto`},
		{[]string{"fuse-transport", "-k", a, "--ci-target", "5"}, "--ci-target and --max-rounds bound --rounds auto: give --rounds auto too"},
		{[]string{"fuse-transport", "-k", a, "--rounds", "8", "--max-rounds", "20"}, "give --rounds auto too"},
		{[]string{"fuse-transport", "-k", a, "--rounds", "auto", "--max-rounds", "3"}, "--max-rounds 3 is out of range, want 6..1000"},
		{[]string{"fuse-transport", "-k", a, "--rounds", "auto", "--ci-target", "0"}, "--ci-target 0 is out of range"},
		{[]string{"fstests-klab-uring", "-k", a, "--rounds", "auto"}, "--rounds: experiments/fstests-klab-uring.yaml runs a test suite"},
	} {
		code, _, stderr := runCLI(t, append([]string{"run"}, tc.args...)...)
		if code != exitBadInput || !strings.Contains(stderr, tc.want) {
			t.Errorf("klab run %q: status %d, stderr %q; want %d and %q", tc.args, code, stderr, exitBadInput, tc.want)
		}
	}
	var n int
	var auto bool
	v := roundsValue{n: &n, auto: &auto}
	for _, tc := range []struct {
		in   string
		n    int
		auto bool
	}{{"auto", 0, true}, {"7", 7, false}} {
		if err := v.Set(tc.in); err != nil || n != tc.n || auto != tc.auto || v.String() != tc.in {
			t.Errorf("Set(%q): %v, n %d, auto %v, String %q", tc.in, err, n, auto, v.String())
		}
	}
}
