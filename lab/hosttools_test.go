package lab

import (
	"klab/images"
	"slices"
	"testing"

	"klab/guest/proto"
)

func TestHostTools(t *testing.T) {
	fio := proto.Step{Kind: proto.StepFio, Fio: &proto.FioStep{Args: []string{"--name=x"}}}
	profiled := proto.Step{Kind: proto.StepWorkload, Perf: &proto.Perf{}}
	profiledFio := fio
	profiledFio.Perf = &proto.Perf{}
	for _, tc := range []struct {
		name string
		req  BootRequest
		want []string
	}{
		{"nothing", BootRequest{Steps: []proto.Step{{Kind: proto.StepExec}}}, nil},
		{"fio step", BootRequest{Steps: []proto.Step{{Kind: proto.StepWorkload}, fio, fio}}, []string{"fio"}},
		{"fio under fuse", BootRequest{Steps: []proto.Step{{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{Then: &fio}}}}, []string{"fio"}},
		{"explicit", BootRequest{HostTools: []string{"mke2fs"}, Steps: []proto.Step{fio}}, []string{"mke2fs", "fio"}},
		{"explicit fio", BootRequest{HostTools: []string{"fio"}, Steps: []proto.Step{fio}}, []string{"fio"}},
		{"perf under fuse, twice", BootRequest{Steps: []proto.Step{
			{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{Then: &profiled}}, profiled}}, []string{perfProgram()}},
		{"fio profiled", BootRequest{Steps: []proto.Step{profiledFio}}, []string{"fio", perfProgram()}},
	} {
		if got := tc.req.hostTools(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	files, err := (&BootRequest{}).extraFiles()
	if err != nil || files != nil {
		t.Errorf("no tools: %v %v", files, err)
	}
	if _, err := (&BootRequest{HostTools: []string{"no-such-tool-klab"}}).extraFiles(); err == nil {
		t.Error("missing tool: no error")
	}
}

func TestNeedsLibfuse(t *testing.T) {
	inner := proto.Step{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{Server: proto.FUSELibfusePassthroughLL}}
	outer := []proto.Step{{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{Server: "passthrough", Then: &inner}}}
	if !needsLibfuse(outer) {
		t.Error("a nested libfuse step not seen")
	}
	if needsLibfuse([]proto.Step{{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{Server: "passthrough"}}, {Kind: proto.StepExec}}) {
		t.Error("libfuse seen where there is none")
	}
}

func TestDedupExtra(t *testing.T) {
	got := dedupExtra([]images.ExtraFile{
		{Source: "/a", Dest: "/lib/libfuse3.so.3"},
		{Source: "/b", Dest: "lib/libfuse3.so.3"},
		{Source: "/c", Dest: "/usr/bin/fio"},
	})
	if len(got) != 2 || got[0].Source != "/a" || got[1].Source != "/c" {
		t.Errorf("got %+v", got)
	}
}
