package agent

import (
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/guest/workload"
	"klab/internal/testenv"
)

func TestDefaultHandlersHaveWorkloadAndFio(t *testing.T) {
	h := DefaultHandlers()
	if h[proto.StepWorkload] == nil || h[proto.StepFio] == nil {
		t.Fatalf("handlers %v lack workload or fio", h)
	}
}

// samplesAndDone checks what the agent streamed for one workload-like
// step: samples of the step, then a Done with metrics.
func samplesAndDone(t *testing.T, h *host, id int, engine proto.Engine) *proto.Metrics {
	t.Helper()
	before, d := h.until(id, time.Minute)
	checkDone(t, d, id, 0, "")
	samples := 0
	for _, m := range before {
		if m.Kind == proto.KindSample {
			samples++
			if m.Sample.Step != id || m.Sample.Engine != engine {
				t.Errorf("sample %+v, want step %d engine %s", m.Sample, id, engine)
			}
		}
	}
	if samples < 2 {
		t.Errorf("%d samples before Done, want at least 2 (%s)", samples, describe(before))
	}
	if d.Metrics == nil || d.Metrics.Engine != engine || d.Metrics.Ops <= 0 {
		t.Fatalf("metrics %+v", d.Metrics)
	}
	return d.Metrics
}

func TestWorkloadStep(t *testing.T) {
	h := startAgent(t, &Agent{Handlers: DefaultHandlers()})
	h.step(proto.Step{ID: 1, Kind: proto.StepWorkload, Workload: &proto.WorkloadStep{
		Pattern: proto.PatternRandWrite, Dir: t.TempDir(), Jobs: 2, BlockSize: 4096, FileSize: 1 << 20,
		RuntimeMs: 500, TimeBased: true, SampleMs: 100,
	}})
	m := samplesAndDone(t, h, 1, proto.EngineGo)
	if m.EngineVersion != Version || m.Bytes != 4096*m.Ops {
		t.Errorf("metrics %+v", m)
	}
}

func TestWorkloadStepErrors(t *testing.T) {
	h := startAgent(t, &Agent{Handlers: DefaultHandlers()})
	h.step(proto.Step{ID: 1, Kind: proto.StepWorkload})
	_, d := h.until(1, 10*time.Second)
	checkDone(t, d, 1, -1, "workload step without")
	h.step(proto.Step{ID: 2, Kind: proto.StepWorkload, Workload: &proto.WorkloadStep{Pattern: proto.PatternSeqWrite, Dir: t.TempDir(), Jobs: 1}})
	_, d = h.until(2, 10*time.Second)
	checkDone(t, d, 2, 1, "bs: 0 is out of range, want 512..64M")
	// The step's timeout stops a long workload; the Done keeps what was
	// measured.
	h.step(proto.Step{ID: 3, Kind: proto.StepWorkload, TimeoutMs: 300, Workload: &proto.WorkloadStep{
		Pattern: proto.PatternFutimes, Dir: t.TempDir(), Jobs: 1, RuntimeMs: 60_000, TimeBased: true,
	}})
	_, d = h.until(3, 10*time.Second)
	checkDone(t, d, 3, 1, "workload futimes: context deadline exceeded")
	if d.Metrics == nil || d.Metrics.Ops == 0 {
		t.Errorf("partial metrics lost: %+v", d.Metrics)
	}
	h.step(proto.Step{ID: 4, Kind: proto.StepFio})
	_, d = h.until(4, 10*time.Second)
	checkDone(t, d, 4, -1, "fio step without")
}

func TestFioStep(t *testing.T) {
	testenv.RequiresCommand(t, "fio")
	dir := t.TempDir()
	fs, err := workload.FioStepFor(&proto.WorkloadStep{
		Pattern: proto.PatternRandRead, Dir: dir, Jobs: 1, BlockSize: 4096, FileSize: 1 << 20, RuntimeMs: 500, TimeBased: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	fs.SampleMs = 100
	h := startAgent(t, &Agent{Handlers: DefaultHandlers()})
	h.step(proto.Step{ID: 7, Kind: proto.StepFio, Fio: fs})
	m := samplesAndDone(t, h, 7, proto.EngineFio)
	if !strings.HasPrefix(m.EngineVersion, "fio-") || m.Pattern != "randread/psync" {
		t.Errorf("metrics %+v", m)
	}
	// fio's complaints come back as stderr Output of the step.
	h.step(proto.Step{ID: 8, Kind: proto.StepFio, Fio: &proto.FioStep{Args: []string{"--name=x", "--rw=bogus"}, Dir: dir}})
	before, d := h.until(8, time.Minute)
	checkDone(t, d, 8, 1, "fio ")
	if !strings.Contains(describe(before), "output stderr") {
		t.Errorf("no stderr output before Done: %s", describe(before))
	}
}

func TestFioStepWithoutFio(t *testing.T) {
	h := startAgent(t, &Agent{Handlers: DefaultHandlers(), Path: t.TempDir()})
	h.step(proto.Step{ID: 1, Kind: proto.StepFio, Fio: &proto.FioStep{Args: []string{"--name=x"}}})
	_, d := h.until(1, 10*time.Second)
	checkDone(t, d, 1, -1, "fio is not in the guest")
}
