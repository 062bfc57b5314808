package matrix

import (
	"fmt"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"

	"klab/experiments"
	"klab/internal/textsafe"
	"klab/results"
	"klab/results/report"
	"klab/results/stats"
	"klab/results/xreport"
)

// bisects collects, cell by cell, what the klab bisect commands of a
// report need: each kernel as its cells' runs recorded it (how it was
// built), and what failed in each cell.
type bisects struct {
	kernels map[string]results.Kernel
	cells   map[[2]string]*bisectCell
}

// bisectCell is what failed in one cell, and how to run its experiment
// again.
type bisectCell struct {
	// spec is the experiment's file as its run names it; sets its --set
	// overrides; src the fstests source of a suite.
	spec string
	sets map[string]string
	src  string
	// splats are the splat titles its guests printed; checks the checks
	// that failed; tests the tests that failed (one kernel) or newly
	// fail against the baseline (an A/B).
	splats []string
	checks []string
	tests  []string
	// rows are the rows of a run measuring the one kernel.
	rows []bisectRow
}

type bisectRow struct {
	name      string
	sum       stats.Summary
	direction int
	threshold float64
}

func newBisects() *bisects {
	return &bisects{kernels: map[string]results.Kernel{}, cells: map[[2]string]*bisectCell{}}
}

// cell is experiment exp's cell on kernel ref, recorded from its run.
func (b *bisects) cell(exp, ref string, saved *experiments.Saved) *bisectCell {
	for _, k := range saved.Manifest.Kernels {
		if _, ok := b.kernels[k.Ref]; !ok {
			b.kernels[k.Ref] = k.Kernel
		}
	}
	c := &bisectCell{spec: saved.Manifest.SpecFile, sets: saved.Manifest.Sets}
	b.cells[[2]string{exp, ref}] = c
	return c
}

// add records the cell of an experiment of workloads, from its report.
func (b *bisects) add(exp, ref string, saved *experiments.Saved, rep *report.Report) {
	c := b.cell(exp, ref, saved)
	for _, g := range saved.Manifest.Guests {
		for _, s := range g.Splats {
			if t := textsafe.OneLine(s.Title); !slices.Contains(c.splats, t) {
				c.splats = append(c.splats, t)
			}
		}
	}
	for _, ch := range rep.Checks {
		if !ch.Passed && !slices.Contains(c.checks, ch.Name) {
			c.checks = append(c.checks, ch.Name)
		}
	}
	if saved.Plan.Single {
		for _, r := range rep.Rows {
			c.rows = append(c.rows, bisectRow{name: r.Name, sum: r.A, direction: r.Direction, threshold: r.ThresholdPct})
		}
	}
}

// addSuite records the cell of a suite experiment.
func (b *bisects) addSuite(exp, ref string, saved *experiments.Saved, sc xreport.SuiteCell) {
	c := b.cell(exp, ref, saved)
	if su := saved.Manifest.Suite; su != nil && su.Fstests != nil {
		c.src = su.Fstests.Source.Path
	}
	for _, t := range append(slices.Clone(sc.Regressions), sc.Failing...) {
		if !slices.Contains(c.tests, t.Name) {
			c.tests = append(c.tests, t.Name)
		}
	}
}

// commands are the klab bisect commands of the failures new on a kernel
// that is a build of another commit of the baseline's git tree, with
// the same config and patches: a splat the baseline never printed, a
// check that fails there and not on the baseline, a row worse than the
// baseline's past its workload's threshold_pct, a test that newly fails.
func (b *bisects) commands(m *Manifest) []xreport.Bisect {
	base, ok := b.kernels[m.Baseline]
	if !ok {
		return nil
	}
	baseSplats := map[string]bool{}
	for key, c := range b.cells {
		if key[1] == m.Baseline {
			for _, s := range c.splats {
				baseSplats[s] = true
			}
		}
	}
	var out []xreport.Bisect
	for _, ref := range m.Kernels {
		k, ok := b.kernels[ref]
		if ref == m.Baseline || !ok || !sameTree(base, k) {
			continue
		}
		seen := map[string]bool{}
		for _, exp := range m.Experiments {
			c, bc := b.cells[[2]string{exp, ref}], b.cells[[2]string{exp, m.Baseline}]
			if c == nil {
				continue
			}
			add := func(failure string, criterion ...string) {
				out = append(out, xreport.Bisect{Experiment: exp, Kernel: ref, Failure: failure, Argv: bisectArgv(base, k, c, criterion)})
			}
			for _, s := range c.splats {
				if !baseSplats[s] && !seen[s] {
					seen[s] = true
					add("new kernel splat: "+s, "--splat", s)
				}
			}
			if bc == nil {
				continue
			}
			for _, ch := range c.checks {
				if !slices.Contains(bc.checks, ch) {
					add("check "+ch+" fails", "--check", ch)
				}
			}
			for _, r := range c.rows {
				i := slices.IndexFunc(bc.rows, func(x bisectRow) bool { return x.name == r.name })
				if i < 0 || r.threshold <= 0 || r.sum.N == 0 || bc.rows[i].sum.N == 0 {
					continue
				}
				ch := stats.Compare(bc.rows[i].sum, r.sum, r.direction)
				if ch.Verdict == stats.Worse && math.Abs(ch.Pct) > r.threshold {
					add(fmt.Sprintf("row %s %+.1f%% against %s (threshold %g%%)", r.name, ch.Pct, m.Baseline, r.threshold), "--row", r.name)
				}
			}
			for _, t := range c.tests {
				if slices.Contains(bc.tests, t) {
					continue
				}
				crit := []string{"--test", t}
				if c.src != "" {
					crit = append(crit, "--fstests-src", c.src)
				}
				add("test "+t+" fails", crit...)
			}
		}
	}
	return out
}

// sameTree reports whether kernels a (good) and b (bad) are builds of
// two commits of one git tree with the same config fragments and
// patches: what klab bisect walks between.
func sameTree(a, b results.Kernel) bool {
	ab, bb := a.Build, b.Build
	if a.Source != "build" || b.Source != "build" || ab == nil || bb == nil {
		return false
	}
	if ab.Tree != bb.Tree || !path.IsAbs(ab.Tree) || ab.BaseCommit == "" || bb.BaseCommit == "" || ab.BaseCommit == bb.BaseCommit {
		return false
	}
	same := func(x, y []results.FileHash) bool {
		return slices.EqualFunc(x, y, func(p, q results.FileHash) bool { return p.SHA256 == q.SHA256 && p.Path == q.Path })
	}
	return same(ab.Fragments, bb.Fragments) && same(ab.Patches, bb.Patches)
}

// mboxPart is the "#N" a patch of an mbox has after the mbox's path.
var mboxPart = regexp.MustCompile(`#\d+$`)

// bisectArgv is the klab bisect command between good and bad for cell
// c's experiment, chasing criterion.
func bisectArgv(good, bad results.Kernel, c *bisectCell, criterion []string) []string {
	argv := []string{"klab", "bisect", "--tree", good.Build.Tree, "--good", short12(good.Build.BaseCommit), "--bad", short12(bad.Build.BaseCommit)}
	var config []string
	for _, f := range good.Build.Fragments {
		config = append(config, f.Path)
	}
	if len(config) > 0 && !slices.Equal(config, []string{"lab"}) {
		argv = append(argv, "--config", strings.Join(config, ","))
	}
	var patches []string
	for _, p := range good.Build.Patches {
		if f := mboxPart.ReplaceAllString(p.Path, ""); !slices.Contains(patches, f) {
			patches = append(patches, f)
		}
	}
	for _, p := range patches {
		argv = append(argv, "--patch", p)
	}
	argv = append(argv, criterion...)
	spec := c.spec
	if name, ok := strings.CutPrefix(spec, experiments.ShippedDir+"/"); ok && slices.Contains(experiments.Shipped(), strings.TrimSuffix(name, ".yaml")) {
		spec = strings.TrimSuffix(name, ".yaml")
	}
	argv = append(argv, spec)
	for _, k := range slices.Sorted(maps.Keys(c.sets)) {
		argv = append(argv, "--set", k+"="+c.sets[k])
	}
	return argv
}

func short12(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
