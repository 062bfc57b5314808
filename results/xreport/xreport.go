// Package xreport holds a matrix's cross-kernel report: every measured
// row of every experiment with the kernels as columns, each cell compared
// against a baseline kernel, with the splats, skipped cells and failures
// per kernel, and the rows held against their experiment's reference
// with a verdict per kernel. Its JSON form (Schema "klab.matrix/v1") is a stable
// interface: fields are only ever added.
package xreport

import (
	"klab/results/reference"
	"klab/results/stats"
)

// Schema names the JSON schema of Matrix.
const Schema = "klab.matrix/v1"

// Matrix is one matrix run across kernels.
type Matrix struct {
	// Schema is always Schema.
	Schema string `json:"schema"`
	// Name is the matrix's name; File and SHA256 name its file as run.
	Name   string `json:"name"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	// Dir is the results tree.
	Dir string `json:"dir"`
	// Kernels are the columns, in the file's order; Baseline is the ref
	// of the column the others are compared against.
	Kernels  []Kernel `json:"kernels"`
	Baseline string   `json:"baseline"`
	// Accel is the accelerator the cells ran under ("kvm", "tcg", or
	// "mixed").
	Accel string `json:"accel"`
	// Cells counts the matrix's cells; Complete those with a result.
	Cells    int `json:"cells"`
	Complete int `json:"complete"`
	// Experiments are the experiments' labels (as in Row.Experiment) in
	// the file's order, measured or not. When it is empty the reports
	// take the experiments from Rows, Skipped and Failures.
	Experiments []string `json:"experiments,omitempty"`
	// Rows are the measured rows, experiments in the file's order.
	Rows []Row `json:"rows"`
	// Splats are the kernel reports per kernel.
	Splats []Splat `json:"splats"`
	// Suites are the cells of suite experiments (fstests), which have
	// test results instead of rows, in the order of Experiments and
	// Kernels.
	Suites []SuiteCell `json:"suites,omitempty"`
	// References are the rows and checks held against what their
	// experiment's reference found (the spec's expect:), with the
	// verdict on each kernel: those of experiments whose cells run an
	// A/B within their kernel (a parameter compared), in the order of
	// Experiments.
	References []Reference `json:"references,omitempty"`
	// ReferenceNotes name the experiments with expectations that no
	// cell can be held against, and why: their cells measure one kernel
	// each, and a reference verdict needs an A/B within the cell.
	ReferenceNotes []ReferenceNote `json:"reference_notes,omitempty"`
	// Skipped are cells that did not run, with why.
	Skipped []Problem `json:"skipped,omitempty"`
	// Failures make the matrix fail: failed checks, failed cells,
	// splats new relative to the baseline, regressions past a
	// threshold.
	Failures []Problem `json:"failures,omitempty"`
	// Warnings apply to the whole matrix (TCG, too few rounds).
	Warnings []string `json:"warnings,omitempty"`
	// Bisects are the klab bisect commands that would find the commit
	// behind a failure new on a kernel, where that kernel and the
	// baseline are builds of two commits of one git tree with the same
	// config and patches.
	Bisects []Bisect `json:"bisects,omitempty"`
}

// Bisect is the command that would chase one failure new on a kernel
// down to its commit.
type Bisect struct {
	// Experiment is the experiment's label; Kernel the kernel the
	// failure is new on.
	Experiment string `json:"experiment"`
	Kernel     string `json:"kernel"`
	// Failure says what is new: "new kernel splat: TITLE", "check NAME
	// fails", "row NAME worse by 23.4%", "test NAME fails".
	Failure string `json:"failure"`
	// Argv is the command line, "klab" first.
	Argv []string `json:"argv"`
}

// Kernel is one column.
type Kernel struct {
	// Ref is what the matrix file names (debian:7.3, build:fix).
	Ref string `json:"ref"`
	// Name and Version identify what it resolved to, when it did.
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

// Row is one measured row of one experiment across the kernels.
type Row struct {
	// Experiment is the experiment's label (its name, with its --set
	// overrides when it has any: "fuse-uring jobs=1").
	Experiment string `json:"experiment"`
	// Name is the row within the experiment ("create transport=uring").
	Name string `json:"name"`
	// Metric, Unit and Direction are as in the experiment report
	// (Direction +1 when higher is better, -1 when lower is).
	Metric    string `json:"metric"`
	Unit      string `json:"unit"`
	Direction int    `json:"direction"`
	// Cells are one per kernel, in Matrix.Kernels' order.
	Cells []Cell `json:"cells"`
}

// Cell is one row's value on one kernel.
type Cell struct {
	// Kernel is the column's ref.
	Kernel string `json:"kernel"`
	// Summary summarises the samples (N is 0 when there are none).
	Summary stats.Summary `json:"summary"`
	// Change compares the cell against the baseline kernel's; nil for
	// the baseline itself and when either has no samples.
	Change *stats.Change `json:"change,omitempty"`
	// Missing says why there is no value (skipped, failed, not run).
	Missing string `json:"missing,omitempty"`
	// Run is the cell's experiment run directory, relative to the
	// results tree, for its own full report.
	Run string `json:"run,omitempty"`
}

// Splat is one kernel report title seen on one kernel.
type Splat struct {
	Kernel string `json:"kernel"`
	Title  string `json:"title"`
	Type   string `json:"type"`
	Count  int    `json:"count"`
	// New is set when the baseline kernel did not print it.
	New bool `json:"new"`
}

// Problem is something about one cell.
type Problem struct {
	// Cell names the cell ("fuse-transport on debian:7.3").
	Cell       string `json:"cell"`
	Kernel     string `json:"kernel"`
	Experiment string `json:"experiment"`
	Message    string `json:"message"`
	// Reference is set on a failure that a strict contradiction of a
	// reference makes; JUnit reports it in the reference's testcase.
	Reference bool `json:"reference,omitempty"`
}

// Reference is one row or check of an experiment held against what its
// reference found, on every kernel: within each kernel's cell, B
// against A.
type Reference struct {
	// Experiment is the experiment's label, as in Row.Experiment.
	Experiment string `json:"experiment"`
	// Name is the row ("creates jobs=2"), or "check " and the check's
	// name.
	Name string `json:"name"`
	// Check is set for a check: it has an Outcome, and its cells no
	// change.
	Check bool `json:"check,omitempty"`
	// Metric, Unit and Direction are the row's, as in Row.
	Metric    string `json:"metric,omitempty"`
	Unit      string `json:"unit,omitempty"`
	Direction int    `json:"direction,omitempty"`
	// A and B label the sides each cell compares ("transport=dev",
	// "transport=uring").
	A string `json:"a,omitempty"`
	B string `json:"b,omitempty"`
	// Expected is what the reference found for a row: better, worse or
	// no-change (B against A); Ratio its B/A and Range its bounds, when
	// it gave them. Outcome is a check's: pass or fail.
	Expected string    `json:"expected,omitempty"`
	Ratio    float64   `json:"ratio,omitempty"`
	Range    []float64 `json:"range,omitempty"`
	Outcome  string    `json:"outcome,omitempty"`
	// Source says where the figure comes from; MeasuredOn the machine
	// the reference measured on, when stated; Needs what a run needs to
	// be comparable ("accel kvm"), "" for any.
	Source     string                `json:"source"`
	MeasuredOn *reference.MeasuredOn `json:"measured_on,omitempty"`
	Needs      string                `json:"needs,omitempty"`
	// Cells are one per kernel, in Matrix.Kernels' order.
	Cells []ReferenceCell `json:"cells"`
}

// ReferenceCell is a row's or check's verdict on one kernel.
type ReferenceCell struct {
	// Kernel is the column's ref.
	Kernel string `json:"kernel"`
	// Change compares B against A within the kernel's cell (its Ratio
	// is the measured B/A); nil for a check and when there is none.
	Change *stats.Change `json:"change,omitempty"`
	// Verdict is as in the cell's own report (reproduced, "same
	// direction, not significant", "opposite direction, not
	// significant", contradicted, "not comparable here", "not
	// measured"); "" when the kernel has none (see Missing). Reason
	// says why a row is not comparable or not measured, or counts a
	// check's rounds.
	Verdict reference.Verdict `json:"verdict,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	// Strict is set when a contradiction fails the matrix (the spec's
	// strict: true, or --strict-reference).
	Strict bool `json:"strict,omitempty"`
	// Missing says why there is no verdict (not run, failed).
	Missing string `json:"missing,omitempty"`
	// Run is the cell's experiment run directory, relative to the
	// results tree.
	Run string `json:"run,omitempty"`
}

// ReferenceNote says why an experiment's expectations get no verdict
// in the matrix.
type ReferenceNote struct {
	Experiment string `json:"experiment"`
	Message    string `json:"message"`
}

// SuiteCell is the summary of one suite experiment's cell: the tests'
// counts per side and the tests that decide it. A cell on the baseline
// kernel runs the suite there alone; a cell on another kernel runs it
// as an A/B of the baseline (A) and its kernel (B), so that a newly
// failing test is rerun on both before it counts as a regression.
type SuiteCell struct {
	// Experiment is the experiment's label; Kernel the cell's kernel.
	Experiment string `json:"experiment"`
	Kernel     string `json:"kernel"`
	// Suite names the suite ("fstests") and Config its configuration
	// ("fuse-klab-uring").
	Suite  string `json:"suite"`
	Config string `json:"config"`
	// Sides are the runs' counts: the cell's kernel alone, or A (the
	// baseline) then B (the cell's kernel).
	Sides []SuiteSide `json:"sides"`
	// Regressions are the tests that fail repeatedly on B and never on
	// A; Flaky the other new failures on B.
	Regressions []SuiteTest `json:"regressions,omitempty"`
	Flaky       []SuiteTest `json:"flaky,omitempty"`
	// Failing are, for a cell of one kernel, its tests that failed, hung
	// or crashed.
	Failing []SuiteTest `json:"failing,omitempty"`
	// Failed says that the cell fails the matrix: a regression, or with
	// one kernel a test that failed, hung or crashed.
	Failed bool `json:"failed"`
	// Run is the cell's run directory, relative to the results tree,
	// with the suite's own reports (one JUnit testcase per test).
	Run string `json:"run,omitempty"`
}

// SuiteSide is one kernel's test results in a suite cell.
type SuiteSide struct {
	// Label is "A" or "B" in an A/B, "" for a kernel alone; Kernel the
	// kernel's ref.
	Label  string `json:"label,omitempty"`
	Kernel string `json:"kernel"`
	// Tests counts the tests, the others them by status.
	Tests  int `json:"tests"`
	Pass   int `json:"pass"`
	Fail   int `json:"fail"`
	NotRun int `json:"notrun"`
	Hang   int `json:"hang"`
	Crash  int `json:"crash"`
}

// SuiteTest is one test named in a suite cell's summary.
type SuiteTest struct {
	// Name is the test ("generic/013"); Status its status on the cell's
	// kernel (B in an A/B).
	Name   string `json:"name"`
	Status string `json:"status"`
	// AFails of ARuns and BFails of BRuns are its failing runs on each
	// side of an A/B, reruns included; 0 for a kernel alone.
	AFails int `json:"a_fails,omitempty"`
	ARuns  int `json:"a_runs,omitempty"`
	BFails int `json:"b_fails,omitempty"`
	BRuns  int `json:"b_runs,omitempty"`
}
