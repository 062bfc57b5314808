package main

import (
	"context"
	"testing"
)

// TestFstestsBuildFlags: klab fstests build refuses a missing source and
// a negative --jobs before any work, and passes the rest on.
func TestFstestsBuildFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string // in the error; none for a build
		src  string
		jobs int
	}{
		{args: nil, want: []string{"--src is required", "tarball"}},
		{args: []string{"--src", " "}, want: []string{"--src is required"}},
		{args: []string{"--jobs", "-1"}, want: []string{"--src is required", "--jobs -1"}},
		{args: []string{"--src", "fstests.tar.gz"}, src: "fstests.tar.gz"},
		{args: []string{"--src", "dir", "-j", "3", "--json"}, src: "dir", jobs: 3},
	} {
		g := &globalOptions{cacheDir: "cache"}
		var got *fstestsBuildOptions
		cmd := newFstestsBuildCommand(g, func(_ context.Context, o *fstestsBuildOptions) error {
			got = o
			return nil
		})
		cmd.SetArgs(c.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.ExecuteContext(context.Background())
		if len(c.want) > 0 {
			wantBadInput(t, "fstests build", c.args, err, c.want)
			continue
		}
		if err != nil || got == nil || got.src != c.src {
			t.Errorf("klab fstests build %q: %v, %+v", c.args, err, got)
			continue
		}
		if o := got.options(g); o.CacheDir != "cache" || o.Jobs != c.jobs {
			t.Errorf("klab fstests build %q: options %+v", c.args, o)
		}
	}
}

// TestFstestsFlags: klab fstests refuses, before any work and with exit
// status 2, an unknown configuration, tests of another file system than
// the configuration's, and a missing kernel or test list; the rest is
// passed on.
func TestFstestsFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string // in the error; none for a run
	}{
		{args: []string{"--kernel", "debian:7.3", "--config", "fuse", "generic/184"},
			want: []string{`--config: unknown fstests configuration "fuse": one of ext4, fuse-hp-dev`}},
		{args: []string{"--kernel", "debian:7.3", "--config", "fuse-klab-dev", "ext4/001", "generic/184"},
			want: []string{"ext4/001 does not apply to configuration fuse-klab-dev: its tests are those of generic"}},
		{args: []string{"--config", "ext4", "--jobs", "0"},
			want: []string{"--kernel is required", "no tests", "--jobs 0"}},
		{args: []string{"--kernel", "a", "--kernel", "b", "--config", "ext4", "ext4/001", "generic/0??"}},
	} {
		var got *fstestsRunOptions
		cmd := newFstestsCommand(&globalOptions{}, func(_ context.Context, o *fstestsRunOptions) error {
			got = o
			return nil
		})
		cmd.SetArgs(c.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.ExecuteContext(context.Background())
		if len(c.want) > 0 {
			wantBadInput(t, "fstests", c.args, err, c.want)
			continue
		}
		if err != nil || got == nil || len(got.kernels) != 2 || got.cfg.Name != "ext4" || len(got.tests) != 2 {
			t.Errorf("klab fstests %q: %v, %+v", c.args, err, got)
		}
	}
}
