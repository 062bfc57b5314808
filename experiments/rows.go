package experiments

// ReportRow is one row of the table a run's report has, known before the
// run: the name the report gives it, the metric it compares, and which
// way is better.
type ReportRow struct {
	// Name is the row's name in the report: the workload's name, its
	// row's parameters ("create transport=dev"), and for a workload's
	// further metrics the metric ("futimes threads=1 cpu_per_op_ns").
	Name string `json:"name"`
	// Workload and Metric are the workload's name and the metric.
	Workload string `json:"workload"`
	Metric   string `json:"metric"`
	// Unit is the metric's unit; Direction +1 when higher is better, -1
	// when lower is.
	Unit      string `json:"unit"`
	Direction int    `json:"direction"`
}

// ReportRows are the rows of the report of a run of f with plan p, in
// the report's order (Saved.Report names them alike).
func ReportRows(f *File, p *Plan) []ReportRow {
	var out []ReportRow
	for ri, pr := range p.Rows {
		cell, err := f.Cell(p.Point(Unit{Row: ri, Side: SideA}))
		if err != nil {
			continue
		}
		for _, w := range cell.Workloads {
			for mi, metric := range metricNames(&w) {
				name := w.Name
				if pr.Label != "-" {
					name += " " + pr.Label
				}
				if mi > 0 {
					name += " " + metric
				}
				unit, dir := metricInfo(metric)
				out = append(out, ReportRow{Name: name, Workload: w.Name, Metric: metric, Unit: unit, Direction: dir})
			}
		}
	}
	return out
}
