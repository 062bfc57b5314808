package experiments

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"klab/guest/proto"
	"klab/internal/specfile"
	"klab/results"
)

// yml trims the leading newline of a raw string, so that its first line
// is line 1.
func yml(s string) []byte { return []byte(strings.TrimPrefix(s, "\n")) }

// fieldList is the YAML fields of v's type, in order, as the "unknown
// field" problems list them. It is computed so that a new field does not
// break the cases below; TestFieldListNamesTheFields checks it.
func fieldList(v any) string {
	t := reflect.TypeOf(v)
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			names = append(names, tag)
		}
	}
	return strings.Join(names, ", ")
}

func patternNames() string {
	var l []string
	for _, p := range proto.Patterns() {
		l = append(l, string(p))
	}
	return strings.Join(l, ", ")
}

func TestFieldListNamesTheFields(t *testing.T) {
	top := strings.Split(fieldList(Spec{}), ", ")
	for _, f := range []string{"name", "rounds", "compare", "params", "setup", "server", "workloads", "checks"} {
		if !slices.Contains(top, f) {
			t.Errorf("fieldList(Spec{}) = %v, lacks %s", top, f)
		}
	}
	w := strings.Split(fieldList(Workload{}), ", ")
	for _, f := range []string{"name", "pattern", "fio", "dir", "jobs", "bs", "prepare", "metric"} {
		if !slices.Contains(w, f) {
			t.Errorf("fieldList(Workload{}) = %v, lacks %s", w, f)
		}
	}
	if !strings.Contains(patternNames(), "create") || !strings.Contains(patternNames(), "seqwrite") {
		t.Errorf("patternNames() = %s", patternNames())
	}
}

func TestLoadProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml []byte
		want []string // every problem, in order
	}{
		{
			name: "unknown top-level field",
			yaml: yml(`
name: x
colour: red
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:2:1: experiment: unknown field "colour", want one of ` + fieldList(Spec{})},
		},
		{
			name: "unknown nested field",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: create
    dir: /tmp/w
    jobs: 1
    files: 10
    colour: red
`),
			want: []string{`t.yaml:8:5: workloads[0]: unknown field "colour", want one of ` + fieldList(Workload{})},
		},
		{
			name: "misspelt fields",
			yaml: yml(`
name: x
round: 3
workloads:
  - name: w
    fio: --name=w --rw=write --size=1M
    dir: /tmp/w
    make-dirs: [a]
`),
			want: []string{
				`t.yaml:2:1: experiment: unknown field "round" (did you mean "rounds"?), want one of ` + fieldList(Spec{}),
				`t.yaml:7:5: workloads[0]: unknown field "make-dirs" (did you mean "make_dirs"?), want one of ` + fieldList(Workload{}),
			},
		},
		{
			name: "make_dirs with a pattern",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: create
    dir: /tmp/w
    jobs: 1
    files: 10
    make_dirs: [a]
`),
			want: []string{`t.yaml:8:16: workloads[0].make_dirs: only with fio (a fio command line); klab's Go engine makes the directories its jobs need`},
		},
		{
			name: "wrong type",
			yaml: yml(`
name: x
rounds: two
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:2:9: rounds: want an integer, got "two"`},
		},
		{
			// Each wrong type names its field, what it wants and what
			// it got; a single value where a list belongs is said once.
			name: "wrong types",
			yaml: yml(`
name: x
rounds: many
order: [abba]
vm:
  tcg_multithread: maybe
  cpus: 1.5
splats:
  allow_warnings: foo
workloads:
  - name: w
    pattern: create
    dir: /tmp/w
    jobs: 1
    files: 10
    threshold_pct: lots
`),
			want: []string{
				`t.yaml:2:9: rounds: want an integer, got "many"`,
				`t.yaml:3:8: order: want a single value, not a list`,
				`t.yaml:5:20: vm.tcg_multithread: want true or false, got "maybe"`,
				`t.yaml:6:9: vm.cpus: want an integer, got "1.5"`,
				`t.yaml:8:19: splats.allow_warnings: want a list`,
				`t.yaml:15:20: workloads[0].threshold_pct: want a number, got "lots"`,
			},
		},
		{
			// One typo in a reference is one problem: not also its
			// value's type in every point, nor the parameter it meant
			// as unused.
			name: "misspelt reference",
			yaml: yml(`
name: x
params:
  jobs: [1, 2]
  dir: [/tmp/a, /tmp/b]
workloads:
  - name: w
    pattern: create
    dir: ${dri}
    jobs: ${jbos}
    files: 10
`),
			want: []string{
				`t.yaml:8:10: ${dri}: no such parameter (did you mean ${dir}?), want one of jobs, dir`,
				`t.yaml:9:11: ${jbos}: no such parameter (did you mean ${jobs}?), want one of jobs, dir`,
			},
		},
		{
			name: "wrong type nested",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: create
    dir: /tmp/w
    jobs: lots
    files: 10
`),
			want: []string{`t.yaml:6:11: workloads[0].jobs: want an integer, got "lots"`},
		},
		{
			// Was "t.yaml: size ..." with no line, and it stopped decoding.
			name: "bad size",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: seqread
    dir: /tmp/w
    jobs: 1
    bs: lots
    size: 1M
`),
			want: []string{`t.yaml:7:9: workloads[0].bs: want a size (bytes, or a number with k, M, G: 4k, 1M), got "lots"`},
		},
		{
			name: "bad profiler",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: create
    dir: /tmp/w
    jobs: 1
    files: 10
    profile: perff
`),
			want: []string{`t.yaml:8:14: workloads[0].profile: want a profiler (perf: the whole guest with perf; go: the guest agent's Go engine; false), got "perff"`},
		},
		{
			name: "profile functions",
			yaml: yml(`
name: x
profile_functions: [do_writev, "a b"]
workloads:
  - name: w
    pattern: create
    dir: /tmp/w
    jobs: 1
    files: 10
    profile: go
`),
			want: []string{
				`t.yaml:2:20: profile_functions: no workload has profile: perf, so there is nothing to look them up in`,
				`t.yaml:2:32: profile_functions: "a b" is not a function name, want letters, digits, '_' and '.' (at most 128)`,
			},
		},
		{
			name: "a list for a size",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: seqread
    dir: /tmp/w
    jobs: 1
    bs: [4k]
    size: 1M
`),
			want: []string{`t.yaml:7:9: workloads[0].bs: want a single value, not a list`},
		},
		{
			// Was also reported raw: "t.yaml:1: cannot unmarshal !!seq into string".
			name: "list for a value",
			yaml: yml(`
name: [a]
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:1:7: name: want a single value, not a list`},
		},
		{
			// Was also reported as the decoder's "mapping key already defined".
			name: "key given twice",
			yaml: yml(`
name: x
checks:
  - {name: c, run: "true"}
name: y
`),
			want: []string{`t.yaml:4:1: experiment: name is given twice`},
		},
		{
			name: "unknown server kind",
			yaml: yml(`
name: x
server:
  kind: bogus
  backing: /b
  mountpoint: /m
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:3:9: server.kind: "bogus" is not a server, want one of passthrough, stuck, interrupt, libfuse-passthrough_ll, libfuse-passthrough_hp`},
		},
		{
			name: "cache timeout out of range, and non-zero for passthrough_hp",
			yaml: yml(`
name: x
params:
  server: [passthrough, libfuse-passthrough_hp]
compare: server
server:
  kind: ${server}
  backing: /b
  mountpoint: /m
  cache_timeout_s: 5
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:9:20: server.cache_timeout_s: libfuse's passthrough_hp caches for a day or not at all: give 0 (its --nocache) or leave it out`},
		},
		{
			name: "splice for libfuse's servers",
			yaml: yml(`
name: x
params:
  server: [libfuse-passthrough_hp, passthrough, libfuse-passthrough_ll]
server:
  kind: ${server}
  backing: /b
  mountpoint: /m
  splice: true
checks:
  - {name: c, run: "true"}
`),
			want: []string{
				`t.yaml:8:11: server.splice: libfuse's passthrough_hp always runs with --nosplice, so that its rchar counts what it served (min_served): give false or leave it out (true is for klab's servers)`,
				`t.yaml:8:11: server.splice: libfuse's passthrough_ll writes its READ replies without splice (libfuse's default): give false or leave it out`,
			},
		},
		{
			name: "splice not a boolean",
			yaml: yml(`
name: x
server:
  kind: passthrough
  backing: /b
  mountpoint: /m
  splice: sometimes
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:6:11: server.splice: want true or false, got "sometimes"`},
		},
		{
			name: "negative cache timeout",
			yaml: yml(`
name: x
server:
  kind: passthrough
  backing: /b
  mountpoint: /m
  cache_timeout_s: -1
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:6:20: server.cache_timeout_s: -1 is out of range, want 0..86400 seconds`},
		},
		{
			name: "unknown pattern",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: zigzag
    dir: /tmp/w
`),
			want: []string{`t.yaml:4:14: workloads[0].pattern: "zigzag" is unknown, want one of ` + patternNames()},
		},
		{
			name: "server CPU without a server",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: seqread
    dir: /tmp/w
    jobs: 1
    bs: 4k
    size: 1M
    metrics: [server_cpu_per_op_ns]
`),
			want: []string{`t.yaml:9:15: workloads[0].metrics: server_cpu_per_op_ns only for a job on the server's mount`},
		},
		{
			name: "empty params",
			yaml: yml(`
name: x
params: {}
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:2:9: params: an empty matrix; leave params out, or give each a list of values`},
		},
		{
			name: "param used by no step",
			yaml: yml(`
name: x
params:
  jobs: [1, 2]
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:3:3: params: jobs is used by no step (write ${jobs} where it goes)`},
		},
		{
			name: "ref to an unknown param",
			yaml: yml(`
name: x
params:
  jobs: [1, 2]
checks:
  - name: c
    run: echo ${jobs} ${nope}
`),
			want: []string{`t.yaml:6:10: ${nope}: no such parameter, want one of jobs`},
		},
		{
			name: "ref without params",
			yaml: yml(`
name: x
checks:
  - {name: c, run: "echo ${nope}"}
`),
			want: []string{`t.yaml:3:20: ${nope}: no such parameter (this file has no params)`},
		},
		{
			name: "ref in setup",
			yaml: yml(`
name: x
params:
  jobs: [1, 2]
setup:
  script: echo ${jobs}
checks:
  - name: c
    run: echo ${jobs}
`),
			want: []string{`t.yaml:5:11: setup: ${jobs}: parameters are not allowed here (it applies to the whole guest); allowed in sysctls, server, workloads and checks`},
		},
		{
			name: "compare a param with 3 values",
			yaml: yml(`
name: x
compare: transport
params:
  transport: [dev, uring, other]
checks:
  - name: c
    run: echo ${transport}
`),
			want: []string{`t.yaml:2:10: compare: transport has 3 values, want exactly 2 (A and B)`},
		},
		{
			name: "compare an unknown param",
			yaml: yml(`
name: x
compare: colour
params:
  jobs: [1, 2]
checks:
  - name: c
    run: echo ${jobs}
`),
			want: []string{`t.yaml:2:10: compare: "colour" is neither kernel nor a parameter, want kernel, jobs`},
		},
		{
			name: "pattern and fio",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: create
    fio: fio --name=x
    dir: /tmp/w
`),
			want: []string{`t.yaml:3:5: workloads[0]: give exactly one of pattern (klab's Go engine: ` + patternNames() + `) and fio (a fio command line)`},
		},
		{
			name: "neither pattern nor fio",
			yaml: yml(`
name: x
workloads:
  - name: w
    dir: /tmp/w
`),
			want: []string{`t.yaml:3:5: workloads[0]: give exactly one of pattern (klab's Go engine: ` + patternNames() + `) and fio (a fio command line)`},
		},
		{
			name: "fio with a Go engine option",
			yaml: yml(`
name: x
workloads:
  - name: w
    fio: fio --name=x --rw=read
    dir: /tmp/w
    jobs: 2
`),
			want: []string{`t.yaml:6:11: workloads[0].jobs: a Go engine option; a fio workload takes its options in its command line`},
		},
		{
			name: "bad kernel range",
			yaml: yml(`
name: x
requires:
  kernel: "~6"
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:3:11: requires.kernel: "~6" is not a version bound, want e.g. ">=6.14" or ">=6.1, <7.0"`},
		},
		{
			name: "unknown feature",
			yaml: yml(`
name: x
requires:
  features: [fuse-io-uring, warp-drive]
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:3:29: requires.features: "warp-drive" is unknown, want one of fuse-io-uring, fuse-request-timeout, fuse-passthrough`},
		},
		{
			name: "icount that is not QEMU's option list",
			yaml: yml(`
name: x
vm: {icount: "shift=0 -d int"}
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:2:14: vm.icount: "shift=0 -d int", want QEMU's -icount options, e.g. shift=0,sleep=off`},
		},
		{
			name: "icount with KVM",
			yaml: yml(`
name: x
vm: {icount: "shift=0,sleep=off", accel: kvm}
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:2:14: vm.icount: QEMU counts instructions under TCG only, not with vm.accel: kvm (leave vm.accel out: icount then runs under TCG)`},
		},
		{
			name: "icount with multi-threaded TCG",
			yaml: yml(`
name: x
vm: {icount: "shift=0", tcg_multithread: true}
checks:
  - {name: c, run: "true"}
`),
			want: []string{`t.yaml:2:14: vm.icount: QEMU counts instructions under single-threaded TCG only, not with vm.tcg_multithread`},
		},
		{
			name: "jobs out of range (the engine's validation)",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: create
    dir: /tmp/w
    jobs: 0
    files: 10
`),
			want: []string{`t.yaml:3:5: workloads[0]: jobs: 0 is out of range, want 1..1024`},
		},
		{
			name: "jobs out of range in one point of the matrix",
			yaml: yml(`
name: x
params:
  jobs: [1, 2000]
workloads:
  - name: w
    pattern: create
    dir: /tmp/w
    jobs: ${jobs}
    files: 10
`),
			want: []string{`t.yaml:5:5: workloads[0]: jobs: 2000 is out of range, want 1..1024`},
		},
		{
			// yaml.v3 said line 3, where the list's block starts.
			name: "YAML syntax: bad indentation",
			yaml: yml(`
name: x
rounds: 3
checks:
  - name: c
   run: "true"
`),
			want: []string{`t.yaml:5: did not find expected '-' indicator`},
		},
		{
			// yaml.v3 said line 2; the unclosed [ is on line 3.
			name: "YAML syntax: unclosed flow list",
			yaml: yml(`
name: x
rounds: 3
dirs: [a, b
reuse: fresh
`),
			want: []string{`t.yaml:3: did not find expected ',' or ']'`},
		},
		{
			name: "YAML syntax: tab",
			yaml: []byte("name: x\n\trounds: 3\n"),
			want: []string{`t.yaml:2: found a tab character that violates indentation`},
		},
		{
			name: "a list, not a mapping",
			yaml: yml(`
- name: x
- name: y
`),
			want: []string{`t.yaml:1:1: an experiment file is a YAML mapping (name:, workloads:, ...)`},
		},
		{
			name: "empty file",
			yaml: nil,
			want: []string{`t.yaml:1:1: an experiment file is a YAML mapping (name:, workloads:, ...)`},
		},
		{
			name: "nothing to measure",
			yaml: yml(`
name: x
rounds: 3
`),
			want: []string{`t.yaml:1:1: experiment: no workloads and no checks: nothing to measure`},
		},
		{
			// Structural, type and validation problems at once, by line.
			// A type error used to hide every problem found by validation.
			name: "several problems",
			yaml: yml(`
name: x
colour: red
rounds: two
workloads:
  - name: w
    pattern: zigzag
    dir: /tmp/w
requires:
  features: [warp-drive]
server:
  kind: passthrough
  backing: relative
  mountpoint: /mnt/fuse
`),
			want: []string{
				`t.yaml:2:1: experiment: unknown field "colour", want one of ` + fieldList(Spec{}),
				`t.yaml:3:9: rounds: want an integer, got "two"`,
				`t.yaml:6:14: workloads[0].pattern: "zigzag" is unknown, want one of ` + patternNames(),
				`t.yaml:9:14: requires.features: "warp-drive" is unknown, want one of fuse-io-uring, fuse-request-timeout, fuse-passthrough`,
				`t.yaml:12:12: server.backing: "relative", want an absolute guest path`,
			},
		},
		{
			// The type error zeroes workloads[0].jobs: that is not a second
			// problem, but workloads[1]'s own problem still shows.
			name: "a type error and a problem elsewhere",
			yaml: yml(`
name: x
workloads:
  - name: w
    pattern: create
    dir: /tmp/w
    jobs: lots
    files: 10
  - name: v
    pattern: create
    dir: /tmp/v
    jobs: 1
    files: 10
    metric: speed
`),
			want: []string{
				`t.yaml:6:11: workloads[0].jobs: want an integer, got "lots"`,
				`t.yaml:13:13: workloads[1].metric: "speed" is unknown, want one of ` + oneOf(metrics),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Load("t.yaml", tc.yaml)
			if err == nil {
				t.Fatalf("Load: no error, want %q", tc.want)
			}
			if f != nil {
				t.Errorf("Load returned a File with its error")
			}
			var se *specfile.Error
			if !errors.As(err, &se) {
				t.Fatalf("Load: %T %v, want a *specfile.Error", err, err)
			}
			var got []string
			for _, p := range se.Problems {
				got = append(got, p.Error())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Load: %d problem(s):\n%s\nwant %d:\n%s", len(got), strings.Join(got, "\n"), len(tc.want), strings.Join(tc.want, "\n"))
			}
			if err.Error() != strings.Join(tc.want, "\n") {
				t.Errorf("Error() = %q, want the problems one a line", err.Error())
			}
		})
	}
}

func TestLoadValid(t *testing.T) {
	f, err := Load("t.yaml", yml(`
name: ok
rounds: 4
compare: transport
params:
  transport: [dev, uring]
  jobs: [1, 2]
server:
  kind: passthrough
  transport: ${transport}
  backing: /tmp/backing
  mountpoint: /mnt/fuse
workloads:
  - name: rr
    pattern: randread
    dir: /mnt/fuse/rr
    jobs: ${jobs}
    bs: 4k
    size: 1M
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.Spec.Name != "ok" || f.Spec.Rounds != 4 || len(f.Spec.Workloads) != 1 {
		t.Errorf("Spec = %+v", f.Spec)
	}
	if w := f.Spec.Workloads[0]; w.BS != 4096 || w.Size != 1<<20 || w.Jobs != 1 {
		t.Errorf("workload = %+v, want bs 4096, size 1M and the first point's jobs 1", w)
	}
	cell, err := f.Cell(map[string]string{"transport": "uring", "jobs": "2"})
	if err != nil {
		t.Fatal(err)
	}
	if cell.Server.Transport != "uring" || cell.Workloads[0].Jobs != 2 {
		t.Errorf("Cell(uring, 2): transport %q, jobs %d", cell.Server.Transport, cell.Workloads[0].Jobs)
	}
	if _, err := f.Cell(map[string]string{"transport": "dev", "jobs": "many"}); err == nil {
		t.Errorf("Cell(jobs=many): no error")
	}
	if len(f.SHA256) != 64 {
		t.Errorf("SHA256 = %q", f.SHA256)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "e.yaml")
	if err := os.WriteFile(p, []byte("name: e\nrounds: two\nchecks:\n  - {name: c, run: \"true\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(p)
	if want := p + `:2:9: rounds: want an integer, got "two"`; err == nil || err.Error() != want {
		t.Errorf("LoadFile: %v, want %s", err, want)
	}
	if _, err := LoadFile(filepath.Join(dir, "none.yaml")); err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("LoadFile(missing): %v", err)
	}
}

func TestShippedLoad(t *testing.T) {
	names := Shipped()
	if !slices.Contains(names, "fuse-transport") {
		t.Fatalf("Shipped() = %v, want fuse-transport among them", names)
	}
	for _, n := range names {
		f, err := Find(n)
		if err != nil {
			t.Errorf("Find(%s): %v", n, err)
			continue
		}
		if f.Spec.Name != n {
			t.Errorf("Find(%s): the spec is named %q", n, f.Spec.Name)
		}
		if f.Path != "experiments/"+n+".yaml" {
			t.Errorf("Find(%s).Path = %q", n, f.Path)
		}
	}
	f, err := Find("experiments/fuse-transport.yaml")
	if err != nil || f.Spec.Compare != "transport" || len(f.Spec.Workloads) != 2 {
		t.Errorf("Find(experiments/fuse-transport.yaml): %v", err)
	}
}

func TestFindUnknown(t *testing.T) {
	_, err := Find("no-such-experiment")
	want := `no experiment "no-such-experiment": not a file, and not one of klab's (` + strings.Join(Shipped(), ", ") + `)`
	if err == nil || err.Error() != want {
		t.Errorf("Find: %v, want %s", err, want)
	}
	if err != nil && !strings.Contains(err.Error(), "fuse-transport") {
		t.Errorf("Find: %v does not list fuse-transport", err)
	}
	// A path is never taken for a shipped name.
	if _, err := Find("some/dir/fuse-transport.yaml"); err == nil {
		t.Errorf("Find(some/dir/fuse-transport.yaml): no error")
	}
	// A file by path.
	p := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(p, []byte("name: mine\nchecks:\n  - {name: c, run: \"true\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := Find(p); err != nil || f.Spec.Name != "mine" || f.Path != p {
		t.Errorf("Find(%s): %v", p, err)
	}
}

func TestPoints(t *testing.T) {
	f, err := Load("t.yaml", yml(`
name: x
params:
  a: [1, 2]
  b: [x, y, z]
checks:
  - name: c
    run: echo ${a} ${b}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pt := range f.Points() {
		if len(pt) != 2 {
			t.Errorf("point %v: want a and b", pt)
		}
		got = append(got, pt["a"]+pt["b"])
	}
	want := []string{"1x", "1y", "1z", "2x", "2y", "2z"}
	if !slices.Equal(got, want) {
		t.Errorf("Points() = %v, want %v (the first parameter slowest)", got, want)
	}
	f, err = Load("t.yaml", yml(`
name: x
checks:
  - {name: c, run: "true"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if pts := f.Points(); len(pts) != 1 || len(pts[0]) != 0 {
		t.Errorf("Points() without params = %v, want one empty point", pts)
	}
}

const setsSpec = `
name: sets
compare: transport
params:
  transport: [dev, uring]
  jobs: [1, 2, 4]
server:
  kind: passthrough
  transport: ${transport}
  backing: /tmp/backing
  mountpoint: /mnt/fuse
workloads:
  - name: create
    pattern: create
    dir: /mnt/fuse/c
    jobs: ${jobs}
    files: 10
`

func TestWithSets(t *testing.T) {
	f, err := Load("t.yaml", yml(setsSpec))
	if err != nil {
		t.Fatal(err)
	}
	g, err := f.WithSets(map[string]string{"jobs": " 4, 1,4 ,"})
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Spec.Params[1].Values; !slices.Equal(got, []string{"4", "1"}) {
		t.Errorf("jobs after --set jobs=4,1,4 = %v, want [4 1]", got)
	}
	if len(g.Points()) != 4 {
		t.Errorf("%d points, want 2 transports x 2 jobs", len(g.Points()))
	}
	if got := f.Spec.Params[1].Values; !slices.Equal(got, []string{"1", "2", "4"}) {
		t.Errorf("WithSets changed the original: jobs = %v", got)
	}

	_, err = f.WithSets(map[string]string{"colour": "red"})
	if want := "set colour: t.yaml has no such parameter, want one of: transport, jobs"; err == nil || err.Error() != want {
		t.Errorf("WithSets(colour): %v, want %s", err, want)
	}
	_, err = f.WithSets(map[string]string{"jbos": "1"})
	if want := `set jbos: t.yaml has no such parameter (did you mean "jobs"?), want one of: transport, jobs`; err == nil || err.Error() != want {
		t.Errorf("WithSets(jbos): %v, want %s", err, want)
	}
	_, err = f.WithSets(map[string]string{"jobs": " , "})
	if want := "set jobs: no values, want jobs=V1[,V2...]"; err == nil || err.Error() != want {
		t.Errorf("WithSets(jobs= , ): %v, want %s", err, want)
	}
	_, err = f.WithSets(map[string]string{"jobs": "2,0"})
	if want := "t.yaml (with parameters set):12:5: workloads[0]: jobs: 0 is out of range, want 1..1024"; err == nil || err.Error() != want {
		t.Errorf("WithSets(jobs=2,0): %v, want %s", err, want)
	}
	_, err = f.WithSets(map[string]string{"jobs": "two"})
	if want := `t.yaml (with parameters set):15:11: workloads[0].jobs: want an integer, got "two" (from ${jobs})`; err == nil || err.Error() != want {
		t.Errorf("WithSets(jobs=two): %v, want %s", err, want)
	}
	_, err = f.WithSets(map[string]string{"transport": "dev,carrier-pigeon"})
	if want := `t.yaml (with parameters set):8:14: server.transport: "carrier-pigeon" is not allowed, want one of dev, uring`; err == nil || err.Error() != want {
		t.Errorf("WithSets(transport): %v, want %s", err, want)
	}
}

func TestParseRange(t *testing.T) {
	const release = "7.3.4+deb13-cloud-amd64"
	for _, tc := range []struct {
		rng, str string
		in       bool
	}{
		{">=6.14", ">=6.14", true},
		{">=6.1, <7.0", ">=6.1, <7.0", false},
		{"=7.3", "=7.3", true},
		{"==7.3.4", "=7.3.4", true},
		{"7.3.5", "=7.3.5", false},
		{">7.3", ">7.3", false},
		{"<=7.3", "<=7.3", true},
		{">= 7.3.3, < 8", ">=7.3.3, <8", true},
		{"", "", true},
	} {
		r, err := ParseRange(tc.rng)
		if err != nil {
			t.Errorf("ParseRange(%q): %v", tc.rng, err)
			continue
		}
		if got := r.Contains(release); got != tc.in {
			t.Errorf("ParseRange(%q).Contains(%s) = %v, want %v", tc.rng, release, got, tc.in)
		}
		if r.String() != tc.str {
			t.Errorf("ParseRange(%q).String() = %q, want %q", tc.rng, r.String(), tc.str)
		}
	}
	if r, _ := ParseRange(">=6.14"); r.Contains("6.12.38+deb13-amd64") {
		t.Errorf(">=6.14 contains 6.12.38")
	}
	for _, bad := range []string{"~6", ">=6.1, <seven", ">=6.1.2.3"} {
		if _, err := ParseRange(bad); err == nil {
			t.Errorf("ParseRange(%q): no error", bad)
		}
	}
	_, err := ParseRange("~6")
	if want := `"~6" is not a version bound, want e.g. ">=6.14" or ">=6.1, <7.0"`; err == nil || err.Error() != want {
		t.Errorf("ParseRange(~6): %v, want %s", err, want)
	}
}

func TestUnmet(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	if err := os.WriteFile(cfg, []byte("CONFIG_FUSE_FS=m\n# CONFIG_FUSE_IO_URING is not set\nCONFIG_FUSE_PASSTHROUGH=y\nCONFIG_LOCALVERSION=\"-x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := &results.Kernel{Name: "k", ID: "k-1", Version: "7.3.4+deb13-cloud-amd64", Config: cfg}
	old := &results.Kernel{Name: "old", ID: "k-2", Version: "6.12.38+deb13-amd64", Config: cfg}
	unknown := &results.Kernel{Name: "u", ID: "k-3", Version: "7.3.0"}
	for _, tc := range []struct {
		name string
		r    Requires
		k    *results.Kernel
		want string
	}{
		{"nothing", Requires{}, k, ""},
		{"io_uring missing", Requires{Features: []string{"fuse-io-uring"}}, k, "needs fuse-io-uring"},
		{"passthrough there", Requires{Features: []string{"fuse-passthrough"}}, k, ""},
		{"timeout on 7.3", Requires{Features: []string{"fuse-request-timeout"}}, k, ""},
		{"timeout on 6.12", Requires{Features: []string{"fuse-request-timeout"}}, old, "needs fuse-request-timeout"},
		{"config with and without prefix", Requires{Config: []string{"FUSE_FS", "CONFIG_FUSE_PASSTHROUGH", "FUSE_IO_URING"}}, k, "needs CONFIG_FUSE_IO_URING"},
		{"every lack", Requires{Kernel: ">=7.0", Config: []string{"CONFIG_BTRFS_FS"}, Features: []string{"fuse-io-uring", "fuse-passthrough"}}, old, "needs kernel >=7.0, CONFIG_BTRFS_FS, fuse-io-uring"},
		{"no config: the guest will tell", Requires{Features: []string{"fuse-io-uring"}, Config: []string{"BTRFS_FS"}}, unknown, ""},
		{"no config, but the version still counts", Requires{Kernel: "<7"}, unknown, "needs kernel <7"},
	} {
		if got := Unmet(&tc.r, tc.k); got != tc.want {
			t.Errorf("%s: Unmet = %q, want %q", tc.name, got, tc.want)
		}
	}
}
