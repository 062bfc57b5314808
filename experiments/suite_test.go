package experiments

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"klab/experiments/fstests"
	"klab/guest/proto"
	imgfstests "klab/images/fstests"
	"klab/images/userspace"
	"klab/internal/specfile"
	labfstests "klab/lab/fstests"
	"klab/results"
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
    mount_options: "lazytime;reboot"
`),
			want: []string{
				`t.yaml:5:26: suite.fstests.tests: ext4/001 is not a test of configuration fuse-hp-dev, which runs those of generic`,
				`t.yaml:5:36: suite.fstests.tests: "generic/013;reboot" is not a test, want a directory and a name or a pattern (generic/013, generic/0??)`,
				`t.yaml:6:14: suite.fstests.groups: "quick now" is not a group name, want e.g. quick or generic/quick`,
				`t.yaml:7:13: suite.fstests.reruns: -1 is out of range, want 0..100 (0: none)`,
				`t.yaml:8:11: suite.fstests.jobs: 100 is out of range, want 1..64`,
				`t.yaml:9:19: suite.fstests.mkfs_options: mkfs options apply to ext4 configurations, not fuse-hp-dev (a FUSE configuration's backing ext4 is klab's)`,
				`t.yaml:10:20: suite.fstests.mount_options: mount options "lazytime;reboot": ";" at byte 8 is not allowed (letters, digits, space and _ = , . : / + - ^)`,
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
			want: []string{`t.yaml:6:19: suite.fstests.test_timeout: want a duration (90s, 10m), got "10"`},
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

// suiteTree writes an fstests tree's group lists.
func suiteTree(t *testing.T) string {
	t.Helper()
	tree := t.TempDir()
	d := filepath.Join(tree, "tests", "generic")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "group.list"), []byte("013 auto rw stress\n184 metadata auto quick\n650 auto cpu dangerous\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return tree
}

// suiteEnv's guests pass every test but fail on kernel B; each guest
// leaves a boot run directory with its manifest, as lab's do.
func suiteEnv(t *testing.T, failOnB string, config string) fstests.Env {
	var mu sync.Mutex
	return fstests.Env{
		Tree: suiteTree(t),
		Resolve: func(_ context.Context, ref string) (*results.Kernel, error) {
			if ref == "nope" {
				return nil, errors.New("no such kernel")
			}
			return &results.Kernel{Name: ref, ID: "id-" + ref, Version: "7.3.4", Source: "debian", Config: config}, nil
		},
		Guest: func(k *results.Kernel, cfg proto.FstestsConfig, _ time.Duration, dir string) labfstests.Guest {
			return func(_ context.Context, tests []string, _ int) (*labfstests.Outcome, error) {
				mu.Lock()
				run, err := results.Store{Root: dir}.Create("fstests")
				mu.Unlock()
				if err != nil {
					return nil, err
				}
				start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
				if err := run.WriteManifest(&results.Manifest{Kernel: *k, Accel: "tcg",
					Times: results.Times{Start: start, End: start.Add(90 * time.Second), BootToAgentMs: 4000}}); err != nil {
					return nil, err
				}
				out := &labfstests.Outcome{RunDir: run.Dir}
				for _, n := range tests {
					r := proto.TestResult{Name: n, Status: proto.TestPass, Seconds: 3, Transport: "dev=0 uring=5"}
					if k.Name == "B" && n == failOnB {
						r.Status, r.Reason = proto.TestFail, "output mismatch"
					}
					out.Results = append(out.Results, r)
				}
				return out, nil
			}
		},
		Userspace: &userspace.Descriptor{ID: "trixie-1234", Packages: []userspace.Package{{Name: "bash", Version: "5.2.37-2", Arch: "amd64"}}},
		Fstests:   &imgfstests.Descriptor{Key: "fstests-abc", Source: imgfstests.Source{Path: "/src/fstests.tar.gz", ID: "sha256:abc"}},
	}
}

const suiteSpec = `
name: fst-uring
description: fstests over io_uring
reference: the seed
requires:
  features: [fuse-io-uring]
suite:
  fstests:
    config: fuse-klab-uring
    tests: [generic/013, generic/184]
    exclude: [generic/650]
    reruns: 1
`

func TestRunSuiteAB(t *testing.T) {
	f, err := Load("fst.yaml", yml(suiteSpec))
	if err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	res, err := RunSuite(context.Background(), f, SuiteOptions{
		Kernels: []string{"A", "B"}, Env: suiteEnv(t, "generic/184", ""), RunsDir: runs, Command: []string{"klab", "run", "fst.yaml"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Result.Regressed() {
		t.Fatalf("no regression: %+v", res.Result.Verdict)
	}
	m := res.Manifest
	if m.Status != StatusComplete || m.Experiment != "fst-uring" || m.SpecSHA256 != f.SHA256 || len(m.Kernels) != 2 || m.Kernels[1].Ref != "B" || m.Kernels[1].Kernel.ID != "id-B" {
		t.Errorf("manifest %+v", m)
	}
	su := m.Suite
	if su == nil || su.Name != SuiteFstests || su.Config != "fuse-klab-uring" || !su.Regressed || !su.Failed ||
		su.Userspace == nil || su.Userspace.Packages[0].Version != "5.2.37-2" || su.Fstests == nil || su.Fstests.Source.ID != "sha256:abc" {
		t.Errorf("manifest suite %+v", su)
	}
	// A first run on each side, then one rerun of generic/184 each.
	if len(m.Guests) != 4 || m.Guests[0].Kernel != 0 || m.Guests[3].Kernel != 1 || m.Guests[0].WallMs != 90000 || m.Accel != "tcg" {
		t.Errorf("guests %+v, accel %q", m.Guests, m.Accel)
	}
	for _, n := range []string{SpecFileName, ManifestFileName, "a.json", "b.json", "verdict.json", "report.txt", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(res.Dir, n)); err != nil {
			t.Error(err)
		}
	}
	saved, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !saved.IsSuite() || saved.File.Spec.Suite.Fstests.Config != "fuse-klab-uring" {
		t.Errorf("Open: not a suite run: %+v", saved.Manifest)
	}
	var b strings.Builder
	if err := saved.WriteSuiteReport(&b, "text"); err != nil {
		t.Fatal(err)
	}
	saved2, _ := os.ReadFile(filepath.Join(res.Dir, "report.txt"))
	if b.String() != string(saved2) || !strings.Contains(b.String(), "generic/184") {
		t.Errorf("the report read back differs from report.txt:\n%s\n---\n%s", b.String(), saved2)
	}
	// klab rerun repeats it with the exact kernels.
	rf, ro, err := RerunOptions(saved, RunOptions{})
	if err != nil || rf.Path != "fst.yaml" || !slices.Equal(ro.Kernels, []string{"A", "B"}) {
		t.Errorf("RerunOptions: %v, %s, %v", err, rf.Path, ro.Kernels)
	}
}

func TestRunSuiteBadInput(t *testing.T) {
	f, err := Load("fst.yaml", yml(suiteSpec))
	if err != nil {
		t.Fatal(err)
	}
	noURing := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(noURing, []byte("CONFIG_FUSE_FS=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		kernels []string
		env     fstests.Env
		want    string
	}{
		{"three kernels", []string{"A", "B", "C"}, suiteEnv(t, "", ""), "kernel given 3 times"},
		{"unknown kernel", []string{"nope"}, suiteEnv(t, "", ""), "kernel nope: no such kernel"},
		{"requires", []string{"A"}, suiteEnv(t, "", noURing), "fst.yaml: kernel A (7.3.4) needs fuse-io-uring"},
		{"no such test", []string{"A"}, func() fstests.Env {
			e := suiteEnv(t, "", "")
			e.Tree = t.TempDir()
			os.MkdirAll(filepath.Join(e.Tree, "tests", "generic"), 0o755)
			os.WriteFile(filepath.Join(e.Tree, "tests", "generic", "group.list"), []byte("001 auto\n"), 0o644)
			return e
		}(), "fst.yaml: fstests:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := t.TempDir()
			_, err := RunSuite(context.Background(), f, SuiteOptions{Kernels: tc.kernels, Env: tc.env, RunsDir: runs})
			var be *specfile.BadInputError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want bad input with %q", err, tc.want)
			}
			if ents, _ := os.ReadDir(runs); len(ents) != 0 {
				t.Errorf("bad input left %d run directories", len(ents))
			}
		})
	}
}

func TestRunRefusesSuite(t *testing.T) {
	f, err := Load("fst.yaml", yml(suiteSpec))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), f, RunOptions{PlanOptions: PlanOptions{Kernels: []string{"A"}}})
	var be *specfile.BadInputError
	if !errors.As(err, &be) {
		t.Errorf("Run of a suite spec: %v, want bad input", err)
	}
}
