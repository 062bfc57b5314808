package matrix

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"klab/experiments"
	"klab/internal/textsafe"
	"klab/results/report"
	"klab/results/stats"
	"klab/results/suite"
	"klab/results/xreport"
)

// Report makes the cross-kernel report of the tree: every experiment's
// rows with the kernels as columns, each compared against the baseline.
// An experiment whose cells run an A/B within their kernel (a parameter
// compared) has its rows and checks held against their reference (the
// spec's expect:) on every kernel, as each cell's own report holds them;
// one whose cells measure one kernel each gets a note instead, as a
// reference verdict needs an A/B within the cell. A cell's run that
// cannot be read becomes a failure of that cell.
func (t *Tree) Report() *xreport.Matrix {
	m := t.Manifest
	x := &xreport.Matrix{Schema: xreport.Schema, Name: m.Name, File: m.File, SHA256: m.SHA256, Dir: t.Dir,
		Baseline: m.Baseline, Cells: len(m.Cells), Experiments: m.Experiments, Rows: []xreport.Row{}, Splats: []xreport.Splat{}}
	cells := map[[2]string]Cell{}
	for _, c := range m.Cells {
		cells[[2]string{c.Experiment, c.Kernel}] = c
	}
	kernels := map[string]*xreport.Kernel{}
	for _, ref := range m.Kernels {
		x.Kernels = append(x.Kernels, xreport.Kernel{Ref: ref})
	}
	for i := range x.Kernels {
		kernels[x.Kernels[i].Ref] = &x.Kernels[i]
	}
	accels := map[string]bool{}
	bz := newBisects()
	splats := map[string]map[string]*xreport.Splat{} // kernel -> title
	problem := func(c Cell, msg string) xreport.Problem {
		return xreport.Problem{Cell: c.Name(), Kernel: c.Kernel, Experiment: c.Experiment, Message: textsafe.Clean(msg)}
	}
	for _, exp := range m.Experiments {
		type rowAcc struct {
			row   xreport.Row
			cells map[string]xreport.Cell
		}
		var order []string
		rows := map[string]*rowAcc{}
		refs := &refAcc{cells: map[string]map[string]xreport.ReferenceCell{}, refs: map[string]*xreport.Reference{}}
		oneSided := false
		for _, ref := range m.Kernels {
			c, ok := cells[[2]string{exp, ref}]
			if !ok {
				continue // another shard's cell
			}
			r := t.Results[c.ID]
			switch {
			case r == nil:
				x.Skipped = append(x.Skipped, problem(c, "not run"))
				continue
			case r.Status == StatusIncomplete:
				x.Skipped = append(x.Skipped, problem(c, "incomplete: "+r.Message))
				continue
			case r.Status == StatusError:
				x.Failures = append(x.Failures, problem(c, r.Message))
				continue
			}
			saved, err := experiments.Open(filepath.Join(t.Dir, r.Run))
			if err != nil {
				x.Failures = append(x.Failures, problem(c, "its run cannot be read: "+err.Error()))
				continue
			}
			x.Complete++
			if saved.IsSuite() {
				sc, err := suiteCell(saved, c, r.Run)
				if err != nil {
					x.Failures = append(x.Failures, problem(c, "its suite results cannot be read: "+err.Error()))
					continue
				}
				accels[saved.Manifest.Accel] = true
				if k := kernels[ref]; k != nil && k.Version == "" {
					if mk := saved.Manifest.Kernels; len(mk) > 0 {
						k.Name, k.Version = mk[len(mk)-1].Kernel.Name, mk[len(mk)-1].Kernel.Version
					}
				}
				x.Suites = append(x.Suites, sc)
				bz.addSuite(exp, ref, saved, sc)
				if sc.Failed {
					x.Failures = append(x.Failures, problem(c, suiteFailure(sc, m.Baseline)))
				}
				continue
			}
			saved.StrictReference = t.StrictReference
			rep := saved.Report()
			bz.add(exp, ref, saved, rep)
			accels[rep.Accel] = true
			if k := kernels[ref]; k != nil && len(rep.Kernels) > 0 && k.Version == "" {
				k.Name, k.Version = rep.Kernels[0].Name, rep.Kernels[0].Version
			}
			refFailures := map[string]bool{}
			for _, f := range experiments.ReferenceFailures(rep) {
				refFailures[f] = true
			}
			for _, f := range rep.Failures {
				p := problem(c, f)
				p.Reference = refFailures[f]
				x.Failures = append(x.Failures, p)
			}
			if saved.Plan.Single {
				oneSided = oneSided || saved.HasExpectations()
			} else {
				refs.add(exp, ref, r.Run, rep)
			}
			for _, s := range rep.Skipped {
				x.Skipped = append(x.Skipped, problem(c, s.Cell+": "+s.Reason))
			}
			for _, g := range saved.Manifest.Guests {
				for _, s := range g.Splats {
					if splats[ref] == nil {
						splats[ref] = map[string]*xreport.Splat{}
					}
					title := textsafe.Clean(s.Title)
					sp := splats[ref][title]
					if sp == nil {
						sp = &xreport.Splat{Kernel: ref, Title: title, Type: string(s.Type)}
						splats[ref][title] = sp
					}
					sp.Count++
				}
			}
			// One row per side: a parameter axis gives two rows per row
			// of the experiment, a single-kernel run one.
			for _, row := range rep.Rows {
				sides := []struct {
					label string
					sum   stats.Summary
				}{{"", row.A}}
				if !saved.Plan.Single {
					sides = []struct {
						label string
						sum   stats.Summary
					}{{" [" + rep.A.Label + "]", row.A}, {" [" + rep.B.Label + "]", row.B}}
				}
				for _, sd := range sides {
					key := withoutSets(row.Name, exp) + sd.label
					acc := rows[key]
					if acc == nil {
						acc = &rowAcc{row: xreport.Row{Experiment: exp, Name: textsafe.Clean(key), Metric: row.Metric, Unit: row.Unit, Direction: row.Direction},
							cells: map[string]xreport.Cell{}}
						rows[key] = acc
						order = append(order, key)
					}
					acc.cells[ref] = xreport.Cell{Kernel: ref, Summary: sd.sum, Run: r.Run}
				}
			}
		}
		for _, key := range order {
			acc := rows[key]
			base, hasBase := acc.cells[m.Baseline]
			for _, ref := range m.Kernels {
				c, ok := acc.cells[ref]
				if !ok {
					c = xreport.Cell{Kernel: ref, Summary: stats.Summarize(nil), Missing: missingWhy(t, cells, exp, ref, "no samples")}
				} else if ref != m.Baseline && hasBase && base.Summary.N > 0 && c.Summary.N > 0 {
					ch := stats.Compare(base.Summary, c.Summary, acc.row.Direction)
					c.Change = &ch
				}
				acc.row.Cells = append(acc.row.Cells, c)
			}
			x.Rows = append(x.Rows, acc.row)
		}
		for _, key := range refs.order {
			xr := *refs.refs[key]
			for _, ref := range m.Kernels {
				c, ok := refs.cells[key][ref]
				if !ok {
					c = xreport.ReferenceCell{Kernel: ref, Missing: missingWhy(t, cells, exp, ref, "not in the cell's report")}
				}
				xr.Cells = append(xr.Cells, c)
			}
			x.References = append(x.References, xr)
		}
		if oneSided {
			x.ReferenceNotes = append(x.ReferenceNotes, xreport.ReferenceNote{Experiment: exp, Message: oneSidedNote})
		}
	}
	// Splats: per kernel, new where the baseline did not print them.
	for _, ref := range m.Kernels {
		var titles []string
		for title := range splats[ref] {
			titles = append(titles, title)
		}
		sort.Strings(titles)
		for _, title := range titles {
			sp := *splats[ref][title]
			if ref != m.Baseline && splats[m.Baseline][title] == nil {
				sp.New = true
				x.Failures = append(x.Failures, xreport.Problem{Cell: "kernel " + ref, Kernel: ref, Message: "new kernel splat (not on " + m.Baseline + "): " + title})
			}
			x.Splats = append(x.Splats, sp)
		}
	}
	x.Bisects = bz.commands(m)
	var acc []string
	for a := range accels {
		acc = append(acc, a)
	}
	sort.Strings(acc)
	switch len(acc) {
	case 0:
	case 1:
		x.Accel = acc[0]
	default:
		x.Accel = "mixed"
	}
	if slices.Contains(acc, "tcg") {
		x.Warnings = append(x.Warnings, "TCG in use: absolute numbers are emulator numbers; compare kernels within a row")
	}
	if m.Shard != "" {
		x.Warnings = append(x.Warnings, fmt.Sprintf("shard %s of the matrix: %d of its %d cells; merge the shards for the whole report", m.Shard, len(m.Cells), m.Total))
	}
	if x.Complete < x.Cells {
		x.Warnings = append(x.Warnings, fmt.Sprintf("%d of %d cells have no result", x.Cells-x.Complete, x.Cells))
	}
	return x
}

// oneSidedNote says why an experiment that compares kernels gets no
// reference verdict in a matrix.
const oneSidedNote = "no verdict: its expectations are about an A/B of two kernels, and each of its cells measures one kernel; " +
	"a reference verdict needs an A/B within the cell (klab run with both kernels gives one)"

// refAcc collects an experiment's rows and checks held against their
// reference, cell by cell.
type refAcc struct {
	// order are the keys in the order first seen; refs what each
	// reference found; cells each one's verdicts by kernel.
	order []string
	refs  map[string]*xreport.Reference
	cells map[string]map[string]xreport.ReferenceCell
}

// add takes the rows' and checks' verdicts of rep, the report of
// experiment exp's cell on kernel ref (its run directory run).
func (a *refAcc) add(exp, ref, run string, rep *report.Report) {
	put := func(key string, r xreport.Reference, c xreport.ReferenceCell) {
		if a.refs[key] == nil {
			a.refs[key] = &r
			a.cells[key] = map[string]xreport.ReferenceCell{}
			a.order = append(a.order, key)
		}
		c.Kernel, c.Run = ref, run
		a.cells[key][ref] = c
	}
	sideA, sideB := textsafe.Clean(rep.A.Label), textsafe.Clean(rep.B.Label)
	for _, row := range rep.Rows {
		rr := row.Reference
		if rr == nil {
			continue
		}
		name := textsafe.Clean(withoutSets(row.Name, exp))
		xr := xreport.Reference{Experiment: exp, Name: name, Metric: row.Metric, Unit: row.Unit, Direction: row.Direction,
			A: sideA, B: sideB, Expected: rr.Direction, Ratio: rr.Ratio, Range: rr.Range,
			Source: textsafe.Clean(rr.Source), MeasuredOn: rr.MeasuredOn, Needs: rr.Needs}
		c := xreport.ReferenceCell{Verdict: rr.Verdict, Reason: textsafe.Clean(rr.Reason), Strict: rr.Strict}
		if row.A.N > 0 && row.B.N > 0 {
			ch := row.Change
			c.Change = &ch
		}
		put("row\x00"+name+"\x00"+row.Metric, xr, c)
	}
	for _, cr := range rep.CheckReferences {
		name := "check " + textsafe.Clean(cr.Check)
		xr := xreport.Reference{Experiment: exp, Name: name, Check: true, A: sideA, B: sideB,
			Outcome: cr.Outcome, Source: textsafe.Clean(cr.Source), Needs: cr.Needs}
		put("check\x00"+name, xr, xreport.ReferenceCell{Verdict: cr.Verdict, Reason: textsafe.Clean(cr.Reason), Strict: cr.Strict})
	}
}

// missingWhy says why a row has no value on a kernel; complete is what
// it says when the kernel's cell is complete.
func missingWhy(t *Tree, cells map[[2]string]Cell, exp, ref, complete string) string {
	c, ok := cells[[2]string{exp, ref}]
	if !ok {
		return "in another shard"
	}
	r := t.Results[c.ID]
	switch {
	case r == nil:
		return "not run"
	case r.Status != StatusComplete:
		return r.Status
	}
	return complete
}

// withoutSets drops from a row's name the parameters the experiment's
// label fixes already ("futimes threads=1" in "fuse-interrupt threads=1"
// is "futimes").
func withoutSets(name, label string) string {
	fixed := map[string]bool{}
	for _, f := range strings.Fields(label)[1:] {
		fixed[f] = true
	}
	var out []string
	for _, f := range strings.Fields(name) {
		if !fixed[f] {
			out = append(out, f)
		}
	}
	return strings.Join(out, " ")
}

// suiteCell summarises a suite cell's run: the counts per side, and the
// regressions and flaky tests of an A/B or the failing tests of one
// kernel, from the results the suite saved.
func suiteCell(saved *experiments.Saved, c Cell, run string) (xreport.SuiteCell, error) {
	sc := xreport.SuiteCell{Experiment: c.Experiment, Kernel: c.Kernel, Run: run, Sides: []xreport.SuiteSide{}}
	if su := saved.Manifest.Suite; su != nil {
		sc.Suite, sc.Config = textsafe.Clean(su.Name), textsafe.Clean(su.Config)
	}
	runs, err := saved.SuiteRuns()
	if err != nil {
		return sc, err
	}
	for i, r := range runs {
		n := r.Counts()
		side := xreport.SuiteSide{Label: r.Label, Tests: n.Tests, Pass: n.Pass, Fail: n.Fail, NotRun: n.NotRun, Hang: n.Hang, Crash: n.Crash}
		if i < len(saved.Manifest.Kernels) {
			side.Kernel = saved.Manifest.Kernels[i].Ref
		}
		sc.Sides = append(sc.Sides, side)
	}
	if len(runs) == 2 {
		v := suite.Compare(runs[0], runs[1])
		for _, l := range []struct {
			changes []suite.Change
			out     *[]xreport.SuiteTest
		}{{v.Regressions(), &sc.Regressions}, {v.Flaky(), &sc.Flaky}} {
			for _, ch := range l.changes {
				*l.out = append(*l.out, xreport.SuiteTest{Name: ch.Test, Status: ch.B, AFails: ch.AFails, ARuns: ch.ARuns, BFails: ch.BFails, BRuns: ch.BRuns})
			}
		}
		sc.Failed = len(sc.Regressions) > 0
		return sc, nil
	}
	for _, t := range runs[0].Tests {
		if suite.Failed(t.Status) {
			sc.Failing = append(sc.Failing, xreport.SuiteTest{Name: t.Name, Status: t.Status})
		}
	}
	sc.Failed = len(sc.Failing) > 0
	return sc, nil
}

// suiteFailure says why a suite cell fails the matrix.
func suiteFailure(sc xreport.SuiteCell, baseline string) string {
	var names []string
	if len(sc.Sides) == 2 {
		for _, t := range sc.Regressions {
			names = append(names, fmt.Sprintf("%s (B fails %d/%d, A %d/%d)", t.Name, t.BFails, t.BRuns, t.AFails, t.ARuns))
		}
		return fmt.Sprintf("%s %s regressed against the baseline %s: %s", sc.Suite, sc.Config, baseline, strings.Join(names, ", "))
	}
	for _, t := range sc.Failing {
		names = append(names, t.Name+" ("+t.Status+")")
	}
	return fmt.Sprintf("%s %s: %d test(s) failed, hung or crashed: %s", sc.Suite, sc.Config, len(names), strings.Join(names, ", "))
}
