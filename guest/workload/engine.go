// Package workload is klab's I/O workload engine for the guest: the
// patterns of the seeds (sequential and random writes, fio's ftruncate
// storm, buffered, O_DIRECT and mmap reads, file creates, a futimes storm)
// and an fstat storm in Go, and a runner for real fio whose JSON output it maps into the same
// proto.Metrics. Both stream per-interval proto.Samples while they run.
//
// The Go engine mirrors fio's sync engines closely on purpose, so that the
// two can be cross-checked (experiments/fidelity.yaml): one system call per
// operation, two clock reads per operation, fio's file names, its
// fallocate and fadvise behaviour, and its ramp and runtime rules. Each job
// runs on its own goroutine locked to its own OS thread, and Run raises
// GOMAXPROCS above the job count while it runs, so that the kernel, not
// the Go scheduler, decides which job runs, as it does for fio's threads.
// Job threads block the runtime's preemption signal (SIGURG): a signal
// that lands while a thread waits in a FUSE request makes the kernel send
// the server an INTERRUPT, which fio's threads would never cause.
// Profile takes a CPU profile with SIGPROF, which does signal the job
// threads.
package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
)

// publishEvery is how often a job publishes its running totals for the
// sampler: often enough for exact per-second samples, rarely enough to
// cost nothing.
const publishEvery = int64(time.Millisecond)

// yieldEvery is how often a job yields to the Go scheduler between
// operations: just under the 10 ms after which the runtime preempts a
// goroutine, wherever it is (inside a timed operation, most likely).
const yieldEvery = int64(8 * time.Millisecond)

// Options tune Run.
type Options struct {
	// OnSample receives each sample while the jobs run, from a single
	// goroutine; nil drops them. The Step field is left 0 for the caller.
	OnSample func(proto.Sample)
	// Version is stamped into Metrics.EngineVersion.
	Version string

	// jobClock, when set, gives job i its own clock in nanoseconds since
	// the start, in place of the run's monotonic clock: tests pass virtual
	// clocks, so that ramp and runtime rules are checked exactly.
	jobClock func(i int) func() int64
}

// run is the shared state of one Run.
type run struct {
	n    *normalized
	base time.Time
	// rampNs and endNs are offsets from base: measuring starts at rampNs,
	// and ends at endNs when endNs > 0.
	rampNs, endNs int64
	stop          atomic.Bool
}

// since returns the monotonic nanoseconds since base.
func (r *run) since() int64 { return int64(time.Since(r.base)) }

// Run runs the workload step s and returns its metrics. It validates s
// first (every problem, joined, as *ParamError). When a job fails or ctx
// ends, the other jobs stop too, and Run returns the metrics measured so
// far with the error.
func Run(ctx context.Context, s *proto.WorkloadStep, opt Options) (*proto.Metrics, error) {
	n, err := normalize(s)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("workload %s: %w", n.Name, err)
	}
	r := &run{n: n}
	if n.RampMs > 0 {
		r.rampNs = n.RampMs * int64(time.Millisecond)
	}
	if n.RuntimeMs > 0 {
		r.endNs = r.rampNs + n.RuntimeMs*int64(time.Millisecond)
	}

	// Enough Ps that a job never waits for one: a job blocked in a system
	// call or a page fault keeps its P, like a fio thread keeps its CPU
	// share.
	if want := n.Jobs + 2; runtime.GOMAXPROCS(0) < want {
		prev := runtime.GOMAXPROCS(want)
		defer runtime.GOMAXPROCS(prev)
	}

	jobs := make([]*job, n.Jobs)
	for i := range jobs {
		jobs[i] = &job{n: n, idx: i, fd: -1, now: r.since}
		if opt.jobClock != nil {
			jobs[i].now = opt.jobClock(i)
		}
	}
	// Set up every job on its own thread, then start them together.
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	ready.Add(len(jobs))
	done.Add(len(jobs))
	for _, j := range jobs {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			restore := quietThread()
			defer restore()
			j.err = j.setup()
			ready.Done()
			<-start
			if j.err == nil && !r.stop.Load() {
				j.err = j.loop(r)
			}
			j.teardown()
			if j.err != nil {
				r.stop.Store(true)
			}
		}()
	}
	ready.Wait()
	var setupErrs []error
	for _, j := range jobs {
		if j.err != nil {
			setupErrs = append(setupErrs, j.err)
		}
	}
	if len(setupErrs) > 0 {
		r.stop.Store(true)
		close(start)
		done.Wait()
		return nil, fmt.Errorf("workload %s: setup: %w", n.Name, errors.Join(setupErrs...))
	}

	var prof bytes.Buffer
	profiling := false
	if n.Profile {
		if err := pprof.StartCPUProfile(&prof); err == nil {
			profiling = true
		}
	}

	r.base = time.Now()
	close(start)
	finished := make(chan struct{})
	go func() { done.Wait(); close(finished) }()
	stopOnCancel := context.AfterFunc(ctx, func() { r.stop.Store(true) })
	defer stopOnCancel()

	smp := sampler{r: r, jobs: jobs, emit: opt.OnSample}
	tick := time.NewTicker(time.Duration(n.SampleMs) * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-tick.C:
			smp.sample(false)
		}
	}
	smp.sample(true)
	if profiling {
		pprof.StopCPUProfile()
	}

	m := aggregate(r, jobs, opt.Version)
	if profiling {
		m.CPUProfile = prof.Bytes()
	}
	var errs []error
	for _, j := range jobs {
		if j.err != nil {
			m.Errors++
			errs = append(errs, j.err)
		}
	}
	if err := ctx.Err(); err != nil && len(errs) == 0 {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return m, fmt.Errorf("workload %s: %w", n.Name, errors.Join(errs...))
	}
	return m, nil
}

// aggregate sums the jobs' measured numbers into Metrics, with fio's group
// reporting rules: rates over the longest job's runtime.
func aggregate(r *run, jobs []*job, version string) *proto.Metrics {
	m := &proto.Metrics{
		Engine:        proto.EngineGo,
		EngineVersion: version,
		Name:          r.n.Name,
		Pattern:       string(r.n.Pattern),
		Jobs:          len(jobs),
		RampNs:        r.rampNs,
	}
	var h Histogram
	for _, j := range jobs {
		m.Ops += j.res.ops
		m.Bytes += j.res.bytes
		m.RuntimeNs = max(m.RuntimeNs, j.res.runtimeNs)
		m.CPU.UserNs += j.res.userNs
		m.CPU.SysNs += j.res.sysNs
		h.Merge(&j.hist)
	}
	deriveRates(m)
	m.Latency = h.Latency()
	return m
}

// sampler turns the jobs' published running totals into Samples.
type sampler struct {
	r    *run
	jobs []*job
	emit func(proto.Sample)
	// Totals and time at the end of the previous sample.
	lastNs                      int64
	lastOps, lastBytes, lastLat int64
}

// sample emits the interval since the previous one. The final one is sent
// only when something happened in it.
func (s *sampler) sample(final bool) {
	now := s.r.since()
	var ops, byt, lat int64
	for _, j := range s.jobs {
		ops += j.pubOps.Load()
		byt += j.pubBytes.Load()
		lat += j.pubLat.Load()
	}
	dOps, dBytes, dLat, dNs := ops-s.lastOps, byt-s.lastBytes, lat-s.lastLat, now-s.lastNs
	s.lastOps, s.lastBytes, s.lastLat, s.lastNs = ops, byt, lat, now
	if s.emit == nil || dNs <= 0 || (final && dOps == 0) {
		return
	}
	sec := float64(dNs) / 1e9
	smp := proto.Sample{
		Engine:      proto.EngineGo,
		Name:        s.r.n.Name,
		ElapsedMs:   now / int64(time.Millisecond),
		IntervalMs:  dNs / int64(time.Millisecond),
		Ramp:        now <= s.r.rampNs,
		Ops:         dOps,
		Bytes:       dBytes,
		OpsPerSec:   float64(dOps) / sec,
		BytesPerSec: float64(dBytes) / sec,
	}
	if dOps > 0 {
		smp.MeanLatNs = dLat / dOps
	}
	s.emit(smp)
}

// jobResult is what one job measured after its ramp.
type jobResult struct {
	ops, bytes, runtimeNs, userNs, sysNs int64
}

// loop runs the job's operations until its end condition, recording the
// measured ones. It runs on the job's locked OS thread.
func (j *job) loop(r *run) (err error) {
	defer func() {
		// mmap jobs turn SIGBUS/SIGSEGV on their mapping into a panic
		// (debug.SetPanicOnFault); report it as the job's error.
		if p := recover(); p != nil {
			err = fmt.Errorf("job %d: fault: %v", j.idx, p)
		}
	}()
	n := j.n
	var (
		measuring        = r.rampNs == 0
		ops, byt         int64
		totOps, totBytes int64
		totLat           int64
		startNs          int64
		ru0              unix.Rusage
		c0               int64
		nextPub          int64
		nextYield        = int64(yieldEvery)
		sizeBased        = !n.TimeBased
		targetBytes      = j.targetBytes
		targetOps        = j.targetOps
		countOps         = !needsData(n.Pattern) // create, futimes, fstat
		endNs            = r.endNs
		op               = j.op
		after            = j.after
		hist             = &j.hist
	)
	finish := func(t int64) {
		j.pubOps.Store(totOps)
		j.pubBytes.Store(totBytes)
		j.pubLat.Store(totLat)
		if !measuring {
			return
		}
		c1 := threadCPU()
		var ru1 unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru1)
		j.res = jobResult{ops: ops, bytes: byt, runtimeNs: t - startNs}
		j.res.userNs, j.res.sysNs = splitCPU(c1-c0,
			unix.TimevalToNsec(ru1.Utime)-unix.TimevalToNsec(ru0.Utime),
			unix.TimevalToNsec(ru1.Stime)-unix.TimevalToNsec(ru0.Stime))
	}
	if measuring {
		c0 = threadCPU()
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
	}
	for {
		if r.stop.Load() {
			finish(j.now())
			return nil
		}
		t0 := j.now()
		nb, err := op()
		t1 := j.now()
		if err == nil && after != nil {
			err = after()
		}
		if err != nil {
			finish(t1)
			return fmt.Errorf("job %d: %w", j.idx, err)
		}
		lat := t1 - t0
		totOps++
		totBytes += nb
		totLat += lat
		if measuring {
			hist.Record(lat)
			ops++
			byt += nb
			if endNs > 0 && t1 >= endNs {
				finish(t1)
				return nil
			}
			if sizeBased && ((countOps && ops >= targetOps) || (!countOps && byt >= targetBytes)) {
				finish(t1)
				return nil
			}
		} else if t1 >= r.rampNs {
			measuring = true
			startNs = t1
			c0 = threadCPU()
			_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru0)
		}
		if t1 >= nextPub {
			j.pubOps.Store(totOps)
			j.pubBytes.Store(totBytes)
			j.pubLat.Store(totLat)
			nextPub = t1 + publishEvery
		}
		if t1 >= nextYield {
			// Yield between operations before the runtime preempts
			// the job inside one (after 10 ms on the same slice),
			// which would add the scheduler's round trip to that
			// operation's latency.
			runtime.Gosched()
			nextYield = j.now() + yieldEvery
		}
	}
}

// threadCPU returns the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID,
// exact), or 0 when it cannot be read.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// splitCPU divides the exact thread CPU time total into user and system
// time in the proportion getrusage reports them (getrusage is only as
// fine as the scheduler tick). With no rusage to go by, or no exact
// total, it trusts getrusage.
func splitCPU(total, ruUser, ruSys int64) (user, sys int64) {
	ru := ruUser + ruSys
	switch {
	case total <= 0:
		return ruUser, ruSys
	case ru <= 0:
		// Too short for a tick: the split is unknown; count it as
		// system time, where I/O workloads spend most of theirs.
		return 0, total
	}
	user = int64(float64(total) * float64(ruUser) / float64(ru))
	return user, total - user
}

// quietThread blocks SIGURG, the Go runtime's asynchronous preemption
// signal, on the calling thread, which must be locked to its goroutine,
// and returns the function that restores the thread's signal mask. The
// runtime then preempts the job only at function calls, without a signal
// (it sends at most one, which stays pending until the mask is restored).
func quietThread() (restore func()) {
	var set, old unix.Sigset_t
	sigaddset(&set, unix.SIGURG)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return func() {}
	}
	return func() { _ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }
}

// sigaddset adds sig to set, as sigaddset(3) does.
func sigaddset(set *unix.Sigset_t, sig unix.Signal) {
	bit := uint(sig) - 1
	set.Val[bit/64] |= 1 << (bit % 64)
}

// deriveRates fills m's per-second and per-operation figures from its
// totals, the same way for both engines.
func deriveRates(m *proto.Metrics) {
	if m.RuntimeNs > 0 {
		sec := float64(m.RuntimeNs) / 1e9
		m.OpsPerSec = float64(m.Ops) / sec
		m.BytesPerSec = float64(m.Bytes) / sec
	}
	if m.Ops > 0 {
		m.CPU.PerOpNs = float64(m.CPU.UserNs+m.CPU.SysNs) / float64(m.Ops)
		m.CPU.UserPerOpNs = float64(m.CPU.UserNs) / float64(m.Ops)
	}
}
