package lab

import (
	"context"
	"debug/elf"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"klab/guest/proto"
	"klab/images"
	"klab/images/debian"
)

// FioTool is the host program a fio step needs in the guest.
const FioTool = "fio"

// needsFio reports whether s, or a step it wraps, runs fio.
func needsFio(s *proto.Step) bool {
	for s != nil {
		if s.Kind == proto.StepFio {
			return true
		}
		if s.FUSE == nil {
			return false
		}
		s = s.FUSE.Then
	}
	return false
}

// PerfTool is the host program a step with Perf needs in the guest.
const PerfTool = "perf"

// needsPerf reports whether s, or a step it wraps, asks for a profile.
func needsPerf(s *proto.Step) bool {
	for ; s != nil; s = s.FUSE.Then {
		if s.Perf != nil {
			return true
		}
		if s.FUSE == nil {
			return false
		}
	}
	return false
}

// perfProgram is the host's perf binary: "perf" when it is one (Debian's
// linux-perf), else the newest of Ubuntu's per-kernel builds, which its
// /usr/bin/perf shell wrapper would run.
func perfProgram() string {
	if p, err := exec.LookPath(PerfTool); err == nil {
		if f, err := elf.Open(p); err == nil {
			f.Close()
			return PerfTool
		}
	}
	var found []string
	for _, g := range []string{"/usr/lib/linux-tools/*/perf", "/usr/lib/linux-tools-*/perf"} {
		m, _ := filepath.Glob(g)
		found = append(found, m...)
	}
	if len(found) == 0 {
		return PerfTool
	}
	slices.Sort(found)
	return found[len(found)-1]
}

// hostTools returns the host programs the request needs in the guest: its
// HostTools, fio when a step runs it, and perf when a step is profiled.
func (r *BootRequest) hostTools() []string {
	tools := slices.Clone(r.HostTools)
	perf := false
	for i := range r.Steps {
		if needsFio(&r.Steps[i]) && !slices.Contains(tools, FioTool) {
			tools = append(tools, FioTool)
		}
		if needsPerf(&r.Steps[i]) && !perf {
			tools, perf = append(tools, perfProgram()), true
		}
	}
	return tools
}

// extraFiles resolves hostTools into initramfs files: each program with
// its shared-library closure. Only runs that need a tool pay for it (fio's
// closure is about 85 MB).
func (r *BootRequest) extraFiles() ([]images.ExtraFile, error) {
	tools := r.hostTools()
	if len(tools) == 0 {
		return nil, nil
	}
	files, err := images.HostPrograms(tools, images.LibSearch{})
	if err != nil {
		return nil, fmt.Errorf("host tools for the guest (install them on the host, e.g. apt-get install fio linux-perf): %w", err)
	}
	return files, nil
}

// needsLibfuse reports whether a step mounts the libfuse server kind
// (proto.FUSELibfusePassthroughLL or proto.FUSELibfusePassthroughHP): a
// fuse step, or an fstests step whose configuration's mounts run
// passthrough_hp.
func needsLibfuse(steps []proto.Step, kind string) bool {
	for i := range steps {
		if f := steps[i].Fstests; f != nil && f.Config.FUSE != nil &&
			f.Config.FUSE.Server == proto.FstestsServerPassthroughHP && kind == proto.FUSELibfusePassthroughHP {
			return true
		}
		for s := &steps[i]; s != nil && s.FUSE != nil; s = s.FUSE.Then {
			if s.FUSE.Server == kind {
				return true
			}
		}
	}
	return false
}

// Builders of libfuse's servers for the guest, replaced by tests.
var (
	passthroughLLFiles = images.PassthroughLLFiles
	passthroughHPFiles = images.PassthroughHPFiles
)

// libfuseFiles builds the libfuse servers the steps mount on the host
// (cached): passthrough_ll from the host's libfuse3 examples,
// passthrough_hp from Debian's fuse3 source (libfuse 3.18, with
// io_uring), and returns them with their libraries.
func (o *Options) libfuseFiles(ctx context.Context, r *BootRequest) ([]images.ExtraFile, error) {
	var files []images.ExtraFile
	if needsLibfuse(r.Steps, proto.FUSELibfusePassthroughLL) {
		f, err := passthroughLLFiles(ctx, o.CacheDir, o.Progress)
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	if needsLibfuse(r.Steps, proto.FUSELibfusePassthroughHP) {
		f, err := passthroughHPFiles(ctx, images.PassthroughHPOptions{DebianOptions: debian.Options{
			Mirror: o.Mirror, CacheDir: o.CacheDir, Progress: o.Progress}})
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	return files, nil
}

// dedupExtra keeps the first file for each guest path: two tools may share
// libraries.
func dedupExtra(files []images.ExtraFile) []images.ExtraFile {
	seen := map[string]bool{}
	var out []images.ExtraFile
	for _, f := range files {
		d := strings.TrimPrefix(path.Clean("/"+f.Dest), "/")
		if seen[d] {
			continue
		}
		seen[d] = true
		out = append(out, f)
	}
	return out
}
