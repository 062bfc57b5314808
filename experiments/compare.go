package experiments

import (
	"fmt"

	"klab/results/report"
	"klab/results/stats"
)

// CompareRuns compares two runs of one experiment: each row and side of
// run a against the same row and side of run b.
func CompareRuns(a, b *Saved) (*report.Report, error) {
	if a.Manifest.Experiment != b.Manifest.Experiment {
		return nil, fmt.Errorf("%s is experiment %s but %s is %s: compare runs of the same experiment",
			a.Manifest.RunID, a.Manifest.Experiment, b.Manifest.RunID, b.Manifest.Experiment)
	}
	ra, rb := a.Report(), b.Report()
	r := &report.Report{
		Schema: report.Schema, Experiment: ra.Experiment, Description: "run " + a.Manifest.RunID + " against run " + b.Manifest.RunID,
		Reference: ra.Reference, SpecFile: ra.SpecFile, SpecSHA256: ra.SpecSHA256, RunID: b.Manifest.RunID, RunDir: b.Dir,
		Start: ra.Start, End: rb.End, Axis: "run",
		A: report.Side{Label: a.Manifest.RunID}, B: report.Side{Label: b.Manifest.RunID},
		Kernels: append(append([]report.Kernel{}, ra.Kernels...), rb.Kernels...),
		Accel:   rb.Accel, Host: rb.Host, QEMU: rb.QEMU, CPUs: rb.CPUs, MemMB: rb.MemMB, Rounds: rb.Rounds, Order: rb.Order, Reuse: rb.Reuse,
		Rows: []report.Row{},
	}
	if ra.SpecSHA256 != rb.SpecSHA256 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the two runs' specs differ (sha256 %.12s and %.12s)", ra.SpecSHA256, rb.SpecSHA256))
	}
	if ra.Accel != rb.Accel {
		r.Warnings = append(r.Warnings, fmt.Sprintf("accelerators differ: %s and %s", ra.Accel, rb.Accel))
	}
	for _, x := range ra.Rows {
		for _, y := range rb.Rows {
			if x.Name != y.Name || x.Metric != y.Metric {
				continue
			}
			for _, side := range []struct {
				label string
				a, b  stats.Summary
			}{{ra.A.Label, x.A, y.A}, {ra.B.Label, x.B, y.B}} {
				row := report.Row{Name: x.Name + " [" + side.label + "]", Workload: x.Workload, Params: x.Params, Metric: x.Metric,
					Unit: x.Unit, Direction: x.Direction, A: side.a, B: side.b}
				row.Change = stats.Compare(side.a, side.b, x.Direction)
				r.Rows = append(r.Rows, row)
			}
		}
	}
	if len(r.Rows) == 0 {
		return nil, fmt.Errorf("runs %s and %s have no row in common", a.Manifest.RunID, b.Manifest.RunID)
	}
	if !b.Manifest.End.IsZero() {
		r.WallSec = b.Manifest.End.Sub(a.Manifest.Start).Seconds()
	}
	return r, nil
}
