package proto

import (
	"bytes"
	"reflect"
	"testing"
)

// TestWorkloadMessagesRoundTrip sends a workload step, a sample and a Done
// with metrics through the codec and gets them back unchanged.
func TestWorkloadMessagesRoundTrip(t *testing.T) {
	msgs := []*Message{
		{Kind: KindStep, Step: &Step{ID: 3, Kind: StepWorkload, Workload: &WorkloadStep{
			Name: "w", Pattern: PatternFtruncate, Dir: "/mnt/m", Jobs: 32, BlockSize: 4096, FileSize: 16 << 20,
			Fallocate: FallocateNative, RuntimeMs: 10_000, TimeBased: true, FilenameFormat: "$jobnum/t", Seed: 7, SampleMs: 500,
		}}},
		{Kind: KindStep, Step: &Step{ID: 4, Kind: StepFio, Fio: &FioStep{CommandLine: "fio --name=x --rw=read", Dir: "/tmp", MakeDirs: []string{"m"}}}},
		{Kind: KindSample, Sample: &Sample{Step: 3, Engine: EngineGo, Name: "w", ElapsedMs: 1000, IntervalMs: 1000, Ops: 5, Bytes: 20480, OpsPerSec: 5, BytesPerSec: 20480, MeanLatNs: 12}},
		{Kind: KindDone, Done: &Done{Step: 3, DurationNs: 1, Metrics: &Metrics{
			Engine: EngineFio, EngineVersion: "fio-3.33", Name: "w", Pattern: "randwrite/ftruncate", Jobs: 32, Ops: 10, Bytes: 40960,
			RuntimeNs: 1e9, OpsPerSec: 10, BytesPerSec: 40960,
			Latency: Latency{Count: 10, MinNs: 1, MaxNs: 9, MeanNs: 5, P50Ns: 5, P90Ns: 8, P99Ns: 9, P999Ns: 9},
			CPU:     CPU{UserNs: 100, SysNs: 900, PerOpNs: 100, UserPerOpNs: 10}, RampNs: 5, Errors: 1, CPUProfile: []byte{1, 2, 3},
		}}},
	}
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	for _, m := range msgs {
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	dec := NewDecoder(&buf)
	for _, want := range msgs {
		got, err := dec.Decode()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v\nwant %+v", got, want)
		}
	}
}

func TestPatternsListed(t *testing.T) {
	seen := map[Pattern]bool{}
	for _, p := range Patterns() {
		if p == "" || seen[p] {
			t.Errorf("pattern %q empty or twice", p)
		}
		seen[p] = true
	}
	if len(seen) != 12 {
		t.Errorf("%d patterns, want 12", len(seen))
	}
}
