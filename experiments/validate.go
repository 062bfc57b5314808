package experiments

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"klab/guest/proto"
	"klab/guest/workload"
	"klab/images/userspace"
	"klab/internal/specfile"
	"klab/lab"
)

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// funcRe matches a function name as perf prints it.
var funcRe = regexp.MustCompile(`^[A-Za-z_.][A-Za-z0-9_.]{0,127}$`)

func oneOf(list []string) string {
	var q []string
	for _, s := range list {
		if s == "" {
			continue
		}
		q = append(q, s)
	}
	return strings.Join(q, ", ")
}

// validate checks one substituted cell of the spec. With axis false the
// compare axis is not held to two values: --set may narrow it when the
// run compares something else (--compare), and the plan checks the axis
// it uses.
func validate(ps *specfile.Problems, root *yaml.Node, s *Spec, params Params, axis bool) {
	at := func(path ...any) *yaml.Node { return specfile.Node(root, path...) }
	if !nameRe.MatchString(s.Name) {
		ps.At(at("name"), "name: %q is not a plain name, want letters, digits, '.', '_' and '-' (at most 64)", s.Name)
	}
	if s.Rounds < 0 || s.Rounds > 1000 {
		ps.At(at("rounds"), "rounds: %d is out of range, want 1..1000", s.Rounds)
	}
	if s.Order != "" && !slices.Contains(orders, s.Order) {
		ps.At(at("order"), "order: %q is not allowed, want one of %s", s.Order, oneOf(orders))
	}
	if s.Reuse != "" && !slices.Contains(reuses, s.Reuse) {
		ps.At(at("reuse"), "reuse: %q is not allowed, want one of %s", s.Reuse, oneOf(reuses))
	}
	if s.Compare != "" && s.Compare != "kernel" {
		var p *Param
		for i := range params {
			if params[i].Name == s.Compare {
				p = &params[i]
			}
		}
		switch {
		case p == nil:
			var names []string
			for _, q := range params {
				names = append(names, q.Name)
			}
			ps.At(at("compare"), "compare: %q is neither kernel nor a parameter%s, want kernel%s", s.Compare, specfile.DidYouMean(s.Compare, append([]string{"kernel"}, names...)), prefixed(", ", names))
		case axis && len(p.Values) != 2:
			ps.At(at("compare"), "compare: %s has %d values, want exactly 2 (A and B)", p.Name, len(p.Values))
		}
	}
	for i, f := range s.ProfileFunctions {
		if !funcRe.MatchString(f) {
			ps.At(at("profile_functions", i), "profile_functions: %q is not a function name, want letters, digits, '_' and '.' (at most 128)", f)
		}
	}
	if len(s.ProfileFunctions) > 0 && !slices.ContainsFunc(s.Workloads, func(w Workload) bool { return w.Profile == ProfilePerf }) {
		ps.At(at("profile_functions"), "profile_functions: no workload has profile: perf, so there is nothing to look them up in")
	}
	if s.VM.CPUs < 0 || s.VM.CPUs > 64 {
		ps.At(at("vm", "cpus"), "vm.cpus: %d is out of range, want 1..64", s.VM.CPUs)
	}
	if s.VM.MemoryMB != 0 && (s.VM.MemoryMB < 128 || s.VM.MemoryMB > 65536) {
		ps.At(at("vm", "memory_mb"), "vm.memory_mb: %d is out of range, want 128..65536", s.VM.MemoryMB)
	}
	if s.VM.Accel != "" && !slices.Contains(accels, s.VM.Accel) {
		ps.At(at("vm", "accel"), "vm.accel: %q is not allowed, want one of %s", s.VM.Accel, oneOf(accels))
	}
	if strings.ContainsAny(s.VM.Cmdline, "\"'`$;&|<>\\\n") {
		ps.At(at("vm", "cmdline"), "vm.cmdline: %q, want plain kernel parameters (brd.rd_size=1048576 ...)", s.VM.Cmdline)
	}
	if s.VM.Icount != "" {
		switch {
		case lab.CheckIcount(s.VM.Icount) != nil:
			ps.At(at("vm", "icount"), "vm.icount: %q, want QEMU's -icount options, e.g. shift=0,sleep=off", s.VM.Icount)
		case s.VM.Accel == "kvm":
			ps.At(at("vm", "icount"), "vm.icount: QEMU counts instructions under TCG only, not with vm.accel: kvm (leave vm.accel out: icount then runs under TCG)")
		case s.VM.TCGMultithread:
			ps.At(at("vm", "icount"), "vm.icount: QEMU counts instructions under single-threaded TCG only, not with vm.tcg_multithread")
		}
	}
	if s.VM.StepTimeoutS < 0 || s.VM.StepTimeoutS > 86400 {
		ps.At(at("vm", "step_timeout_s"), "vm.step_timeout_s: %d is out of range, want 1..86400", s.VM.StepTimeoutS)
	}
	if _, err := ParseRange(s.Requires.Kernel); err != nil {
		ps.At(at("requires", "kernel"), "requires.kernel: %v", err)
	}
	for i, c := range s.Requires.Config {
		if !regexp.MustCompile(`^(CONFIG_)?[A-Z0-9_]+$`).MatchString(c) {
			ps.At(at("requires", "config", i), "requires.config: %q is not a config option, want e.g. FUSE_IO_URING", c)
		}
	}
	for i, f := range s.Requires.Features {
		if !slices.Contains(features, f) {
			ps.At(at("requires", "features", i), "requires.features: %q is unknown, want one of %s", f, oneOf(features))
		}
	}
	validateSetup(ps, root, &s.Setup)
	for k := range s.Sysctls {
		if !sysctlRe.MatchString(k) {
			ps.At(at("sysctls"), "sysctls: %q is not a sysctl name (fs.fuse.default_request_timeout)", k)
		}
	}
	if sv := s.Server; sv != nil {
		if !slices.Contains(servers, sv.Kind) {
			ps.At(at("server", "kind"), "server.kind: %q is not a server, want one of %s", sv.Kind, oneOf(servers))
		}
		if sv.Transport != "" && !slices.Contains(transports, sv.Transport) {
			ps.At(at("server", "transport"), "server.transport: %q is not allowed, want one of %s", sv.Transport, oneOf(transports))
		}
		if sv.KernelPassthrough && sv.Kind == "libfuse-passthrough_ll" {
			ps.At(at("server", "kernel_passthrough"), "server.kernel_passthrough: klab's servers only; libfuse's passthrough_ll has none")
		}
		if sv.Splice != nil && *sv.Splice {
			switch sv.Kind {
			case "libfuse-passthrough_hp":
				ps.At(at("server", "splice"), "server.splice: libfuse's passthrough_hp always runs with --nosplice, so that its rchar counts what it served (min_served): give false or leave it out (true is for klab's servers)")
			case "libfuse-passthrough_ll":
				ps.At(at("server", "splice"), "server.splice: libfuse's passthrough_ll writes its READ replies without splice (libfuse's default): give false or leave it out")
			}
		}
		if c := sv.CacheTimeoutS; c != nil {
			switch {
			case *c < 0 || *c > 86400:
				ps.At(at("server", "cache_timeout_s"), "server.cache_timeout_s: %g is out of range, want 0..86400 seconds", *c)
			case *c != 0 && sv.Kind == "libfuse-passthrough_hp":
				ps.At(at("server", "cache_timeout_s"), "server.cache_timeout_s: libfuse's passthrough_hp caches for a day or not at all: give 0 (its --nocache) or leave it out")
			}
		}
		if sv.Threads < 0 || sv.Threads > 1024 {
			ps.At(at("server", "threads"), "server.threads: %d is out of range, want 1..1024", sv.Threads)
		}
		if sv.QueueDepth < 0 || sv.QueueDepth > 1024 {
			ps.At(at("server", "queue_depth"), "server.queue_depth: %d is out of range, want 1..1024", sv.QueueDepth)
		}
		for _, f := range []struct{ k, v string }{{"backing", sv.Backing}, {"mountpoint", sv.Mountpoint}} {
			if !strings.HasPrefix(f.v, "/") {
				ps.At(at("server", f.k), "server.%s: %q, want an absolute guest path", f.k, f.v)
			}
		}
	}
	switch {
	case s.Suite != nil:
		validateSuite(ps, root, s.Suite)
	case specfile.Node(root, "suite") != root:
		ps.At(at("suite"), "suite: want fstests: {config: ..., tests: [...]}, the suite klab runs")
	case len(s.Workloads) == 0 && len(s.Checks) == 0:
		ps.At(root, "experiment: no workloads and no checks: nothing to measure")
	}
	names := map[string]bool{}
	for i := range s.Workloads {
		validateWorkload(ps, root, s, i)
		validateExpects(ps, root, s, params, axis, i)
		if names[s.Workloads[i].Name] {
			ps.At(at("workloads", i, "name"), "workloads[%d].name: %q is used twice", i, s.Workloads[i].Name)
		}
		names[s.Workloads[i].Name] = true
	}
	for i, c := range s.Checks {
		p := func(f string) *yaml.Node { return at("checks", i, f) }
		if !nameRe.MatchString(c.Name) {
			ps.At(p("name"), "checks[%d].name: %q is not a plain name", i, c.Name)
		}
		if names[c.Name] {
			ps.At(p("name"), "checks[%d].name: %q is used twice", i, c.Name)
		}
		names[c.Name] = true
		switch {
		case (c.Run == "") == (c.FuseCheck == ""):
			ps.At(at("checks", i), "checks[%d]: give exactly one of run (a shell command) and fuse_check (%s)", i, oneOf(fuseChecks))
		case c.FuseCheck != "" && !slices.Contains(fuseChecks, c.FuseCheck):
			ps.At(p("fuse_check"), "checks[%d].fuse_check: %q is unknown, want one of %s", i, c.FuseCheck, oneOf(fuseChecks))
		case c.Run != "" && len(c.Args) > 0:
			ps.At(p("args"), "checks[%d].args: only for fuse_check; put a command's arguments in run", i)
		}
		if c.ExpectExit < 0 || c.ExpectExit > 255 {
			ps.At(p("expect_exit"), "checks[%d].expect_exit: %d is out of range, want 0..255", i, c.ExpectExit)
		}
		if c.MaxS < 0 || c.MaxS > 86400 {
			ps.At(p("max_s"), "checks[%d].max_s: %g is out of range, want 0..86400", i, c.MaxS)
		}
		if c.Mount {
			switch {
			case s.Server == nil:
				ps.At(p("mount"), "checks[%d].mount: true, but the experiment has no server to mount (mount: true runs the check while the server is mounted)", i)
			case c.FuseCheck != "":
				ps.At(p("mount"), "checks[%d].mount: only for run; fuse_check %s mounts a server of its own", i, c.FuseCheck)
			}
		}
		if c.Userspace && c.FuseCheck != "" {
			ps.At(p("userspace"), "checks[%d].userspace: only for run; fuse_check %s runs klab's agent, which is not in the userspace", i, c.FuseCheck)
		}
		if c.Userspace && s.Server != nil && c.Mount && !underWritable(s.Server.Mountpoint) {
			ps.At(p("userspace"), "checks[%d].userspace: the server's mountpoint %s is seen in the userspace only under one of %s (the rest of it is read-only)", i, s.Server.Mountpoint, strings.Join(userspace.Writable(), ", "))
		}
		if c.TimeoutS < 0 || c.TimeoutS > 86400 {
			ps.At(p("timeout_s"), "checks[%d].timeout_s: %d is out of range, want 1..86400", i, c.TimeoutS)
		}
		validateCheckExpects(ps, root, s, i)
	}
}

// mountWarnings warns of the steps that name the server's mountpoint but
// run with the server unmounted: a check without mount: true, a prepare
// without prepare_mount: true. They would see, or write into, the bare
// mountpoint directory, and a check could pass against the guest's own
// file system.
func mountWarnings(ws *specfile.Problems, root *yaml.Node, s *Spec) {
	if s.Server == nil || s.Server.Mountpoint == "" {
		return
	}
	mp := path.Clean(s.Server.Mountpoint)
	if mp == "/" {
		return
	}
	for i, c := range s.Checks {
		if !c.Mount && c.Run != "" && namesPath(c.Run, mp) {
			ws.At(specfile.Node(root, "checks", i, "run"), "checks[%d].run names %s, but the check runs after the server is unmounted: it would see the bare mountpoint directory; add mount: true", i, mp)
		}
	}
	for i, w := range s.Workloads {
		if !w.PrepareMount && w.Prepare != "" && namesPath(w.Prepare, mp) {
			ws.At(specfile.Node(root, "workloads", i, "prepare"), "workloads[%d].prepare names %s, but it runs before the server is mounted: it would see the bare mountpoint directory; add prepare_mount: true", i, mp)
		}
	}
}

// namesPath reports whether the shell text cmd names the directory dir
// or a path under it: dir not preceded by a path character and followed
// by the end, a '/' or a character that ends a shell word.
func namesPath(cmd, dir string) bool {
	for off := 0; ; {
		i := strings.Index(cmd[off:], dir)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(dir)
		before := i == 0 || !pathChar(cmd[i-1])
		after := end == len(cmd) || cmd[end] == '/' || !pathChar(cmd[end])
		if before && after {
			return true
		}
		off = i + 1
	}
}

// pathChar reports whether b can be part of a path word in a shell
// command: letters, digits and . _ - + / ~ @ % , :.
func pathChar(b byte) bool {
	switch {
	case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		return true
	}
	return strings.IndexByte("._-+/~@%,:", b) >= 0
}

func prefixed(sep string, l []string) string {
	if len(l) == 0 {
		return ""
	}
	return sep + strings.Join(l, sep)
}

var sysctlRe = regexp.MustCompile(`^[a-z0-9_]+([./][a-z0-9_-]+)+$`)

func validateSetup(ps *specfile.Problems, root *yaml.Node, st *Setup) {
	at := func(path ...any) *yaml.Node { return specfile.Node(root, append([]any{"setup"}, path...)...) }
	if b := st.Brd; b != nil {
		if b.Count < 0 || b.Count > 16 {
			ps.At(at("brd", "count"), "setup.brd.count: %d is out of range, want 1..16", b.Count)
		}
		if b.SizeMB < 1 || b.SizeMB > 16384 {
			ps.At(at("brd", "size_mb"), "setup.brd.size_mb: %d is out of range, want 1..16384", b.SizeMB)
		}
	}
	for i, m := range st.Mkfs {
		if !slices.Contains(fsTypes, m.Type) {
			ps.At(at("mkfs", i, "type"), "setup.mkfs[%d].type: %q is not supported, want one of %s", i, m.Type, oneOf(fsTypes))
		}
		if !strings.HasPrefix(m.Device, "/dev/") {
			ps.At(at("mkfs", i, "device"), "setup.mkfs[%d].device: %q, want a /dev path", i, m.Device)
		}
		if strings.ContainsAny(m.Options, "'\"`$;&|<>\\") {
			ps.At(at("mkfs", i, "options"), "setup.mkfs[%d].options: %q: want plain options (no quotes or shell characters)", i, m.Options)
		}
	}
	for i, m := range st.Mounts {
		if !strings.HasPrefix(m.Path, "/") {
			ps.At(at("mounts", i, "path"), "setup.mounts[%d].path: %q, want an absolute guest path", i, m.Path)
		}
		for _, f := range []string{m.Device, m.Path, m.Type, m.Options} {
			if strings.ContainsAny(f, " '\"`$;&|<>\\") {
				ps.At(at("mounts", i), "setup.mounts[%d]: %q: want plain words (no spaces, quotes or shell characters)", i, f)
			}
		}
	}
	for k := range st.Sysctls {
		if !sysctlRe.MatchString(k) {
			ps.At(at("sysctls"), "setup.sysctls: %q is not a sysctl name (fs.fuse.max_request_timeout)", k)
		}
	}
	for i, m := range st.Modules {
		if !regexp.MustCompile(`^[a-z0-9_]+$`).MatchString(m.Name) {
			ps.At(at("modules", i, "name"), "setup.modules[%d].name: %q is not a module name", i, m.Name)
		}
		for k, v := range m.Params {
			if !regexp.MustCompile(`^[a-z0-9_]+$`).MatchString(k) || strings.ContainsAny(v, " '\"`$;&|<>\\\n") {
				ps.At(at("modules", i, "params"), "setup.modules[%d].params: %s=%q: want a parameter name and a plain value", i, k, v)
			}
		}
	}
	for i, d := range st.Dirs {
		if !strings.HasPrefix(d, "/") || strings.ContainsAny(d, " '\"`$;&|<>\\") {
			ps.At(at("dirs", i), "setup.dirs[%d]: %q, want an absolute guest path of plain characters", i, d)
		}
	}
}

func validateWorkload(ps *specfile.Problems, root *yaml.Node, s *Spec, i int) {
	w := &s.Workloads[i]
	at := func(f string) *yaml.Node { return specfile.Node(root, "workloads", i, f) }
	pre := fmt.Sprintf("workloads[%d]", i)
	if !nameRe.MatchString(w.Name) {
		ps.At(at("name"), "%s.name: %q is not a plain name, want letters, digits, '.', '_' and '-'", pre, w.Name)
	}
	if (w.Pattern == "") == (w.Fio == "") {
		ps.At(specfile.Node(root, "workloads", i), "%s: give exactly one of pattern (klab's Go engine: %s) and fio (a fio command line)", pre, patternList())
		return
	}
	if w.Metric != "" && !slices.Contains(metrics, w.Metric) {
		ps.At(at("metric"), "%s.metric: %q is unknown, want one of %s", pre, w.Metric, oneOf(metrics))
	}
	for j, m := range w.Metrics {
		if !slices.Contains(metrics, m) {
			ps.At(specfile.Node(root, "workloads", i, "metrics", j), "%s.metrics: %q is unknown, want one of %s", pre, m, oneOf(metrics))
		}
	}
	if w.Engine != "" && !slices.Contains(engines, w.Engine) {
		ps.At(at("engine"), "%s.engine: %q is unknown, want one of %s", pre, w.Engine, oneOf(engines))
	}
	if w.Engine != "" && w.Fio != "" {
		ps.At(at("engine"), "%s.engine: only with pattern; a fio command line always runs fio", pre)
	}
	if w.ThresholdPct < 0 || w.ThresholdPct > 1000 {
		ps.At(at("threshold_pct"), "%s.threshold_pct: %g is out of range, want 0..1000", pre, w.ThresholdPct)
	}
	if w.MinServed < 0 || w.MinServed > 1 {
		ps.At(at("min_served"), "%s.min_served: %g is out of range, want 0..1", pre, w.MinServed)
	}
	if w.MinServed > 0 && (s.Server == nil || (w.Mount != nil && !*w.Mount)) {
		ps.At(at("min_served"), "%s.min_served: only for a job on the server's mount", pre)
	}
	if s.Server == nil || (w.Mount != nil && !*w.Mount) {
		if w.Metric == ServerCPUMetric {
			ps.At(at("metric"), "%s.metric: %s only for a job on the server's mount", pre, ServerCPUMetric)
		}
		for j, m := range w.Metrics {
			if m == ServerCPUMetric {
				ps.At(specfile.Node(root, "workloads", i, "metrics", j), "%s.metrics: %s only for a job on the server's mount", pre, ServerCPUMetric)
			}
		}
	}
	if !strings.HasPrefix(w.Dir, "/") {
		ps.At(at("dir"), "%s.dir: %q, want an absolute guest path", pre, w.Dir)
	}
	if w.Mount != nil && *w.Mount && s.Server == nil {
		ps.At(at("mount"), "%s.mount: true, but the experiment has no server", pre)
	}
	if w.PrepareMount {
		switch {
		case s.Server == nil:
			ps.At(at("prepare_mount"), "%s.prepare_mount: true, but the experiment has no server to mount", pre)
		case w.Prepare == "":
			ps.At(at("prepare_mount"), "%s.prepare_mount: true, but the workload has no prepare to run", pre)
		}
	}
	if w.Fio != "" {
		for _, f := range []string{"jobs", "bs", "size", "files", "fallocate", "filename_format", "ramp_s", "runtime_s", "time_based"} {
			if n := at(f); n != specfile.Node(root, "workloads", i) {
				ps.At(n, "%s.%s: a Go engine option; a fio workload takes its options in its command line", pre, f)
			}
		}
		return
	}
	if len(w.MakeDirs) > 0 {
		ps.At(at("make_dirs"), "%s.make_dirs: only with fio (a fio command line); klab's Go engine makes the directories its jobs need", pre)
	}
	if !slices.Contains(proto.Patterns(), proto.Pattern(w.Pattern)) {
		ps.At(at("pattern"), "%s.pattern: %q is unknown, want one of %s", pre, w.Pattern, patternList())
		return
	}
	ws := w.step()
	if err := workload.Validate(&ws); err != nil {
		ps.At(specfile.Node(root, "workloads", i), "%s: %v", pre, err)
	} else if w.Engine == "fio" {
		if _, err := workload.FioStepFor(&ws); err != nil {
			ps.At(at("engine"), "%s.engine: fio cannot run this job: %v", pre, err)
		}
	}
}

func patternList() string {
	var l []string
	for _, p := range proto.Patterns() {
		l = append(l, string(p))
	}
	return strings.Join(l, ", ")
}

// step is the Go engine step of a pattern workload.
func (w *Workload) step() proto.WorkloadStep {
	fa := w.Fallocate
	return proto.WorkloadStep{
		Name: w.Name, Pattern: proto.Pattern(w.Pattern), Dir: w.Dir, Jobs: w.Jobs,
		BlockSize: int64(w.BS), FileSize: int64(w.Size), Files: w.Files, Fallocate: fa,
		FilenameFormat: w.FilenameFormat, RampMs: int64(w.RampS) * 1000, RuntimeMs: int64(w.RuntimeS) * 1000,
		TimeBased: w.TimeBased, Profile: w.Profile == ProfileGo && w.Engine != "fio",
	}
}

// Range is a kernel version range: every bound must hold.
type Range []bound

type bound struct {
	op string
	v  []int
}

// ParseRange parses ">=6.14", ">=6.1, <7.0" or "" (any).
func ParseRange(s string) (Range, error) {
	var r Range
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		m := regexp.MustCompile(`^(>=|<=|>|<|=|==)?\s*(\d+(\.\d+){0,2})$`).FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("%q is not a version bound, want e.g. \">=6.14\" or \">=6.1, <7.0\"", part)
		}
		op := m[1]
		if op == "" || op == "==" {
			op = "="
		}
		r = append(r, bound{op: op, v: parseVersion(m[2])})
	}
	return r, nil
}

// parseVersion reads the leading numbers of a kernel release
// ("7.3.4+deb13-cloud-amd64" is 7.3.4).
func parseVersion(s string) []int {
	var out []int
	for _, p := range strings.SplitN(s, ".", 3) {
		end := 0
		for end < len(p) && p[end] >= '0' && p[end] <= '9' {
			end++
		}
		if end == 0 {
			break
		}
		n, _ := strconv.Atoi(p[:end])
		out = append(out, n)
		if end < len(p) {
			break
		}
	}
	return out
}

func cmpVersion(a, b []int) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		x, y := 0, 0
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Contains reports whether the kernel release is in the range.
func (r Range) Contains(release string) bool {
	v := parseVersion(release)
	for _, b := range r {
		c := cmpVersion(v[:min(len(v), len(b.v))], b.v)
		ok := false
		switch b.op {
		case ">=":
			ok = c >= 0
		case ">":
			ok = c > 0
		case "<=":
			ok = c <= 0
		case "<":
			ok = c < 0
		case "=":
			ok = c == 0
		}
		if !ok {
			return false
		}
	}
	return true
}

// String is the range as written.
func (r Range) String() string {
	var parts []string
	for _, b := range r {
		var v []string
		for _, n := range b.v {
			v = append(v, strconv.Itoa(n))
		}
		parts = append(parts, b.op+strings.Join(v, "."))
	}
	return strings.Join(parts, ", ")
}

// underWritable reports whether the guest path p lies below one of the
// userspace's writable directories, where a mount can be bound in.
func underWritable(p string) bool {
	return slices.ContainsFunc(userspace.Writable(), func(w string) bool { return strings.HasPrefix(p, w+"/") })
}
