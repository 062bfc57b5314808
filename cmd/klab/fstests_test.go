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
