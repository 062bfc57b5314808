package agent

import (
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/internal/testenv"
)

// TestPerfStep profiles a busy shell loop with the host's perf, as the
// agent does in a guest: the Done carries the folded stacks, the shell's
// among them.
func TestPerfStep(t *testing.T) {
	testenv.RequiresRoot(t)
	testenv.RequiresCommand(t, "perf")
	// Sysctls go to a scratch directory, not the host's /proc/sys.
	h := startAgent(t, &Agent{ProcSys: t.TempDir()})
	h.step(proto.Step{ID: 7, Kind: proto.StepExec, Argv: []string{"sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"},
		Perf: &proto.Perf{Freq: 999}})
	_, d := h.until(7, 2*time.Minute)
	checkDone(t, d, 7, 0, "")
	p := d.Profile
	if p == nil {
		t.Fatal("no profile in the Done")
	}
	if p.Error != "" || p.Event != proto.PerfCPUClock || p.Freq != 999 {
		t.Fatalf("profile: error %q, event %q, freq %d", p.Error, p.Event, p.Freq)
	}
	var total, sh int64
	for _, s := range p.Stacks {
		total += s.Count
		if strings.HasPrefix(s.Stack, "sh;") {
			sh += s.Count
		}
	}
	if total == 0 || total+p.Dropped != p.Samples || sh == 0 {
		t.Errorf("profile: %d samples, %d in stacks, %d dropped, %d in sh's stacks", p.Samples, total, p.Dropped, sh)
	}
}

// TestPerfStepBadOptions: a profile that cannot be taken says why, and
// the step still runs.
func TestPerfStepBadOptions(t *testing.T) {
	h := startAgent(t, &Agent{ProcSys: t.TempDir()})
	h.step(proto.Step{ID: 8, Kind: proto.StepExec, Argv: []string{"true"}, Perf: &proto.Perf{Event: "instructions:u; rm"}})
	_, d := h.until(8, 30*time.Second)
	checkDone(t, d, 8, 0, "")
	if d.Profile == nil || !strings.Contains(d.Profile.Error, `perf event "instructions:u; rm": want cpu-clock or cycles`) {
		t.Errorf("profile %+v", d.Profile)
	}
}
