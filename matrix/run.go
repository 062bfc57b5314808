package matrix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"klab/experiments"
	"klab/experiments/fstests"
	"klab/images/userspace"
	"klab/internal/fileio"
	"klab/internal/option"
	"klab/internal/specfile"
	"klab/lab"
)

// Files of a results tree.
const (
	// ManifestFile is the tree's manifest; FileCopy the matrix file as
	// run; CellsDir holds one directory per cell, and CellFile in it the
	// cell's result, written atomically when the cell ends.
	ManifestFile = "matrix.json"
	FileCopy     = "matrix.yaml"
	CellsDir     = "cells"
	CellFile     = "cell.json"
	// ManifestSchema is the manifest's schema.
	ManifestSchema = "klab.matrix-run/v1"
)

// Cell statuses.
const (
	// StatusComplete: the experiment ran to its end (its report may
	// still have failures).
	StatusComplete = "complete"
	// StatusError: the experiment could not run (bad input for this
	// kernel, a kernel that does not resolve, its QEMU was killed, the
	// disk was full, klab failed); resume runs it again.
	StatusError = "error"
	// StatusIncomplete: interrupted; resume runs it again.
	StatusIncomplete = "incomplete"
)

// Manifest is a results tree's matrix.json.
type Manifest struct {
	Schema string `json:"schema"`
	// Name, File and SHA256 identify the matrix file as run.
	Name   string `json:"name"`
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
	// Kernels and Experiments are the matrix's columns and experiment
	// labels in the file's order; Baseline the baseline kernel's ref.
	Kernels     []string `json:"kernels"`
	Experiments []string `json:"experiments"`
	Baseline    string   `json:"baseline"`
	// Shard is "i/n", or "" for the whole matrix; Cells the cells of
	// this tree; Total the cells of the whole matrix.
	Shard string `json:"shard,omitempty"`
	Cells []Cell `json:"cells"`
	Total int    `json:"total"`
	// Start is when the tree was made; Command klab's argv.
	Start   time.Time `json:"start"`
	Command []string  `json:"command,omitempty"`
}

// CellResult is a cell's cell.json.
type CellResult struct {
	Cell
	Status string `json:"status"`
	// Run is the experiment's run directory, relative to the tree.
	Run string `json:"run,omitempty"`
	// Message says why a cell is not complete.
	Message string    `json:"message,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
}

// Options say how to run a matrix.
type Options struct {
	// Out is the results tree; it must not exist, unless Resume.
	Out string
	// Resume runs only the cells of Out that did not finish.
	Resume bool
	// Jobs is how many cells run at once (each boots its own VMs); 0
	// means DefaultJobs. It is never more than fit in memory.
	Jobs  int
	Shard Shard
	// CPUs, MemMB and Accel override every experiment's guest shape.
	CPUs, MemMB int
	Accel       string
	// StrictReference makes a row or check of an experiment that
	// contradicts its reference (the spec's expect:) a failure.
	StrictReference bool
	// TCG says the guests run under TCG (asked, or the cached verdict):
	// a VM then keeps one host CPU busy, not one per vCPU, unless an
	// experiment asks for multi-threaded TCG.
	TCG bool
	// Opener resolves kernel references and boots guests (from several
	// goroutines); Build builds a recipe's kernel.
	Opener lab.Opener
	Build  func(ctx context.Context, r *Recipe) error
	// Userspace gives the userspace for checks with userspace: true
	// (experiments.RunOptions.Userspace).
	Userspace func(context.Context) (*userspace.Image, error)
	// Fstests makes what the cells of suite experiments (fstests) run
	// on: fstests built from its source, the userspace, guests. Run
	// calls it once, before any cell runs, and only when a suite cell is
	// to run; a *fstests.SourceError from it is bad input.
	Fstests func(ctx context.Context) (fstests.Env, error)
	// Progress receives a line per cell event; with Terminal, a bar per
	// running cell and one for the whole matrix.
	Progress io.Writer
	Terminal bool
	Command  []string
	// MinFree is the free space a cell needs to start: 0 means
	// MinFreeBytes, a negative value no check (tests).
	MinFree int64
}

// vmShape is the largest guest of the file's experiments, with o's
// overrides: the host CPUs one keeps busy, and its memory.
func vmShape(f *File, o *Options) (cpus, memMB int) {
	cpus, memMB = 2, 1024
	multi := false
	for _, e := range f.Experiments {
		c, m := e.Spec.Spec.VM.CPUs, e.Spec.Spec.VM.MemoryMB
		cpus, memMB = max(cpus, c), max(memMB, m)
		multi = multi || e.Spec.Spec.VM.TCGMultithread
	}
	if o.CPUs > 0 {
		cpus = o.CPUs
	}
	if o.TCG && !multi {
		// Single-threaded TCG runs every vCPU on one host thread.
		cpus = 1
	}
	if o.MemMB > 0 {
		memMB = o.MemMB
	}
	return cpus, memMB
}

// vmOverheadMB is QEMU's own memory beyond the guest's, per VM.
const vmOverheadMB = 256

// Slots returns how many VMs of the shape fit at once: by CPUs (a VM per
// its vCPUs) and by available memory. It is at least 1.
func Slots(cpus, memMB int) (byCPU, byMem int) {
	byCPU = max(1, runtime.NumCPU()/max(1, cpus))
	byMem = max(1, int(availableMB()/int64(memMB+vmOverheadMB)))
	return byCPU, byMem
}

// availableMB is MemAvailable from /proc/meminfo, or 4 GiB when unknown.
func availableMB() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 4096
	}
	for _, l := range strings.Split(string(data), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(l, "MemAvailable: %d kB", &kb); err == nil {
			return kb / 1024
		}
	}
	return 4096
}

// Run runs the matrix's cells (o.Shard's) into o.Out and returns the
// tree. Cells run in parallel, up to o.Jobs; one failing cell never stops
// the others, and the errors of all come back joined, each naming its
// cell. Bad input gives a *specfile.BadInputError before any cell runs and leaves
// no tree behind. A suite experiment's cell runs the suite (fstests) on
// o.Fstests' environment, made once when such a cell is to run.
func Run(ctx context.Context, f *File, o Options) (*Tree, error) {
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
	cells := o.Shard.Of(f.Cells())
	if len(cells) == 0 {
		return nil, &specfile.BadInputError{Err: fmt.Errorf("shard %s of %s has no cells (the matrix has %d)", o.Shard, f.Path, len(f.Cells()))}
	}
	t, err := openTree(f, &o)
	if err != nil {
		return nil, err
	}
	pending := cells
	if t != nil {
		pending = nil
		for _, c := range cells {
			if !NeedsRun(t.Results[c.ID]) {
				continue
			}
			pending = append(pending, c)
		}
	}
	env, err := suiteEnv(ctx, f, &o, pending)
	if err != nil {
		return nil, err
	}
	if t == nil {
		if t, err = createTree(f, &o, cells); err != nil {
			return nil, err
		}
	}
	if len(pending) < len(cells) {
		progress("klab: resuming %s: %d of %d cell(s) finished already", t.Dir, len(cells)-len(pending), len(cells))
	}
	// Kernels first, one at a time: builds and downloads are shared by
	// every cell of a kernel, and a kernel that cannot be had is an
	// error of its cells only.
	kernelErr := map[string]error{}
	for _, k := range f.Kernels {
		if !anyCell(pending, func(c Cell) bool { return slices.Contains(cellKernels(f, c), k.Ref) }) {
			continue
		}
		if k.Build != nil && o.Build != nil {
			progress("klab: building %s...", k.Ref)
			if err := o.Build(ctx, k.Build); err != nil {
				kernelErr[k.Ref] = fmt.Errorf("build %s: %w", k.Ref, err)
				continue
			}
		}
		if _, err := o.Opener.ResolveKernel(ctx, k.Ref); err != nil {
			kernelErr[k.Ref] = fmt.Errorf("kernel %s: %w", k.Ref, err)
		}
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
	}
	cpus, memMB := vmShape(f, &o)
	byCPU, byMem := Slots(cpus, memMB)
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = min(byCPU, byMem)
	}
	if jobs > byMem {
		progress("klab: --jobs %d: only %d VM(s) of %d MiB fit in the available memory; running %d at once", jobs, byMem, memMB, byMem)
		jobs = byMem
	}
	jobs = max(1, min(jobs, len(pending)))
	progress("klab: matrix %s: %d cell(s) to run, %d at once; results in %s", f.Name, len(pending), jobs, t.Dir)

	disp := newDisplay(o.Progress, o.Terminal, len(cells), len(cells)-len(pending))
	defer disp.close()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	// A full file system stops the matrix: no cell is started once the
	// tree's file system has less than MinFreeBytes free or a cell ran
	// out of space; the cells not started are left for --resume.
	var full *DiskFullError
	queue := make(chan Cell)
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range queue {
				mu.Lock()
				if full == nil {
					full = checkFree(t.Dir, o.minFree())
					if full != nil {
						progress("klab: %v", full.Reason())
					}
				}
				if full != nil {
					full.NotStarted++
					mu.Unlock()
					continue
				}
				mu.Unlock()
				var kerrs []error
				for _, ref := range cellKernels(f, c) {
					kerrs = append(kerrs, kernelErr[ref])
				}
				r, err := t.runCell(ctx, f, &o, env, c, errors.Join(kerrs...), disp)
				mu.Lock()
				t.Results[c.ID] = r
				if err != nil {
					errs = append(errs, fmt.Errorf("cell %s: %w", c.Name(), err))
					if full == nil && IsDiskFull(err) {
						full = &DiskFullError{Dir: t.Dir, Err: err, Cell: c.Name()}
						progress("klab: %v", full.Reason())
					}
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, c := range pending {
		select {
		case queue <- c:
		case <-ctx.Done():
			break feed
		}
	}
	close(queue)
	wg.Wait()
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	if full != nil {
		errs = append(errs, full)
	}
	return t, errors.Join(errs...)
}

// NeedsRun says whether a cell with result r is run (again) by a resume:
// one not run or interrupted, and one that could not run (StatusError:
// its QEMU was killed, the disk was full, its kernel could not be had).
// A complete cell is kept, whatever its report says.
func NeedsRun(r *CellResult) bool {
	return r == nil || r.Status != StatusComplete
}

// MinFreeBytes is the free space the file system of a results tree must
// have for a cell to start: a cell writes a few MiB at most (its
// console, events and reports).
const MinFreeBytes = 16 << 20

func (o *Options) minFree() int64 {
	if o.MinFree != 0 {
		return o.MinFree
	}
	return MinFreeBytes
}

// DiskFullError says that the results tree's file system filled up, and
// that the matrix stopped starting cells.
type DiskFullError struct {
	// Dir is the results tree.
	Dir string
	// Free is what statfs said was free, when that was the reason.
	Free int64
	// Err is the error of the cell (Cell) that ran out of space, when that
	// was the reason.
	Err  error
	Cell string
	// NotStarted counts the cells that were not started.
	NotStarted int
}

// Reason says why the matrix stops.
func (e *DiskFullError) Reason() string {
	if e.Err != nil {
		return fmt.Sprintf("the file system of %s is full (cell %s: no space left on device): starting no more cells", e.Dir, e.Cell)
	}
	return fmt.Sprintf("the file system of %s is full (%d KiB free, a cell needs %d MiB): starting no more cells", e.Dir, e.Free>>10, MinFreeBytes>>20)
}

func (e *DiskFullError) Error() string {
	return fmt.Sprintf("%s; %d cell(s) not started; the finished cells are kept: free space there, or copy %s to a bigger disk, and go on with klab matrix run FILE --resume DIR",
		e.Reason(), e.NotStarted, e.Dir)
}

// IsDiskFull says whether err comes from a full file system: ENOSPC or
// EDQUOT, wrapped. Only the host's own errors count: a guest's message
// that quotes "no space left on device" is about the guest's disks.
func IsDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// checkFree returns a *DiskFullError when dir's file system has less than
// min bytes free for an unprivileged user; nil when it has, or when it
// cannot tell.
func checkFree(dir string, min int64) *DiskFullError {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free >= min {
		return nil
	}
	return &DiskFullError{Dir: dir, Free: free}
}

func anyCell(cells []Cell, fn func(Cell) bool) bool {
	for _, c := range cells {
		if fn(c) {
			return true
		}
	}
	return false
}

// openTree checks o.Out: to resume, it opens the tree there, made by a
// run of f as it is now and of the same shard; for a new tree, o.Out
// must not exist or be empty, and openTree returns nil.
func openTree(f *File, o *Options) (*Tree, error) {
	if o.Out == "" {
		return nil, &specfile.BadInputError{Err: errors.New("no results directory given")}
	}
	if o.Resume {
		t, err := Open(o.Out)
		if err != nil {
			return nil, &specfile.BadInputError{Err: option.Errorf("resume", "%s: %w", o.Out, err)}
		}
		switch {
		case t.Manifest.SHA256 != f.SHA256:
			return nil, &specfile.BadInputError{Err: option.Errorf("resume", "%s: it holds a run of %s (sha256 %.12s), not of %s as it is now (sha256 %.12s)",
				o.Out, t.Manifest.File, t.Manifest.SHA256, f.Path, f.SHA256)}
		case t.Manifest.Shard != shardText(o.Shard):
			return nil, &specfile.BadInputError{Err: option.Errorf("resume", "%s: it holds shard %q, not %q", o.Out, t.Manifest.Shard, shardText(o.Shard))}
		}
		return t, nil
	}
	if entries, err := os.ReadDir(o.Out); err == nil && len(entries) > 0 {
		return nil, &specfile.BadInputError{Err: option.Errorf("out", "%s exists and is not empty: resume it, or choose another results directory", o.Out)}
	}
	return nil, nil
}

// createTree makes the tree o.Out for cells, with its manifest.
func createTree(f *File, o *Options, cells []Cell) (*Tree, error) {
	m := &Manifest{Schema: ManifestSchema, Name: f.Name, File: f.Path, SHA256: f.SHA256, Baseline: f.Baseline,
		Shard: shardText(o.Shard), Cells: cells, Total: len(f.Cells()), Start: time.Now().UTC(), Command: o.Command}
	for _, k := range f.Kernels {
		m.Kernels = append(m.Kernels, k.Ref)
	}
	for _, e := range f.Experiments {
		m.Experiments = append(m.Experiments, e.Label)
	}
	if err := os.MkdirAll(filepath.Join(o.Out, CellsDir), 0o755); err != nil {
		return nil, err
	}
	if err := fileio.WriteAtomic(filepath.Join(o.Out, FileCopy), f.Data, 0o644); err != nil {
		return nil, err
	}
	if err := fileio.WriteJSON(filepath.Join(o.Out, ManifestFile), m); err != nil {
		return nil, err
	}
	return &Tree{Dir: o.Out, Manifest: m, Results: map[string]*CellResult{}}, nil
}

func shardText(s Shard) string {
	if s.N <= 1 {
		return ""
	}
	return s.String()
}

// runCell runs one cell's experiment into its directory and records its
// result. A cell left by an earlier, interrupted run starts afresh.
func (t *Tree) runCell(ctx context.Context, f *File, o *Options, env *fstests.Env, c Cell, kernelErr error, disp *display) (*CellResult, error) {
	dir := filepath.Join(t.Dir, CellsDir, c.ID)
	r := &CellResult{Cell: c, Start: time.Now().UTC()}
	finish := func(status, msg string) (*CellResult, error) {
		r.Status, r.Message, r.End = status, msg, time.Now().UTC()
		err := fileio.WriteJSON(filepath.Join(dir, CellFile), r)
		disp.done(c, r)
		return r, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return finish(StatusError, err.Error())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return finish(StatusError, err.Error())
	}
	if kernelErr != nil {
		_, err := finish(StatusError, kernelErr.Error())
		return r, errors.Join(kernelErr, err)
	}
	log, err := os.Create(filepath.Join(dir, "progress.log"))
	if err != nil {
		return finish(StatusError, err.Error())
	}
	defer log.Close()
	disp.start(c)
	var runDir string
	if isSuite(f, c) {
		runDir, err = runSuiteCell(ctx, f, o, env, c, dir, log)
	} else {
		runDir, err = runExperimentCell(ctx, f, o, c, dir, log)
	}
	if runDir != "" {
		if rel, rerr := filepath.Rel(t.Dir, runDir); rerr == nil {
			r.Run = rel
		}
	}
	switch {
	case ctx.Err() != nil:
		fr, werr := finish(StatusIncomplete, "interrupted")
		return fr, werr
	case err != nil:
		_, werr := finish(StatusError, err.Error())
		return r, errors.Join(err, werr)
	}
	return finish(StatusComplete, "")
}

// runExperimentCell runs an experiment of workloads and checks on the
// cell's kernel (its A/B when it compares a parameter) in dir, writes
// its reports, and returns its run directory ("" when none was made).
func runExperimentCell(ctx context.Context, f *File, o *Options, c Cell, dir string, log io.Writer) (string, error) {
	e := f.Experiments[c.E]
	single := e.Spec.Spec.Compare == "" || e.Spec.Spec.Compare == "kernel"
	res, err := experiments.Run(ctx, e.Spec, experiments.RunOptions{
		PlanOptions: experiments.PlanOptions{Kernels: []string{c.Kernel}, Rounds: e.Rounds, Single: single},
		CPUs:        o.CPUs, MemMB: o.MemMB, Accel: o.Accel, RunsDir: dir,
		Opener: o.Opener, Progress: log, Command: o.Command, Userspace: o.Userspace,
	})
	if res == nil {
		return "", err
	}
	if saved, oerr := experiments.Open(res.Dir); oerr == nil {
		saved.StrictReference = o.StrictReference
		_ = saved.WriteReports(saved.Report())
	}
	return res.Dir, err
}

// runSuiteCell runs a suite experiment's cell in dir: on the baseline
// alone, or as an A/B of the baseline and the cell's kernel (see
// cellKernels). The suite writes its own reports. A cell that ran
// completes, whatever its tests did: the report reads the verdict back.
func runSuiteCell(ctx context.Context, f *File, o *Options, env *fstests.Env, c Cell, dir string, log io.Writer) (string, error) {
	if env == nil {
		return "", errors.New("no fstests environment for a suite cell")
	}
	res, err := experiments.RunSuite(ctx, f.Experiments[c.E].Spec, experiments.SuiteOptions{
		Kernels: cellKernels(f, c), Env: *env, RunsDir: dir, Progress: log, Command: o.Command,
	})
	if res == nil {
		return "", err
	}
	if err == nil && res.Result != nil && res.Result.Reported == 0 {
		err = errors.New("fstests reported no test result")
	}
	return res.Dir, err
}

// isSuite says whether c is a suite experiment's cell.
func isSuite(f *File, c Cell) bool {
	return c.E < len(f.Experiments) && f.Experiments[c.E].Spec.Spec.Suite != nil
}

// cellKernels are the kernels cell c boots: its own; for a suite cell
// on another kernel than the baseline, the baseline (A) and its own
// (B), so that a new failure is rerun on both sides in the cell and
// judged by the suite's flake rule.
func cellKernels(f *File, c Cell) []string {
	if isSuite(f, c) && c.Kernel != f.Baseline {
		return []string{f.Baseline, c.Kernel}
	}
	return []string{c.Kernel}
}

// suiteEnv makes the fstests environment of the suite cells among
// pending, once; nil when there are none.
func suiteEnv(ctx context.Context, f *File, o *Options, pending []Cell) (*fstests.Env, error) {
	if !anyCell(pending, func(c Cell) bool { return isSuite(f, c) }) {
		return nil, nil
	}
	if o.Fstests == nil {
		return nil, &specfile.BadInputError{Err: fmt.Errorf("%s has suite experiments (fstests), and klab cannot build fstests here", f.Path)}
	}
	env, err := o.Fstests(ctx)
	var se *fstests.SourceError
	switch {
	case errors.As(err, &se):
		return nil, &specfile.BadInputError{Err: fmt.Errorf("%s has suite experiments (fstests): %w", f.Path, err)}
	case err != nil:
		return nil, fmt.Errorf("fstests for the suite cells: %w", err)
	}
	return &env, nil
}

// Tree is a results tree: the manifest and the cells' results.
type Tree struct {
	Dir      string
	Manifest *Manifest
	// Results are the finished (or interrupted) cells by ID.
	Results map[string]*CellResult
	// StrictReference makes Report count a row or check that
	// contradicts its reference as a failure.
	StrictReference bool
}

// Open reads a results tree. A cell whose directory has no cell.json
// (its klab was killed) counts as incomplete.
func Open(dir string) (*Tree, error) {
	t := &Tree{Dir: dir, Manifest: &Manifest{}, Results: map[string]*CellResult{}}
	if err := fileio.ReadJSON(filepath.Join(dir, ManifestFile), t.Manifest); err != nil {
		return nil, err
	}
	if t.Manifest.Schema != ManifestSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", filepath.Join(dir, ManifestFile), t.Manifest.Schema, ManifestSchema)
	}
	ids := map[string]bool{}
	for _, c := range t.Manifest.Cells {
		if !idRe.MatchString(c.ID) || ids[c.ID] {
			return nil, fmt.Errorf("%s: bad or repeated cell %q", filepath.Join(dir, ManifestFile), c.ID)
		}
		ids[c.ID] = true
		var r CellResult
		err := fileio.ReadJSON(filepath.Join(dir, CellsDir, c.ID, CellFile), &r)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if _, serr := os.Stat(filepath.Join(dir, CellsDir, c.ID)); serr == nil {
				t.Results[c.ID] = &CellResult{Cell: c, Status: StatusIncomplete, Message: "its klab stopped before the cell ended"}
			}
			continue
		case err != nil:
			return nil, err
		}
		if r.ID != c.ID || (r.Run != "" && !filepath.IsLocal(r.Run)) {
			return nil, fmt.Errorf("%s: not the result of cell %s", filepath.Join(dir, CellsDir, c.ID, CellFile), c.ID)
		}
		t.Results[c.ID] = &r
	}
	return t, nil
}

// idRe matches a cell ID: what Cells makes.
var idRe = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9._-]+$`)

// Missing are the tree's cells that a resume runs (NeedsRun): not run,
// incomplete, or that could not run.
func (t *Tree) Missing() []Cell {
	var out []Cell
	for _, c := range t.Manifest.Cells {
		if NeedsRun(t.Results[c.ID]) {
			out = append(out, c)
		}
	}
	return out
}

// sortedCells returns cells sorted by ID.
func sortedCells(cells []Cell) []Cell {
	out := append([]Cell(nil), cells...)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
