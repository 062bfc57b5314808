package experiments

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"klab/experiments/fstests"
	"klab/internal/specfile"
)

func TestLoadSuite(t *testing.T) {
	f, err := Load("t.yaml", yml(`
name: fst
reference: the seed
requires:
  features: [fuse-io-uring]
suite:
  fstests:
    config: fuse-klab-uring
    tests: [generic/013, generic/184]
    groups: [quick]
    exclude_groups: [dangerous]
    exclude: [generic/650]
    test_timeout: 10m
    reruns: 2
    mount_options: lazytime
    jobs: 1
`))
	if err != nil {
		t.Fatal(err)
	}
	fs := f.Spec.Suite.Fstests
	if fs.Config != "fuse-klab-uring" || len(fs.Tests) != 2 || fs.TestTimeout != 10*time.Minute || *fs.Reruns != 2 || fs.Jobs != 1 {
		t.Errorf("suite = %+v", fs)
	}
	req, err := fstestsRequest(fs)
	if err != nil {
		t.Fatal(err)
	}
	if req.Config.Name != "fuse-klab-uring" || req.Config.MountOptions != "lazytime" || req.Reruns != 2 ||
		!slices.Equal(req.Select.Exclude, []string{"generic/650"}) || !slices.Equal(req.Select.ExcludeGroups, []string{"dangerous"}) {
		t.Errorf("request = %+v", req)
	}
	zero := 0
	fs.Reruns = &zero
	if req, _ := fstestsRequest(fs); req.Reruns != -1 {
		t.Errorf("reruns: 0 gives Request.Reruns %d, want -1 (none)", req.Reruns)
	}
	fs.Reruns = nil
	if req, _ := fstestsRequest(fs); req.Reruns != 0 {
		t.Errorf("no reruns gives Request.Reruns %d, want 0 (the default)", req.Reruns)
	}
}

func TestLoadSuiteProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml []byte
		want []string
	}{
		{
			name: "suite and workloads",
			yaml: yml(`
name: x
suite:
  fstests: {config: ext4, tests: [generic/013]}
server:
  kind: passthrough
  backing: /b
  mountpoint: /m
workloads:
  - {name: w, pattern: create, dir: /m/w, jobs: 1, files: 10}
`),
			want: []string{
				`t.yaml:4:1: server: a spec with suite runs the suite (fstests) in klab's own guests and takes no server; with suite, give only name, description, reference, requires, suite (workloads and checks go in another experiment)`,
				`t.yaml:8:1: workloads: a spec with suite runs the suite (fstests) in klab's own guests and takes no workloads; with suite, give only name, description, reference, requires, suite (workloads and checks go in another experiment)`,
			},
		},
		{
			name: "suite and params",
			yaml: yml(`
name: x
params:
  transport: [dev, uring]
suite:
  fstests: {config: ext4, tests: [generic/013]}
`),
			want: []string{
				`t.yaml:2:1: params: a spec with suite runs the suite (fstests) in klab's own guests and takes no params; with suite, give only name, description, reference, requires, suite (workloads and checks go in another experiment)`,
				`t.yaml:3:3: params: transport is used by no step (write ${transport} where it goes)`,
			},
		},
		{
			name: "unknown configuration and field",
			yaml: yml(`
name: x
suite:
  fstests:
    config: fuse
    tests: [generic/013]
    colour: red
`),
			want: []string{
				`t.yaml:4:13: suite.fstests.config: "fuse" is not an fstests configuration, want one of ` + strings.Join(fstests.Configs(), ", "),
				`t.yaml:6:5: suite.fstests: unknown field "colour", want one of ` + fieldList(FstestsSuite{}),
			},
		},
		{
			name: "unknown suite",
			yaml: yml(`
name: x
suite:
  ltp: {}
`),
			want: []string{
				`t.yaml:3:3: suite: unknown field "ltp", want one of fstests`,
				`t.yaml:3:3: suite: want fstests: {config: ext4, tests: [generic/013]}, the suite klab runs`,
			},
		},
		{
			name: "bad values",
			yaml: yml(`
name: x
suite:
  fstests:
    config: fuse-hp-dev
    tests: [generic/013, ext4/001, "generic/013;reboot"]
    groups: ["quick now"]
    reruns: -1
    jobs: 100
    mkfs_options: -b 1024
    mount_options: "a b"
`),
			want: []string{
				`t.yaml:5:26: suite.fstests.tests: ext4/001 is not a test of configuration fuse-hp-dev, which runs those of generic`,
				`t.yaml:5:36: suite.fstests.tests: "generic/013;reboot" is not a test, want a directory and a name or a pattern (generic/013, generic/0??)`,
				`t.yaml:6:14: suite.fstests.groups: "quick now" is not a group name, want e.g. quick or generic/quick`,
				`t.yaml:7:13: suite.fstests.reruns: -1 is out of range, want 0..100 (0: none)`,
				`t.yaml:8:11: suite.fstests.jobs: 100 is out of range, want 1..64`,
				`t.yaml:9:19: suite.fstests.mkfs_options: mkfs options apply to ext4 configurations, not fuse-hp-dev (a FUSE configuration's backing ext4 is klab's)`,
				`t.yaml:10:20: suite.fstests.mount_options: "a b", want mount(8)'s -o options (lazytime,noatime): no spaces, quotes or shell characters`,
			},
		},
		{
			// A type error leaves the rest of its top-level entry unchecked.
			name: "bad duration",
			yaml: yml(`
name: x
suite:
  fstests:
    config: ext4
    tests: [generic/013]
    test_timeout: 10
`),
			want: []string{`t.yaml:6:19: found "10", want a duration (90s, 10m)`},
		},
		{
			name: "no tests",
			yaml: yml(`
name: x
suite:
  fstests: {config: ext4}
`),
			want: []string{`t.yaml:3:12: suite.fstests: no tests: give tests (generic/013) or groups (quick)`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("t.yaml", tc.yaml)
			var se *specfile.Error
			if !errors.As(err, &se) {
				t.Fatalf("Load: %v, want a *specfile.Error", err)
			}
			var got []string
			for _, p := range se.Problems {
				got = append(got, p.Error())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Load: %d problem(s):\n%s\nwant %d:\n%s", len(got), strings.Join(got, "\n"), len(tc.want), strings.Join(tc.want, "\n"))
			}
		})
	}
}
