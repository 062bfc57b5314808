package main

import (
	"strings"
	"testing"
)

// TestKernelsBuildFlagErrors: klab kernels build's bad flags are bad
// input (status 2) that names each flag, all at once, before any build.
func TestKernelsBuildFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--name", "x"}, []string{"give exactly one of --tree DIR, --tarball FILE and --source debian:<series>"}},
		{[]string{"--tree", "debian:7.3"}, []string{"--tree debian:7.3: for Debian's kernel source use --source debian:7.3"}},
		{[]string{"--source", "debian:7.3", "--arch", "arm64", "-j", "2000", "--base-config", "oldconfig"},
			[]string{"--arch arm64: only x86_64", "--jobs 2000 is out of range, want 1..1024", "--base-config oldconfig: want tinyconfig, defconfig or allnoconfig"}},
		{[]string{"--tarball", "/nonexistent/linux.tar.xz", "--dirty"}, []string{"--dirty needs a git tree, not /nonexistent/linux.tar.xz"}},
		{[]string{"--source", "debian:7.3", "--config", "lab,/nonexistent/frag"}, []string{"--config /nonexistent/frag: ", "want a fragment file or one of: "}},
	} {
		code, _, stderr := runCLI(t, append([]string{"kernels", "build"}, tc.args...)...)
		if code != exitBadInput {
			t.Errorf("klab kernels build %q: status %d, want %d; stderr %q", tc.args, code, exitBadInput, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("klab kernels build %q: stderr %q, want %q in it", tc.args, stderr, w)
			}
		}
	}
}
