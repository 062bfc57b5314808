package experiments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/images"
	"klab/images/userspace"
	"klab/internal/fileio"
	"klab/internal/option"
	"klab/internal/specfile"
	"klab/internal/textsafe"
	"klab/lab"
	"klab/lab/hostguest"
	"klab/results"
	"klab/results/splat"
)

// Files of an experiment run directory.
const (
	SpecFileName     = "spec.yaml"
	ManifestFileName = "experiment.json"
	PlanFileName     = "plan.json"
	SamplesFileName  = "samples.json"
	ReportFileName   = "report.json"
	GuestsDirName    = "guests"
)

// ManifestSchema is the experiment manifest's format version.
const ManifestSchema = 1

// Run statuses.
const (
	StatusRunning     = "running"
	StatusComplete    = "complete"
	StatusInterrupted = "interrupted"
)

// Manifest names every input of an experiment run: enough to repeat it
// (klab rerun uses nothing else).
type Manifest struct {
	Schema int    `json:"schema"`
	RunID  string `json:"run_id"`
	// Experiment is the spec's name; SpecFile the path given, SpecSHA256
	// its content's hash (the content is spec.yaml beside this file).
	Experiment string `json:"experiment"`
	SpecFile   string `json:"spec_file"`
	SpecSHA256 string `json:"spec_sha256"`
	// Sets are the --set overrides.
	Sets map[string]string `json:"sets,omitempty"`
	// Command is klab's argv.
	Command []string `json:"command"`
	// Kernels are the kernels as asked and as resolved.
	Kernels []ManifestKernel `json:"kernels"`
	// Axis, Rounds, Order, Seed and Reuse are the plan's; Rounds are
	// the rounds run (planned, when interrupted), which klab rerun
	// repeats.
	Axis   string `json:"axis"`
	Rounds int    `json:"rounds"`
	Order  string `json:"order"`
	Seed   int64  `json:"seed"`
	Reuse  string `json:"reuse"`
	// AutoRounds is set when the run chose its rounds (--rounds auto).
	AutoRounds *AutoRounds `json:"auto_rounds,omitempty"`
	// CPUs, MemMB and AccelWanted are the guest shape asked for.
	CPUs        int    `json:"cpus"`
	MemMB       int    `json:"mem_mb"`
	AccelWanted string `json:"accel_wanted"`
	// Icount and TCGMultithread are the timing mode the guests ran in
	// under TCG: the spec's vm.icount and vm.tcg_multithread, or what
	// --icount or --tcg-multithread put in their place.
	Icount         string `json:"icount,omitempty"`
	TCGMultithread bool   `json:"tcg_multithread,omitempty"`
	// Accel, QEMU, Initramfs and AgentVersion are what the guests used
	// (the first guest's, with every initramfs hash seen).
	Accel        string              `json:"accel,omitempty"`
	QEMU         results.QEMU        `json:"qemu"`
	Initramfs    []results.Initramfs `json:"initramfs,omitempty"`
	AgentVersion string              `json:"agent_version,omitempty"`
	Host         results.Host        `json:"host"`
	// Guests are the boots, in order.
	Guests []GuestRecord `json:"guests"`
	Start  time.Time     `json:"start"`
	End    time.Time     `json:"end,omitzero"`
	// Status is running, complete or interrupted; Message says more.
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	// Suite is what a suite experiment ran, and on what; nil for an
	// experiment of workloads and checks.
	Suite *SuiteRecord `json:"suite,omitempty"`
	// Userspace is the userspace image the checks with userspace: true
	// ran in; nil when none did.
	Userspace *userspace.Descriptor `json:"userspace,omitempty"`
}

// ManifestKernel is one kernel: the reference given and what it was.
type ManifestKernel struct {
	Ref    string         `json:"ref"`
	Kernel results.Kernel `json:"kernel"`
	// Skipped says why the kernel's cells did not run (requires).
	Skipped string `json:"skipped,omitempty"`
}

// GuestRecord is one boot of the run.
type GuestRecord struct {
	// Dir is the guest's run directory, relative to the experiment's.
	Dir    string `json:"dir"`
	Kernel int    `json:"kernel"`
	// Outcome is the guest run's outcome.
	Outcome       results.Outcome `json:"outcome"`
	BootToAgentMs int64           `json:"boot_to_agent_ms"`
	WallMs        int64           `json:"wall_ms"`
	// Splats are the kernel reports the guest's console showed.
	Splats []splat.Report `json:"splats"`
	// EmulatorFaults are the boots of this guest that died of a known
	// fault of multi-threaded TCG (a false "Oops: int3"), retried and
	// never counted as kernel results: their run directories.
	EmulatorFaults []string `json:"emulator_faults,omitempty"`
}

// Sample is one workload measured in one unit.
type Sample struct {
	Row      int            `json:"row"`
	Side     string         `json:"side"`
	Round    int            `json:"round"`
	Guest    int            `json:"guest"`
	Workload string         `json:"workload"`
	Metric   string         `json:"metric"`
	Value    float64        `json:"value"`
	Metrics  *proto.Metrics `json:"metrics,omitempty"`
	// FUSE are the server's counters when the job ran on its mount.
	FUSE *proto.FUSEStats `json:"fuse,omitempty"`
	// Error says why there is no value.
	Error string `json:"error,omitempty"`
	// Profile is the folded call graph of the run (profile: perf), a
	// file under the run directory; ProfileError says why there is none.
	Profile      string `json:"profile,omitempty"`
	ProfileError string `json:"profile_error,omitempty"`
}

// CheckResult is one check in one unit.
type CheckResult struct {
	Check    string  `json:"check"`
	Row      int     `json:"row"`
	Side     string  `json:"side"`
	Round    int     `json:"round"`
	Guest    int     `json:"guest"`
	Passed   bool    `json:"passed"`
	ExitCode int     `json:"exit_code"`
	Message  string  `json:"message,omitempty"`
	TookSec  float64 `json:"took_s"`
	// Output is the tail of what a failed check printed (stdout and
	// stderr as they came; see checkOutput).
	Output string `json:"output,omitempty"`
}

// Samples is samples.json: everything measured so far.
type Samples struct {
	Samples []Sample      `json:"samples"`
	Checks  []CheckResult `json:"checks"`
}

// RunOptions say how to run an experiment.
type RunOptions struct {
	PlanOptions
	// Sets override parameters (name -> comma-separated values).
	Sets map[string]string
	// CPUs, MemMB and Accel override the spec's guest shape when set.
	CPUs, MemMB int
	Accel       string
	// Icount and TCGMultithread, when set, override the spec's timing
	// mode (vm.icount, vm.tcg_multithread); one excludes the other.
	Icount         string
	TCGMultithread bool
	// RunsDir is where the run directory is made.
	RunsDir string
	// Opener resolves kernel references and boots guests.
	Opener lab.Opener
	// Progress receives one line per guest and unit; with Terminal, a
	// progress bar too.
	Progress io.Writer
	Terminal bool
	// Command is klab's argv, for the manifest.
	Command []string
	// Auto, when set, adds rounds until every row's change CI is
	// narrow enough (--rounds auto); PlanOptions.Rounds is then unused.
	Auto *AutoRounds
	// Userspace gives the userspace image that checks with userspace:
	// true run in (built when missing); nil when the caller has none.
	Userspace func(context.Context) (*userspace.Image, error)
}

// Result is a finished (or interrupted) run.
type Result struct {
	Dir      string
	Manifest *Manifest
	Plan     *Plan
	Samples  *Samples
}

// Run runs the experiment f and saves it. Bad input gives a
// *specfile.BadInputError before any guest boots and leaves no run directory.
func Run(ctx context.Context, f *File, o RunOptions) (*Result, error) {
	if f.Spec.Suite != nil {
		return nil, &specfile.BadInputError{Err: fmt.Errorf("%s runs a test suite, not workloads: klab run runs it (RunSuite)", f.Path)}
	}
	if len(o.Sets) > 0 {
		nf, err := f.WithSets(o.Sets)
		if err != nil {
			return nil, &specfile.BadInputError{Err: err}
		}
		f = nf
	}
	if o.Auto != nil {
		if err := o.Auto.check(); err != nil {
			return nil, &specfile.BadInputError{Err: err}
		}
		o.Rounds = o.Auto.startRounds(f.Spec.Rounds)
	}
	plan, err := MakePlan(f, o.PlanOptions)
	if err != nil {
		return nil, &specfile.BadInputError{Err: err}
	}
	if err := autoPlanProblem(o.Auto, plan); err != nil {
		return nil, &specfile.BadInputError{Err: err}
	}
	if err := overrideMode(f, o); err != nil {
		return nil, &specfile.BadInputError{Err: err}
	}
	s := f.Spec
	// Resolve every kernel and check requires before any boot.
	kernels := make([]*results.Kernel, len(plan.Kernels))
	skipped := make([]string, len(plan.Kernels))
	var errs []error
	for i, ref := range plan.Kernels {
		k, err := o.Opener.ResolveKernel(ctx, ref)
		if err != nil {
			errs = append(errs, option.Errorf("kernel", "%s: %w", ref, err))
			continue
		}
		kernels[i] = k
		skipped[i] = Unmet(&s.Requires, k)
		if k.Source == hostguest.Source {
			if err := hostProblems(f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &specfile.BadInputError{Err: err}
	}
	if !slices.Contains(skipped, "") {
		var why []string
		for i, r := range plan.Kernels {
			why = append(why, fmt.Sprintf("%s (%s): %s", r, kernels[i].Version, skipped[i]))
		}
		return nil, &specfile.BadInputError{Err: fmt.Errorf("%s: no kernel meets its requires: %s", f.Path, strings.Join(why, "; "))}
	}
	var us *userspace.Image
	if needsUserspace(s) {
		if o.Userspace == nil {
			return nil, &specfile.BadInputError{Err: fmt.Errorf("%s: a check runs in the userspace (userspace: true), which this way of running it does not provide", f.Path)}
		}
		if us, err = o.Userspace(ctx); err != nil {
			return nil, fmt.Errorf("the userspace for checks with userspace: true: %w", err)
		}
		for i, k := range kernels {
			if skipped[i] != "" {
				continue
			}
			if _, err := userspace.Attach(us, k); err != nil {
				errs = append(errs, option.Errorf("kernel", "%s: %w", plan.Kernels[i], err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, &specfile.BadInputError{Err: err}
		}
	}
	cpus, mem, accel := s.VM.CPUs, s.VM.MemoryMB, s.VM.Accel
	if o.CPUs != 0 {
		cpus = o.CPUs
	}
	if o.MemMB != 0 {
		mem = o.MemMB
	}
	if o.Accel != "" {
		accel = o.Accel
	}
	if cpus == 0 {
		cpus = 2
	}
	if mem == 0 {
		mem = 1024
	}
	if accel == "" {
		accel = "auto"
	}

	store := results.Store{Root: o.RunsDir}
	run, err := store.Create("exp-" + s.Name[:min(len(s.Name), 40)])
	if err != nil {
		return nil, err
	}
	man := &Manifest{
		Schema: ManifestSchema, RunID: run.ID, Experiment: s.Name, SpecFile: f.Path, SpecSHA256: f.SHA256,
		Sets: o.Sets, Command: o.Command, Axis: plan.Axis, Rounds: plan.Rounds, Order: plan.Order, Seed: plan.Seed,
		Reuse: plan.Reuse, CPUs: cpus, MemMB: mem, AccelWanted: accel, Icount: s.VM.Icount, TCGMultithread: s.VM.TCGMultithread, Start: time.Now(), Status: StatusRunning,
		Guests: []GuestRecord{}, AutoRounds: o.Auto,
	}
	if us != nil {
		man.Userspace = &us.Descriptor
	}
	man.Host, _ = results.HostInfo()
	for i, ref := range plan.Kernels {
		man.Kernels = append(man.Kernels, ManifestKernel{Ref: ref, Kernel: lab.ManifestKernel(kernels[i]), Skipped: skipped[i]})
	}
	if err := fileio.WriteAtomic(filepath.Join(run.Dir, SpecFileName), f.Data, 0o644); err != nil {
		return nil, err
	}
	samples := &Samples{Samples: []Sample{}, Checks: []CheckResult{}}
	save := func() error {
		return errors.Join(run.WriteJSON(ManifestFileName, man), run.WriteJSON(SamplesFileName, samples))
	}
	if err := errors.Join(run.WriteJSON(PlanFileName, plan), save()); err != nil {
		return nil, err
	}
	res := &Result{Dir: run.Dir, Manifest: man, Plan: plan, Samples: samples}
	total := 0
	for _, gp := range plan.Guests {
		if skipped[gp.Kernel] == "" {
			total += len(gp.Units)
		}
	}
	disp := newDisplay(o.Progress, o.Terminal, total)
	defer disp.close()
	progress := disp.printf
	sides := plan.A + " against " + plan.B
	if plan.Single {
		sides = "on " + plan.A
	}
	rounds := fmt.Sprintf("%d round(s)", plan.Rounds)
	if a := o.Auto; a != nil {
		rounds = fmt.Sprintf("%d round(s), more until every change CI is within ±%g%% (at most %d)", plan.Rounds, a.CITargetPct, a.MaxRounds)
	}
	progress("klab: %s: %s, %d row(s), %s, %d guest(s); saving to %s",
		s.Name, sides, len(plan.Rows), rounds, len(plan.Guests), run.Dir)

	r := &runner{f: f, plan: plan, kernels: kernels, opener: o.Opener, command: o.Command, dir: run.Dir,
		cpus: cpus, memMB: mem, accel: accel, samples: samples, disp: disp, userspace: us}
	runStart := time.Now()
	var runErr error
	done := 0
	for gi := 0; ; gi++ {
		if gi == len(plan.Guests) {
			// The plan is done; --rounds auto may add a round.
			added, err := r.addRound(ctx, o, man, skipped)
			if err != nil {
				runErr = err
			}
			if added == 0 {
				break
			}
			total += added
			disp.grow(total)
			if err := errors.Join(run.WriteJSON(PlanFileName, plan), save()); err != nil {
				runErr = err
				break
			}
		}
		gp := plan.Guests[gi]
		if skipped[gp.Kernel] != "" {
			continue
		}
		if ctx.Err() != nil {
			runErr = ctx.Err()
			break
		}
		eta := ""
		if done > 0 {
			left := 0
			for _, g := range plan.Guests[gi:] {
				if skipped[g.Kernel] == "" {
					left++
				}
			}
			eta = fmt.Sprintf(", about %s left", (time.Since(runStart) / time.Duration(done) * time.Duration(left)).Round(time.Second))
		}
		progress("[guest %d/%d] %s: %d unit(s)%s", gi+1, len(plan.Guests), plan.Kernels[gp.Kernel], len(gp.Units), eta)
		advanced := 0
		rec, err := r.runGuest(ctx, gi, func() { advanced++; disp.advance(1) })
		disp.advance(len(gp.Units) - advanced)
		done++
		if rec != nil {
			man.Guests = append(man.Guests, *rec)
		}
		if serr := save(); serr != nil && err == nil {
			err = serr
		}
		if err != nil {
			runErr = err
			if ctx.Err() != nil || !isKernelOrStep(err) {
				break
			}
			runErr = nil
		}
	}
	man.addGuestFacts(run.Dir)
	man.finish(ctx, runErr)
	if err := save(); err != nil && runErr == nil {
		runErr = err
	}
	return res, runErr
}

// addGuestFacts fills in what the guests under runDir shared: the
// accelerator, QEMU and agent of the first, every initramfs seen, and the
// kernels as the guests' manifests recorded them.
func (man *Manifest) addGuestFacts(runDir string) {
	for _, g := range man.Guests {
		gm, err := results.ReadManifest(filepath.Join(runDir, g.Dir))
		if err != nil {
			continue
		}
		if man.Accel == "" {
			man.Accel, man.QEMU, man.AgentVersion = string(gm.Accel), gm.QEMU, gm.AgentVersion
		}
		if !slices.ContainsFunc(man.Initramfs, func(x results.Initramfs) bool { return x.SHA256 == gm.Initramfs.SHA256 }) {
			man.Initramfs = append(man.Initramfs, gm.Initramfs)
		}
		for i := range man.Kernels {
			if man.Kernels[i].Kernel.ID == gm.Kernel.ID {
				man.Kernels[i].Kernel = gm.Kernel
			}
		}
	}
}

// finish records the end of the run and its status: complete, or
// interrupted by ctx or by runErr.
func (man *Manifest) finish(ctx context.Context, runErr error) {
	man.End = time.Now()
	switch {
	case runErr == nil:
		man.Status = StatusComplete
	case ctx.Err() != nil:
		man.Status, man.Message = StatusInterrupted, "interrupted: what finished is kept"
	default:
		man.Status, man.Message = StatusInterrupted, runErr.Error()
	}
}

func isKernelOrStep(err error) bool {
	var ke *lab.KernelError
	var se *lab.StepError
	return errors.As(err, &ke) || errors.As(err, &se)
}

// firstLine is the first line of s, which may come from the guest (a
// kernel error quotes its console): see guestText.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return guestText(s)
}

// maxGuestText bounds one message from the guest kept in samples.json and
// printed in progress lines.
const maxGuestText = 1024

// guestText makes a string the guest sent safe to store and print: no
// control characters (a terminal escape stays inert) and at most
// maxGuestText bytes.
func guestText(s string) string {
	s = strings.NewReplacer("\n", "", "\t", " ").Replace(textsafe.Clean(s))
	if len(s) > maxGuestText {
		s = strings.ToValidUTF8(s[:maxGuestText], "") + " [cut]"
	}
	return s
}

// Unmet says what k lacks of r ("needs fuse-io-uring"), or "" when it
// meets it.
func Unmet(r *Requires, k *results.Kernel) string {
	var need []string
	if rg, err := ParseRange(r.Kernel); err == nil && len(rg) > 0 && !rg.Contains(k.Version) {
		need = append(need, "kernel "+rg.String())
	}
	cfg := readConfig(k.Config)
	has := func(opt string) bool {
		if cfg == nil {
			return true // unknown: the guest will tell
		}
		opt = "CONFIG_" + strings.TrimPrefix(opt, "CONFIG_")
		v := cfg[opt]
		return v == "y" || v == "m"
	}
	for _, c := range r.Config {
		if !has(c) {
			need = append(need, "CONFIG_"+strings.TrimPrefix(c, "CONFIG_"))
		}
	}
	for _, f := range r.all() {
		ok := true
		switch f {
		case "fuse-io-uring":
			ok = has("FUSE_IO_URING")
		case "fuse-passthrough":
			ok = has("FUSE_PASSTHROUGH")
		case "fuse-request-timeout":
			rg, _ := ParseRange(">=6.14")
			ok = has("FUSE_FS") && rg.Contains(k.Version)
		}
		if !ok {
			if why := r.Implied[f]; why != "" {
				f += " (for " + why + ")"
			}
			need = append(need, f)
		}
	}
	if len(need) == 0 {
		return ""
	}
	return "needs " + strings.Join(need, ", ")
}

// all are r's features: those it lists, then those implied, sorted.
func (r *Requires) all() []string {
	out := slices.Clone(r.Features)
	for _, f := range sortedKeys(r.Implied) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// readConfig reads a kernel .config; nil when there is none.
func readConfig(path string) map[string]string {
	if path == "" {
		return nil
	}
	m, err := images.ReadConfig(path)
	if err != nil {
		return nil
	}
	return m
}

// overrideMode puts o's timing mode (--icount, --tcg-multithread) in
// place of the spec's, after the same checks as the spec's fields.
func overrideMode(f *File, o RunOptions) error {
	switch {
	case o.Icount != "" && o.TCGMultithread:
		return errors.New("--icount and --tcg-multithread: QEMU counts instructions only under single-threaded TCG; give one")
	case o.Icount != "":
		if err := lab.CheckIcount(o.Icount); err != nil {
			return fmt.Errorf("--icount %q: want QEMU's -icount options, e.g. shift=0,sleep=off", o.Icount)
		}
		f.Spec.VM.Icount, f.Spec.VM.TCGMultithread = o.Icount, false
	case o.TCGMultithread:
		f.Spec.VM.Icount, f.Spec.VM.TCGMultithread = "", true
	default:
		return nil
	}
	accel := f.Spec.VM.Accel
	if o.Accel != "" {
		accel = o.Accel
	}
	if accel == "kvm" {
		return errors.New("--icount and --tcg-multithread are modes of TCG: not with accel kvm")
	}
	return nil
}
