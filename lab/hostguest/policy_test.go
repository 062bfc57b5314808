package hostguest

import (
	"errors"
	"strings"
	"testing"

	"klab/guest/proto"
	"klab/lab"
)

func fuseStep(transport string, then *proto.Step) proto.Step {
	return proto.Step{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{Server: proto.FUSEPassthrough, Transport: transport, Mountpoint: "/mnt/m", Backing: "/tmp/b", Then: then}}
}

func TestCheck(t *testing.T) {
	root := Facts{Root: true, FUSEURing: "Y"}
	drop := proto.Step{Kind: proto.StepExec, Argv: []string{"sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"}}
	wl := &proto.Step{Kind: proto.StepWorkload, Workload: &proto.WorkloadStep{Pattern: proto.PatternSeqRead}}
	for _, tc := range []struct {
		name  string
		req   lab.BootRequest
		facts Facts
		want  []string // in the error, all of them; none: no error
		notes int
	}{
		{name: "fine", req: lab.BootRequest{Prepare: []proto.Step{fuseStep("uring", wl)}}, facts: root},
		{name: "not root", facts: Facts{FUSEURing: "Y"}, want: []string{"needs root"}},
		{name: "sysctls", req: lab.BootRequest{Sysctls: []lab.Sysctl{{Key: "vm.dirty_ratio", Value: "5"}}, Prepare: []proto.Step{{Kind: proto.StepSysctl, Key: "kernel.x"}}}, facts: root,
			want: []string{"sysctl vm.dirty_ratio", "sysctl kernel.x"}},
		{name: "vm settings", req: lab.BootRequest{Icount: "shift=0", Cmdline: "quiet", QEMUArgs: []string{"-x"}, MultiThreadTCG: true, Modules: []string{"brd"}, Shares: []lab.Share{{}}}, facts: root,
			want: []string{"icount", "kernel command line", "QEMU arguments", "multi-threaded TCG", "modules brd", "shares"}},
		{name: "uring off", req: lab.BootRequest{Steps: []proto.Step{fuseStep("uring", wl)}}, facts: Facts{Root: true, FUSEURing: "N"}, want: []string{"enable_uring is off", "echo Y > " + enableURing}},
		{name: "no uring", req: lab.BootRequest{Steps: []proto.Step{fuseStep("uring", nil)}}, facts: Facts{Root: true}, want: []string{"no FUSE-over-io_uring"}},
		{name: "dev ignores enable_uring", req: lab.BootRequest{Steps: []proto.Step{fuseStep("dev", wl)}}, facts: Facts{Root: true, FUSEURing: "N"}},
		{name: "sysctl inside a fuse step", req: lab.BootRequest{Prepare: []proto.Step{fuseStep("dev", &proto.Step{Kind: proto.StepSysctl, Key: "fs.fuse.x"})}}, facts: root, want: []string{"sysctl fs.fuse.x"}},
		{name: "drop caches noted once", req: lab.BootRequest{Prepare: []proto.Step{drop, drop}}, facts: root, notes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notes, err := check(&tc.req, tc.facts)
			if len(notes) != tc.notes {
				t.Errorf("notes %q, want %d", notes, tc.notes)
			}
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("not refused, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCheckSaysEachRefusalOnce(t *testing.T) {
	steps := []proto.Step{{Kind: proto.StepSysctl, Key: "a"}, {Kind: proto.StepSysctl, Key: "a"}}
	_, err := check(&lab.BootRequest{Prepare: steps}, Facts{})
	if n := strings.Count(err.Error(), "sysctl a:"); n != 1 {
		t.Errorf("sysctl a refused %d times: %v", n, err)
	}
	if !errors.Is(err, ErrNotRoot) {
		t.Errorf("%v does not wrap ErrNotRoot", err)
	}
}
