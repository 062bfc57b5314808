package experiments

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"klab/internal/specfile"
	"klab/results/reference"
)

// expectBase is a valid spec with two parameters besides the axis and a
// workload of two metrics; the cases add its expect: lines (indented for
// the workload, at line 20 on) and its check's (line 23 on).
const expectBase = `
name: x
compare: transport
params:
  transport: [dev, uring]
  jobs: [1, 2]
server:
  kind: passthrough
  transport: ${transport}
  backing: /tmp/b
  mountpoint: /mnt/f
workloads:
  - name: rr
    pattern: randread
    dir: /mnt/f/r
    jobs: ${jobs}
    bs: 4k
    size: 1M
    metrics: [p99_ns]
    expect:
%s
checks:
  - name: c
    run: "true"
%s`

// expectSpec is expectBase with the workload's and the check's expect:
// lines.
func expectSpec(workload, check string) []byte {
	return yml(strings.Replace(strings.Replace(expectBase, "%s", workload, 1), "%s", check, 1))
}

func TestExpectValid(t *testing.T) {
	f, err := Load("t.yaml", expectSpec(`
      - {ratio: 2.57, source: "seed 003, creates/s", params: {jobs: 1}, measured_on: {cpus: 32, accel: native, note: Xeon E5-2650}}
      - {direction: better, range: [1.2, 3.6], source: seed 003, params: {jobs: 2}, needs: {accel: kvm, min_cpus: 4}, strict: true}
      - {metric: p99_ns, direction: worse, ratio: 1.3, source: s, needs: {icount: true}}`[1:],
		`    expect: {outcome: fail, source: the thread, needs: {tcg_multithread: true}}`))
	if err != nil {
		t.Fatal(err)
	}
	w := f.Spec.Workloads[0]
	want := []reference.Expectation{
		{Ratio: 2.57, Source: "seed 003, creates/s", Params: map[string]string{"jobs": "1"}, MeasuredOn: reference.MeasuredOn{CPUs: 32, Accel: "native", Note: "Xeon E5-2650"}},
		{Direction: reference.Better, Range: []float64{1.2, 3.6}, Source: "seed 003", Params: map[string]string{"jobs": "2"}, Needs: reference.Needs{Accel: "kvm", MinCPUs: 4}, Strict: true},
		{Metric: "p99_ns", Direction: reference.Worse, Ratio: 1.3, Source: "s", Needs: reference.Needs{Icount: true}},
	}
	if !reflect.DeepEqual([]reference.Expectation(w.Expect), want) {
		t.Errorf("expect = %+v\nwant %+v", w.Expect, want)
	}
	if c := f.Spec.Checks[0].Expect; len(c) != 1 || c[0] != (reference.CheckExpectation{Outcome: reference.Fail, Source: "the thread", Needs: reference.Needs{TCGMultithread: true}}) {
		t.Errorf("check expect = %+v", c)
	}
	// One mapping is a list of one.
	f, err = Load("t.yaml", expectSpec("      direction: no-change\n      source: s", ""))
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Spec.Workloads[0].Expect; len(e) != 1 || e[0].Direction != reference.NoChange {
		t.Errorf("expect = %+v", e)
	}
	// --set may narrow the matrix below an expectation's params.
	f, err = Load("t.yaml", expectSpec("      {ratio: 2, source: s, params: {jobs: 2}}", ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WithSets(map[string]string{"jobs": "1"}); err != nil {
		t.Errorf("WithSets(jobs=1): %v", err)
	}
}

func TestExpectProblems(t *testing.T) {
	for _, tc := range []struct {
		name            string
		workload, check string
		want            []string
	}{
		{
			name:     "source required",
			workload: "      ratio: 2",
			want:     []string{`t.yaml:20:7: workloads[0].expect.source: required: where the figure comes from ("seed 003, creates/s table")`},
		},
		{
			name:     "nothing expected",
			workload: "      - {source: s}",
			want:     []string{`t.yaml:20:9: workloads[0].expect[0]: want direction (better, worse, no-change), ratio (the reference's B/A) or range ([lo, hi])`},
		},
		{
			name:     "direction",
			workload: "      {direction: faster, source: s}",
			want:     []string{`t.yaml:20:19: workloads[0].expect.direction: "faster" is not allowed, want one of better, worse, no-change`},
		},
		{
			name:     "direction against ratio",
			workload: "      - {direction: worse, ratio: 2.57, source: s}\n      - {metric: p99_ns, direction: better, ratio: 1.5, source: s}\n      - {direction: no-change, range: [1.1, 1.3], source: s, params: {jobs: 1}}",
			want: []string{
				`t.yaml:20:21: workloads[0].expect[0].direction: ratio 2.57 does not agree with worse: where higher is better, worse is a B/A below 1 (metric ops_per_sec)`,
				`t.yaml:21:37: workloads[0].expect[1].direction: ratio 1.5 does not agree with better: where lower is better, better is a B/A below 1 (metric p99_ns)`,
				`t.yaml:22:9: workloads[0].expect[2]: the same rows as workloads[0].expect[0] (metric ops_per_sec); give them params that tell the rows apart`,
				`t.yaml:22:21: workloads[0].expect[2].direction: range [1.1, 1.3] does not agree with no-change: want a range that holds 1 (metric ops_per_sec)`,
			},
		},
		{
			name:     "ratio and range",
			workload: "      - {ratio: 0, source: s, params: {jobs: 1}}\n      - {ratio: 2, range: [1, 3], source: s, params: {jobs: 2}}\n      - {metric: p99_ns, range: [3, 1], source: s, params: {jobs: 1}}\n      - {metric: p99_ns, range: [3], source: s, params: {jobs: 2}}",
			want: []string{
				`t.yaml:20:17: workloads[0].expect[0].ratio: 0 is out of range, want the reference's B/A, above 0 (2.57)`,
				`t.yaml:21:27: workloads[0].expect[1].range: give ratio or range, not both`,
				`t.yaml:22:33: workloads[0].expect[2].range: [3, 1], want 0 < lo <= hi`,
				`t.yaml:23:33: workloads[0].expect[3].range: 1 values, want [lo, hi]`,
			},
		},
		{
			name:     "metric",
			workload: "      {metric: p50_ns, ratio: 0.5, source: s}",
			want:     []string{`t.yaml:20:16: workloads[0].expect.metric: "p50_ns" is not a metric of rr, want one of ops_per_sec, p99_ns`},
		},
		{
			name:     "params",
			workload: "      {ratio: 2, source: s, params: {transport: dev, jobs: 3, threads: 4}}",
			want: []string{
				`t.yaml:20:38: workloads[0].expect.params: transport is the A/B axis; an expectation is about B against A, so it cannot pick a side`,
				`t.yaml:20:54: workloads[0].expect.params: jobs: "3" is not one of its values (1, 2)`,
				`t.yaml:20:63: workloads[0].expect.params: "threads" is not a parameter, want one of jobs`,
			},
		},
		{
			name:     "needs and measured_on",
			workload: "      ratio: 2\n      source: s\n      needs: {accel: tcg, min_cpus: 100, icount: true, tcg_multithread: true}\n      measured_on: {cpus: -1, accel: metal}",
			want: []string{
				`t.yaml:22:22: workloads[0].expect.needs.accel: "tcg" is not allowed, want kvm (a row that needs hardware virtualisation; leave it out for any)`,
				`t.yaml:22:37: workloads[0].expect.needs.min_cpus: 100 is out of range, want 1..64 (vm.cpus' range)`,
				`t.yaml:22:73: workloads[0].expect.needs: icount and tcg_multithread exclude each other (QEMU counts instructions under single-threaded TCG only); accel: kvm meets both`,
				`t.yaml:23:27: workloads[0].expect.measured_on.cpus: -1 is out of range, want 1..65536`,
				`t.yaml:23:38: workloads[0].expect.measured_on.accel: "metal" is not allowed, want one of kvm, tcg, native`,
			},
		},
		{
			name:     "unknown field and a parameter",
			workload: "      {ratio: \"${jobs}\", source: s, outcome: pass}",
			want: []string{
				`t.yaml:20:15: workloads[0].expect: ${jobs}: parameters are not allowed in an expectation; pick its rows with params: {name: value}`,
				`t.yaml:20:37: workloads[0].expect: unknown field "outcome", want one of ` + fieldList(reference.Expectation{}),
			},
		},
		{
			name:     "not a mapping",
			workload: "      - better",
			check:    "    expect: pass",
			want: []string{
				`t.yaml:20:9: workloads[0].expect[0]: want a mapping with ` + fieldList(reference.Expectation{}),
				`t.yaml:24:13: checks[0].expect: want a mapping (outcome, source, needs, ...), or a list of them`,
			},
		},
		{
			name:     "type",
			workload: "      {ratio: fast, source: s}",
			want:     []string{`t.yaml:20:15: workloads[0].expect.ratio: want a number, got "fast"`},
		},
		{
			name:     "check",
			workload: "      {ratio: 2, source: s}",
			check:    "    expect:\n      - {outcome: hang, direction: better}\n      - {source: s}",
			want: []string{
				`t.yaml:25:9: checks[0].expect[0].source: required: where the figure comes from ("seed 003, creates/s table")`,
				`t.yaml:25:19: checks[0].expect[0].outcome: "hang" is not allowed, want pass or fail`,
				`t.yaml:25:25: checks[0].expect[0]: unknown field "direction", want one of ` + fieldList(reference.CheckExpectation{}),
				`t.yaml:26:9: checks[0].expect[1]: a check has one expected outcome; give one expectation`,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("t.yaml", expectSpec(tc.workload, tc.check))
			var se *specfile.Error
			if !errors.As(err, &se) {
				t.Fatalf("Load: %v, want a *specfile.Error", err)
			}
			var got []string
			for _, p := range se.Problems {
				got = append(got, p.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestShippedExpectations: the seed experiments state their seeds'
// figures as data, each with a source, and every row with a figure that
// needs parallelism across CPUs needs KVM.
func TestShippedExpectations(t *testing.T) {
	for _, n := range []string{"fuse-transport", "fuse-uring", "fuse-timeout", "fuse-interrupt", "ext4-lazytime"} {
		f, err := Find(n)
		if err != nil {
			t.Fatal(err)
		}
		count := 0
		for _, w := range f.Spec.Workloads {
			count += len(w.Expect)
		}
		for _, c := range f.Spec.Checks {
			count += len(c.Expect)
		}
		if count == 0 {
			t.Errorf("%s states no expectation", n)
		}
	}
}
