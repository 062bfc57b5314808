// Package report holds the result of one experiment run in a form every
// report format is made from: the A/B table with its statistics, the
// checks, the splat diff and a summary of the manifest. Its JSON form
// (Schema "klab.report/v1") is a documented, stable interface: fields are
// only ever added.
package report

import "klab/results/stats"

// Schema names the JSON schema of Report.
const Schema = "klab.report/v1"

// Report is one experiment run, compared A against B.
type Report struct {
	// Schema is always Schema.
	Schema string `json:"schema"`
	// Experiment is the experiment's name; Description and Reference
	// come from its spec (Reference is the table the experiment
	// reproduces, shown next to klab's numbers).
	Experiment  string `json:"experiment"`
	Description string `json:"description,omitempty"`
	Reference   string `json:"reference,omitempty"`
	// SpecFile and SpecSHA256 name the spec as run.
	SpecFile   string `json:"spec_file"`
	SpecSHA256 string `json:"spec_sha256"`
	// RunID and RunDir name the run.
	RunID  string `json:"run_id"`
	RunDir string `json:"run_dir"`
	// Start and End are RFC 3339 times; WallSec the run's wall time.
	Start   string  `json:"start"`
	End     string  `json:"end"`
	WallSec float64 `json:"wall_s"`
	// Axis is what A and B differ in: "kernel", or a parameter's name.
	Axis string `json:"axis"`
	// A and B are the two sides.
	A Side `json:"a"`
	B Side `json:"b"`
	// Kernels are every kernel the run used.
	Kernels []Kernel `json:"kernels"`
	// Accel is the accelerator used ("kvm" or "tcg"); under TCG absolute
	// numbers are emulator numbers and only ratios count.
	Accel string `json:"accel"`
	// Host is the host's kernel release and CPU model; QEMU its version.
	Host string `json:"host"`
	QEMU string `json:"qemu"`
	// CPUs and MemMB are the guest's shape.
	CPUs  int `json:"cpus"`
	MemMB int `json:"mem_mb"`
	// Icount is QEMU's -icount options under TCG ("" when guest time
	// was real time); TCGMultithread is set when each vCPU had a host
	// thread of its own. With Accel and CPUs they are the run's mode,
	// which decides what the run can show (see CheckReferences and
	// Row.Reference).
	Icount         string `json:"icount,omitempty"`
	TCGMultithread bool   `json:"tcg_multithread,omitempty"`
	// Rounds is the number of rounds; Order how they were interleaved
	// ("abba" or "random seed N"); Reuse is "fresh" (a new guest per
	// round) or "guest" (all rounds in one boot).
	Rounds int    `json:"rounds"`
	Order  string `json:"order"`
	Reuse  string `json:"reuse"`
	// AutoRounds, for a run with --rounds auto, is its target and
	// whether each row reached it; Rounds is then the rounds it ran.
	AutoRounds *AutoRounds `json:"auto_rounds,omitempty"`
	// Rows are the measured comparisons, one per row of the table.
	Rows []Row `json:"rows"`
	// Profiles compare where the guests spent their time, one per row of
	// a workload profiled with perf.
	Profiles []Profile `json:"profiles,omitempty"`
	// Checks are the pass/fail checks, one per check, cell and round.
	Checks []Check `json:"checks,omitempty"`
	// CheckReferences are the checks' verdicts against the outcome the
	// experiment's reference saw (the spec's expect:), one per check
	// with an expectation.
	CheckReferences []CheckReference `json:"check_references,omitempty"`
	// Skipped are the cells that did not run, with why.
	Skipped []Skipped `json:"skipped,omitempty"`
	// Splats compares the kernel reports of the A and B guests.
	Splats SplatDiff `json:"splats"`
	// Warnings apply to the whole run (TCG in use, too few rounds).
	Warnings []string `json:"warnings,omitempty"`
	// Failures are what makes the run fail (a failed check, a new splat
	// in B, a regression past its threshold); empty when it passed.
	Failures []string `json:"failures,omitempty"`
}

// AutoRounds is how a run with --rounds auto chose its rounds: it added
// rounds until every row's change CI was within ±CITargetPct, or until
// MaxRounds.
type AutoRounds struct {
	// CITargetPct is the target half-width of a change's CI, in percent.
	CITargetPct float64 `json:"ci_target_pct"`
	// MaxRounds is the bound on the rounds.
	MaxRounds int `json:"max_rounds"`
	// Reached is set when every row reached the target.
	Reached bool `json:"reached"`
	// Wide are the rows that did not, with their CI's half-width
	// ("create (±14.2%)", "mkdir (no CI)").
	Wide []string `json:"wide,omitempty"`
}

// Side is one side of the comparison.
type Side struct {
	// Label is what the reader sees: a kernel's name, or "transport=dev".
	Label string `json:"label"`
	// Kernel is the side's kernel name when the axis is "kernel".
	Kernel string `json:"kernel,omitempty"`
	// Value is the parameter's value when the axis is a parameter.
	Value string `json:"value,omitempty"`
}

// Kernel is one kernel the run used.
type Kernel struct {
	// Ref is what the user asked for (debian:7.3, build:fix, a path).
	Ref string `json:"ref"`
	// Name, ID and Version identify what it resolved to.
	Name    string `json:"name"`
	ID      string `json:"id"`
	Version string `json:"version"`
	// Label is the short name the report's rows and lines give the
	// kernel when it is not Ref: "debian:7.3" for a kernel pinned to
	// "debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1", as klab rerun
	// pins them.
	Label string `json:"label,omitempty"`
}

// Row is one row of the A/B table: a workload's metric in one point of
// the parameter matrix, A's samples against B's.
type Row struct {
	// Name is the row's label: the workload and the other parameters
	// ("create jobs=2").
	Name string `json:"name"`
	// Workload is the workload's name; Params the row's parameter values
	// (the axis excluded).
	Workload string            `json:"workload"`
	Params   map[string]string `json:"params"`
	// Metric is what was measured ("ops_per_sec", "bytes_per_sec",
	// "p99_ns", ...), Unit its unit ("ops/s", "MiB/s", "ns").
	Metric string `json:"metric"`
	Unit   string `json:"unit"`
	// Direction is +1 when higher is better, -1 when lower is, 0 when
	// neither.
	Direction int `json:"direction"`
	// A and B summarise each side's samples, one per round.
	A stats.Summary `json:"a"`
	B stats.Summary `json:"b"`
	// Change compares B against A.
	Change stats.Change `json:"change"`
	// ThresholdPct, when not 0, is the largest regression the spec
	// accepts, in percent; Regression is set when a significant change
	// in the bad direction is larger.
	ThresholdPct float64 `json:"threshold_pct,omitempty"`
	Regression   bool    `json:"regression,omitempty"`
	// Reference is what the experiment's reference found for this row
	// (the spec's expect:) and the row's verdict against it; nil when
	// the spec states nothing for the row.
	Reference *Reference `json:"reference,omitempty"`
}

// Check is one pass/fail check in one cell and round.
type Check struct {
	// Name is the check's name; Cell the cell's label ("transport=uring
	// on debian:7.3"), Side "a" or "b", Round from 1.
	Name  string `json:"name"`
	Cell  string `json:"cell"`
	Side  string `json:"side"`
	Round int    `json:"round"`
	// Passed is true when the check held; Message says what happened.
	Passed  bool    `json:"passed"`
	Message string  `json:"message,omitempty"`
	TookSec float64 `json:"took_s"`
	// Output is the tail of what a failed check printed: its last lines
	// (at most 20 and 2 KiB), control characters removed.
	Output string `json:"output,omitempty"`
}

// Skipped is a cell that did not run.
type Skipped struct {
	// Cell is the cell's label; Reason says why ("needs fuse-io-uring").
	Cell   string `json:"cell"`
	Reason string `json:"reason"`
}

// SplatDiff sorts the kernel reports by title: new in B, gone in B, in
// both.
type SplatDiff struct {
	New  []SplatCount `json:"new"`
	Gone []SplatCount `json:"gone"`
	Both []SplatCount `json:"both"`
}

// SplatCount is one report title with how often each side printed it.
type SplatCount struct {
	Title string `json:"title"`
	Type  string `json:"type"`
	A     int    `json:"a"`
	B     int    `json:"b"`
}

// Profile compares the perf profiles of one row's A and B runs: the
// share of the busy samples (every CPU, the idle loop left out) spent in
// functions, inclusive of what they call.
type Profile struct {
	// Row names the row ("futimes threads=4").
	Row string `json:"row"`
	// Event is the sampling event; SamplesA and SamplesB count the
	// samples of each side, over all its rounds, idle ones included.
	Event    string `json:"event"`
	SamplesA int64  `json:"samples_a"`
	SamplesB int64  `json:"samples_b"`
	// IdleA and IdleB are each side's share (0..1) of samples in a CPU's
	// idle loop (profile.IsIdle); the function shares are of the others.
	IdleA float64 `json:"idle_a"`
	IdleB float64 `json:"idle_b"`
	// Functions are the functions the spec names (profile_functions).
	Functions []FuncShare `json:"functions,omitempty"`
	// Changed are the functions whose share changed most.
	Changed []FuncShare `json:"changed,omitempty"`
	// Files are the folded profiles the shares come from, relative to
	// the run directory.
	Files []string `json:"files,omitempty"`
	// IcicleA and IcicleB are SVG icicle charts of each side for the
	// HTML report, escaped already; not part of the JSON form.
	IcicleA string `json:"-"`
	IcicleB string `json:"-"`
}

// FuncShare is one function's share of the busy samples on each side.
type FuncShare struct {
	Func string `json:"func"`
	// A and B are inclusive shares (0..1) of the busy samples: samples
	// with the function anywhere on the stack. SelfA and SelfB count it
	// as the leaf only.
	A     float64 `json:"a"`
	B     float64 `json:"b"`
	SelfA float64 `json:"self_a"`
	SelfB float64 `json:"self_b"`
}
