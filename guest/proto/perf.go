package proto

// Perf asks the agent to record the whole guest with perf (Linux's
// profiler) while a step runs: every CPU, with call graphs. The perf
// program must be in the guest (lab adds the host's when a step asks).
type Perf struct {
	// Event is the sampling event: PerfCPUClock (the default, a software
	// timer that works without a PMU, as under TCG) or PerfCycles.
	Event string `json:"event,omitempty"`
	// Freq is samples per second on each CPU: 1..10000; 0 means
	// DefaultPerfFreq.
	Freq int `json:"freq,omitempty"`
}

// Perf events a step may ask for.
const (
	PerfCPUClock = "cpu-clock"
	PerfCycles   = "cycles"
)

// DefaultPerfFreq is Perf.Freq's default, in samples per second per CPU.
const DefaultPerfFreq = 499

// Profile is the folded call graph of a Perf step: one entry per distinct
// call stack, the process name first, then the callers from the outermost
// to the leaf, joined by ";".
type Profile struct {
	Event string `json:"event"`
	Freq  int    `json:"freq"`
	// Samples counts every sample recorded; Dropped those in stacks the
	// agent left out to bound the message.
	Samples int64 `json:"samples"`
	Dropped int64 `json:"dropped,omitempty"`
	// Stacks are the most frequent first.
	Stacks []ProfileStack `json:"stacks,omitempty"`
	// Error says why there is no profile. The step's own result does not
	// depend on it.
	Error string `json:"error,omitempty"`
}

// ProfileStack is one folded call stack and its sample count.
type ProfileStack struct {
	Stack string `json:"stack"`
	Count int64  `json:"count"`
}
