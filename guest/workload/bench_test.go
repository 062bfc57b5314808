package workload

import (
	"testing"
	"time"

	"klab/guest/proto"
)

// benchLoop runs one job's real loop (the operation, two clock reads, the
// histogram, the published totals) for b.N operations.
func benchLoop(b *testing.B, s proto.WorkloadStep) {
	b.Helper()
	s.Dir = b.TempDir()
	s.Jobs = 1
	n, err := normalize(&s)
	if err != nil {
		b.Fatal(err)
	}
	n.TimeBased = false // end after b.N operations
	j := &job{n: n, fd: -1}
	if err := j.setup(); err != nil {
		b.Fatal(err)
	}
	defer j.teardown()
	j.targetBytes, j.targetOps = int64(b.N)*s.BlockSize, int64(b.N)
	r := &run{n: n, base: time.Now()}
	if s.BlockSize > 0 {
		b.SetBytes(s.BlockSize)
	}
	b.ResetTimer()
	if err := j.loop(r); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if j.res.ops != int64(b.N) {
		b.Fatalf("%d ops, want %d", j.res.ops, b.N)
	}
	b.ReportMetric(float64(j.res.userNs)/float64(b.N), "user-ns/op")
	b.ReportMetric(float64(j.res.sysNs)/float64(b.N), "sys-ns/op")
}

func BenchmarkSeqWrite1K(b *testing.B) {
	benchLoop(b, proto.WorkloadStep{Pattern: proto.PatternSeqWrite, BlockSize: 1 << 10, FileSize: 1 << 20})
}

func BenchmarkRandWrite4K(b *testing.B) {
	benchLoop(b, proto.WorkloadStep{Pattern: proto.PatternRandWrite, BlockSize: 4 << 10, FileSize: 8 << 20})
}

func BenchmarkFtruncate(b *testing.B) {
	benchLoop(b, proto.WorkloadStep{Pattern: proto.PatternFtruncate, BlockSize: 4 << 10, FileSize: 16 << 20})
}

func BenchmarkRandRead4K(b *testing.B) {
	benchLoop(b, proto.WorkloadStep{Pattern: proto.PatternRandRead, BlockSize: 4 << 10, FileSize: 8 << 20})
}

func BenchmarkSeqRead128K(b *testing.B) {
	benchLoop(b, proto.WorkloadStep{Pattern: proto.PatternSeqRead, BlockSize: 128 << 10, FileSize: 8 << 20})
}

func BenchmarkMmapRandRead4K(b *testing.B) {
	benchLoop(b, proto.WorkloadStep{Pattern: proto.PatternMmapRandRead, BlockSize: 4 << 10, FileSize: 8 << 20})
}

func BenchmarkCreate(b *testing.B) {
	b.StopTimer()
	benchLoop(b, proto.WorkloadStep{Pattern: proto.PatternCreate, Files: 1})
}

func BenchmarkFutimes(b *testing.B) {
	benchLoop(b, proto.WorkloadStep{Pattern: proto.PatternFutimes, RuntimeMs: 1000, TimeBased: true})
}
