package experiments

import (
	"testing"

	"klab/guest/proto"
)

func TestSampleMetricServerCPU(t *testing.T) {
	m := &proto.Metrics{Ops: 1000, OpsPerSec: 50}
	if v, ok := sampleMetric(ServerCPUMetric, m, &proto.FUSEStats{ServerCPUNs: 2_500_000}); !ok || v != 2500 {
		t.Errorf("server CPU per op = %v, %v; want 2500 ns", v, ok)
	}
	for name, c := range map[string]struct {
		m *proto.Metrics
		f *proto.FUSEStats
	}{
		"no server counters":  {m, nil},
		"CPU time unknown":    {m, &proto.FUSEStats{ServerCPUNs: -1}},
		"no operations":       {&proto.Metrics{}, &proto.FUSEStats{ServerCPUNs: 10}},
		"no workload metrics": {nil, &proto.FUSEStats{ServerCPUNs: 10}},
	} {
		if v, ok := sampleMetric(ServerCPUMetric, c.m, c.f); ok {
			t.Errorf("%s: %v, want no value", name, v)
		}
	}
	// The workload's own metrics do not need the server's counters.
	if v, ok := sampleMetric("ops_per_sec", m, nil); !ok || v != 50 {
		t.Errorf("ops_per_sec = %v, %v", v, ok)
	}
	if unit, dir := metricInfo(ServerCPUMetric); unit != "ns" || dir != -1 {
		t.Errorf("metricInfo: %s %d, want ns, lower is better", unit, dir)
	}
}
