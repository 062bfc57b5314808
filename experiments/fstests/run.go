package fstests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"klab/guest/proto"
	imgfstests "klab/images/fstests"
	"klab/images/userspace"
	"klab/internal/fileio"
	labfstests "klab/lab/fstests"
	"klab/results"
	"klab/results/suite"
	"klab/results/suite/statusline"
)

// Request is one fstests run: a configuration on one kernel, or an A/B
// of two kernels.
type Request struct {
	// Kernels are one kernel reference, or two for an A/B (A first).
	Kernels []string
	// Config is the configuration (Config).
	Config proto.FstestsConfig
	// Select chooses the tests, as check's arguments do.
	Select suite.SelectArgs
	// Jobs is the number of guests per kernel (shards); 0 means 1. The
	// two kernels of an A/B run side by side.
	Jobs int
	// TestTimeout bounds each test; 0 means DefaultTestTimeout.
	TestTimeout time.Duration
	// Reruns is how many times a test whose result changed between A and
	// B is rerun on each side; 0 means suite.DefaultReruns, below 0 none.
	Reruns int
	// NoExpunge runs the tests klab's expunge files leave out.
	NoExpunge bool
	// Times are earlier per-test times in seconds, for balancing shards.
	Times map[string]float64
	// TimesFile, when set, keeps the configuration's per-test times
	// across runs (TimesFileName in the runs directory): Run reads it
	// when Times is nil, and merges the run's times into it at the end.
	TimesFile string
	// Dir is the run directory: it must exist; Run writes its results
	// there.
	Dir string
	// Progress receives a line per guest and per test; nil means none.
	Progress io.Writer
}

// InputError is a request that cannot run as given: tests that do not
// exist or do not apply, kernels given the wrong number of times.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// DefaultTestTimeout bounds a test when Request.TestTimeout is 0: the
// longest cheap tests take a few minutes under TCG.
const DefaultTestTimeout = 15 * time.Minute

// Env is what Run needs from the host: the fstests tree, kernels, and
// guests. cmd/klab makes it from klab's lab; tests of the policy use
// fakes.
type Env struct {
	// Tree is the built fstests tree (check at its top).
	Tree string
	// Resolve resolves a kernel reference.
	Resolve func(ctx context.Context, ref string) (*results.Kernel, error)
	// Guest returns the Guest that boots kernel k for a shard, with its
	// boots' run directories under dir.
	Guest func(k *results.Kernel, cfg proto.FstestsConfig, timeout time.Duration, dir string) labfstests.Guest
	// Userspace and Fstests describe the guests' userspace (its packages
	// and versions) and the fstests build (its source and toolchain), for
	// manifests; nil when not known.
	Userspace *userspace.Descriptor
	Fstests   *imgfstests.Descriptor
}

// Result is what Run produced.
type Result struct {
	// Runs are the runs, A first.
	Runs []*suite.Run
	// Verdict compares A and B; nil for one kernel.
	Verdict *suite.Verdict
	// Times are the tests' times, the earlier ones updated.
	Times map[string]float64
	// Reported is how many test results the guests reported, reruns
	// included: 0 when the run failed before any test ended.
	Reported int
}

// Regressed says whether B has a regression against A.
func (r *Result) Regressed() bool { return r.Verdict != nil && r.Verdict.Regressed() }

// Failed says whether the run fails: B has a regression against A, or,
// with one kernel, a test failed, hung or crashed.
func (r *Result) Failed() bool {
	if r.Verdict != nil || len(r.Runs) == 0 {
		return r.Regressed()
	}
	c := r.Runs[0].Counts()
	return c.Fail+c.Hang+c.Crash > 0
}

// side is one kernel's part of a run.
type side struct {
	label  string
	kernel *results.Kernel
	tests  []string
	run    *suite.Run
	dir    string
	// reported counts the results guests reported for this side.
	reported int
}

// Run runs the request and writes into req.Dir: one JSON file per side
// (a.json, b.json, or run.json), the verdict (verdict.json) for an A/B,
// and the reports (report.txt, report.md, report.html, junit.xml). What
// ended is written even when a shard fails.
func Run(ctx context.Context, env Env, req Request) (*Result, error) {
	if len(req.Kernels) < 1 || len(req.Kernels) > 2 {
		return nil, &InputError{fmt.Errorf("fstests: %d kernels: give one, or two to compare", len(req.Kernels))}
	}
	jobs := max(req.Jobs, 1)
	timeout := req.TestTimeout
	if timeout <= 0 {
		timeout = DefaultTestTimeout
	}
	tests, err := selectTests(env.Tree, req.Config, req.Select)
	if err != nil {
		return nil, &InputError{err}
	}
	pw := progressWriter(req.Progress)
	if req.Times == nil && req.TimesFile != "" {
		t, err := LoadTimes(req.TimesFile)
		if err != nil {
			pw("fstests: earlier test times not used (shards balanced by count): %v", err)
		}
		req.Times = t
	}
	sides := make([]*side, len(req.Kernels))
	for i, ref := range req.Kernels {
		k, err := env.Resolve(ctx, ref)
		if err != nil {
			return nil, err
		}
		s := &side{kernel: k, dir: req.Dir}
		if len(req.Kernels) == 2 {
			s.label = string(rune('A' + i))
			s.dir = filepath.Join(req.Dir, strings.ToLower(s.label))
		}
		run, expunged := tests, []suite.Test(nil)
		if !req.NoExpunge {
			ex, err := suite.LoadExpunges(Expunges(), req.Config.Name, k.Version)
			if err != nil {
				return nil, err
			}
			run, expunged = suite.ApplyExpunges(tests, ex)
		}
		s.tests = run
		s.run = &suite.Run{Label: s.label, Kernel: *k, Config: req.Config.Name, Tests: expunged}
		sides[i] = s
	}
	errs := runSides(ctx, env, req, sides, jobs, timeout, pw)
	res := &Result{Times: times(req.Times, sides)}
	if req.TimesFile != "" {
		if err := SaveTimes(context.WithoutCancel(ctx), req.TimesFile, req.Config.Name, firstRunTimes(sides)); err != nil {
			pw("fstests: test times not kept for the next run's shards: %v", err)
		}
	}
	for _, s := range sides {
		res.Runs = append(res.Runs, s.run)
	}
	if len(sides) == 2 && errs == nil {
		v := suite.Compare(sides[0].run, sides[1].run)
		if again := suite.NeedsRerun(v); len(again) > 0 && req.Reruns >= 0 {
			k := req.Reruns
			if k == 0 {
				k = suite.DefaultReruns
			}
			pw("fstests: %d test(s) changed between A and B (%s): rerunning each %d time(s) on both sides", len(again), strings.Join(again, " "), k)
			errs = rerun(ctx, env, req, sides, again, k, timeout, pw)
			v = suite.Compare(sides[0].run, sides[1].run)
		}
		res.Verdict = v
	}
	for _, s := range sides {
		res.Reported += s.reported
	}
	if err := write(req.Dir, res); err != nil {
		errs = errors.Join(errs, err)
	}
	if errs != nil {
		return res, errs
	}
	if err := CheckTransport(req.Config, res.Runs); err != nil {
		return res, err
	}
	return res, nil
}

// selectTests reads the tree's groups and selects the tests that apply
// to cfg.
func selectTests(tree string, cfg proto.FstestsConfig, args suite.SelectArgs) ([]string, error) {
	all, groups, err := suite.ReadGroups(tree)
	if err != nil {
		return nil, fmt.Errorf("fstests: %w", err)
	}
	applies := func(t string) bool { return appliesTo(cfg, t) }
	all = slices.DeleteFunc(all, func(t string) bool { return !applies(t) })
	for g, ts := range groups {
		groups[g] = slices.DeleteFunc(ts, func(t string) bool { return !applies(t) })
	}
	if err := CheckTests(cfg, args.Tests); err != nil {
		return nil, fmt.Errorf("fstests: %w", err)
	}
	tests, err := suite.Select(all, groups, args)
	if err != nil {
		return nil, fmt.Errorf("fstests: %w", err)
	}
	if len(tests) == 0 {
		return nil, fmt.Errorf("fstests: no test selected: name tests (generic/013) or groups (-g quick)")
	}
	return tests, nil
}

// runSides runs each side's tests, the sides side by side, and fills
// their runs.
func runSides(ctx context.Context, env Env, req Request, sides []*side, jobs int, timeout time.Duration, pw labfstests.Progress) error {
	errc := make(chan error, len(sides))
	for _, s := range sides {
		go func() {
			start := time.Now()
			s.run.Started = start.UTC()
			shards := suite.Balance(s.tests, req.Times, jobs)
			out, err := labfstests.RunShards(ctx, shards, 1, guestFor(env, s, req.Config, timeout), prefixed(pw, s.label))
			for _, sh := range out {
				s.addResults(sh, false)
			}
			s.run.Elapsed = time.Since(start).Seconds()
			errc <- err
		}()
	}
	var errs []error
	for range sides {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rerun runs tests k more times on each side, the sides side by side,
// and counts the runs in each side's run.
func rerun(ctx context.Context, env Env, req Request, sides []*side, tests []string, k int, timeout time.Duration, pw labfstests.Progress) error {
	errc := make(chan error, len(sides))
	for _, s := range sides {
		go func() {
			// Each rerun is a fresh guest: a flaky test gets independent
			// chances, as on the first run.
			var errs []error
			for i := range k {
				out, err := labfstests.RunShards(ctx, [][]string{tests}, 1, guestFor(env, s, req.Config, timeout), prefixed(pw, fmt.Sprintf("%s rerun %d/%d", s.label, i+1, k)))
				for _, sh := range out {
					s.addResults(sh, true)
				}
				if err != nil {
					errs = append(errs, err)
					break
				}
			}
			errc <- errors.Join(errs...)
		}()
	}
	var errs []error
	for range sides {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// guestFor returns the guests of side s's shards.
func guestFor(env Env, s *side, cfg proto.FstestsConfig, timeout time.Duration) func(int) labfstests.Guest {
	return func(int) labfstests.Guest {
		return env.Guest(s.kernel, cfg, timeout, filepath.Join(s.dir, "boots"))
	}
}

// addResults adds a shard's results to s's run, as first runs or as
// reruns. A result for a test s did not ask for is dropped (the guest is
// not trusted), and an unknown status counts as a failure. Splats are
// attributed to tests from the consoles of the shard's boots.
func (s *side) addResults(sh labfstests.ShardResult, reruns bool) {
	asked := make(map[string]bool, len(sh.Tests))
	for _, t := range sh.Tests {
		asked[t] = true
	}
	for _, r := range sh.Results {
		if !asked[r.Name] || !statusline.ValidName(r.Name) {
			continue
		}
		s.reported++
		t := suite.FromProto(r)
		switch t.Status {
		case proto.TestPass, proto.TestFail, proto.TestNotRun, proto.TestHang, proto.TestCrash:
		default:
			t.Reason = "the guest reported an unknown status " + strconv.Quote(textLimit(t.Status))
			t.Status = proto.TestFail
		}
		if reruns {
			s.run.AddRerun(t)
		} else {
			s.run.Tests = append(s.run.Tests, t)
		}
	}
	for _, dir := range sh.Boots {
		console, err := readBounded(filepath.Join(dir, "console.log"), maxConsole)
		if err != nil {
			continue
		}
		byTest := suite.Attribute(console)
		if reruns {
			delete(byTest, "") // a rerun's boot splats are the first run's
		}
		s.run.AttachSplats(byTest)
	}
}

// maxConsole bounds the console read back for splat attribution.
const maxConsole = 64 << 20

// readBounded reads at most max bytes of path.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

func textLimit(s string) string {
	if len(s) > 32 {
		return s[:32]
	}
	return s
}

// times returns earlier with the sides' first-run times.
func times(earlier map[string]float64, sides []*side) map[string]float64 {
	out := make(map[string]float64, len(earlier))
	for k, v := range earlier {
		out[k] = v
	}
	maps.Copy(out, firstRunTimes(sides))
	return out
}

// firstRunTimes are the seconds of the tests the sides' first runs passed
// or failed (a hang's or a crash's time says nothing of the test's).
func firstRunTimes(sides []*side) map[string]float64 {
	out := map[string]float64{}
	for _, s := range sides {
		for _, t := range s.run.Tests {
			if t.Status == proto.TestPass || t.Status == proto.TestFail {
				out[t.Name] = t.Seconds
			}
		}
	}
	return out
}

// write saves res's runs, verdict and reports in dir, each file
// atomically.
func write(dir string, res *Result) error {
	var errs []error
	for _, r := range res.Runs {
		name := "run.json"
		if r.Label != "" {
			name = strings.ToLower(r.Label) + ".json"
		}
		errs = append(errs, r.Save(filepath.Join(dir, name)))
	}
	report := func(name, format string) {
		var b strings.Builder
		var err error
		if res.Verdict != nil {
			err = suite.WriteVerdict(&b, res.Verdict, format)
		} else {
			err = suite.WriteRun(&b, res.Runs[0], format)
		}
		if err == nil {
			err = fileio.WriteAtomic(filepath.Join(dir, name), []byte(b.String()), 0o644)
		}
		errs = append(errs, err)
	}
	if res.Verdict != nil {
		report("verdict.json", "json")
	}
	report("report.txt", "text")
	report("report.md", "md")
	report("report.html", "html")
	report("junit.xml", "junit")
	return errors.Join(errs...)
}

// CheckTransport fails a FUSE run whose tests were served by another
// transport than the configuration's: each test that reports what served
// it must have had requests over the configured transport and none over
// the other.
func CheckTransport(cfg proto.FstestsConfig, runs []*suite.Run) error {
	if cfg.FUSE == nil {
		return nil
	}
	want := cfg.FUSE.Transport
	var bad []string
	for _, r := range runs {
		for _, t := range r.Tests {
			if t.Transport == "" {
				continue
			}
			counts := transportCounts(t.Transport)
			for tr, n := range counts {
				if tr != want && n > 0 {
					bad = append(bad, fmt.Sprintf("%s %s: %s", sideOf(r), t.Name, t.Transport))
					break
				}
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("fstests: configuration %s asks for FUSE over %s, but other transports served requests: %s", cfg.Name, want, strings.Join(bad, "; "))
	}
	return nil
}

func sideOf(r *suite.Run) string {
	if r.Label != "" {
		return r.Label
	}
	return r.Kernel.Name
}

// transportCounts parses a proof such as "dev=0 uring=1234".
func transportCounts(s string) map[string]int64 {
	out := map[string]int64{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// progressWriter returns a Progress that writes lines to w.
func progressWriter(w io.Writer) labfstests.Progress {
	if w == nil {
		return func(string, ...any) {}
	}
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// prefixed returns p with the side's label before each line.
func prefixed(p labfstests.Progress, label string) labfstests.Progress {
	if label == "" || label == " rerun" {
		return p
	}
	return func(format string, args ...any) { p(label+": "+format, args...) }
}
