package experiments

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"klab/internal/fileio"
	"klab/results/report"
	"klab/results/splat"
	"klab/results/stats"
)

// Saved is an experiment run read back from its directory.
type Saved struct {
	Dir      string
	Manifest *Manifest
	Plan     *Plan
	Samples  *Samples
	File     *File
	// StrictReference makes every row or check that contradicts its
	// reference a failure of the report, as the spec's strict: true does
	// for one (--strict-reference).
	StrictReference bool
}

// Open reads the experiment run in dir.
func Open(dir string) (*Saved, error) {
	s := &Saved{Dir: dir, Manifest: &Manifest{}, Plan: &Plan{}, Samples: &Samples{}}
	if err := fileio.ReadJSON(filepath.Join(dir, ManifestFileName), s.Manifest); err != nil {
		return nil, err
	}
	if s.Manifest.Schema < 1 || s.Manifest.Schema > ManifestSchema {
		return nil, fmt.Errorf("%s: schema %d is not supported, want 1..%d", filepath.Join(dir, ManifestFileName), s.Manifest.Schema, ManifestSchema)
	}
	// A suite run has its suite's results (SuiteRuns), no plan or samples.
	if s.Manifest.Suite == nil {
		for _, r := range []struct {
			name string
			v    any
		}{{PlanFileName, s.Plan}, {SamplesFileName, s.Samples}} {
			if err := fileio.ReadJSON(filepath.Join(dir, r.name), r.v); err != nil {
				return nil, err
			}
		}
	}
	f, err := LoadFile(filepath.Join(dir, SpecFileName))
	if err != nil {
		return nil, err
	}
	if len(s.Manifest.Sets) > 0 {
		if f, err = f.WithSets(s.Manifest.Sets); err != nil {
			return nil, err
		}
	}
	s.File = f
	if s.IsSuite() {
		return s, nil
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// check validates what the report and the commands index into, so that
// a damaged or edited run directory gives an error, not a panic.
func (s *Saved) check() error {
	p, m := s.Plan, s.Manifest
	var errs []error
	bad := func(file, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", filepath.Join(s.Dir, file), fmt.Sprintf(format, args...)))
	}
	if len(p.Rows) == 0 {
		bad(PlanFileName, "no rows")
	}
	if p.Axis == "kernel" && !p.Single && len(p.Kernels) != 2 {
		bad(PlanFileName, "the kernel axis with %d kernels, want 2", len(p.Kernels))
	}
	if p.Single && len(p.Kernels) != 1 {
		bad(PlanFileName, "a single-kernel plan with %d kernels, want 1", len(p.Kernels))
	}
	if p.Axis != "kernel" && len(p.Kernels) != 1 {
		bad(PlanFileName, "a parameter axis with %d kernels, want 1", len(p.Kernels))
	}
	if len(m.Kernels) != len(p.Kernels) {
		bad(ManifestFileName, "%d kernels, but the plan has %d", len(m.Kernels), len(p.Kernels))
	}
	for _, g := range m.Guests {
		if g.Kernel < 0 || g.Kernel >= len(m.Kernels) {
			bad(ManifestFileName, "a guest names kernel %d of %d", g.Kernel, len(m.Kernels))
		}
	}
	for _, smp := range s.Samples.Samples {
		if smp.Row < 0 || smp.Row >= len(p.Rows) || (smp.Side != SideA && smp.Side != SideB) {
			bad(SamplesFileName, "a sample names row %d side %q, want a row of %d and side a or b", smp.Row, smp.Side, len(p.Rows))
			break
		}
	}
	for _, c := range s.Samples.Checks {
		if c.Row < 0 || c.Row >= len(p.Rows) || (c.Side != SideA && c.Side != SideB) {
			bad(SamplesFileName, "a check names row %d side %q, want a row of %d and side a or b", c.Row, c.Side, len(p.Rows))
			break
		}
	}
	return errors.Join(errs...)
}

// IsRun reports whether dir holds an experiment run.
func IsRun(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ManifestFileName))
	return err == nil
}

// failedRows are the report rows whose samples failed with the same first
// error: one failure line says it for all of them.
type failedRows struct {
	at      int      // the line's index in the report's failures
	first   string   // the first failure: side, round and error
	rows    []string // the rows' names, in report order
	samples int      // the failed samples of all of them
}

// Report makes the run's report.
func (s *Saved) Report() *report.Report {
	m, p, spec := s.Manifest, s.Plan, s.File.Spec
	r := &report.Report{
		Schema: report.Schema, Experiment: m.Experiment, Description: spec.Description, Reference: strings.TrimRight(spec.Reference, "\n"),
		SpecFile: m.SpecFile, SpecSHA256: m.SpecSHA256, RunID: m.RunID, RunDir: s.Dir,
		Start: m.Start.Format(time.RFC3339), Axis: p.Axis,
		A: report.Side{Label: p.Label(SideA)}, B: report.Side{Label: p.Label(SideB)},
		Accel: m.Accel, QEMU: m.QEMU.Version, CPUs: m.CPUs, MemMB: m.MemMB,
		Rounds: p.Rounds, Order: p.Order, Reuse: p.Reuse,
		Rows: []report.Row{}, Kernels: []report.Kernel{},
	}
	if p.Order == "random" {
		r.Order = fmt.Sprintf("random, seed %d", p.Seed)
	}
	if !m.End.IsZero() {
		r.End = m.End.Format(time.RFC3339)
		r.WallSec = m.End.Sub(m.Start).Seconds()
	}
	r.Host = strings.TrimSpace(m.Host.KernelRelease + ", " + m.Host.CPUModel)
	switch {
	case p.Single:
		r.A.Kernel = p.Kernels[0]
	case p.Axis == "kernel":
		r.A.Kernel, r.B.Kernel = p.Kernels[0], p.Kernels[1]
	default:
		r.A.Value, r.B.Value = p.AValue, p.BValue
	}
	for i, k := range m.Kernels {
		label := k.Ref
		if i < len(p.Kernels) && p.Kernels[i] == k.Ref {
			label = p.KernelLabel(i)
		}
		rk := report.Kernel{Ref: k.Ref, Name: k.Kernel.Name, ID: k.Kernel.ID, Version: k.Kernel.Version}
		if label != k.Ref {
			rk.Label = label
		}
		r.Kernels = append(r.Kernels, rk)
		if k.Skipped != "" {
			r.Skipped = append(r.Skipped, report.Skipped{Cell: "every cell on " + label, Reason: k.Skipped})
		}
	}
	// Rows: each plan row times each workload. Rows whose samples failed
	// with the same first error (a transport the kernel lacks fails every
	// row alike) share one failure line, where the first of them is.
	sampleFailures := map[string]*failedRows{}
	for ri, pr := range p.Rows {
		cell, err := s.File.Cell(p.Point(Unit{Row: ri, Side: SideA}))
		if err != nil {
			continue
		}
		for _, w := range cell.Workloads {
			names := metricNames(&w)
			for mi, metric := range names {
				unit, dir := metricInfo(metric)
				var a, b []float64
				var failed []string
				for _, smp := range s.Samples.Samples {
					if smp.Row != ri || smp.Workload != w.Name {
						continue
					}
					if smp.Error != "" {
						failed = append(failed, fmt.Sprintf("%s round %d: %s", sideName(p, smp.Side), smp.Round, smp.Error))
						continue
					}
					v := smp.Value
					if smp.Metrics != nil || metric == ServerCPUMetric {
						var ok bool
						if v, ok = sampleMetric(metric, smp.Metrics, smp.FUSE); !ok {
							continue
						}
					}
					if smp.Side == SideA {
						a = append(a, v)
					} else {
						b = append(b, v)
					}
				}
				name := w.Name
				if pr.Label != "-" {
					name += " " + pr.Label
				}
				if mi == 0 && w.MinServed > 0 {
					for _, smp := range s.Samples.Samples {
						if smp.Row == ri && smp.Workload == w.Name && smp.Error == "" && (smp.FUSE == nil || smp.FUSE.ServerReadBytes < 0) {
							r.Warnings = append(r.Warnings, fmt.Sprintf("%s: min_served not checked on %s: the kernel has no /proc/PID/io (CONFIG_TASK_IO_ACCOUNTING)",
								name, sideName(p, smp.Side)))
							break
						}
					}
				}
				if mi > 0 {
					name += " " + metric
					failed = nil // reported on the first row
				}
				row := report.Row{Name: name, Workload: w.Name, Params: pr.Params, Metric: metric, Unit: unit, Direction: dir,
					A: stats.Summarize(a), B: stats.Summarize(b), ThresholdPct: w.ThresholdPct}
				row.Change = stats.Compare(row.A, row.B, dir)
				if mi == 0 && w.ThresholdPct > 0 && row.Change.Verdict == stats.Worse && absf(row.Change.Pct) > w.ThresholdPct {
					row.Regression = true
					r.Failures = append(r.Failures, fmt.Sprintf("%s: %s %+.1f%% (threshold %.1f%%)", name, metric, row.Change.Pct, w.ThresholdPct))
				}
				if len(failed) > 0 {
					g := sampleFailures[failed[0]]
					if g == nil {
						g = &failedRows{at: len(r.Failures), first: failed[0]}
						sampleFailures[failed[0]] = g
						r.Failures = append(r.Failures, "")
					}
					g.rows, g.samples = append(g.rows, name), g.samples+len(failed)
				}
				r.Rows = append(r.Rows, row)
			}
		}
	}
	for _, g := range sampleFailures {
		r.Failures[g.at] = fmt.Sprintf("%s: %d sample(s) failed: %s", strings.Join(g.rows, ", "), g.samples, g.first)
	}
	r.AutoRounds = reportAutoRounds(m.AutoRounds, r.Rows)
	r.Profiles, r.Warnings = s.profiles(r.Warnings)
	for _, c := range s.Samples.Checks {
		// The cell names its kernel: "jobs=1 transport=uring on debian:7.3".
		cellName := sideName(p, c.Side)
		if p.Axis != "kernel" {
			cellName += " on " + p.KernelLabel(0)
		}
		if p.Rows[c.Row].Label != "-" {
			cellName = p.Rows[c.Row].Label + " " + cellName
			if p.Axis == "kernel" {
				cellName = p.Rows[c.Row].Label + " on " + sideName(p, c.Side)
			}
		}
		r.Checks = append(r.Checks, report.Check{Name: c.Check, Cell: cellName, Side: c.Side, Round: c.Round,
			Passed: c.Passed, Message: c.Message, TookSec: c.TookSec, Output: c.Output})
		if !c.Passed {
			r.Failures = append(r.Failures, fmt.Sprintf("check %s failed on %s round %d: %s", c.Check, cellName, c.Round, c.Message))
		}
	}
	// Splats: per side when each guest ran one side.
	var sa, sb []splat.Report
	for _, g := range m.Guests {
		if p.Axis == "kernel" {
			if g.Kernel == 0 {
				sa = append(sa, g.Splats...)
			} else {
				sb = append(sb, g.Splats...)
			}
		} else {
			sa, sb = append(sa, g.Splats...), append(sb, g.Splats...)
		}
	}
	d := splat.Compare(sa, sb)
	conv := func(es []splat.DiffEntry) []report.SplatCount {
		out := []report.SplatCount{}
		for _, e := range es {
			out = append(out, report.SplatCount{Title: e.Title, Type: string(e.Type), A: e.CountA, B: e.CountB})
		}
		return out
	}
	r.Splats = report.SplatDiff{New: conv(d.New), Gone: conv(d.Gone), Both: conv(d.Both)}
	for _, e := range d.New {
		r.Failures = append(r.Failures, fmt.Sprintf("new kernel splat in %s: %s", p.Label(SideB), e.Title))
	}
	if p.Axis != "kernel" && len(sa) > 0 {
		r.Warnings = append(r.Warnings, "every guest ran both sides, so kernel splats cannot be told apart by side: they are listed as seen by both")
	}
	s.references(r)
	if p.Reuse == "guest" {
		r.Warnings = append(r.Warnings, "reuse: guest: every round of a kernel ran in one boot, so rounds are not independent boots")
	}
	if p.Rounds < 4 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d rounds: the Mann-Whitney test needs at least 4 per side to reach p < %.2f", p.Rounds, stats.Alpha))
	}
	if m.Status != StatusComplete {
		msg := "the run did not complete"
		if m.Message != "" {
			msg += ": " + m.Message
		}
		r.Warnings = append(r.Warnings, msg)
	}
	for _, g := range m.Guests {
		if len(g.EmulatorFaults) > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("guest %s: %d boot(s) died of multi-threaded TCG's false \"Oops: int3\" and were retried (an emulator fault, not a kernel result): %s",
				g.Dir, len(g.EmulatorFaults), strings.Join(g.EmulatorFaults, ", ")))
		}
		if g.Outcome.Status != "" && g.Outcome.Status != "ok" {
			r.Failures = append(r.Failures, fmt.Sprintf("guest %s: %s: %s", g.Dir, g.Outcome.Status, g.Outcome.Message))
		}
	}
	r.Failures = dedup(r.Failures)
	return r
}

// sideName is a side's label in the report (Plan.Label).
func sideName(p *Plan, side string) string {
	return p.Label(side)
}

func absf(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func dedup(l []string) []string {
	var out []string
	for _, s := range l {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// WriteReports writes report.json, report.txt, report.md, report.xml
// (JUnit) and report.html into the run directory.
func (s *Saved) WriteReports(r *report.Report) error {
	var errs []error
	for _, f := range []struct{ name, format string }{
		{ReportFileName, "json"}, {"report.txt", "text"}, {"report.md", "md"}, {"report.xml", "junit"}, {"report.html", "html"},
	} {
		var b strings.Builder
		if err := report.Write(&b, r, f.format); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := fileio.WriteAtomic(filepath.Join(s.Dir, f.name), []byte(b.String()), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
