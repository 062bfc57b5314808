package experiments

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"klab/guest/proto"
	"klab/guest/workload"
	"klab/images/userspace"
)

// setupScript is the shell that prepares a guest: brd, mkfs, mounts,
// module parameters, directories, then the spec's own script. Every
// value in it was validated as a plain word.
func setupScript(st *Setup) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	if st.Brd != nil {
		n := st.Brd.Count
		if n == 0 {
			n = 1
		}
		// brd may already be loaded (built in, or by the agent): reload
		// it with the spec's size, or say why not.
		fmt.Fprintf(&b, "if [ -e /sys/module/brd ]; then rmmod brd 2>/dev/null || echo 'klab: brd cannot be reloaded; using the ramdisks as they are' >&2; fi\n")
		fmt.Fprintf(&b, "if [ ! -e /sys/module/brd ]; then insmod /lib/klab/modules/brd.ko rd_nr=%d rd_size=%d; fi\n", n, st.Brd.SizeMB*1024)
	}
	for _, m := range st.Modules {
		for _, k := range sortedKeys(m.Params) {
			fmt.Fprintf(&b, "echo %s > /sys/module/%s/parameters/%s\n", m.Params[k], m.Name, k)
		}
	}
	for _, m := range st.Mkfs {
		fmt.Fprintf(&b, "mke2fs -t %s %s %s\n", m.Type, m.Options, m.Device)
	}
	for _, m := range st.Mounts {
		fmt.Fprintf(&b, "mkdir -p %s\n", m.Path)
		args := ""
		if m.Type != "" {
			args += " -t " + m.Type
		}
		if m.Options != "" {
			args += " -o " + m.Options
		}
		fmt.Fprintf(&b, "mount%s %s %s\n", args, m.Device, m.Path)
	}
	for _, d := range st.Dirs {
		fmt.Fprintf(&b, "mkdir -p %s\n", d)
	}
	if st.Script != "" {
		b.WriteString(st.Script)
		b.WriteString("\n")
	}
	return b.String()
}

// setupSteps prepares a guest: the setup sysctls, then the script.
func setupSteps(st *Setup) []proto.Step {
	var steps []proto.Step
	for _, k := range sortedKeys(st.Sysctls) {
		steps = append(steps, proto.Step{Kind: proto.StepSysctl, Key: k, Value: st.Sysctls[k]})
	}
	if st.Brd != nil || len(st.Mkfs) > 0 || len(st.Mounts) > 0 || len(st.Modules) > 0 || len(st.Dirs) > 0 || st.Script != "" {
		steps = append(steps, proto.Step{Kind: proto.StepExec, Argv: []string{"sh", "-c", setupScript(st)}})
	}
	return steps
}

// hostTools are the host programs a spec's guests need.
func hostTools(st *Setup) []string {
	var tools []string
	for _, m := range st.Mkfs {
		switch m.Type {
		case "ext2", "ext3", "ext4":
			tools = append(tools, "mke2fs")
		}
	}
	return tools
}

// workloadStep is a workload as a step: the Go engine or fio, inside a
// FUSE mount when the spec has a server.
func workloadStep(s *Spec, w *Workload) proto.Step {
	var inner proto.Step
	if w.Fio != "" {
		inner = proto.Step{Kind: proto.StepFio, Fio: &proto.FioStep{Name: w.Name, CommandLine: w.Fio, Dir: w.Dir, MakeDirs: w.MakeDirs}}
	} else {
		ws := w.step()
		inner = proto.Step{Kind: proto.StepWorkload, Workload: &ws}
		if w.Engine == "fio" {
			// Validated: FioStepFor accepts the job.
			if fs, err := workload.FioStepFor(&ws); err == nil {
				inner = proto.Step{Kind: proto.StepFio, Fio: fs}
			}
		}
	}
	if w.Profile == ProfilePerf {
		inner.Perf = &proto.Perf{}
	}
	if s.Server == nil || (w.Mount != nil && !*w.Mount) {
		return inner
	}
	return proto.Step{Kind: proto.StepFUSE, FUSE: fuseStep(s.Server, &inner)}
}

func fuseStep(sv *Server, then *proto.Step) *proto.FUSEStep {
	depth := sv.QueueDepth
	if sv.Transport != "uring" {
		depth = 0 // the io_uring queues' depth: nothing to size over /dev/fuse
	}
	zc := sv.ZeroCopy && sv.Transport == "uring" && (sv.Kind == "" || sv.Kind == "passthrough")
	// Only klab's servers splice, and only over /dev/fuse.
	noSplice := sv.Splice != nil && !*sv.Splice && sv.Transport != "uring" && !strings.HasPrefix(sv.Kind, "libfuse-")
	return &proto.FUSEStep{
		Server: sv.Kind, Transport: sv.Transport, QueueDepth: depth, ZeroCopy: zc, NoSplice: noSplice,
		Mountpoint: sv.Mountpoint, Backing: sv.Backing, MountOptions: sv.Options,
		Threads: sv.Threads, RequestTimeoutSec: sv.RequestTimeoutS, MaxWrite: sv.MaxWrite,
		Passthrough: passthroughOptions(sv),
		Then:        then,
	}
}

func passthroughOptions(sv *Server) proto.FUSEPassthroughOptions {
	o := proto.FUSEPassthroughOptions{KernelPassthrough: sv.KernelPassthrough}
	if sv.CacheTimeoutS != nil {
		ms := int64(*sv.CacheTimeoutS * 1000)
		o.AttrTimeoutMs, o.EntryTimeoutMs = &ms, &ms
	}
	return o
}

// prepareStep is a workload's prepare as an exec step, inside a mount of
// the spec's server of its own when the workload asks for it.
func prepareStep(s *Spec, w *Workload) proto.Step {
	st := proto.Step{Kind: proto.StepExec, Argv: []string{"sh", "-c", w.Prepare}}
	if s.Server == nil || !w.PrepareMount {
		return st
	}
	return proto.Step{Kind: proto.StepFUSE, FUSE: fuseStep(s.Server, &st)}
}

// checkStep is a check as an exec step, inside a mount of the spec's
// server of its own when the check asks for it (mount: true).
func checkStep(s *Spec, c *Check) proto.Step {
	st := execCheckStep(c)
	if s.Server == nil || !c.Mount {
		return st
	}
	return proto.Step{Kind: proto.StepFUSE, FUSE: fuseStep(s.Server, &st)}
}

// execCheckStep is a check's command as an exec step.
func execCheckStep(c *Check) proto.Step {
	st := proto.Step{Kind: proto.StepExec}
	switch {
	case c.FuseCheck != "":
		st.Argv = append([]string{"klab-agent", "fuse", "check", c.FuseCheck}, c.Args...)
	case c.Userspace:
		st.Argv, st.Root = []string{"bash", "-c", c.Run}, userspace.GuestRoot
	default:
		st.Argv = []string{"sh", "-c", c.Run}
	}
	if c.TimeoutS > 0 {
		st.TimeoutMs = int64(c.TimeoutS) * 1000
	}
	return st
}

// cellSysctls are a cell's sysctls in a stable order.
func cellSysctls(s *Spec) []proto.Step {
	var steps []proto.Step
	keys := make([]string, 0, len(s.Sysctls))
	for k := range s.Sysctls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		steps = append(steps, proto.Step{Kind: proto.StepSysctl, Key: k, Value: s.Sysctls[k]})
	}
	return steps
}

// metricOf picks a workload's metric from its numbers.
func metricOf(name string, m *proto.Metrics) float64 {
	switch name {
	case "bytes_per_sec":
		return m.BytesPerSec
	case "p50_ns":
		return float64(m.Latency.P50Ns)
	case "p99_ns":
		return float64(m.Latency.P99Ns)
	case "p999_ns":
		return float64(m.Latency.P999Ns)
	case "cpu_per_op_ns":
		return m.CPU.PerOpNs
	case "user_per_op_ns":
		return m.CPU.UserPerOpNs
	case "sys_per_op_ns":
		return m.CPU.PerOpNs - m.CPU.UserPerOpNs
	}
	return m.OpsPerSec
}

// ServerCPUMetric is the FUSE server's CPU time (user and system, of its
// process) per operation of the workload on its mount. Both servers of a
// comparison answer the same kernel requests for the same operations, so
// that per-operation figures compare the servers' cost.
const ServerCPUMetric = "server_cpu_per_op_ns"

// sampleMetric is a metric of one run: metricOf for the workload's own,
// the server's counters for ServerCPUMetric. ok is false when the run
// lacks what the metric needs (no server counters, no operations).
func sampleMetric(name string, m *proto.Metrics, f *proto.FUSEStats) (v float64, ok bool) {
	if name != ServerCPUMetric {
		return metricOf(name, m), true
	}
	if m == nil || m.Ops <= 0 || f == nil || f.ServerCPUNs < 0 {
		return 0, false
	}
	return float64(f.ServerCPUNs) / float64(m.Ops), true
}

// metricInfo is a metric's unit and good direction.
func metricInfo(name string) (unit string, direction int) {
	switch name {
	case "bytes_per_sec":
		return "B/s", 1
	case "p50_ns", "p99_ns", "p999_ns", "cpu_per_op_ns", "user_per_op_ns", "sys_per_op_ns", ServerCPUMetric:
		return "ns", -1
	}
	return "ops/s", 1
}

func metricName(w *Workload) string {
	if w.Metric == "" {
		return "ops_per_sec"
	}
	return w.Metric
}

// metricNames are every metric a workload's rows show: Metric first.
func metricNames(w *Workload) []string {
	out := []string{metricName(w)}
	for _, m := range w.Metrics {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// needsUserspace reports whether a check of s runs in the userspace.
func needsUserspace(s *Spec) bool {
	return slices.ContainsFunc(s.Checks, func(c Check) bool { return c.Userspace })
}
