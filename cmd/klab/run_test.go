package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	experimentsfstests "klab/experiments/fstests"
	"klab/internal/option"
	"klab/internal/specfile"
)

// TestRunFlagErrors: klab run's bad flags are bad input (status 2) that
// names the flag, before any guest boots; experiments' own errors name
// options, not flags.
func TestRunFlagErrors(t *testing.T) {
	// Kernels that are never resolved unless the plan holds: a bzImage
	// that does not exist fails at once, without the network.
	a, b := "/nonexistent/a/bzImage", "/nonexistent/b/bzImage"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"fuse-transport"}, []string{"no kernel: give --kernel A (and --kernel B to compare kernels)"}},
		{[]string{"fuse-transport", "-k", a, "--rounds", "1001"}, []string{"--rounds 1001 is out of range, want 1..1000"}},
		{[]string{"fuse-transport", "-k", a, "--order", "zigzag"}, []string{`--order "zigzag" is not allowed, want abba or random`}},
		{[]string{"fuse-transport", "-k", a, "--compare", "colour"}, []string{`--compare "colour" is neither kernel nor a parameter of fuse-transport`}},
		{[]string{"fuse-transport", "-k", a, "-k", a, "--compare", "kernel"}, []string{"--kernel " + a + " is given twice"}},
		{[]string{"fuse-transport", "-k", a, "--set", "colour=red", "--set", "transport="},
			[]string{"--set colour: ", "has no such parameter, want one of: transport", "--set transport: no values, want transport=V1[,V2...]"}},
		{[]string{"fuse-transport", "-k", a, "-k", b, "--compare", "kernel"}, []string{"--kernel " + a + ": ", "--kernel " + b + ": "}},
		{[]string{"fuse-transport", "-k", a, "--accel", "hvf"}, []string{`--accel "hvf": want auto, kvm or tcg`}},
		{[]string{"fuse-transport", "-k", a, "--set", "transport"}, []string{`--set "transport": want NAME=V1[,V2...]`}},
	} {
		code, _, stderr := runCLI(t, append([]string{"run"}, tc.args...)...)
		if code != exitBadInput {
			t.Errorf("klab run %q: status %d, want %d; stderr %q", tc.args, code, exitBadInput, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("klab run %q: stderr %q, want %q in it", tc.args, stderr, w)
			}
		}
	}
}

// TestFlagNames: flagNames names the flag of every option error it
// finds, joined or inside a bad-input marker, and leaves other errors as
// they are.
func TestFlagNames(t *testing.T) {
	other := os.ErrNotExist
	err := &specfile.BadInputError{Err: errors.Join(
		option.Errorf("set", "x: no values"),
		other,
		option.Errorf("kernel", "k: %w", other),
	)}
	got := flagNames(err)
	if want := "--set x: no values\n" + other.Error() + "\n--kernel k: " + other.Error(); got.Error() != want {
		t.Errorf("flagNames = %q, want %q", got, want)
	}
	if !errors.Is(got, other) {
		t.Error("flagNames lost the wrapped errors")
	}
	// A wrapper that says more is left alone.
	for _, e := range []error{other, fmt.Errorf("boot: %w", option.Errorf("rounds", "0"))} {
		if got := flagNames(e); got != e {
			t.Errorf("flagNames(%v) = %v", e, got)
		}
	}
}

// TestRunSuiteFlagErrors: klab run of a suite experiment refuses the
// flags of workload experiments, and a missing fstests source, as bad
// input before anything is built or booted.
func TestRunSuiteFlagErrors(t *testing.T) {
	t.Setenv(experimentsfstests.SrcEnv, "")
	a := "/nonexistent/a/bzImage"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"fstests-klab-uring", "-k", a, "--rounds", "2"}, []string{"--rounds: experiments/fstests-klab-uring.yaml runs a test suite"}},
		{[]string{"fstests-klab-uring", "-k", a, "--set", "x=1"}, []string{"--set: "}},
		{[]string{"fstests-klab-uring", "-k", "host"}, []string{"--kernel host: experiments/fstests-klab-uring.yaml runs a test suite, in guests only"}},
		{[]string{"fstests-klab-uring", "-k", a}, []string{"--fstests-src: no fstests source", "--fstests-src DIR|TARBALL", "$" + experimentsfstests.SrcEnv}},
		{[]string{"fuse-transport", "-k", a, "--fstests-src", "x.tar.gz"}, []string{"--fstests-src: experiments/fuse-transport.yaml runs workloads, not a test suite"}},
	} {
		code, _, stderr := runCLI(t, append([]string{"run"}, tc.args...)...)
		if code != exitBadInput {
			t.Errorf("klab run %q: status %d, want %d; stderr %q", tc.args, code, exitBadInput, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("klab run %q: stderr %q, want %q in it", tc.args, stderr, w)
			}
		}
	}
}
