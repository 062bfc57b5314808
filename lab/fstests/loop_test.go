package fstests

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"klab/guest/proto"
)

// script is a fake guest: for each boot, the test at which the guest
// stops (hangs or crashes) or "" to finish the list.
type script struct {
	stops  []string
	status string
	boots  [][]string
}

func (s *script) guest(_ context.Context, tests []string, iterations int) (*Outcome, error) {
	s.boots = append(s.boots, append([]string(nil), tests...))
	stop := ""
	if len(s.boots) <= len(s.stops) {
		stop = s.stops[len(s.boots)-1]
	}
	out := &Outcome{RunDir: fmt.Sprintf("run-%d", len(s.boots))}
	for it := 0; it < iterations; it++ {
		for _, t := range tests {
			if t == stop {
				out.Stopped, out.StoppedStatus, out.StoppedReason = t, s.status, "it stopped"
				return out, nil
			}
			out.Results = append(out.Results, proto.TestResult{Name: t, Status: proto.TestPass, Seconds: 1})
		}
	}
	return out, nil
}

func statuses(rs []proto.TestResult) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%s=%s ", r.Name, r.Status)
	}
	return strings.TrimSpace(b.String())
}

func TestRunShardContinuesAfterACrash(t *testing.T) {
	s := &script{stops: []string{"generic/002"}, status: proto.TestCrash}
	rs, boots, err := RunShard(context.Background(), "t", []string{"generic/001", "generic/002", "generic/003"}, 1, s.guest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := statuses(rs), "generic/001=pass generic/002=crash generic/003=pass"; got != want {
		t.Errorf("results %q, want %q", got, want)
	}
	if !reflect.DeepEqual(boots, []string{"run-1", "run-2"}) {
		t.Errorf("boots %v", boots)
	}
	if !reflect.DeepEqual(s.boots[1], []string{"generic/003"}) {
		t.Errorf("second guest ran %v, want the test after the crash", s.boots[1])
	}
}

func TestRunShardHangKeepsItsStatus(t *testing.T) {
	s := &script{stops: []string{"generic/001"}, status: proto.TestHang}
	rs, _, err := RunShard(context.Background(), "t", []string{"generic/001", "generic/002"}, 1, s.guest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := statuses(rs), "generic/001=hang generic/002=pass"; got != want {
		t.Errorf("results %q, want %q", got, want)
	}
	if rs[0].Reason != "it stopped" {
		t.Errorf("reason %q", rs[0].Reason)
	}
}

func TestRunShardGivesUpOnAKernelThatRunsNothing(t *testing.T) {
	g := func(context.Context, []string, int) (*Outcome, error) {
		return &Outcome{StoppedReason: "kernel panic before the agent"}, nil
	}
	rs, _, err := RunShard(context.Background(), "t", []string{"generic/001"}, 1, g, nil)
	if err == nil || !strings.Contains(err.Error(), "kernel panic before the agent") {
		t.Fatalf("err %v, want the reason the guests stopped", err)
	}
	if len(rs) != 0 {
		t.Errorf("results %v", rs)
	}
}

func TestRunShardIterations(t *testing.T) {
	s := &script{}
	rs, _, err := RunShard(context.Background(), "t", []string{"generic/002", "generic/001"}, 2, s.guest, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := statuses(rs), "generic/002=pass generic/002=pass generic/001=pass generic/001=pass"; got != want {
		t.Errorf("results %q, want %q", got, want)
	}
}

func TestRunShardsKeepsWhatWorked(t *testing.T) {
	ok := &script{}
	shards := [][]string{{"generic/001"}, {"generic/002"}}
	out, err := RunShards(context.Background(), shards, 1, func(i int) Guest {
		if i == 1 {
			return func(context.Context, []string, int) (*Outcome, error) { return nil, fmt.Errorf("qemu is missing") }
		}
		return ok.guest
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "qemu is missing") {
		t.Fatalf("err %v", err)
	}
	if got := statuses(out[0].Results); got != "generic/001=pass" {
		t.Errorf("shard 0 %q", got)
	}
}
