package experiments

import (
	"testing"
)

// TestReportRowsMatchReport: the rows known before a run are the rows
// its report has, by name and metric, for every shipped experiment of
// workloads measured on one kernel (as a bisection measures them).
func TestReportRowsMatchReport(t *testing.T) {
	for _, name := range Shipped() {
		f, err := Find(name)
		if err != nil {
			t.Fatal(err)
		}
		if f.Spec.Suite != nil {
			continue
		}
		p, err := MakePlan(f, PlanOptions{Kernels: []string{"build:x"}, Compare: "kernel", Single: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s := &Saved{Manifest: &Manifest{Kernels: []ManifestKernel{{Ref: "build:x"}}, Status: StatusComplete}, Plan: p, Samples: &Samples{}, File: f}
		rows := ReportRows(f, p)
		rep := s.Report()
		if len(rows) != len(rep.Rows) || len(rows) == 0 {
			t.Fatalf("%s: %d rows known, the report has %d", name, len(rows), len(rep.Rows))
		}
		for i, r := range rows {
			if r.Name != rep.Rows[i].Name || r.Metric != rep.Rows[i].Metric || r.Unit != rep.Rows[i].Unit || r.Direction != rep.Rows[i].Direction {
				t.Errorf("%s: row %d is %+v, the report's %q %s %s %d", name, i, r, rep.Rows[i].Name, rep.Rows[i].Metric, rep.Rows[i].Unit, rep.Rows[i].Direction)
			}
		}
	}
}
