package bisect

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/internal/specfile"
)

// TestPrepare: a bisection's input is checked before anything is built,
// every problem at once, as bad input; a good one gives the manifest.
func TestPrepare(t *testing.T) {
	tree, commits := history(t, []string{"a", "b", "c"})
	ctx := context.Background()
	base := Options{Tree: tree, Good: "main~2", Bad: "main", Spec: "fuse-transport", Command: []string{"klab", "bisect"}}
	with := func(f func(o *Options)) Options {
		o := base
		f(&o)
		return o
	}
	for _, c := range []struct {
		name string
		o    Options
		want []string
	}{
		{"two criteria", with(func(o *Options) { o.Splat, o.Check = "x", "y" }), []string{"give one of them"}},
		{"unknown spec", with(func(o *Options) { o.Spec = "nosuch" }), []string{`no experiment "nosuch"`}},
		{"unknown spec and a bad tree", with(func(o *Options) { o.Spec, o.Tree = "nosuch", t.TempDir() }), []string{`no experiment "nosuch"`, "not a git tree"}},
		{"bad rev", with(func(o *Options) { o.Good = "v0" }), []string{"--good v0: no such commit"}},
		{"unknown check", with(func(o *Options) { o.Spec, o.Check = "fuse-timeout", "nosuch" }), []string{"--check nosuch: ", "want stuck-server-aborted"}},
		{"check of a spec without", with(func(o *Options) { o.Check = "x" }), []string{"it has none"}},
		{"test of workloads", with(func(o *Options) { o.Test = "generic/013" }), []string{"--test generic/013: ", "runs workloads, not a test suite"}},
		{"row of a suite", with(func(o *Options) { o.Spec, o.Row = "fstests-klab-uring", "1" }), []string{"--row 1: ", "has no rows"}},
		{"check of a suite", with(func(o *Options) { o.Spec, o.Check = "fstests-klab-uring", "x" }), []string{"chase one of its tests with --test"}},
		{"unknown row", with(func(o *Options) { o.Row = "nosuch" }), []string{"--row nosuch: no such row", `1 "create transport=dev"`, `4 "randread-4k transport=uring"`}},
		{"row out of range", with(func(o *Options) { o.Row = "9" }), []string{"--row 9: no such row"}},
		{"splat family", with(func(o *Options) { o.SplatFamily = "oopsie" }), []string{`--splat-family: unknown splat type "oopsie"`}},
		{"too few metric rounds", with(func(o *Options) { o.Row, o.Rounds = "1", 2 }), []string{"--rounds 2: a metric step needs at least 3 rounds"}},
		{"max rounds below rounds", with(func(o *Options) { o.Row, o.Rounds, o.MaxRounds = "1", 4, 3 }), []string{"--max-rounds 3 is out of range, want 4..1000"}},
		{"max rounds without a row", with(func(o *Options) { o.MaxRounds = 9 }), []string{"--max-rounds bounds the rounds of a metric step"}},
		{"rounds of a suite", with(func(o *Options) { o.Spec, o.Test, o.Rounds = "fstests-klab-uring", "generic/184", 2 }), []string{"once per step"}},
		{"a test the suite does not run", with(func(o *Options) { o.Spec, o.Test = "fstests-klab-uring", "generic/013" }), []string{"does not run it; it runs generic/023, "}},
		{"bad set", with(func(o *Options) { o.Sets = map[string]string{"nosuch": "1"} }), []string{"nosuch"}},
		{"bad config", with(func(o *Options) { o.Config = []string{"lab", "nosuch"} }), []string{"--config nosuch: neither"}},
		{"missing patch", with(func(o *Options) { o.Patches = []string{filepath.Join(tree, "none.patch")} }), []string{"--patch: "}},
		{"fstests for workloads", with(func(o *Options) { o.FstestsSrc = "/src/xfstests" }), []string{"--fstests-src: "}},
	} {
		_, _, err := Prepare(ctx, c.o)
		var bi *specfile.BadInputError
		if err == nil || !errors.As(err, &bi) {
			t.Errorf("%s: %v, want bad input", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", c.name, err, w)
			}
		}
	}

	frag := filepath.Join(t.TempDir(), "extra.config")
	if err := os.WriteFile(frag, []byte("CONFIG_X=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, f, err := Prepare(ctx, with(func(o *Options) {
		o.Row, o.Sets, o.Config = "create   transport=uring", map[string]string{"transport": "dev,uring"}, []string{"lab", frag}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if m.Criterion != (Criterion{Kind: KindMetric, Row: "create transport=uring", Metric: "ops_per_sec", Unit: "ops/s", Direction: 1}) {
		t.Errorf("criterion %+v", m.Criterion)
	}
	if m.Rounds != 5 || m.MaxRounds != 10 || m.GoodCommit != commits[0] || m.BadCommit != commits[2] || m.Commits != 2 || m.Experiment != "fuse-transport" || f.Spec.Name != "fuse-transport" {
		t.Errorf("manifest %+v", m)
	}
	if m.Config[0] != "lab" || m.Config[1] != frag {
		t.Errorf("config %v", m.Config)
	}
	m, _, err = Prepare(ctx, with(func(o *Options) { o.Row, o.Spec = "2", "fuse-uring" }))
	if err != nil || m.Rounds != MinMetricRounds || m.MaxRounds != 2*MinMetricRounds || m.Criterion.Row == "" {
		t.Errorf("a spec of 2 rounds, a metric: %+v, %v; want %d rounds", m, err, MinMetricRounds)
	}
	m, _, err = Prepare(ctx, base)
	if err != nil || m.Criterion.Kind != KindSplat || m.Criterion.Splat != "" || m.Config[0] != "lab" || m.Rounds != 5 {
		t.Errorf("the default criterion: %+v, %v", m, err)
	}
	m, _, err = Prepare(ctx, with(func(o *Options) { o.Spec, o.Test = "fstests-klab-uring", "generic/184" }))
	if err != nil || m.Criterion.Kind != KindTest || m.Rounds != 1 {
		t.Errorf("a test: %+v, %v", m, err)
	}
}

// TestBuildReason: a failed make's reason names its first compiler
// error; other build errors their first line.
func TestBuildReason(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"make bzImage failed; first errors:\n  fs/fuse/readdir.c:612:40: error: expected ';' before '}' token\n      612 | int x(void) { return 0 }\n  fs/fuse/readdir.c:613:1: error: y\nfull log: /c/build.log",
			"does not build: make bzImage failed: fs/fuse/readdir.c:612:40: error: expected ';' before '}' token"},
		{"make tinyconfig failed: exit status 2\nfull log: /c/build.log", "does not build: make tinyconfig failed: exit status 2"},
		{"patch 1/1 x.patch does not apply", "does not build: patch 1/1 x.patch does not apply"},
	} {
		if got := buildReason(c.in); got != c.want {
			t.Errorf("buildReason(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
