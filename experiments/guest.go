package experiments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/images/userspace"
	"klab/internal/fileio"
	"klab/lab"
	"klab/results"
	"klab/results/splat"
)

// runner is an experiment run under way: what each of its guests needs.
type runner struct {
	f    *File
	plan *Plan
	// kernels are the plan's kernels, resolved before the first boot.
	kernels []*results.Kernel
	opener  lab.Opener
	// command is klab's argv, for the guests' manifests.
	command []string
	// dir is the run directory.
	dir string
	// cpus, memMB and accel are the guests' shape.
	cpus, memMB int
	accel       string
	// samples gets every sample and check result.
	samples *Samples
	disp    *display
	// userspace is the image checks with userspace: true run in; nil
	// when none does.
	userspace *userspace.Image
}

// guestRun is one guest of a run: its units as agent steps, and the
// boots of it that died of an emulator fault.
type guestRun struct {
	*runner
	index int
	gp    GuestPlan
	units []unitSteps
	// lastID is the last step ID given.
	lastID int
	// faults are the run directories of the boots retried after an
	// emulator fault.
	faults []string
	// tail keeps the output of the check running now.
	tail outputTail
}

// unitSteps is one unit as agent steps: the cell's sysctls first, then
// each workload and check.
type unitSteps struct {
	unit  Unit
	items []item
}

// item is what the guest runs in one Run call: the cell's sysctls (no
// workload and no check), a workload (its untimed prepare step, then the
// measured step) or a check.
type item struct {
	workload *Workload
	check    *Check
	steps    []proto.Step
	// id is the step whose result is recorded; 0 for the sysctls.
	id int
}

// runGuest boots guest gi and runs its units; unitDone is called after
// each unit that ran. A kernel failure ends the guest (its remaining
// units get the error) but not the run.
func (r *runner) runGuest(ctx context.Context, gi int, unitDone func()) (*GuestRecord, error) {
	g := &guestRun{runner: r, index: gi, gp: r.plan.Guests[gi], lastID: 1}
	if err := g.compile(); err != nil {
		return nil, err
	}
	req, err := g.request()
	if err != nil {
		return nil, err
	}
	gst, err := g.boot(ctx, req)
	if gst == nil {
		if err == nil {
			err = errors.New("no guest")
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ke *lab.KernelError
		if !errors.As(err, &ke) {
			return nil, err
		}
	}
	if err != nil {
		return g.abandon(gst, "the guest did not boot: "+firstLine(err.Error())), err
	}
	if _, err := gst.Run(ctx, g.numberedSetup()); err != nil {
		return g.abandon(gst, "setup failed: "+firstLine(err.Error())), err
	}
	for ui := range g.units {
		if err := g.runUnit(ctx, gst, ui); err != nil {
			return g.close(gst), err
		}
		unitDone()
	}
	return g.close(gst), nil
}

// newID gives the next step ID.
func (g *guestRun) newID() int {
	g.lastID++
	return g.lastID
}

// compile turns the guest's units into agent steps, each with its own
// ID.
func (g *guestRun) compile() error {
	for _, u := range g.gp.Units {
		cell, err := g.f.Cell(g.plan.Point(u))
		if err != nil {
			return err
		}
		g.units = append(g.units, g.compileUnit(u, cell))
	}
	return nil
}

// compileUnit is unit u of cell as agent steps. A check marked once runs
// in round 1 only, and a check that no row parameter changes runs in the
// first row only: the other rows would repeat it.
func (g *guestRun) compileUnit(u Unit, cell *Spec) unitSteps {
	sys := cellSysctls(cell)
	for i := range sys {
		sys[i].ID = g.newID()
	}
	us := unitSteps{unit: u, items: []item{{steps: sys}}}
	for i := range cell.Workloads {
		w := &cell.Workloads[i]
		it := item{workload: w}
		if w.Prepare != "" {
			pst := prepareStep(cell, w)
			pst.ID = g.newID()
			it.steps = append(it.steps, pst)
		}
		st := workloadStep(cell, w)
		st.ID = g.newID()
		it.id = st.ID
		it.steps = append(it.steps, st)
		us.items = append(us.items, it)
	}
	for i := range cell.Checks {
		c := &cell.Checks[i]
		if c.Once && u.Round != 1 {
			continue
		}
		if u.Row != 0 && !slices.ContainsFunc(g.f.checkRefs(i), func(p string) bool { return p != g.plan.Axis }) {
			continue
		}
		st := checkStep(cell, c)
		st.ID = g.newID()
		us.items = append(us.items, item{check: c, steps: []proto.Step{st}, id: st.ID})
	}
	return us
}

// numberedSetup is the spec's setup steps, numbered after the units'.
func (g *guestRun) numberedSetup() []proto.Step {
	setup := setupSteps(&g.f.Spec.Setup)
	if g.userspace != nil {
		// Checks in the userspace find it mounted from the start.
		att, err := userspace.Attach(g.userspace, nil)
		if err == nil {
			setup = append([]proto.Step{att.Step}, setup...)
		}
	}
	for i := range setup {
		setup[i].ID = g.newID()
	}
	return setup
}

// request is the guest's boot request: every unit's steps go into
// Prepare, so that the initramfs carries what they need.
func (g *guestRun) request() (lab.BootRequest, error) {
	s := g.f.Spec
	var policy *splat.Policy
	if len(s.Splats.AllowWarnings) > 0 {
		p, err := splat.NewPolicy(splat.PolicyConfig{Fail: splat.DefaultFail(), Allow: s.Splats.AllowWarnings})
		if err != nil {
			return lab.BootRequest{}, fmt.Errorf("splats.allow_warnings: %w", err)
		}
		policy = p
	}
	var all []proto.Step
	for _, us := range g.units {
		for _, it := range us.items {
			all = append(all, it.steps...)
		}
	}
	req := lab.BootRequest{
		Kernel: g.plan.Kernels[g.gp.Kernel], Resolved: g.kernels[g.gp.Kernel], MemMB: g.memMB, CPUs: g.cpus, Prepare: all,
		HostTools: hostTools(&s.Setup), MultiThreadTCG: s.VM.TCGMultithread, IgnoreSplats: true, Policy: policy,
		Command: g.command, RunKind: "guest", RunsDir: filepath.Join(g.dir, GuestsDirName), Accel: g.accel, Progress: g.disp,
		Cmdline: s.VM.Cmdline, Icount: s.VM.Icount, OnMessage: g.tail.message,
	}
	if s.VM.StepTimeoutS > 0 {
		req.StepTimeout = time.Duration(s.VM.StepTimeoutS) * time.Second
	}
	if g.userspace != nil {
		att, err := userspace.Attach(g.userspace, req.Resolved)
		if err != nil {
			return lab.BootRequest{}, err
		}
		req.QEMUArgs, req.Modules = att.QEMUArgs, att.Modules
	}
	return req, nil
}

// boot opens the guest. A boot under multi-threaded TCG that dies of the
// emulator's known fault is no kernel result: it is booted again, at
// most twice, and the failed boot's run kept in g.faults.
func (g *guestRun) boot(ctx context.Context, req lab.BootRequest) (lab.Guest, error) {
	gst, err := g.opener.Open(ctx, req)
	for attempt := 1; err != nil && attempt < 3 && req.MultiThreadTCG && emulatorFault(err); attempt++ {
		if rec := closeGuest(gst, g.gp, g.dir); rec != nil {
			g.faults = append(g.faults, rec.Dir)
		}
		g.disp.printf("  the boot died of a known multi-threaded TCG fault (%s), not a kernel result; booting again", firstLine(err.Error()))
		gst, err = g.opener.Open(ctx, req)
	}
	return gst, err
}

// close closes gst and describes it with the emulator faults before it.
func (g *guestRun) close(gst lab.Guest) *GuestRecord {
	rec := closeGuest(gst, g.gp, g.dir)
	if rec != nil {
		rec.EmulatorFaults = g.faults
	}
	return rec
}

// abandon records every item of every unit as failed with msg, says so
// and closes gst.
func (g *guestRun) abandon(gst lab.Guest, msg string) *GuestRecord {
	g.failUnits(g.units, msg)
	g.disp.printf("  %s", msg)
	return g.close(gst)
}

// runUnit runs unit ui and records what it measured. An error other than
// a failed step (the kernel failed, or the run was interrupted) ends the
// guest: the unit's items from the one that met it, and every later
// unit, are recorded as failed with it.
func (g *guestRun) runUnit(ctx context.Context, gst lab.Guest, ui int) error {
	u := g.units[ui].unit
	items := g.units[ui].items
	g.disp.unit(g.unitText(u))
	for j, it := range items {
		if it.check != nil {
			g.tail.start()
		}
		start := time.Now()
		out, err := gst.Run(ctx, it.steps)
		took := time.Since(start).Seconds()
		var output string
		if it.check != nil {
			output = g.tail.stop()
		}
		if err != nil && !isStep(err) {
			msg := firstLine(err.Error())
			if it.workload == nil && it.check == nil {
				msg = "sysctls: " + msg
			}
			g.failItems(u, items[j:], msg)
			g.failUnits(g.units[ui+1:], msg)
			g.disp.printf("  %s%s: %s", rowText(g.plan, u.Row), sideLabel(g.plan, u.Side), msg)
			return err
		}
		if it.id == 0 {
			continue
		}
		d := doneFor(out, it.id)
		switch {
		case it.workload != nil:
			g.recordSample(u, it.workload, d, err)
		case it.check != nil:
			g.recordCheck(u, it.check, d, took, err, output)
		}
	}
	return nil
}

// unitText names unit u in progress lines ("jobs=4 dev round 2").
func (g *guestRun) unitText(u Unit) string {
	return fmt.Sprintf("%s%s round %d", rowText(g.plan, u.Row), sideLabel(g.plan, u.Side), u.Round)
}

// recordSample records what workload w measured in unit u: its result d,
// or err (or the lack of a done) when there is none.
func (g *guestRun) recordSample(u Unit, w *Workload, d *proto.Done, err error) {
	smp := Sample{Row: u.Row, Side: u.Side, Round: u.Round, Guest: g.index, Workload: w.Name, Metric: metricName(w)}
	switch {
	case d == nil:
		smp.Error = "no result: " + errText(err)
	case d.Error != "" || d.ExitCode != 0 || d.Metrics == nil:
		smp.Error = strings.TrimSpace(fmt.Sprintf("exit %d: %s", d.ExitCode, guestText(d.Error)))
	default:
		g.measured(&smp, u, w, d)
	}
	g.samples.Samples = append(g.samples.Samples, smp)
	if smp.Error != "" {
		g.disp.printf("  %s %s: failed: %s", w.Name, g.unitText(u), smp.Error)
	} else {
		unit, _ := metricInfo(smp.Metric)
		g.disp.printf("  %s %s: %.4g %s", w.Name, g.unitText(u), smp.Value, unit)
	}
}

// measured fills smp from a workload that ran to its end: its metrics,
// its profiles (saved under the run directory), the metric's value and
// the served check.
func (g *guestRun) measured(smp *Sample, u Unit, w *Workload, d *proto.Done) {
	smp.Metrics = d.Metrics
	if prof := d.Metrics.CPUProfile; len(prof) > 0 {
		p := filepath.Join(g.dir, "profiles", g.profileName(u, w, ".pprof"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil && fileio.WriteAtomic(p, prof, 0o644) == nil {
			g.disp.printf("  CPU profile of the guest agent: %s", p)
		}
	}
	smp.Metrics.CPUProfile = nil
	if w.Profile == ProfilePerf {
		smp.Profile, smp.ProfileError = saveProfile(g.dir, g.profileName(u, w, ".folded"), d.Profile)
		if smp.ProfileError != "" {
			g.disp.printf("  no profile of %s %s: %s", w.Name, g.unitText(u), smp.ProfileError)
		}
	}
	smp.FUSE = d.FUSE
	if v, ok := sampleMetric(smp.Metric, d.Metrics, d.FUSE); ok {
		smp.Value = v
	} else {
		smp.Error = fmt.Sprintf("no %s: the server's CPU time is unknown", smp.Metric)
	}
	if msg := servedCheck(w, d); msg != "" {
		smp.Error = msg
	}
}

// profileName is the file name of workload w's profile in unit u, ext
// its extension.
func (g *guestRun) profileName(u Unit, w *Workload, ext string) string {
	return safeName(fmt.Sprintf("%s-%s%s-round%d%s", w.Name, strings.ReplaceAll(rowText(g.plan, u.Row), " ", "-"), u.Side, u.Round, ext))
}

// recordCheck records how check c went in unit u: its result d, or err
// (or the lack of a done) when there is none; took is the host's time,
// output the tail of what it printed, kept when it failed.
func (g *guestRun) recordCheck(u Unit, c *Check, d *proto.Done, took float64, err error, output string) {
	cr := CheckResult{Check: c.Name, Row: u.Row, Side: u.Side, Round: u.Round, Guest: g.index, TookSec: took, ExitCode: -1}
	if d != nil {
		judge(&cr, c, d)
	} else {
		cr.Message = "no result: " + errText(err)
	}
	if !cr.Passed {
		cr.Output = output
	}
	g.samples.Checks = append(g.samples.Checks, cr)
	verdict := "pass"
	if !cr.Passed {
		verdict = "FAIL: " + cr.Message
	}
	g.disp.printf("  check %s %s: %s", c.Name, g.unitText(u), verdict)
}

// judge fills cr from check c's result d: its exit code against the one
// expected, its time against max_s, and why it failed.
func judge(cr *CheckResult, c *Check, d *proto.Done) {
	cr.ExitCode = d.ExitCode
	cr.Passed = d.ExitCode == c.ExpectExit && !d.TimedOut
	guestS := float64(d.DurationNs) / 1e9
	if c.MaxS > 0 && cr.Passed && guestS > c.MaxS {
		cr.Passed = false
		cr.Message = fmt.Sprintf("took %.1fs, want at most %gs", guestS, c.MaxS)
	}
	switch {
	case cr.Message != "":
	case d.TimedOut:
		cr.Message = "timed out"
	case !cr.Passed:
		cr.Message = fmt.Sprintf("exit %d, want %d", d.ExitCode, c.ExpectExit)
		if d.Error != "" {
			cr.Message += ": " + guestText(d.Error)
		}
	}
}

// failUnits records every item of units as failed with msg.
func (g *guestRun) failUnits(units []unitSteps, msg string) {
	for _, us := range units {
		g.failItems(us.unit, us.items, msg)
	}
}

// failItems records items of unit u as failed with msg: a workload gets
// a sample without a value, a check a failed result.
func (g *guestRun) failItems(u Unit, items []item, msg string) {
	for _, it := range items {
		switch {
		case it.workload != nil:
			g.samples.Samples = append(g.samples.Samples, Sample{Row: u.Row, Side: u.Side, Round: u.Round, Guest: g.index, Workload: it.workload.Name, Metric: metricName(it.workload), Error: msg})
		case it.check != nil:
			g.samples.Checks = append(g.samples.Checks, CheckResult{Check: it.check.Name, Row: u.Row, Side: u.Side, Round: u.Round, Guest: g.index, ExitCode: -1, Message: msg})
		}
	}
}

// closeGuest closes g and describes it.
func closeGuest(g lab.Guest, gp GuestPlan, dir string) *GuestRecord {
	if g == nil {
		return nil
	}
	res, _ := g.Close()
	if res == nil {
		return nil
	}
	rec := &GuestRecord{Kernel: gp.Kernel, BootToAgentMs: res.BootToAgent.Milliseconds(), WallMs: res.Wall.Milliseconds(), Splats: res.Splats}
	if rec.Splats == nil {
		rec.Splats = []splat.Report{}
	}
	if rel, err := filepath.Rel(dir, res.RunDir); err == nil {
		rec.Dir = rel
	}
	if res.Manifest != nil {
		rec.Outcome = res.Manifest.Outcome
	}
	return rec
}

// emulatorFault reports whether a boot died of multi-threaded TCG's
// known false "Oops: int3" (static-key patching seen by another vCPU).
func emulatorFault(err error) bool {
	var ke *lab.KernelError
	return errors.As(err, &ke) && strings.Contains(ke.Msg, "int3")
}

// rowText is a row's label for progress lines ("" for no parameters).
func rowText(p *Plan, row int) string {
	if l := p.Rows[row].Label; l != "-" {
		return l + " "
	}
	return ""
}

// sideLabel is a side's label in progress lines (Plan.Label).
func sideLabel(p *Plan, side string) string {
	return p.Label(side)
}

func isStep(err error) bool {
	var se *lab.StepError
	return errors.As(err, &se)
}

func errText(err error) string {
	if err == nil {
		return "the guest sent no done"
	}
	return firstLine(err.Error())
}

// doneFor finds the result of step id, by the step it answers, not by
// Done.Step: that is the guest's numbering, which the Guest interface
// does not promise to be the runner's (vm.Agent used to renumber every
// step, setup steps included).
func doneFor(out []lab.StepResult, id int) *proto.Done {
	for i := range out {
		if out[i].Step.ID == id {
			return &out[i].Done
		}
	}
	return nil
}

// servedCheck fails a read job whose server read too little of what the
// job counted.
func servedCheck(w *Workload, d *proto.Done) string {
	if w.MinServed == 0 || d.Metrics == nil || d.Metrics.Bytes == 0 {
		return ""
	}
	if d.FUSE == nil || d.FUSE.ServerReadBytes < 0 {
		return "" // not checkable on this kernel: the report warns
	}
	r := float64(d.FUSE.ServerReadBytes) / float64(d.Metrics.Bytes)
	if r < w.MinServed {
		return fmt.Sprintf("the server read %.0f%% of the %d bytes the job counted (min_served %.0f%%): served from a cache", 100*r, d.Metrics.Bytes, 100*w.MinServed)
	}
	return ""
}

// safeName keeps letters, digits and ._- of a file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}
