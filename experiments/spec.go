// Package experiments owns klab's experiment files (experiments/*.yaml):
// their format, strict loading with every error at once (file:line:col),
// the plan of an A/B run (cells, rounds, interleaving), and the runner
// that drives guests through lab's Guest interface and turns their
// results into a report. The experiment files themselves, and the
// patches and config fragments they use, live in this folder too.
package experiments

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"klab/internal/units"
	"klab/results/reference"
)

// Spec is one experiment, as written in its YAML file.
type Spec struct {
	// Name identifies the experiment; `klab run NAME` finds it.
	Name string `yaml:"name"`
	// Description says what it measures, in a sentence.
	Description string `yaml:"description"`
	// Reference is the table the experiment reproduces (free text,
	// shown in reports next to klab's numbers).
	Reference string `yaml:"reference"`
	// Requires is what a kernel needs for the experiment to run on it.
	Requires Requires `yaml:"requires"`
	// VM is the guest's shape.
	VM VM `yaml:"vm"`
	// Rounds is the number of repetitions of every cell (default 3).
	Rounds int `yaml:"rounds"`
	// Order interleaves the rounds: "abba" (default) or "random".
	Order string `yaml:"order"`
	// Seed seeds the random order.
	Seed int64 `yaml:"seed"`
	// Reuse is "fresh" (a new guest per round, the default) or "guest"
	// (every round of a kernel in one boot: faster, less independent).
	Reuse string `yaml:"reuse"`
	// Compare is the A/B axis: "kernel" (the default: the first two
	// --kernel) or the name of a parameter with two values.
	Compare string `yaml:"compare"`
	// Params is the parameter matrix, substituted as ${name} into the
	// steps. Its order is the file's.
	Params Params `yaml:"params"`
	// Exclude drops the points of the matrix that match every value of
	// one of its entries ({server: libfuse-passthrough_ll,
	// kernel_passthrough: true}).
	Exclude []map[string]string `yaml:"exclude"`
	// Setup prepares each guest once, before any cell runs.
	Setup Setup `yaml:"setup"`
	// Sysctls are written before each cell's workloads; ${param} is
	// allowed.
	Sysctls map[string]string `yaml:"sysctls"`
	// Server is the FUSE server the workloads run on; none means they
	// run on the guest's own file systems.
	Server *Server `yaml:"server"`
	// Workloads are measured, one table row each per point of the
	// matrix.
	Workloads []Workload `yaml:"workloads"`
	// Checks pass or fail, in every cell and round.
	Checks []Check `yaml:"checks"`
	// Splats is the splat policy.
	Splats Splats `yaml:"splats"`
	// ProfileFunctions are the kernel or user functions whose share of
	// the profiled time the report shows for each side (workloads with
	// profile: perf), next to the functions whose share changed most.
	ProfileFunctions []string `yaml:"profile_functions"`
	// Suite is a test suite run instead of workloads and checks: a spec
	// has either a suite or workloads, never both.
	Suite *Suite `yaml:"suite"`
}

// Suite is a test suite that an experiment runs in klab's own guests,
// on one kernel or as an A/B of two.
type Suite struct {
	// Fstests runs fstests (xfstests).
	Fstests *FstestsSuite `yaml:"fstests"`
}

// FstestsSuite is an fstests run: a configuration and the tests, chosen
// as fstests' check chooses them.
type FstestsSuite struct {
	// Config is one of the configurations of experiments/fstests
	// (ext4, fuse-klab-uring, ...).
	Config string `yaml:"config"`
	// Tests are test names (generic/013) or globs (generic/0??).
	Tests []string `yaml:"tests"`
	// Groups adds the tests of these groups (check's -g).
	Groups []string `yaml:"groups"`
	// ExcludeGroups leaves out the tests of these groups (check's -x).
	ExcludeGroups []string `yaml:"exclude_groups"`
	// Exclude leaves out these tests (check's -e).
	Exclude []string `yaml:"exclude"`
	// TestTimeout bounds each test (10m); a test running longer is
	// marked hang. Unset, experiments/fstests' default.
	TestTimeout time.Duration `yaml:"test_timeout"`
	// Reruns is how many times a test that newly fails in B is rerun on
	// each side; unset, the suite's default; 0, none.
	Reruns *int `yaml:"reruns"`
	// MountOptions are ext4's mount options (lazytime), or the FUSE
	// mount's.
	MountOptions string `yaml:"mount_options"`
	// MkfsOptions are mkfs.ext4's options (ext4 only).
	MkfsOptions string `yaml:"mkfs_options"`
	// Jobs is the number of guests per kernel, each running a share of
	// the tests (default 1).
	Jobs int `yaml:"jobs"`
	// NoExpunge runs the tests klab's expunge files leave out.
	NoExpunge bool `yaml:"no_expunge"`
}

// Profiler says what a workload's profile records.
type Profiler string

// Profilers.
const (
	// ProfileNone records nothing.
	ProfileNone Profiler = ""
	// ProfileGo is a pprof CPU profile of the guest agent (Go engine).
	ProfileGo Profiler = "go"
	// ProfilePerf is perf record of the whole guest with call graphs.
	ProfilePerf Profiler = "perf"
)

// UnmarshalYAML takes perf, go, true (go) or false; anything else is a
// type error with its line, so that decoding goes on.
func (p *Profiler) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		switch n.Value {
		case "perf":
			*p = ProfilePerf
			return nil
		case "go", "true":
			*p = ProfileGo
			return nil
		case "false", "":
			*p = ProfileNone
			return nil
		}
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s `%s` into a profiler (perf: the whole guest with perf; go: the guest agent's Go engine; false)", n.Line, n.ShortTag(), n.Value)}}
}

// Params is the ordered parameter matrix.
type Params []Param

// Param is one parameter and its values.
type Param struct {
	Name   string
	Values []string
	line   int
	col    int
}

// Requires is what a kernel needs. A kernel that lacks it gives skipped
// cells, not failures.
type Requires struct {
	// Kernel is a version range: ">=6.14", ">=6.1, <7.0".
	Kernel string `yaml:"kernel"`
	// Config are options that must be y or m: "FUSE_IO_URING" or
	// "CONFIG_FUSE_IO_URING".
	Config []string `yaml:"config"`
	// Features are named capabilities: fuse-io-uring,
	// fuse-request-timeout, fuse-passthrough.
	Features []string `yaml:"features"`
	// Implied are the features the spec needs without listing them in
	// Features, each with what needs it: fuse-io-uring for a server over
	// io_uring (server.transport: uring) in any point of the matrix.
	// Load and WithSets fill it; a kernel without them is skipped as for
	// Features.
	Implied map[string]string `yaml:"-" json:"-"`
}

// implied returns the features s needs for what it runs, with what needs
// each: fuse-io-uring for a server over io_uring.
func implied(s *Spec) map[string]string {
	if s.Server != nil && s.Server.Transport == "uring" {
		return map[string]string{"fuse-io-uring": "server.transport: uring"}
	}
	return nil
}

// addImplied records in r the features of need (from implied) that r
// does not list.
func (r *Requires) addImplied(need map[string]string) {
	for f, why := range need {
		if slices.Contains(r.Features, f) {
			continue
		}
		if r.Implied == nil {
			r.Implied = map[string]string{}
		}
		if _, ok := r.Implied[f]; !ok {
			r.Implied[f] = why
		}
	}
}

// VM is the guest's shape and accelerator policy.
type VM struct {
	// CPUs is the number of vCPUs (default 2).
	CPUs int `yaml:"cpus"`
	// MemoryMB is the guest memory (default 1024).
	MemoryMB int `yaml:"memory_mb"`
	// Accel is auto (prove KVM, else TCG), kvm or tcg.
	Accel string `yaml:"accel"`
	// TCGMultithread gives each vCPU its own host thread under TCG.
	TCGMultithread bool `yaml:"tcg_multithread"`
	// StepTimeoutS bounds each step under KVM, scaled under TCG (default
	// 600).
	StepTimeoutS int `yaml:"step_timeout_s"`
	// Cmdline is extra kernel command line (brd.rd_size=1048576 sizes
	// a built-in brd).
	Cmdline string `yaml:"cmdline"`
	// Icount is QEMU's -icount setting ("shift=0,sleep=off"): guest time
	// then counts instructions, so that host load does not move the
	// numbers under TCG.
	Icount string `yaml:"icount"`
}

// Setup prepares a guest.
type Setup struct {
	// Brd loads the brd ramdisk module with rd_nr and rd_size.
	Brd *Brd `yaml:"brd"`
	// Mkfs makes file systems.
	Mkfs []Mkfs `yaml:"mkfs"`
	// Mounts mounts them (or tmpfs).
	Mounts []Mount `yaml:"mounts"`
	// Sysctls are written once.
	Sysctls map[string]string `yaml:"sysctls"`
	// Modules are kernel module parameters to set
	// (/sys/module/NAME/parameters/PARAM).
	Modules []Module `yaml:"modules"`
	// Dirs are created.
	Dirs []string `yaml:"dirs"`
	// Script is extra shell run last.
	Script string `yaml:"script"`
}

// Brd is the ramdisk.
type Brd struct {
	// Count is rd_nr (default 1); SizeMB each disk's size.
	Count  int `yaml:"count"`
	SizeMB int `yaml:"size_mb"`
}

// Mkfs makes a file system.
type Mkfs struct {
	// Device is the block device, Type the file system ("ext4"), Options
	// mkfs's options ("-F -I 256 -b 4096 -q").
	Device  string `yaml:"device"`
	Type    string `yaml:"type"`
	Options string `yaml:"options"`
}

// Mount mounts a file system.
type Mount struct {
	// Device (or "tmpfs"), Path, Type and Options as mount(8) takes
	// them.
	Device  string `yaml:"device"`
	Path    string `yaml:"path"`
	Type    string `yaml:"type"`
	Options string `yaml:"options"`
}

// Module sets module parameters.
type Module struct {
	Name   string            `yaml:"name"`
	Params map[string]string `yaml:"params"`
}

// Server is a FUSE server mounted for each workload.
type Server struct {
	// Kind is passthrough, stuck, interrupt, libfuse-passthrough_ll or
	// libfuse-passthrough_hp (libfuse 3.18, over dev and uring).
	Kind string `yaml:"kind"`
	// Transport is dev (/dev/fuse) or uring (FUSE-over-io_uring).
	Transport string `yaml:"transport"`
	// Threads are server threads; QueueDepth io_uring entries per queue
	// (used over uring only, so that a transport parameter can switch).
	Threads    int `yaml:"threads"`
	QueueDepth int `yaml:"queue_depth"`
	// ZeroCopy makes the io_uring queues of klab's passthrough server
	// zero-copy (Linux 7.3+): READs of files opened read-only go from
	// the backing file straight into the client's pages. Like
	// QueueDepth it applies where it can (klab's passthrough over uring)
	// and is left out elsewhere, so that server and transport
	// parameters can switch.
	ZeroCopy bool `yaml:"zero_copy"`
	// Splice says how the server copies READ data over /dev/fuse: true
	// splices it from the backing file into the reply (one copy less),
	// false reads it into the server's memory and writes it with the
	// reply. Unset, klab's servers splice. libfuse's servers never
	// splice here, so that for them it can only be false:
	// passthrough_hp runs with --nosplice, because spliced data do not
	// show in its rchar, which is what min_served counts, and
	// passthrough_ll keeps libfuse's default of replies written without
	// splice. A comparison with passthrough_hp is like for like with
	// false. Over uring nothing is spliced and the field is left out,
	// so that a transport parameter can switch.
	Splice *bool `yaml:"splice"`
	// Backing is the directory served; Mountpoint where it is mounted.
	Backing    string `yaml:"backing"`
	Mountpoint string `yaml:"mountpoint"`
	// Options are FUSE mount options.
	Options []string `yaml:"options"`
	// RequestTimeoutS is sent in the INIT reply (FUSE_REQUEST_TIMEOUT).
	RequestTimeoutS int `yaml:"request_timeout_s"`
	// MaxWrite is the largest WRITE in bytes.
	MaxWrite int `yaml:"max_write"`
	// KernelPassthrough registers backing files with the kernel
	// (FUSE_PASSTHROUGH), as libfuse's passthrough_hp does.
	KernelPassthrough bool `yaml:"kernel_passthrough"`
	// CacheTimeoutS is how long the kernel may cache attributes and
	// entries, in seconds; 0 caches nothing, so that every lookup and
	// getattr reaches the server. Unset, each server keeps its own:
	// klab's and passthrough_ll's 1 s, passthrough_hp's day (it has no
	// other setting than its own or none).
	CacheTimeoutS *float64 `yaml:"cache_timeout_s"`
}

// Workload is one measured job: klab's Go engine, or fio.
type Workload struct {
	// Name labels the table rows.
	Name string `yaml:"name"`
	// Pattern is a Go engine pattern (seqwrite, randread, create, ...).
	Pattern string `yaml:"pattern"`
	// Fio is a fio command line, verbatim as a seed gives it; it
	// excludes Pattern.
	Fio string `yaml:"fio"`
	// Engine runs a Pattern with klab's Go engine ("go", the default) or
	// with fio ("fio": the same job as fio options), to cross-check the
	// two.
	Engine string `yaml:"engine"`
	// Profile records a profile of each run, under profiles/ in the run
	// directory: "perf" records the whole guest (kernel and user call
	// graphs) with perf, and the report compares the sides' function
	// shares; "go" (or true) a CPU profile of the guest agent during Go
	// engine runs.
	Profile Profiler `yaml:"profile"`
	// Dir is where the job's files go (fio's working directory).
	Dir string `yaml:"dir"`
	// Jobs, BS, Size, Files, Fallocate, FilenameFormat, RampS,
	// RuntimeS and TimeBased are the Go engine's options (as fio's).
	Jobs           int    `yaml:"jobs"`
	BS             Size   `yaml:"bs"`
	Size           Size   `yaml:"size"`
	Files          int    `yaml:"files"`
	Fallocate      string `yaml:"fallocate"`
	FilenameFormat string `yaml:"filename_format"`
	RampS          int    `yaml:"ramp_s"`
	RuntimeS       int    `yaml:"runtime_s"`
	TimeBased      bool   `yaml:"time_based"`
	// MakeDirs are created before fio runs (relative to Dir).
	MakeDirs []string `yaml:"make_dirs"`
	// Prepare is shell run before the job, untimed (e.g. rm -rf DIR).
	// It runs without the server mounted, unless PrepareMount.
	Prepare string `yaml:"prepare"`
	// PrepareMount runs Prepare while the spec's server is mounted, in a
	// mount of its own before the job's: what it writes under the
	// mountpoint goes through the server to the backing directory, and
	// the pages it cached on the mount are gone when the job mounts.
	PrepareMount bool `yaml:"prepare_mount"`
	// Mount runs the job on the server's mount (the default when there
	// is a server); false runs it without the server.
	Mount *bool `yaml:"mount"`
	// Metric is what the row compares: ops_per_sec (default),
	// bytes_per_sec, p50_ns, p99_ns, p999_ns, cpu_per_op_ns,
	// user_per_op_ns, sys_per_op_ns (the workload's CPU), or
	// server_cpu_per_op_ns (the FUSE server's, on its mount).
	Metric string `yaml:"metric"`
	// Metrics are more metrics of the same runs, one table row each.
	Metrics []string `yaml:"metrics"`
	// ThresholdPct fails the run (in JUnit) on a significant regression
	// larger than this many percent; 0 never fails.
	ThresholdPct float64 `yaml:"threshold_pct"`
	// MinServed, for a read job on the server's mount, fails a sample
	// whose server read less than this share (0..1) of the bytes the job
	// counted: the reads were served from a cache, not by the server.
	MinServed float64 `yaml:"min_served"`
	// Expect is what the experiment's reference found for the
	// workload's rows (a mapping, or a list of them for several metrics
	// or parameter values): the report gives each row a verdict against
	// it.
	Expect OneOrMany[reference.Expectation] `yaml:"expect"`
}

// Check is a pass/fail step: a command, or one of klab's FUSE checks.
type Check struct {
	// Name labels the check.
	Name string `yaml:"name"`
	// Run is a shell command line (run with sh -c).
	Run string `yaml:"run"`
	// FuseCheck is one of klab's FUSE checks (timeout, interrupt, kill),
	// run as `klab-agent fuse check NAME ARGS...`.
	FuseCheck string   `yaml:"fuse_check"`
	Args      []string `yaml:"args"`
	// ExpectExit is the exit status that passes (default 0).
	ExpectExit int `yaml:"expect_exit"`
	// TimeoutS bounds the check under KVM, scaled under TCG.
	TimeoutS int `yaml:"timeout_s"`
	// Once runs the check in the first round only (for each row and
	// side): for long correctness checks that rounds would only repeat.
	// A check that refers to no parameter but the axis runs in the
	// first row only, whatever Once says.
	Once bool `yaml:"once"`
	// MaxS, when set, fails a check that took longer than this many
	// seconds (a timing bound such as "ECONNABORTED within T+15 s"); it
	// is not scaled.
	MaxS float64 `yaml:"max_s"`
	// Mount runs the check while the spec's server is mounted, in a
	// mount of its own, as a workload runs; false (the default) runs it
	// after the workloads, with the server unmounted, so that the
	// mountpoint is then a bare directory.
	Mount bool `yaml:"mount"`
	// Userspace runs the check's run: with bash, chrooted into klab's
	// Debian userspace (the one test suites use), for tools u-root lacks;
	// the agent's /proc, /sys and /dev, and with mount: true the server's
	// mountpoint, are seen at the same paths there.
	Userspace bool `yaml:"userspace"`
	// Expect is the outcome the experiment's reference saw (pass, or
	// fail), with where it comes from.
	Expect OneOrMany[reference.CheckExpectation] `yaml:"expect"`
}

// Splats is the splat policy of the experiment's guests.
type Splats struct {
	// AllowWarnings are WARNING titles (substrings, or /regexp/) that
	// are not failures.
	AllowWarnings []string `yaml:"allow_warnings"`
}

// Size is a byte count written as 4096, "4k", "1M" or "1GiB".
type Size int64

// UnmarshalText parses a size.
func (s *Size) UnmarshalText(b []byte) error {
	t := strings.TrimSpace(string(b))
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		*s = Size(n)
		return nil
	}
	n, err := units.ParseSize(t)
	if err != nil {
		return fmt.Errorf("size %q: want bytes, or a number with k, M, G (4k, 1M)", t)
	}
	*s = Size(n)
	return nil
}

// Allowed values of the enumerated fields.
var (
	orders     = []string{"abba", "random"}
	reuses     = []string{"fresh", "guest"}
	accels     = []string{"auto", "kvm", "tcg"}
	servers    = []string{"passthrough", "stuck", "interrupt", "libfuse-passthrough_ll", "libfuse-passthrough_hp"}
	transports = []string{"dev", "uring"}
	metrics    = []string{"ops_per_sec", "bytes_per_sec", "p50_ns", "p99_ns", "p999_ns", "cpu_per_op_ns", "user_per_op_ns", "sys_per_op_ns", ServerCPUMetric}
	engines    = []string{"go", "fio"}
	features   = []string{"fuse-io-uring", "fuse-request-timeout", "fuse-passthrough"}
	fuseChecks = []string{"timeout", "interrupt", "kill"}
	fsTypes    = []string{"ext4", "ext2", "ext3"}
	fallocates = []string{"", "none", "native", "posix", "keep", "truncate"}
)
