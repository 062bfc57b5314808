package main

import (
	"fmt"
	"strings"
	"testing"

	"klab/guest/proto"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"--jobs", "4,1,2,1", "--workloads", "creates,paged-1m", "--host-size", "8G"})
	if err != nil {
		t.Fatal(err)
	}
	if got := o.jobs; len(got) != 3 || got[0] != 1 || got[2] != 4 {
		t.Errorf("jobs = %v, want [1 2 4]", got)
	}
	if len(o.workloads) != 2 || o.workloads[0].Key != "paged-1m" || o.workloads[1].Key != "creates" {
		t.Errorf("workloads = %v, want paged-1m, creates in table order", workloadKeys(o.workloads))
	}
	if o.hostSize != 8<<30 || o.devThreads != 4 {
		t.Errorf("host size %d, dev threads %d", o.hostSize, o.devThreads)
	}
	_, err = parseFlags([]string{"--jobs", "0", "--workloads", "nope", "--rounds", "0"})
	if err == nil {
		t.Fatal("bad flags accepted")
	}
	for _, want := range []string{"--jobs", "--workloads", "--rounds"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestPlanAlternates(t *testing.T) {
	vs := []variant{{serverKlab, transportDev}, {serverKlab, transportRing}}
	p := makePlan(allWorkloads[:1], []int{1, 2}, 2, vs)
	var got []string
	for _, c := range p {
		got = append(got, c.V.Transport)
	}
	want := "dev uring dev uring uring dev uring dev"
	if strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

func TestMediansAndTable(t *testing.T) {
	w := allWorkloads[2] // dio-1m
	cell := func(tr string, round int, v float64, check, errMsg string) Cell {
		return Cell{Where: "host", Server: serverKlab, Transport: tr, Workload: w.Key, Jobs: 1, Round: round, Value: v, Unit: "MB/s", Check: check, Error: errMsg}
	}
	cells := []Cell{
		cell("dev", 0, 100, "ok", ""), cell("uring", 0, 300, "ok", ""),
		cell("uring", 1, 200, "ok", ""), cell("dev", 1, 120, "cached", ""),
		cell("dev", 2, 110, "ok", ""), cell("uring", 2, 0, "", "boom"),
	}
	ms := medians(cells)
	if len(ms) != 2 {
		t.Fatalf("%d medians, want 2", len(ms))
	}
	for _, m := range ms {
		switch m.Transport {
		case "dev":
			if m.Median != 110 || m.Flag != "*" {
				t.Errorf("dev median %v flag %q, want 110 *", m.Median, m.Flag)
			}
		case "uring":
			if m.Median != 250 || m.Flag != "!" || len(m.Values) != 2 {
				t.Errorf("uring median %v flag %q values %v, want 250 ! (the failed cell left out)", m.Median, m.Flag, m.Values)
			}
		}
	}
	out := renderPart("host", cells, []wdef{w}, []int{1, 2})
	for _, want := range []string{
		"dio reads (1024K), MB/s\n-----------------------\n",
		"jobs   /dev/fuse   uring   gain\n",
		"   1        110*    250!   2.27\n",
		"   2           -       -      -\n",
		"  ! dio-1m jobs=1 klab/uring round 3: boom",
		"  * dio-1m jobs=1 klab/dev round 2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestTableGroups(t *testing.T) {
	tb := table{Title: "paged reads", First: "jobs", Groups: []tgroup{
		{Label: "128K IO size", Cols: []string{"/dev/fuse", "uring", "gain"}},
		{Label: "1024K IO size", Cols: []string{"/dev/fuse", "uring", "gain"}},
	}, Rows: []trow{{Label: "1", Cells: []string{"1117", "1921", "1.72", "1902", "1942", "1.02"}}}}
	want := "paged reads\n" +
		"-----------\n" +
		"            128K IO size              1024K IO size\n" +
		"jobs   /dev/fuse   uring   gain   /dev/fuse   uring   gain\n" +
		"   1        1117    1921   1.72        1902    1942   1.02\n"
	if got := tb.render(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestFinishChecks(t *testing.T) {
	paged := allWorkloads[0]
	mmap := allWorkloads[3]
	m := &proto.Metrics{Ops: 100, Bytes: 1 << 30, BytesPerSec: 500e6}
	cases := []struct {
		name      string
		w         wdef
		c         Cell
		inProcess bool
		want      string
	}{
		{"served", paged, Cell{Server: serverKlab, Transport: transportDev, ServerRchar: 1<<30 + 4096}, false, "ok"},
		{"cached", paged, Cell{Server: serverKlab, Transport: transportDev, ServerRchar: 1 << 20}, false, "cached"},
		// In the guest the client's reads are in the agent's rchar too.
		{"guest served", paged, Cell{Server: serverKlab, Transport: transportDev, ServerRchar: 2 << 30}, true, "ok"},
		{"guest cached", paged, Cell{Server: serverKlab, Transport: transportDev, ServerRchar: 1<<30 + 1<<20}, true, "cached"},
		// mmap copies do not count in the client's rchar.
		{"guest mmap", mmap, Cell{Server: serverKlab, Transport: transportDev, ServerRchar: 1 << 30}, true, "ok"},
		{"no ring requests", paged, Cell{Server: serverKlab, Transport: transportRing, ServerRchar: 1 << 30}, false, "cached"},
		{"ring", paged, Cell{Server: serverKlab, Transport: transportRing, ServerRchar: 1 << 30, RingRequests: 1024}, false, "ok"},
		{"libfuse splices", paged, Cell{Server: serverLibfuse, Transport: transportDev}, false, "unverified"},
	}
	for _, tc := range cases {
		c := tc.c
		c.Metrics = m
		c.finish(tc.w, tc.inProcess, true)
		if c.Check != tc.want {
			t.Errorf("%s: check %q (%s), want %q", tc.name, c.Check, c.Warning, tc.want)
		}
		if c.Value != 500 {
			t.Errorf("%s: value %v, want 500 MB/s", tc.name, c.Value)
		}
	}
}

func TestURingArgsFromHelp(t *testing.T) {
	a, err := uringArgsFromHelp("    -o io_uring            enable io-uring\n    -o io_uring_q_depth=<n> io-uring queue depth\n", 8)
	if err != nil || strings.Join(a, " ") != "-o io_uring -o io_uring_q_depth=8" {
		t.Errorf("3.18: %v %v", a, err)
	}
	a, err = uringArgsFromHelp("  --uring   use uring\n  --uring-q-depth=N\n", 16)
	if err != nil || strings.Join(a, " ") != "--uring --uring-q-depth=16" {
		t.Errorf("3.17: %v %v", a, err)
	}
	if _, err := uringArgsFromHelp("usage: passthrough_hp [options]", 8); err == nil {
		t.Error("no io_uring option accepted")
	}
}

func TestParseRchar(t *testing.T) {
	if n, err := parseRchar("rchar: 12\nwchar: 3\n"); err != nil || n != 12 {
		t.Errorf("rchar %d %v", n, err)
	}
}

func TestPlanLLAndFixedJobs(t *testing.T) {
	ws, err := parseWorkloads("paged-1m,write-1k")
	if err != nil {
		t.Fatal(err)
	}
	vs := []variant{{serverKlab, transportDev}, {serverLibfuse, transportDev}, {serverLL, transportDev}}
	var got []string
	for _, p := range makePlan(ws, []int{1, 2}, 1, vs) {
		got = append(got, fmt.Sprintf("%s/%d/%s", p.W.Key, p.Jobs, p.V.Server))
	}
	want := "paged-1m/1/klab paged-1m/1/libfuse-hp paged-1m/2/klab paged-1m/2/libfuse-hp write-1k/4/klab write-1k/4/libfuse-hp write-1k/4/libfuse-ll"
	if strings.Join(got, " ") != want {
		t.Errorf("plan %v\nwant %s", got, want)
	}
	o, err := parseFlags([]string{"--jobs", "1", "--workloads", "paged-1m,write-1k", "--libfuse-ll", "none"})
	if err != nil || o.devThreads != 4 || o.libfuseLL != "" {
		t.Errorf("dev threads %d (want 4, seed 000's), ll %q, %v", o.devThreads, o.libfuseLL, err)
	}
}

func TestVsLibfuse(t *testing.T) {
	w := allWorkloads[5] // write-1k
	if w.Key != "write-1k" {
		t.Fatalf("workload 5 is %s", w.Key)
	}
	cell := func(server, tr string, round int, v, us float64) Cell {
		return Cell{Where: "host", Server: server, Transport: tr, Workload: w.Key, Jobs: 4, Round: round, Value: v, Unit: "MB/s", CPUPerReqUs: us}
	}
	cells := []Cell{
		cell(serverKlab, transportDev, 0, 100, 4), cell(serverLL, transportDev, 0, 125, 5),
		cell(serverKlab, transportDev, 1, 120, 4.2), cell(serverLL, transportDev, 1, 100, 5.2),
		cell(serverKlab, transportRing, 0, 150, 3), cell(serverLibfuse, transportRing, 0, 150, 3.5),
	}
	out := vsLibfuse("host", cells, medians(cells), []wdef{w}, []int{1}).render()
	for _, want := range []string{
		"workload jobs   ref   ratio      rounds   klab us/req   ref us/req   ratio      rounds   klab us/req   hp us/req\n",
		"write-1k x4    ll    0.98   0.80-1.20           4.1          5.1    1.00   1.00-1.00           3.0         3.5\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestFinishSpliced: bytes klab's server spliced count as served.
func TestFinishSpliced(t *testing.T) {
	c := Cell{Server: serverKlab, Transport: transportDev, ServerRchar: 1 << 20, SplicedBytes: 1<<30 - 1<<20,
		Metrics: &proto.Metrics{Ops: 100, Bytes: 1 << 30, BytesPerSec: 500e6}}
	c.finish(allWorkloads[0], false, true)
	if c.Check != "ok" || c.ServedRatio != 1 {
		t.Errorf("check %q ratio %v (%s), want ok 1", c.Check, c.ServedRatio, c.Warning)
	}
}
