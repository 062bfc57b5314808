package workload

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/internal/testenv"
)

// seed002 is the lazytime seed's fio command line, as the mail gives it.
const seed002 = `fio --ioengine=ftruncate --direct=1 --bs=4k --filesize=16m --time_based=1 \
--runtime=10 --numjobs=32 --group_reporting --norandommap --name=write-32 \
--rw=randwrite --directory=m --filename_format='$jobnum/t'`

func TestSplitCommandLine(t *testing.T) {
	got, err := SplitCommandLine(seed002)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fio", "--ioengine=ftruncate", "--direct=1", "--bs=4k", "--filesize=16m", "--time_based=1",
		"--runtime=10", "--numjobs=32", "--group_reporting", "--norandommap", "--name=write-32",
		"--rw=randwrite", "--directory=m", "--filename_format=$jobnum/t"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	for in, want := range map[string][]string{
		`a "b c" d\ e`:            {"a", "b c", "d e"},
		`"x\"y" 'p\q'`:            {`x"y`, `p\q`},
		"  \t":                    nil,
		`--name=""`:               {"--name="},
		"one\\\ntwo three":        {"onetwo", "three"},
		`"$HOME"`:                 {"$HOME"},
		`a"b"'c'd`:                {"abcd"},
		"fio --name=x\n--rw=read": {"fio", "--name=x", "--rw=read"},
	} {
		got, err := SplitCommandLine(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitCommandLine(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`'open`, `"open`, `trailing\`} {
		if _, err := SplitCommandLine(bad); err == nil {
			t.Errorf("SplitCommandLine(%q): no error", bad)
		}
	}
}

func TestFioCommand(t *testing.T) {
	argv, jf, err := FioCommand(&proto.FioStep{CommandLine: seed002}, "/tmp/x")
	if err != nil || jf != "" {
		t.Fatal(err, jf)
	}
	if argv[0] != "fio" || argv[1] != "--output-format=json+" || argv[2] != "--status-interval=1000ms" || argv[4] != "--ioengine=ftruncate" {
		t.Errorf("argv %q", argv)
	}
	argv, jf, err = FioCommand(&proto.FioStep{JobFile: "[x]\nrw=read\n", SampleMs: 500, Binary: "/usr/local/bin/fio"}, "/tmp/x")
	if err != nil || jf != "/tmp/x/job.fio" || argv[0] != "/usr/local/bin/fio" || argv[len(argv)-1] != jf || argv[2] != "--status-interval=500ms" {
		t.Errorf("job file: %q %q %v", argv, jf, err)
	}
	for _, tc := range []struct {
		s    proto.FioStep
		want string
	}{
		{proto.FioStep{}, "fio: 0 of job_file, args and command_line are set, want exactly one"},
		{proto.FioStep{JobFile: "x", Args: []string{"y"}}, "2 of job_file"},
		{proto.FioStep{Args: []string{"--name=x", "--output-format=normal"}}, "--output-format is set by klab"},
		{proto.FioStep{Args: []string{"--output", "f"}}, "--output is set by klab"},
		{proto.FioStep{CommandLine: "fio"}, "command_line: has no fio arguments"},
		{proto.FioStep{CommandLine: "fio 'x"}, "command_line: unterminated single quote"},
		{proto.FioStep{Args: []string{"--name=x"}, SampleMs: 10}, "sample_ms: 10 is out of range, want 100..60000"},
	} {
		_, _, err := FioCommand(&tc.s, "/tmp")
		var pe *ParamError
		if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want a ParamError with %q", tc.s, err, tc.want)
		}
	}
}

func TestSplitJSONDocs(t *testing.T) {
	in := "fio: some warning\n{\n  \"a\" : \"}{\\\"\",\n  \"b\" : {\"c\": 1}\n}\nnoise {not json}\n{\n\"x\": 2\n}\n"
	var docs, texts []string
	err := SplitJSONDocs(strings.NewReader(in), 1<<20, func(b []byte) { docs = append(docs, string(b)) }, func(b []byte) { texts = append(texts, string(b)) })
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || !strings.Contains(docs[0], `"}{\""`) || !strings.Contains(docs[1], `"x": 2`) {
		t.Errorf("docs %q", docs)
	}
	if !slices.Equal(texts, []string{"fio: some warning", "noise {not json}"}) {
		t.Errorf("texts %q", texts)
	}
	if err := SplitJSONDocs(strings.NewReader("{\n\"a\": 1\n"), 1<<20, func([]byte) {}, nil); err == nil {
		t.Error("truncated document: no error")
	}
	if err := SplitJSONDocs(strings.NewReader("{\n\"a\": \""+strings.Repeat("x", 100)+"\"}\n"), 50, func([]byte) {}, nil); err == nil {
		t.Error("oversized document: no error")
	}
}

func TestParseFioTime(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "30": 30 * time.Second, "500ms": 500 * time.Millisecond, "2m": 2 * time.Minute, "100us": 100 * time.Microsecond, "1.5s": 1500 * time.Millisecond} {
		if got, err := ParseFioTime(in); err != nil || got != want {
			t.Errorf("ParseFioTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseFioTime("5 parsecs"); err == nil {
		t.Error("bad unit accepted")
	}
}

func readGolden(t *testing.T, name string) *FioOutput {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var o *FioOutput
	err = SplitJSONDocs(bytes.NewReader(b), MaxFioDoc, func(doc []byte) {
		if o, err = ParseFioOutput(doc); err != nil {
			t.Fatal(err)
		}
	}, nil)
	if err != nil || o == nil {
		t.Fatalf("%s: %v", name, err)
	}
	return o
}

// TestFioMetricsGroup maps real fio 3.33 json+ output with group
// reporting: the histogram bins give percentiles close to fio's own.
func TestFioMetricsGroup(t *testing.T) {
	o := readGolden(t, "fio-3.33-seqwrite-group.json")
	m := o.Metrics("")
	w := o.Jobs[0].Write
	if m.Engine != proto.EngineFio || m.EngineVersion != "fio-3.33" || m.Name != "seqwrite" || m.Pattern != "write/sync" || m.Jobs != 2 {
		t.Errorf("identity %+v", m)
	}
	if m.Ops != w.TotalIOs || m.Bytes != w.IOBytes || m.RuntimeNs != w.Runtime*1e6 {
		t.Errorf("ops %d bytes %d runtime %d; fio says %d %d %d ms", m.Ops, m.Bytes, m.RuntimeNs, w.TotalIOs, w.IOBytes, w.Runtime)
	}
	if math.Abs(m.OpsPerSec-w.IOPS)/w.IOPS > 0.001 {
		t.Errorf("ops/s %.1f, fio's iops %.1f", m.OpsPerSec, w.IOPS)
	}
	for q, got := range map[string]int64{"50.000000": m.Latency.P50Ns, "90.000000": m.Latency.P90Ns, "99.000000": m.Latency.P99Ns, "99.900000": m.Latency.P999Ns} {
		want := w.Clat.Percentile[q]
		if math.Abs(float64(got-want))/float64(want) > 0.04 {
			t.Errorf("p%s = %d, fio says %d", q, got, want)
		}
	}
	if m.Latency.Count != w.Clat.N || m.Latency.MinNs != w.Clat.Min || m.Latency.MaxNs != w.Clat.Max {
		t.Errorf("latency %+v vs fio %+v", m.Latency, w.Clat)
	}
	if m.RampNs != 100e6 {
		t.Errorf("ramp %d", m.RampNs)
	}
	wantUser := o.Jobs[0].UsrCPU / 100 * float64(o.Jobs[0].JobRuntime) * 1e6
	if math.Abs(float64(m.CPU.UserNs)-wantUser) > 1e3 || m.CPU.PerOpNs <= 0 {
		t.Errorf("cpu %+v, want user %.0f", m.CPU, wantUser)
	}
}

// TestFioMetricsNoGroup maps plain json without group reporting: jobs are
// summed, percentiles come from the busiest job.
func TestFioMetricsNoGroup(t *testing.T) {
	o := readGolden(t, "fio-3.33-ftruncate-nogroup.json")
	m := o.Metrics("lazytime")
	a, b := o.Jobs[0].Write, o.Jobs[1].Write
	if m.Name != "lazytime" || m.Jobs != 2 || m.Pattern != "randwrite/ftruncate" {
		t.Errorf("identity %+v", m)
	}
	if m.Ops != a.TotalIOs+b.TotalIOs || m.Bytes != m.Ops*4096 {
		t.Errorf("ops %d bytes %d", m.Ops, m.Bytes)
	}
	if m.Latency.P50Ns == 0 || m.Latency.P999Ns < m.Latency.P50Ns || m.Latency.Count != a.Clat.N+b.Clat.N {
		t.Errorf("latency %+v", m.Latency)
	}
}

// TestFioArgsRunOnHost runs every pattern's fio equivalent with the host's
// fio, and the Go engine on the same job, and checks both report the same
// amount of work in the same units.
func TestFioArgsRunOnHost(t *testing.T) {
	testenv.Short(t, "runs fio")
	testenv.RequiresCommand(t, "fio")
	dir := t.TempDir()
	for _, s := range []proto.WorkloadStep{
		{Pattern: proto.PatternSeqWrite, Jobs: 2, BlockSize: 1024, FileSize: 1 << 20},
		{Pattern: proto.PatternRandWrite, Jobs: 2, BlockSize: 4096, FileSize: 1 << 20, RuntimeMs: 200, TimeBased: true},
		{Pattern: proto.PatternFtruncate, Jobs: 4, BlockSize: 4096, FileSize: 16 << 20, RuntimeMs: 200, TimeBased: true, FilenameFormat: "$jobnum/t", Fallocate: proto.FallocateNative},
		{Pattern: proto.PatternSeqRead, Jobs: 2, BlockSize: 4096, FileSize: 1 << 20},
		{Pattern: proto.PatternRandRead, Jobs: 2, BlockSize: 4096, FileSize: 1 << 20, RuntimeMs: 200, TimeBased: true},
		{Pattern: proto.PatternMmapRandRead, Jobs: 1, BlockSize: 4096, FileSize: 1 << 20, RuntimeMs: 200, TimeBased: true},
		{Pattern: proto.PatternCreate, Jobs: 2, Files: 300},
	} {
		s.Dir = filepath.Join(dir, string(s.Pattern))
		t.Run(string(s.Pattern), func(t *testing.T) {
			fs, err := FioStepFor(&s)
			if err != nil {
				t.Fatal(err)
			}
			fs.SampleMs = 100
			var stderr bytes.Buffer
			var samples int
			fm, err := RunFio(context.Background(), fs, FioOptions{Stderr: &stderr, OnSample: func(proto.Sample) { samples++ }})
			if err != nil {
				t.Fatalf("fio %q: %v\n%s", fs.Args, err, stderr.String())
			}
			gm, err := Run(context.Background(), &s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("go  %.0f ops/s %d ops, p50 %d ns, %.0f cpu-ns/op", gm.OpsPerSec, gm.Ops, gm.Latency.P50Ns, gm.CPU.PerOpNs)
			t.Logf("fio %.0f ops/s %d ops, p50 %d ns, %.0f cpu-ns/op, %d samples", fm.OpsPerSec, fm.Ops, fm.Latency.P50Ns, fm.CPU.PerOpNs, samples)
			if fm.Jobs != s.Jobs || fm.Ops <= 0 || fm.OpsPerSec <= 0 || fm.Latency.P50Ns <= 0 {
				t.Errorf("fio metrics %+v", fm)
			}
			if !s.TimeBased {
				// Size-based jobs do the same number of operations.
				if fm.Ops != gm.Ops || fm.Bytes != gm.Bytes {
					t.Errorf("size-based: fio %d ops %d bytes, go %d ops %d bytes", fm.Ops, fm.Bytes, gm.Ops, gm.Bytes)
				}
			} else if fm.Bytes/fm.Ops != gm.Bytes/gm.Ops {
				t.Errorf("bytes per op: fio %d, go %d", fm.Bytes/fm.Ops, gm.Bytes/gm.Ops)
			}
		})
	}
	if _, err := FioArgs(&proto.WorkloadStep{Pattern: proto.PatternFutimes, Dir: dir, Jobs: 1, RuntimeMs: 10, TimeBased: true}); err == nil {
		t.Error("futimes has a fio equivalent?")
	}
	if _, err := FioArgs(&proto.WorkloadStep{Pattern: proto.PatternFstat, Dir: dir, Jobs: 1, RuntimeMs: 10, TimeBased: true}); err == nil {
		t.Error("fstat has a fio equivalent?")
	}
}

// TestRunFioSeedCommandLine runs the lazytime seed's command line,
// shortened, as the seed wrote it.
func TestRunFioSeedCommandLine(t *testing.T) {
	testenv.Short(t, "runs fio")
	testenv.RequiresCommand(t, "fio")
	dir := t.TempDir()
	cl := strings.NewReplacer("--runtime=10", "--runtime=300ms", "--numjobs=32", "--numjobs=4", "--direct=1 ", "").Replace(seed002)
	m, err := RunFio(context.Background(), &proto.FioStep{CommandLine: cl, Dir: dir, MakeDirs: []string{"m"}}, FioOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Jobs != 4 || m.Name != "write-32" || m.Pattern != "randwrite/ftruncate" || m.Bytes != 4096*m.Ops {
		t.Errorf("metrics %+v", m)
	}
	if _, err := os.Stat(filepath.Join(dir, "m", "3", "t")); err != nil {
		t.Errorf("job 3's file: %v", err)
	}
}

func TestRunFioFailure(t *testing.T) {
	testenv.RequiresCommand(t, "fio")
	_, err := RunFio(context.Background(), &proto.FioStep{Args: []string{"--name=x", "--rw=nonsense"}, Dir: t.TempDir()}, FioOptions{})
	if err == nil || !strings.Contains(err.Error(), "nonsense") {
		t.Errorf("err %v, want fio's complaint", err)
	}
	_, err = RunFio(context.Background(), &proto.FioStep{Args: []string{"--name=x"}, Binary: "/nonexistent/fio"}, FioOptions{})
	if err == nil || !strings.Contains(err.Error(), "initramfs") {
		t.Errorf("err %v, want a hint about the initramfs", err)
	}
}

func BenchmarkFioMetrics(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("testdata", "fio-3.33-seqwrite-group.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	for i := 0; i < b.N; i++ {
		o, err := ParseFioOutput(raw)
		if err != nil {
			b.Fatal(err)
		}
		_ = o.Metrics("")
	}
}
