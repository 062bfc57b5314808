package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
	"klab/internal/testenv"
)

func TestValidateMessages(t *testing.T) {
	ok := proto.WorkloadStep{Pattern: proto.PatternSeqWrite, Dir: "/tmp/x", Jobs: 1, BlockSize: 4096, FileSize: 1 << 20}
	if err := Validate(&ok); err != nil {
		t.Fatalf("valid step: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*proto.WorkloadStep)
		want []string
	}{
		{"bs zero", func(s *proto.WorkloadStep) { s.BlockSize = 0 }, []string{"bs: 0 is out of range, want 512..64M"}},
		{"bs huge", func(s *proto.WorkloadStep) { s.BlockSize = 128 << 20 }, []string{"bs: 128M is out of range, want 512..64M"}},
		{"jobs", func(s *proto.WorkloadStep) { s.Jobs = 0 }, []string{"jobs: 0 is out of range, want 1..1024"}},
		{"size below bs", func(s *proto.WorkloadStep) { s.FileSize = 1024 }, []string{"size: 1K is out of range, want 4K..1T"}},
		{"pattern", func(s *proto.WorkloadStep) { s.Pattern = "scribble" }, []string{`pattern: "scribble" is not a pattern, want one of seqwrite, randwrite`}},
		{"dir", func(s *proto.WorkloadStep) { s.Dir = "rel" }, []string{`dir: "rel" is relative`}},
		{"time based without runtime", func(s *proto.WorkloadStep) { s.TimeBased = true }, []string{"runtime_ms: is 0 but time_based needs a runtime"}},
		{"fallocate", func(s *proto.WorkloadStep) { s.Fallocate = "maybe" }, []string{`fallocate: "maybe" is not a mode`}},
		{"sample", func(s *proto.WorkloadStep) { s.SampleMs = 5 }, []string{"sample_ms: 5 is out of range, want 100..60000"}},
		{"files on write", func(s *proto.WorkloadStep) { s.Files = 3 }, []string{"files: is set but only create uses it"}},
		{"shared file", func(s *proto.WorkloadStep) { s.Jobs = 2; s.FilenameFormat = "f" }, []string{`filename_format: "f" has no $jobnum`}},
		{"escape", func(s *proto.WorkloadStep) { s.FilenameFormat = "../$jobnum" }, []string{"leaves dir"}},
		{"many at once", func(s *proto.WorkloadStep) { s.BlockSize = 0; s.Jobs = 2000; s.RampMs = -1 }, []string{"bs: 0", "jobs: 2000", "ramp_ms: -1"}},
		{"create needs files", func(s *proto.WorkloadStep) {
			s.Pattern = proto.PatternCreate
			s.BlockSize, s.FileSize = 0, 0
		}, []string{"files: 0 is out of range, want 1..10000000"}},
		{"fstat needs runtime", func(s *proto.WorkloadStep) {
			s.Pattern = proto.PatternFstat
			s.BlockSize, s.FileSize, s.RuntimeMs = 0, 0, 0
		}, []string{"runtime_ms: is 0 but fstat runs until its runtime is over"}},
		{"futimes needs runtime", func(s *proto.WorkloadStep) {
			s.Pattern = proto.PatternFutimes
			s.BlockSize, s.FileSize = 0, 0
		}, []string{"runtime_ms: is 0 but futimes runs until its runtime is over"}},
		{"dio alignment", func(s *proto.WorkloadStep) { s.Pattern = proto.PatternDirectRandRead; s.BlockSize = 1000 }, []string{"bs: 1000 is not a multiple of 512"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok
			tc.mod(&s)
			err := Validate(&s)
			if err == nil {
				t.Fatal("no error")
			}
			var pe *ParamError
			if !errors.As(err, &pe) {
				t.Errorf("%v is not a *ParamError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 512: "512", 1024: "1K", 1536: "1536", 64 << 20: "64M", 3 << 30: "3G", 1 << 40: "1T"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// runStep runs s and checks the invariants every pattern shares.
func runStep(t *testing.T, s proto.WorkloadStep) (*proto.Metrics, []proto.Sample) {
	t.Helper()
	var mu sync.Mutex
	var samples []proto.Sample
	m, err := Run(context.Background(), &s, Options{OnSample: func(smp proto.Sample) {
		mu.Lock()
		samples = append(samples, smp)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if m.Engine != proto.EngineGo || m.Jobs != s.Jobs || m.Pattern != string(s.Pattern) {
		t.Errorf("metrics identity %+v", m)
	}
	if m.Ops <= 0 || m.RuntimeNs <= 0 || m.OpsPerSec <= 0 {
		t.Fatalf("no work measured: %+v", m)
	}
	if l := m.Latency; l.Count != m.Ops || l.MinNs <= 0 || l.MinNs > l.P50Ns || l.P50Ns > l.P90Ns || l.P90Ns > l.P99Ns || l.P99Ns > l.P999Ns || l.P999Ns > l.MaxNs {
		t.Errorf("latency not ordered or not counted: %+v (ops %d)", l, m.Ops)
	}
	if want := float64(m.Ops) / (float64(m.RuntimeNs) / 1e9); m.OpsPerSec < want*0.999 || m.OpsPerSec > want*1.001 {
		t.Errorf("ops/s %.0f, want ops/runtime %.0f", m.OpsPerSec, want)
	}
	if m.CPU.UserNs+m.CPU.SysNs <= 0 || m.CPU.PerOpNs <= 0 {
		t.Errorf("no CPU time measured: %+v", m.CPU)
	}
	var sOps int64
	for _, smp := range samples {
		if smp.Engine != proto.EngineGo || smp.IntervalMs < 0 || smp.Ops < 0 {
			t.Errorf("bad sample %+v", smp)
		}
		sOps += smp.Ops
	}
	if sOps < m.Ops {
		t.Errorf("samples count %d ops, fewer than the %d measured", sOps, m.Ops)
	}
	t.Logf("%s: %d ops, %.0f ops/s, %.1f MB/s, p50 %d ns p99 %d ns, cpu %.0f ns/op (user %.0f), %d samples",
		s.Pattern, m.Ops, m.OpsPerSec, m.BytesPerSec/1e6, m.Latency.P50Ns, m.Latency.P99Ns, m.CPU.PerOpNs, m.CPU.UserPerOpNs, len(samples))
	return m, samples
}

func TestSeqWriteSizeBased(t *testing.T) {
	dir := t.TempDir()
	m, _ := runStep(t, proto.WorkloadStep{Pattern: proto.PatternSeqWrite, Dir: dir, Jobs: 2, BlockSize: 1024, FileSize: 1 << 20, SampleMs: 100})
	if m.Bytes != 2<<20 || m.Ops != 2*1024 {
		t.Errorf("wrote %d bytes in %d ops, want 2M in 2048", m.Bytes, m.Ops)
	}
	for i := 0; i < 2; i++ {
		fi, err := os.Stat(filepath.Join(dir, "seqwrite."+string(rune('0'+i))+".0"))
		if err != nil || fi.Size() != 1<<20 {
			t.Errorf("job %d file: %v, size %v", i, err, fi)
		}
	}
}

func TestSeqWriteTimeBasedWithRamp(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	m, samples := runStep(t, proto.WorkloadStep{Pattern: proto.PatternSeqWrite, Dir: dir, Jobs: 4, BlockSize: 1024, FileSize: 256 << 10,
		RampMs: 200, RuntimeMs: 400, TimeBased: true, SampleMs: 100, Fallocate: proto.FallocateNone})
	wall := time.Since(start)
	// Measuring starts at the first operation that ends after the ramp
	// and stops before Run returns, so the runtime fits in the wall time
	// less the ramp, however loaded the host. (The exact ramp and runtime
	// rules are checked in virtual time: TestRampAndRuntimeVirtualTime.)
	if rt := time.Duration(m.RuntimeNs); rt > wall-200*time.Millisecond {
		t.Errorf("runtime %v in a wall time of %v: the 200ms ramp was measured", rt, wall)
	}
	if m.RampNs != 200e6 {
		t.Errorf("ramp %d", m.RampNs)
	}
	if m.Bytes != m.Ops*1024 {
		t.Errorf("%d bytes for %d 1K writes", m.Bytes, m.Ops)
	}
	ramp := 0
	for _, s := range samples {
		if s.Ramp {
			ramp++
		}
	}
	if ramp == 0 || ramp == len(samples) {
		t.Errorf("%d of %d samples in the ramp", ramp, len(samples))
	}
	// The files wrapped: none grew beyond FileSize.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		fi, _ := e.Info()
		if fi.Size() > 256<<10 {
			t.Errorf("%s grew to %d", e.Name(), fi.Size())
		}
	}
}

func TestRandWrite(t *testing.T) {
	dir := t.TempDir()
	m, _ := runStep(t, proto.WorkloadStep{Pattern: proto.PatternRandWrite, Dir: dir, Jobs: 2, BlockSize: 4096, FileSize: 1 << 20,
		Fallocate: proto.FallocateNative, RuntimeMs: 200, TimeBased: true})
	if m.Bytes != m.Ops*4096 {
		t.Errorf("%d bytes for %d 4K writes", m.Bytes, m.Ops)
	}
	fi, err := os.Stat(filepath.Join(dir, "randwrite.1.0"))
	if err != nil || fi.Size() != 1<<20 {
		t.Errorf("preallocated file: %v %v", err, fi)
	}
}

func TestFtruncateStorm(t *testing.T) {
	dir := t.TempDir()
	// The lazytime seed: per-job directories, file t, 16m, 4k sizes.
	m, _ := runStep(t, proto.WorkloadStep{Pattern: proto.PatternFtruncate, Dir: dir, Jobs: 4, BlockSize: 4096, FileSize: 16 << 20,
		RuntimeMs: 300, TimeBased: true, FilenameFormat: "$jobnum/t"})
	if m.Bytes != m.Ops*4096 {
		t.Errorf("ftruncate counts %d bytes for %d ops, want bs each", m.Bytes, m.Ops)
	}
	sizes := map[int64]bool{}
	for i := 0; i < 4; i++ {
		fi, err := os.Stat(filepath.Join(dir, string(rune('0'+i)), "t"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size()%4096 != 0 || fi.Size() >= 16<<20 {
			t.Errorf("job %d file size %d: want a 4K multiple below 16M", i, fi.Size())
		}
		sizes[fi.Size()] = true
	}
	if len(sizes) < 2 {
		t.Errorf("all jobs ended at the same size %v: offsets are not random per job", sizes)
	}
}

func TestReads(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []proto.Pattern{proto.PatternSeqRead, proto.PatternRandRead, proto.PatternMmapSeqRead, proto.PatternMmapRandRead} {
		t.Run(string(p), func(t *testing.T) {
			// All read patterns share one laid-out file per job (name "r").
			m, _ := runStep(t, proto.WorkloadStep{Name: "r", Pattern: p, Dir: dir, Jobs: 2, BlockSize: 4096, FileSize: 2 << 20, RuntimeMs: 200, TimeBased: true})
			if m.Bytes != m.Ops*4096 {
				t.Errorf("%d bytes for %d 4K reads", m.Bytes, m.Ops)
			}
		})
	}
	// Size-based sequential read reads each file once.
	m, _ := runStep(t, proto.WorkloadStep{Name: "r", Pattern: proto.PatternSeqRead, Dir: dir, Jobs: 2, BlockSize: 64 << 10, FileSize: 2 << 20})
	if m.Bytes != 4<<20 {
		t.Errorf("size-based seqread moved %d bytes, want 4M", m.Bytes)
	}
}

func TestDirectRead(t *testing.T) {
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe")
	os.WriteFile(probe, make([]byte, 4096), 0o644)
	if fd, err := unix.Open(probe, unix.O_RDONLY|unix.O_DIRECT, 0); err != nil {
		testenv.Missingf(t, "the test directory %s does not support O_DIRECT: %v", dir, err)
	} else {
		unix.Close(fd)
	}
	for _, p := range []proto.Pattern{proto.PatternDirectSeqRead, proto.PatternDirectRandRead} {
		t.Run(string(p), func(t *testing.T) {
			runStep(t, proto.WorkloadStep{Name: "d", Pattern: p, Dir: dir, Jobs: 2, BlockSize: 4096, FileSize: 1 << 20, RuntimeMs: 200, TimeBased: true})
		})
	}
}

func TestCreates(t *testing.T) {
	dir := t.TempDir()
	m, _ := runStep(t, proto.WorkloadStep{Pattern: proto.PatternCreate, Dir: dir, Jobs: 3, Files: 500})
	if m.Ops != 1500 || m.Bytes != 0 {
		t.Errorf("%d creates (%d bytes), want 1500 (0)", m.Ops, m.Bytes)
	}
	for i := 0; i < 3; i++ {
		ents, err := os.ReadDir(filepath.Join(dir, string(rune('0'+i))))
		if err != nil || len(ents) != 500 {
			t.Errorf("job %d directory: %v, %d files", i, err, len(ents))
		}
	}
	// A second run creates again instead of opening old files.
	m2, _ := runStep(t, proto.WorkloadStep{Pattern: proto.PatternCreate, Dir: dir, Jobs: 3, Files: 500})
	if m2.Ops != 1500 {
		t.Errorf("second run: %d creates", m2.Ops)
	}
}

// TestFstat: every job opens its own file, created empty, and counts
// fstat calls as operations, moving no data.
func TestFstat(t *testing.T) {
	dir := t.TempDir()
	m, _ := runStep(t, proto.WorkloadStep{Pattern: proto.PatternFstat, Dir: dir, Jobs: 3, RuntimeMs: 200, TimeBased: true})
	if m.Bytes != 0 || m.Ops < 3 || m.Jobs != 3 {
		t.Errorf("fstat: %d bytes, %d ops, %d jobs; want no data and an op per call", m.Bytes, m.Ops, m.Jobs)
	}
	for j := 0; j < 3; j++ {
		fi, err := os.Stat(filepath.Join(dir, fmt.Sprintf("fstat.%d.0", j)))
		if err != nil || fi.Size() != 0 {
			t.Errorf("job %d's file: %v, %v", j, fi, err)
		}
	}
}

func TestFutimes(t *testing.T) {
	dir := t.TempDir()
	m, _ := runStep(t, proto.WorkloadStep{Pattern: proto.PatternFutimes, Dir: dir, Jobs: 8, RuntimeMs: 200, TimeBased: true})
	if m.Bytes != 0 {
		t.Errorf("futimes moved %d bytes", m.Bytes)
	}
	fi, err := os.Stat(filepath.Join(dir, "futimes.7.0"))
	if err != nil {
		t.Fatal(err)
	}
	if y := fi.ModTime().Unix(); y != 1_000_000_000 && y != 1_500_000_000 {
		t.Errorf("mtime %v is neither of the two values", fi.ModTime())
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	s := proto.WorkloadStep{Pattern: proto.PatternRandWrite, Dir: t.TempDir(), Jobs: 2, BlockSize: 4096, FileSize: 1 << 20, RuntimeMs: 60_000, TimeBased: true}
	m, err := Run(ctx, &s, Options{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v, want the context's", err)
	}
	if m == nil || m.Ops == 0 {
		t.Fatalf("partial metrics lost: %+v", m)
	}
	// A job that ran to its end would have measured the whole 60 s
	// runtime: less means the cancellation stopped every job.
	if rt := time.Duration(m.RuntimeNs); rt >= 60*time.Second {
		t.Errorf("runtime %v: the jobs ran to their end, not to the cancellation", rt)
	}
}

// virtualClocks gives each job a clock of its own that moves step at
// each reading, whatever the host does meanwhile.
func virtualClocks(step time.Duration) func(int) func() int64 {
	return func(int) func() int64 {
		var ns int64
		return func() int64 {
			ns += int64(step)
			return ns
		}
	}
}

// TestRampAndRuntimeVirtualTime checks the ramp and runtime rules in
// virtual time, where the bounds are exact. A job reads its clock before
// and after each operation (t0, t1), and once more after a yield; with
// readings step apart, the first reading at or past a boundary is the
// boundary itself, and the t1 that ends or starts measuring comes at most
// two readings later. So the measured runtime is the runtime within two
// steps, and every operation takes exactly one step.
func TestRampAndRuntimeVirtualTime(t *testing.T) {
	const step = time.Millisecond
	for _, c := range []struct {
		name          string
		ramp, runtime int64
	}{
		{"ramp", 200, 400},
		{"no ramp", 0, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := proto.WorkloadStep{Pattern: proto.PatternSeqWrite, Dir: t.TempDir(), Jobs: 2, BlockSize: 4096, FileSize: 64 << 10,
				RampMs: c.ramp, RuntimeMs: c.runtime, TimeBased: true, Fallocate: proto.FallocateNone}
			m, err := Run(context.Background(), &s, Options{jobClock: virtualClocks(step)})
			if err != nil {
				t.Fatal(err)
			}
			want := time.Duration(c.runtime) * time.Millisecond
			if rt := time.Duration(m.RuntimeNs); rt < want-2*step || rt > want+2*step {
				t.Errorf("runtime %v, want %v within %v", rt, want, 2*step)
			}
			if c.ramp == 0 && time.Duration(m.RuntimeNs) < want {
				// Without a ramp, measuring starts at 0 and stops
				// at the first t1 at or past the runtime.
				t.Errorf("runtime %v without a ramp, want at least %v", time.Duration(m.RuntimeNs), want)
			}
			if m.RampNs != c.ramp*int64(time.Millisecond) {
				t.Errorf("ramp %v, want %dms", time.Duration(m.RampNs), c.ramp)
			}
			// Each job measures one operation per two readings, less
			// the yields (one reading every 8 ms): between 1/3 and 1/2
			// of the runtime's readings.
			perJob := int64(want / step)
			if m.Ops < 2*perJob/3 || m.Ops > 2*perJob/2+2 {
				t.Errorf("%d ops for 2 jobs over %d readings each", m.Ops, perJob)
			}
			if l := m.Latency; l.MinNs != int64(step) || l.MaxNs != int64(step) {
				t.Errorf("latency %+v, want every operation to take %v", l, step)
			}
		})
	}
}

func TestRunSetupError(t *testing.T) {
	dir := t.TempDir()
	// A file where the job directory should be.
	os.WriteFile(filepath.Join(dir, "0"), nil, 0o644)
	s := proto.WorkloadStep{Pattern: proto.PatternFtruncate, Dir: dir, Jobs: 1, BlockSize: 4096, FileSize: 1 << 20, RuntimeMs: 100, TimeBased: true, FilenameFormat: "$jobnum/t"}
	_, err := Run(context.Background(), &s, Options{})
	if err == nil || !strings.Contains(err.Error(), "setup") {
		t.Fatalf("err %v, want a setup error", err)
	}
}

func TestProfile(t *testing.T) {
	s := proto.WorkloadStep{Pattern: proto.PatternFutimes, Dir: t.TempDir(), Jobs: 1, RuntimeMs: 300, TimeBased: true, Profile: true}
	m, err := Run(context.Background(), &s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.CPUProfile) == 0 {
		t.Error("no CPU profile")
	}
}

func TestQuietThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	blocked := func() bool {
		var cur unix.Sigset_t
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &cur); err != nil {
			t.Fatal(err)
		}
		var urg unix.Sigset_t
		sigaddset(&urg, unix.SIGURG)
		return cur.Val[0]&urg.Val[0] != 0
	}
	if blocked() {
		t.Fatal("SIGURG blocked before")
	}
	restore := quietThread()
	if !blocked() {
		t.Error("SIGURG not blocked")
	}
	restore()
	if blocked() {
		t.Error("mask not restored")
	}
}
