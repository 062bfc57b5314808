package lab

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"klab/images"

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
	if !needsLibfuse(outer, proto.FUSELibfusePassthroughLL) {
		t.Error("a nested libfuse step not seen")
	}
	if needsLibfuse(outer, proto.FUSELibfusePassthroughHP) {
		t.Error("passthrough_ll taken for passthrough_hp")
	}
	if needsLibfuse([]proto.Step{{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{Server: "passthrough"}}, {Kind: proto.StepExec}}, proto.FUSELibfusePassthroughLL) {
		t.Error("libfuse seen where there is none")
	}
	hp := proto.Step{Kind: proto.StepFstests, Fstests: &proto.FstestsStep{Config: proto.FstestsConfig{
		FSType: proto.FstestsFUSE, FUSE: &proto.FstestsFUSEConfig{Server: proto.FstestsServerPassthroughHP}}}}
	if !needsLibfuse([]proto.Step{hp}, proto.FUSELibfusePassthroughHP) || needsLibfuse([]proto.Step{hp}, proto.FUSELibfusePassthroughLL) {
		t.Error("an fstests step with passthrough_hp mounts needs passthrough_hp, and only it")
	}
	hp.Fstests.Config.FUSE.Server = proto.FstestsServerKlab
	if needsLibfuse([]proto.Step{hp}, proto.FUSELibfusePassthroughHP) {
		t.Error("an fstests step of klab's server took passthrough_hp")
	}
}

// TestLibfuseFiles checks which libfuse servers go into the initramfs:
// only those a step (or a prepare step) mounts, each built once.
func TestLibfuseFiles(t *testing.T) {
	var built []string
	oldLL, oldHP := passthroughLLFiles, passthroughHPFiles
	t.Cleanup(func() { passthroughLLFiles, passthroughHPFiles = oldLL, oldHP })
	passthroughLLFiles = func(_ context.Context, cache string, _ io.Writer) ([]images.ExtraFile, error) {
		built = append(built, "ll:"+cache)
		return []images.ExtraFile{{Source: "/c/ll", Dest: proto.LibfusePassthroughLLPath}, {Source: "/lib/libc.so.6", Dest: "/lib/libc.so.6"}}, nil
	}
	passthroughHPFiles = func(_ context.Context, o images.PassthroughHPOptions) ([]images.ExtraFile, error) {
		built = append(built, "hp:"+o.DebianOptions.CacheDir+":"+o.DebianOptions.Mirror)
		return []images.ExtraFile{{Source: "/c/hp", Dest: proto.LibfusePassthroughHPPath}, {Source: "/lib/libc.so.6", Dest: "/lib/libc.so.6"}}, nil
	}
	fuseStep := func(server string) proto.Step {
		w := proto.Step{Kind: proto.StepWorkload}
		return proto.Step{Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{Server: server, Then: &w}}
	}
	o := &Options{CacheDir: "/cache", Mirror: "m"}
	for _, tc := range []struct {
		name  string
		steps []proto.Step
		built []string
		dests []string
	}{
		{"none", []proto.Step{fuseStep(proto.FUSEPassthrough), {Kind: proto.StepExec}}, nil, nil},
		{"passthrough_hp", []proto.Step{fuseStep(proto.FUSELibfusePassthroughHP), fuseStep(proto.FUSELibfusePassthroughHP)},
			[]string{"hp:/cache:m"}, []string{proto.LibfusePassthroughHPPath, "/lib/libc.so.6"}},
		{"both", []proto.Step{fuseStep(proto.FUSEPassthrough), fuseStep(proto.FUSELibfusePassthroughLL), fuseStep(proto.FUSELibfusePassthroughHP)},
			[]string{"ll:/cache", "hp:/cache:m"}, []string{proto.LibfusePassthroughLLPath, "/lib/libc.so.6", proto.LibfusePassthroughHPPath}},
	} {
		built = nil
		files, err := o.libfuseFiles(context.Background(), &BootRequest{Steps: tc.steps})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var dests []string
		for _, f := range dedupExtra(files) {
			dests = append(dests, f.Dest)
		}
		if !slices.Equal(built, tc.built) || !slices.Equal(dests, tc.dests) {
			t.Errorf("%s: built %q, files %q; want %q, %q", tc.name, built, dests, tc.built, tc.dests)
		}
	}
	passthroughHPFiles = func(context.Context, images.PassthroughHPOptions) ([]images.ExtraFile, error) {
		return nil, errors.New("build passthrough_hp: missing meson: apt-get install meson")
	}
	if _, err := o.libfuseFiles(context.Background(), &BootRequest{Steps: []proto.Step{fuseStep(proto.FUSELibfusePassthroughHP)}}); err == nil || !strings.Contains(err.Error(), "apt-get install") {
		t.Errorf("a failed build: %v", err)
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
