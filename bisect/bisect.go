// Package bisect finds the commit of a git kernel tree that changed an
// experiment's verdict: the first commit that prints a kernel splat, fails
// a check or a suite's test, or moves a report row from the good commit's
// value to the bad one's.
//
// The order of the steps is git's own: git bisect runs in a clone of the
// user's tree that borrows its objects and has no checkout (git bisect
// start --no-checkout), so that the user's tree, refs and bisection state
// are never touched. Each step builds the commit (images/build, whose
// work trees move from commit to commit) and runs the experiment on it
// (experiments) through a Runner; Judge turns what the step found into
// good, bad or skip, and git picks the next commit.
//
// A bisection is a run directory of the run store: bisect.json (its
// inputs, enough to resume it), steps.json (klab's own step log: every
// commit tested, how it built, the experiment runs, the verdict and
// why), bisect.log (git bisect log), the experiment runs under runs/, and
// at the end result.json (the first bad commit with the evidence). Every
// file is replaced atomically after each change, so that a killed
// bisection resumes from what it had recorded (Open, then Run): git's
// state is rebuilt by replaying the recorded verdicts into a fresh git
// bisect start, and a step that was in progress is tested again.
package bisect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"klab/internal/fileio"
	"klab/internal/flock"
	"klab/results"
	"klab/results/stats"
)

// Files of a bisection's run directory.
const (
	// ManifestFile is the bisection's inputs and status; its presence
	// makes a run directory a bisection's.
	ManifestFile = "bisect.json"
	// SpecFile is the experiment spec as the bisection runs it.
	SpecFile = "spec.yaml"
	// StepsFile is klab's step log.
	StepsFile = "steps.json"
	// LogFile is git bisect log, as git wrote it.
	LogFile = "bisect.log"
	// ResultFile is the result, written when the bisection ends.
	ResultFile = "result.json"
	// ProgressFile keeps the builds' and the experiment runs' progress.
	ProgressFile = "progress.log"
	// RepoDir is the scratch clone git bisect runs in.
	RepoDir = "repo"
	// RunsDir holds the steps' experiment runs.
	RunsDir  = "runs"
	lockFile = ".lock"
)

// ManifestSchema is bisect.json's format version.
const ManifestSchema = 1

// Statuses of a bisection.
const (
	StatusRunning     = "running"
	StatusComplete    = "complete"
	StatusInterrupted = "interrupted"
	StatusFailed      = "failed"
)

// Step roles: the endpoints are measured first, then git's steps.
const (
	RoleGood = "good"
	RoleBad  = "bad"
	RoleStep = "step"
)

// Manifest is bisect.json: what the bisection is (enough to resume it)
// and how it stands.
type Manifest struct {
	Schema int    `json:"schema"`
	RunID  string `json:"run_id"`
	// Tree is the top of the user's git tree.
	Tree string `json:"tree"`
	// Good and Bad are the revisions as given; GoodCommit and BadCommit
	// what they resolved to; Commits counts good..bad.
	Good       string `json:"good"`
	Bad        string `json:"bad"`
	GoodCommit string `json:"good_commit"`
	BadCommit  string `json:"bad_commit"`
	Commits    int    `json:"commits"`
	// Config are the config fragments and Patches the patches applied on
	// top of every commit, as images/build takes them.
	Config  []string `json:"config"`
	Patches []string `json:"patches,omitempty"`
	// Experiment is the spec's name; SpecFile the path given (the
	// content is spec.yaml beside this file); SpecSHA256 its hash.
	Experiment string `json:"experiment"`
	SpecFile   string `json:"spec_file"`
	SpecSHA256 string `json:"spec_sha256"`
	// Sets are the --set overrides.
	Sets map[string]string `json:"sets,omitempty"`
	// Criterion is what makes a commit bad.
	Criterion Criterion `json:"criterion"`
	// Rounds is a step's rounds; MaxRounds the most an ambiguous metric
	// step gets. A metric's endpoints run twice Rounds.
	Rounds    int `json:"rounds"`
	MaxRounds int `json:"max_rounds,omitempty"`
	// FstestsSrc is the fstests source of a suite experiment.
	FstestsSrc string `json:"fstests_src,omitempty"`
	// Command is klab's argv.
	Command []string  `json:"command"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end,omitzero"`
	// Status is running, complete, interrupted or failed; Message says
	// more.
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// Step is one commit tested: an endpoint or one of git's steps.
type Step struct {
	// N numbers git's steps from 1; 0 for the endpoints.
	N int `json:"n"`
	// Role is good or bad (an endpoint), or step.
	Role string `json:"role"`
	// Commit and Subject are the commit tested.
	Commit  string `json:"commit"`
	Subject string `json:"subject"`
	// Done is set once the verdict is in; a step without it was in
	// progress when klab stopped, and is tested again.
	Done  bool      `json:"done"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
	// Build is how the commit built; BuildError why it did not.
	Build      Build  `json:"build"`
	BuildError string `json:"build_error,omitempty"`
	// Runs are the experiment runs, relative to the bisection's
	// directory; Rounds the rounds they ran together.
	Runs   []string `json:"runs,omitempty"`
	Rounds int      `json:"rounds,omitempty"`
	// Verdict, Reason and Evidence are the judgement.
	Verdict  Verdict   `json:"verdict,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Evidence *Evidence `json:"evidence,omitempty"`
	// Splats are the splat titles the guests printed; Samples the
	// metric row's samples.
	Splats  []string  `json:"splats,omitempty"`
	Samples []float64 `json:"samples,omitempty"`
}

// Steps is steps.json.
type Steps struct {
	Steps []Step `json:"steps"`
}

// Result is result.json: how the bisection ended.
type Result struct {
	// Found is set when git named the first bad commit.
	Found    bool    `json:"found"`
	FirstBad *Commit `json:"first_bad,omitempty"`
	// Candidates are the commits one of which is the first bad one, when
	// only skipped commits were left to test.
	Candidates []Commit `json:"candidates,omitempty"`
	// Evidence is why the first bad commit is bad; At says which step
	// found it ("step 3", "bad endpoint").
	Evidence *Evidence `json:"evidence,omitempty"`
	At       string    `json:"at,omitempty"`
	// Reason says why no first bad commit was found.
	Reason string `json:"reason,omitempty"`
	// Separation is a metric's endpoints, compared.
	Separation *Separation `json:"separation,omitempty"`
	// Steps counts git's steps; Skipped those skipped.
	Steps   int `json:"steps"`
	Skipped int `json:"skipped"`
}

// Runner tests one commit: it builds it and runs the experiment on it.
type Runner interface {
	// Run builds commit and runs the experiment on it for rounds
	// rounds. What the commit did, a failed build and guests that did
	// not boot included, is in the outcome; an error is klab's own
	// failure or an interruption, and stops the bisection (the step is
	// tested again on resume).
	Run(ctx context.Context, commit string, rounds int) (*StepOutcome, error)
}

// Bisection is a bisection's run directory, read or being written.
type Bisection struct {
	Dir      string
	Manifest *Manifest
	Steps    []Step
	// Result is set once the bisection ended.
	Result *Result
}

// IsRun reports whether dir holds a bisection.
func IsRun(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ManifestFile))
	return err == nil
}

// Create makes a new bisection in the run store at root: its run
// directory with m (RunID, Status and Start filled in), the spec's
// content as spec.yaml, and an empty step log.
func Create(root string, m *Manifest, spec []byte) (*Bisection, error) {
	run, err := results.Store{Root: root}.Create("bisect-" + m.Experiment[:min(len(m.Experiment), 40)])
	if err != nil {
		return nil, err
	}
	m.Schema, m.RunID, m.Status, m.Start = ManifestSchema, run.ID, StatusRunning, time.Now().UTC()
	b := &Bisection{Dir: run.Dir, Manifest: m, Steps: []Step{}}
	if err := fileio.WriteAtomic(filepath.Join(b.Dir, SpecFile), spec, 0o644); err != nil {
		return nil, err
	}
	if err := errors.Join(b.saveManifest(), b.saveSteps()); err != nil {
		return nil, err
	}
	return b, nil
}

// Open reads the bisection in dir.
func Open(dir string) (*Bisection, error) {
	b := &Bisection{Dir: dir, Manifest: &Manifest{}}
	if err := fileio.ReadJSON(filepath.Join(dir, ManifestFile), b.Manifest); err != nil {
		return nil, fmt.Errorf("open bisection: %w", err)
	}
	m := b.Manifest
	if m.Schema < 1 || m.Schema > ManifestSchema {
		return nil, fmt.Errorf("%s: schema %d is not supported, want 1..%d", filepath.Join(dir, ManifestFile), m.Schema, ManifestSchema)
	}
	var st Steps
	if err := fileio.ReadJSON(filepath.Join(dir, StepsFile), &st); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open bisection: %w", err)
	}
	b.Steps = st.Steps
	if b.Steps == nil {
		b.Steps = []Step{}
	}
	var res Result
	switch err := fileio.ReadJSON(filepath.Join(dir, ResultFile), &res); {
	case err == nil:
		b.Result = &res
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("open bisection: %w", err)
	}
	var errs []error
	for i, s := range b.Steps {
		if !slices.Contains([]string{RoleGood, RoleBad, RoleStep}, s.Role) || !shaLineRe.MatchString(s.Commit) {
			errs = append(errs, fmt.Errorf("step %d: role %q commit %q, want good, bad or step and a full commit hash", i+1, s.Role, s.Commit))
		}
		if s.Done && !slices.Contains([]Verdict{Good, Bad, Skip}, s.Verdict) {
			errs = append(errs, fmt.Errorf("step %d: verdict %q, want good, bad or skip", i+1, s.Verdict))
		}
		for _, r := range s.Runs {
			if !filepath.IsLocal(r) {
				errs = append(errs, fmt.Errorf("step %d: run %q is not inside the bisection", i+1, r))
			}
		}
	}
	if !shaLineRe.MatchString(m.GoodCommit) || !shaLineRe.MatchString(m.BadCommit) {
		errs = append(errs, fmt.Errorf("good %q and bad %q: want full commit hashes", m.GoodCommit, m.BadCommit))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return b, nil
}

func (b *Bisection) saveManifest() error {
	return fileio.WriteJSON(filepath.Join(b.Dir, ManifestFile), b.Manifest)
}

func (b *Bisection) saveSteps() error {
	return fileio.WriteJSON(filepath.Join(b.Dir, StepsFile), Steps{Steps: b.Steps})
}

// RunsRoot is where the steps' experiment runs go: a run store of its
// own inside the bisection.
func (b *Bisection) RunsRoot() string { return filepath.Join(b.Dir, RunsDir) }

// endpoint returns the finished endpoint step of role, or nil.
func (b *Bisection) endpoint(role string) *Step {
	for i := range b.Steps {
		if s := &b.Steps[i]; s.Role == role && s.Done {
			return s
		}
	}
	return nil
}

// baseline is what the finished endpoints showed.
func (b *Bisection) baseline() Baseline {
	var bl Baseline
	if g := b.endpoint(RoleGood); g != nil {
		bl.GoodSplats, bl.Good = g.Splats, g.Samples
	}
	if s := b.endpoint(RoleBad); s != nil {
		bl.Bad = s.Samples
	}
	return bl
}

// ErrBusy is returned by Run when another klab runs the bisection.
var ErrBusy = errors.New("another klab is running this bisection")

// Run runs the bisection to its end with r, from where it stands: the
// endpoints first (when not measured yet), then git's steps, replaying
// those recorded. Progress lines go to progress. It returns the result
// (also in result.json) when the bisection ended, found or not; an error
// when klab failed or ctx ended, with everything finished recorded.
func (b *Bisection) Run(ctx context.Context, r Runner, progress io.Writer) (*Result, error) {
	unlock, ok := flock.TryLock(filepath.Join(b.Dir, lockFile))
	if !ok {
		return nil, fmt.Errorf("%s: %w", b.Dir, ErrBusy)
	}
	defer unlock()
	d := &driver{b: b, r: r, out: progress}
	res, err := d.run(ctx)
	m := b.Manifest
	switch {
	case err == nil:
		m.Status, m.Message = StatusComplete, ""
	case ctx.Err() != nil:
		m.Status, m.Message = StatusInterrupted, "interrupted"
	default:
		m.Status, m.Message = StatusFailed, err.Error()
	}
	m.End = time.Now().UTC()
	if serr := errors.Join(b.saveManifest(), b.WriteReports()); serr != nil && err == nil {
		err = serr
	}
	return res, err
}

// driver is one Run.
type driver struct {
	b    *Bisection
	r    Runner
	out  io.Writer
	repo *repo
}

func (d *driver) printf(format string, args ...any) {
	if d.out != nil {
		fmt.Fprintf(d.out, format+"\n", args...)
	}
}

func (d *driver) run(ctx context.Context) (*Result, error) {
	b, m := d.b, d.b.Manifest
	if err := d.dropUnfinished(); err != nil {
		return nil, err
	}
	b.Result = nil
	_ = os.Remove(filepath.Join(b.Dir, ResultFile))
	m.Status, m.Message, m.End = StatusRunning, "", time.Time{}
	if err := b.saveManifest(); err != nil {
		return nil, err
	}
	var err error
	if d.repo, err = cloneRepo(ctx, m.Tree, filepath.Join(b.Dir, RepoDir)); err != nil {
		return nil, err
	}
	d.printf("klab: bisecting %s: good %.12s, bad %.12s (%d commits): bad is %s; saving to %s",
		m.Tree, m.GoodCommit, m.BadCommit, m.Commits, m.Criterion, b.Dir)

	// The endpoints: good first, so that the splats it prints are known
	// when the bad one is judged.
	for _, role := range []string{RoleGood, RoleBad} {
		commit := m.GoodCommit
		if role == RoleBad {
			commit = m.BadCommit
		}
		st := b.endpoint(role)
		if st == nil {
			if st, err = d.test(ctx, role, 0, commit, role+" endpoint"); err != nil {
				return nil, err
			}
		}
		if why := endpointProblem(role, st); why != "" {
			return d.end(ctx, &Result{Reason: why})
		}
	}
	var sep *Separation
	if m.Criterion.Kind == KindMetric {
		s := Separate(m.Criterion, b.baseline())
		sep = &s
		d.printf("klab: endpoints: %s", s)
		if !s.Separable() {
			return d.end(ctx, &Result{Separation: sep, Reason: fmt.Sprintf(
				"the good and bad commits cannot be told apart on row %q (%s, alpha %.2f): nothing to bisect; more rounds (--rounds) or a row with less noise may separate them",
				m.Criterion.Row, fmtP(s.Change.P), stats.Alpha)})
		}
	}

	// git's steps: replay those recorded, then go on.
	s, err := d.repo.start(ctx, m.BadCommit, m.GoodCommit)
	if err != nil {
		return nil, err
	}
	for _, st := range b.Steps {
		if st.Role != RoleStep {
			continue
		}
		if s.done() || st.Commit != s.Next {
			return nil, fmt.Errorf("%s: step %d tested %.12s where git now asks for %.12s: the step log does not replay (was the tree rewritten?)",
				filepath.Join(b.Dir, StepsFile), st.N, st.Commit, s.Next)
		}
		if s, err = d.repo.mark(ctx, st.Verdict, st.Commit); err != nil {
			return nil, err
		}
	}
	if err := d.saveLog(ctx); err != nil {
		return nil, err
	}
	for !s.done() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := 1 + len(d.steps())
		label := fmt.Sprintf("step %d/~%d", n, n+s.Steps)
		st, err := d.test(ctx, RoleStep, n, s.Next, label)
		if err != nil {
			return nil, err
		}
		if s, err = d.repo.mark(ctx, st.Verdict, st.Commit); err != nil {
			return nil, err
		}
		if err := d.saveLog(ctx); err != nil {
			return nil, err
		}
	}
	res := &Result{Separation: sep}
	if s.FirstBad != "" {
		c, err := d.repo.commit(ctx, s.FirstBad)
		if err != nil {
			return nil, err
		}
		res.Found, res.FirstBad = true, &c
		res.Evidence, res.At = d.evidence(s.FirstBad)
	} else {
		for _, sha := range s.Candidates {
			c, err := d.repo.commit(ctx, sha)
			if err != nil {
				return nil, err
			}
			res.Candidates = append(res.Candidates, c)
		}
		res.Reason = fmt.Sprintf("only skipped commits are left to test: the first bad commit is one of %d", len(res.Candidates))
	}
	return d.end(ctx, res)
}

// endpointProblem says why an endpoint does not allow a bisection: the
// good commit is not good, or the bad one not bad.
func endpointProblem(role string, st *Step) string {
	switch {
	case st.Verdict == Skip:
		return fmt.Sprintf("the %s commit %.12s cannot be judged: %s", role, st.Commit, st.Reason)
	case role == RoleGood && st.Verdict != Good:
		return fmt.Sprintf("the good commit %.12s is bad already (%s): choose an older --good", st.Commit, st.Reason)
	case role == RoleBad && st.Verdict != Bad:
		return fmt.Sprintf("the bad commit %.12s is not bad (%s): there is nothing to bisect", st.Commit, st.Reason)
	}
	return ""
}

// steps are git's steps recorded so far.
func (d *driver) steps() []Step {
	var out []Step
	for _, s := range d.b.Steps {
		if s.Role == RoleStep {
			out = append(out, s)
		}
	}
	return out
}

// evidence is the evidence of the step that found commit bad.
func (d *driver) evidence(commit string) (*Evidence, string) {
	for _, s := range d.b.Steps {
		if s.Commit != commit || s.Verdict != Bad {
			continue
		}
		at := fmt.Sprintf("step %d", s.N)
		if s.Role != RoleStep {
			at = s.Role + " endpoint"
		}
		return s.Evidence, at
	}
	return nil, ""
}

// end records the result, with the counts of the steps.
func (d *driver) end(ctx context.Context, res *Result) (*Result, error) {
	for _, s := range d.steps() {
		res.Steps++
		if s.Verdict == Skip {
			res.Skipped++
		}
	}
	d.b.Result = res
	if err := fileio.WriteJSON(filepath.Join(d.b.Dir, ResultFile), res); err != nil {
		return nil, err
	}
	switch {
	case res.Found:
		d.printf("klab: first bad commit: %.12s %s", res.FirstBad.SHA, res.FirstBad.Subject)
	case len(res.Candidates) > 0:
		d.printf("klab: %s", res.Reason)
		for _, c := range res.Candidates {
			d.printf("  %.12s %s", c.SHA, c.Subject)
		}
	default:
		d.printf("klab: no bisection: %s", res.Reason)
	}
	return res, nil
}

// saveLog writes git bisect log into bisect.log.
func (d *driver) saveLog(ctx context.Context) error {
	l, err := d.repo.log(ctx)
	if err != nil {
		return err
	}
	return fileio.WriteAtomic(filepath.Join(d.b.Dir, LogFile), []byte(l), 0o644)
}

// dropUnfinished forgets the steps that were in progress when klab
// stopped, with their experiment runs: they are tested again.
func (d *driver) dropUnfinished() error {
	var keep []Step
	for _, s := range d.b.Steps {
		if s.Done {
			keep = append(keep, s)
			continue
		}
		for _, r := range s.Runs {
			if filepath.IsLocal(r) {
				_ = os.RemoveAll(filepath.Join(d.b.Dir, r))
			}
		}
	}
	if len(keep) == len(d.b.Steps) {
		return nil
	}
	d.b.Steps = append([]Step{}, keep...)
	return d.b.saveSteps()
}

// test tests commit as a step of role (n numbers git's steps), records
// it, and returns it judged.
func (d *driver) test(ctx context.Context, role string, n int, commit, label string) (*Step, error) {
	b, m := d.b, d.b.Manifest
	c, err := d.repo.commit(ctx, commit)
	if err != nil {
		return nil, err
	}
	b.Steps = append(b.Steps, Step{N: n, Role: role, Commit: commit, Subject: c.Subject, Start: time.Now().UTC()})
	idx := len(b.Steps) - 1
	if err := b.saveSteps(); err != nil {
		return nil, err
	}
	head := fmt.Sprintf("%s: %.12s %s", label, commit, oneLine(c.Subject, 60))
	rounds := m.Rounds
	if m.Criterion.Kind == KindMetric && role != RoleStep {
		rounds = 2 * m.Rounds
	}
	d.printf("%s: building...", head)
	out, err := d.r.Run(ctx, commit, rounds)
	if err != nil {
		return nil, err
	}
	st := &b.Steps[idx]
	d.record(st, out, true)
	if st.BuildError == "" {
		d.printf("%s: built in %s (%s); ran %d round(s)", label, fmtSec(st.Build.TookSec), st.Build.Mode, out.Rounds)
	}
	j := d.judge(role, out)
	for j.Verdict == ambiguous && st.Rounds < m.MaxRounds {
		add := min(m.Rounds, m.MaxRounds-st.Rounds)
		d.printf("%s: %s; %d more round(s)...", label, j.Reason, add)
		if err := b.saveSteps(); err != nil {
			return nil, err
		}
		more, err := d.r.Run(ctx, commit, add)
		if err != nil {
			return nil, err
		}
		d.record(st, more, false)
		merged := *out
		merged.Runs = append(slices.Clone(out.Runs), more.Runs...)
		merged.Rounds += more.Rounds
		merged.Splats = append(slices.Clone(out.Splats), more.Splats...)
		merged.Checks = append(slices.Clone(out.Checks), more.Checks...)
		merged.Samples = map[string][]float64{}
		for k, v := range out.Samples {
			merged.Samples[k] = slices.Clone(v)
		}
		for k, v := range more.Samples {
			merged.Samples[k] = append(merged.Samples[k], v...)
		}
		if more.GuestError != "" {
			merged.GuestError = strings.TrimSpace(merged.GuestError + "\n" + more.GuestError)
		}
		out = &merged
		j = d.judge(role, out)
	}
	if j.Verdict == ambiguous {
		j.Verdict, j.Reason = Skip, fmt.Sprintf("ambiguous after %d round(s): %s", st.Rounds, j.Reason)
	}
	if m.Criterion.Kind == KindMetric {
		st.Samples = out.Samples[m.Criterion.Row]
	}
	st.Verdict, st.Reason, st.Evidence = j.Verdict, j.Reason, j.Evidence
	st.Done, st.End = true, time.Now().UTC()
	if err := b.saveSteps(); err != nil {
		return nil, err
	}
	d.printf("%s: %s (%s)", head, st.Verdict, oneLine(st.Reason, 160))
	return st, nil
}

// record adds what a run of a step gave to the step; first says it is
// the step's first run (whose build is the step's).
func (d *driver) record(st *Step, o *StepOutcome, first bool) {
	if first {
		st.Build, st.BuildError = o.Build, o.BuildError
	}
	for _, r := range o.Runs {
		if rel, err := filepath.Rel(d.b.Dir, r); err == nil && filepath.IsLocal(rel) {
			r = rel
		}
		st.Runs = append(st.Runs, r)
	}
	st.Rounds += o.Rounds
	for _, s := range o.Splats {
		if !slices.Contains(st.Splats, s.Title) {
			st.Splats = append(st.Splats, s.Title)
		}
	}
}

// judge is the verdict of an outcome of a step of role. The good
// endpoint of a bisection that chases any new splat is good by
// definition (its splats are the baseline), and a metric's endpoints are
// what they are named, once they have samples.
func (d *driver) judge(role string, o *StepOutcome) Judgement {
	c := d.b.Manifest.Criterion
	bl := d.b.baseline()
	if role == RoleGood && c.Kind == KindSplat && c.Splat == "" && c.SplatType == "" {
		for _, s := range o.Splats {
			bl.GoodSplats = append(bl.GoodSplats, s.Title)
		}
	}
	if c.Kind == KindMetric && role != RoleStep {
		if o.BuildError != "" {
			return Judgement{Verdict: Skip, Reason: buildReason(o.BuildError)}
		}
		vals := o.Samples[c.Row]
		if len(vals) == 0 {
			why := "no samples of row " + c.Row
			if o.GuestError != "" {
				why += ": " + firstLine(o.GuestError)
			}
			return Judgement{Verdict: Skip, Reason: why}
		}
		s := stats.Summarize(vals)
		return Judgement{Verdict: Verdict(role), Reason: fmt.Sprintf("median %s over %d sample(s)", fmtValue(s.Median, c.Unit), s.N)}
	}
	return Judge(c, bl, o)
}

// oneLine is s on one line, cut to n bytes.
func oneLine(s string, n int) string {
	s = firstLine(s)
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// fmtSec formats seconds as 41s, 6m02s, 1h05m.
func fmtSec(sec float64) string {
	d := time.Duration(sec * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}
