package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/guest/workload"
	"klab/internal/paths"
	"klab/internal/testenv"
	"klab/lab"
	"klab/results"
)

// logWriter sends each line written to it to t.Logf with a prefix.
type logWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.t.Logf("%s%s", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// TestWorkloadBothEngines boots debian:7.3 once and runs one short job with
// the Go engine and then with fio (added to the initramfs for the fio
// step), and checks that both report sane numbers in the same units, that
// samples streamed while they ran, and that metrics.json has both.
func TestWorkloadBothEngines(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	testenv.RequiresCommand(t, "fio")
	job := proto.WorkloadStep{
		Name: "e2e-write", Pattern: proto.PatternSeqWrite, Dir: "/tmp/e2e-wl", Jobs: 2,
		BlockSize: 1024, FileSize: 4 << 20, RuntimeMs: 2000, TimeBased: true, SampleMs: 500,
	}
	fio, err := workload.FioStepFor(&job)
	if err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	o := &lab.Options{CacheDir: paths.CacheDir(), RunsDir: runs, Progress: &logWriter{t: t, prefix: "klab| "}}
	var mu sync.Mutex
	samples := map[proto.Engine][]proto.Sample{}
	ctx := testContext(t, 15*time.Minute)
	res, err := o.Boot(ctx, lab.BootRequest{
		Kernel:  "debian:7.3",
		Console: &logWriter{t: t, prefix: "console| "},
		// Guest time counts instructions, so that the load of the host
		// (other tests, other work) does not move the two engines' rates
		// apart: in real time one run saw go/fio 2.58 on a busy host.
		Icount: "shift=0,sleep=off",
		Steps: []proto.Step{
			{Kind: proto.StepWorkload, Workload: &job},
			{Kind: proto.StepFio, Fio: fio},
		},
		OnMessage: func(m *proto.Message) {
			if m.Kind == proto.KindSample {
				mu.Lock()
				samples[m.Sample.Engine] = append(samples[m.Sample.Engine], *m.Sample)
				mu.Unlock()
			}
			if m.Kind == proto.KindOutput {
				t.Logf("guest %s| %s", m.Output.Stream, strings.TrimSpace(string(m.Output.Data)))
			}
		},
		Command: []string{"go", "test", "-run", t.Name()},
	})
	if res != nil && res.Manifest != nil {
		t.Logf("qemu: %s", strings.Join(res.Manifest.QEMU.Argv, " "))
	}
	if err != nil || res == nil {
		t.Fatalf("Boot: %v (result %v)", err, res != nil)
	}
	if len(res.Steps) != 2 {
		t.Fatalf("%d steps finished, want 2", len(res.Steps))
	}
	g, f := res.Steps[0].Done.Metrics, res.Steps[1].Done.Metrics
	if g == nil || f == nil {
		t.Fatalf("metrics missing: go %v, fio %v", g, f)
	}
	// The bounds below are in guest time, which -icount makes a count of
	// instructions: the host's load does not move them.
	for i, m := range []*proto.Metrics{g, f} {
		t.Logf("%-3s %s: %.0f ops/s, %.2f MB/s, p50 %d ns, p99 %d ns, p99.9 %d ns, cpu %.0f ns/op (user %.0f), %d jobs, runtime %v",
			m.Engine, m.Pattern, m.OpsPerSec, m.BytesPerSec/1e6, m.Latency.P50Ns, m.Latency.P99Ns, m.Latency.P999Ns,
			m.CPU.PerOpNs, m.CPU.UserPerOpNs, m.Jobs, time.Duration(m.RuntimeNs))
		if m.Ops <= 0 || m.OpsPerSec <= 0 || m.Jobs != 2 {
			t.Errorf("%s: no work: %+v", m.Engine, m)
		}
		if m.Bytes != m.Ops*1024 {
			t.Errorf("%s: %d bytes for %d 1K writes", m.Engine, m.Bytes, m.Ops)
		}
		// Runtime: the Go engine measures from its start (no ramp) to
		// the first write that ends at or after the 2 s, so never less;
		// fio's runtime starts a moment after the clock of its 2 s
		// timeout and is in whole ms, which the 1.9 s covers. At most: a
		// job finishes its current write (p99.9 well under 1 ms here)
		// and waits for the guest's own scheduler, which runs 2 jobs on
		// 2 vCPUs; a whole second more is room. And the run is part of
		// its step.
		low := 1900 * time.Millisecond
		if m.Engine == proto.EngineGo {
			low = 2 * time.Second
		}
		step := time.Duration(res.Steps[i].Done.DurationNs)
		if rt := time.Duration(m.RuntimeNs); rt < low || rt > 3*time.Second || rt > step {
			t.Errorf("%s: runtime %v, want %v..3s and within the step's %v", m.Engine, rt, low, step)
		}
		// A median 1 KiB write to tmpfs of 100 ms would be 10^8 guest
		// instructions: far beyond any sane cost, host load or not.
		if l := m.Latency; l.P50Ns <= 0 || l.P50Ns > l.P99Ns || l.P99Ns > l.MaxNs || l.P50Ns > int64(100*time.Millisecond) {
			t.Errorf("%s: latency not sane: %+v", m.Engine, l)
		}
		if m.CPU.PerOpNs <= 0 {
			t.Errorf("%s: no CPU cost: %+v", m.Engine, m.CPU)
		}
	}
	if g.Engine != proto.EngineGo || f.Engine != proto.EngineFio || !strings.HasPrefix(f.EngineVersion, "fio-") {
		t.Errorf("engines %s %s %s", g.Engine, f.Engine, f.EngineVersion)
	}
	// Same job, same guest, in instruction-counted time: the rate ratio
	// is about the ratio of the engines' instructions per write, whatever
	// the host's load (1.0 and 1.1 in two runs here; 2.7 was seen once).
	// bench-fidelity measures how close the engines are; this test
	// catches an engine that reports in other units (ms for s, KiB for
	// bytes: a factor of 1000 or more), which a factor of 10 either way
	// cannot hide.
	r := g.OpsPerSec / f.OpsPerSec
	t.Logf("go/fio = %.2f", r)
	if r < 0.1 || r > 10 || math.IsNaN(r) {
		t.Errorf("go/fio = %.2f, want within a factor of 10", r)
	}
	mu.Lock()
	for _, m := range []*proto.Metrics{g, f} {
		e := m.Engine
		// Samples every 500 ms of a 2 s run, in guest time: at least 3.
		if len(samples[e]) < 2 {
			t.Errorf("%s: %d samples streamed, want at least 2", e, len(samples[e]))
		}
		// With no ramp, every write is measured, and the samples carry
		// the running totals of every job: they add up to the final
		// count, in the same units.
		var ops int64
		for _, s := range samples[e] {
			if s.Step == 0 || s.Ops < 0 || s.OpsPerSec < 0 {
				t.Errorf("%s: bad sample %+v", e, s)
			}
			ops += s.Ops
		}
		if ops != m.Ops {
			t.Errorf("%s: the samples add up to %d writes, the final metrics to %d", e, ops, m.Ops)
		}
	}
	mu.Unlock()

	// The run directory has the samples and the final numbers.
	b, err := os.ReadFile(filepath.Join(res.RunDir, "metrics.json"))
	if err != nil {
		t.Fatal(err)
	}
	var saved []lab.StepMetrics
	if err := json.Unmarshal(b, &saved); err != nil || len(saved) != 2 || saved[0].Metrics.Engine != proto.EngineGo || saved[1].Metrics.Engine != proto.EngineFio {
		t.Errorf("metrics.json: %v: %s", err, b)
	}
	ev, err := os.Open(filepath.Join(res.RunDir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	n := 0
	sc := bufio.NewScanner(ev)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line results.Event
		var e lab.Event
		if json.Unmarshal(sc.Bytes(), &line) == nil && json.Unmarshal(line.Event, &e) == nil && e.Kind == "sample" && e.Sample != nil {
			n++
		}
	}
	if n < 4 {
		t.Errorf("events.jsonl has %d samples, want at least 4", n)
	}
}
