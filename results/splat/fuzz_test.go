package splat

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

var knownTypes = func() map[Type]bool {
	m := map[Type]bool{}
	for _, t := range Types() {
		m[t] = true
	}
	return m
}()

// checkBounds checks the limits that keep a scanner's memory bounded
// whatever the console holds.
func checkBounds(t *testing.T, s *Scanner) {
	t.Helper()
	rs := s.Reports()
	if len(rs) > MaxReports {
		t.Fatalf("%d reports, limit %d", len(rs), MaxReports)
	}
	if len(s.pending) > MaxLineBytes {
		t.Fatalf("pending line %d bytes, limit %d", len(s.pending), MaxLineBytes)
	}
	total := 0
	for i, r := range rs {
		if !knownTypes[r.Type] {
			t.Fatalf("report %d: type %q", i, r.Type)
		}
		if r.Line < 1 || r.Line > s.Lines() {
			t.Fatalf("report %d: line %d of %d", i, r.Line, s.Lines())
		}
		if i > 0 && r.Line <= rs[i-1].Line {
			t.Fatalf("report %d: line %d not after %d", i, r.Line, rs[i-1].Line)
		}
		if r.Title == "" || len(r.Title) > MaxTitleBytes || strings.ContainsAny(r.Title, "\n\r") {
			t.Fatalf("report %d: title %q", i, r.Title)
		}
		if r.Text == "" || len(r.Text) > MaxReportBytes {
			t.Fatalf("report %d: text %d bytes, limit %d", i, len(r.Text), MaxReportBytes)
		}
		lines := strings.Split(r.Text, "\n")
		if len(lines) > MaxReportLines {
			t.Fatalf("report %d: %d text lines, limit %d", i, len(lines), MaxReportLines)
		}
		for _, l := range lines {
			if len(l) > MaxLineBytes {
				t.Fatalf("report %d: text line of %d bytes, limit %d", i, len(l), MaxLineBytes)
			}
		}
		if r.Frames == nil || len(r.Frames) > MaxFrames {
			t.Fatalf("report %d: %d frames (nil %v), limit %d", i, len(r.Frames), r.Frames == nil, MaxFrames)
		}
		if r.Type == TypePanic && !r.Fatal {
			t.Fatalf("report %d: panic not fatal", i)
		}
		if r.Corrupted != (r.CorruptedReason != "") {
			t.Fatalf("report %d: corrupted %v, reason %q", i, r.Corrupted, r.CorruptedReason)
		}
		total += len(r.Text)
	}
	if total > MaxTotalBytes+MaxReports*(MaxLineBytes+1) {
		t.Fatalf("total text %d bytes", total)
	}
}

func FuzzScanner(f *testing.F) {
	for _, path := range corpusFiles(f) {
		g, err := readGolden(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(g.log, uint8(6))
	}
	f.Add([]byte("[    1.000000] BUG: x\n\n[    1.1] Kernel panic - not syncing: y\r\n"), uint8(0))
	f.Add([]byte("Oops[#1]\n[  T1] WARNING: at f+0x1/0x2, CPU#0: a/1\n\r\r\n"), uint8(1))
	f.Add([]byte("------------[ cut here ]------------\nlist_add corruption.\nkernel BUG at lib/list_debug.c:1!\n Call Trace:\n <IRQ>\n"), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		whole := NewScanner()
		var done int
		whole.OnDone(func(Report) { done++ })
		whole.Write(data)
		whole.Close()
		checkBounds(t, whole)
		if n := len(whole.Reports()) + whole.Dropped(); done != n {
			t.Fatalf("OnDone saw %d reports, the scanner found %d", done, n)
		}

		// The same bytes in other chunks give the same reports.
		parts := NewScanner()
		n := int(chunk) + 1
		for rest := data; len(rest) > 0; {
			k := min(n, len(rest))
			parts.Write(rest[:k])
			rest = rest[k:]
		}
		parts.Close()
		if a, b := whole.Reports(), parts.Reports(); !reflect.DeepEqual(a, b) {
			t.Fatalf("chunks of %d change the reports:\n whole %+v\n parts %+v", n, a, b)
		}
		if whole.Lines() != parts.Lines() {
			t.Fatalf("chunks of %d: %d lines, whole: %d", n, parts.Lines(), whole.Lines())
		}
	})
}

// adversarial inputs: each is built to hit one limit or slow path.
var adversarial = []struct {
	name string
	make func(size int) []byte
}{
	{"one endless line", func(n int) []byte { return bytes.Repeat([]byte("[ 1.0] BUG: x"), n/13) }},
	{"brackets", func(n int) []byte { return bytes.Repeat([]byte("[[[[ [ 1.[ T"), n/12) }},
	{"newlines", func(n int) []byte { return bytes.Repeat([]byte("\n"), n) }},
	{"a header on every line", func(n int) []byte {
		return bytes.Repeat([]byte("[    1.000000] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x1/0x2\n"), n/58)
	}},
	{"an endless call trace of helpers", func(n int) []byte {
		head := "[    1.000000] BUG: sleeping function called from invalid context at x.c:1\n[    1.000000] Call Trace:\n[    1.000000]  <TASK>\n"
		return append([]byte(head), bytes.Repeat([]byte("[    1.000000]  _raw_spin_lock+0x1/0x2\n"), n/40)...)
	}},
	{"short reports of helpers", func(n int) []byte {
		r := "[    1.000000] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [a:1]\n[    1.000000] Call Trace:\n" +
			strings.Repeat("[    1.000000]  <IRQ>\n[    1.000000]  kmalloc_trace+0x1/0x2\n", 8)
		return bytes.Repeat([]byte(r), n/len(r))
	}},
	{"banners and cut lines", func(n int) []byte {
		r := "==========\n------------[ cut here ]------------\nrefcount_t: x\n==================\nBUG: KASAN: a in f+0x1/0x2\n"
		return bytes.Repeat([]byte(r), n/len(r))
	}},
	{"lockdep at lines", func(n int) []byte {
		r := "[    1.000000] WARNING: possible circular locking dependency detected\n" +
			strings.Repeat("[    1.000000] x is trying to acquire lock: at: at: at:\n", 50)
		return bytes.Repeat([]byte(r), n/len(r))
	}},
}

// The parser takes time linear in its input and bounded memory on
// adversarial input.
func TestAdversarial(t *testing.T) {
	size := 8 << 20
	if testing.Short() {
		size = 1 << 20
	}
	for _, tc := range adversarial {
		data := tc.make(size)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		s := NewScanner()
		for rest := data; len(rest) > 0; {
			k := min(64<<10, len(rest))
			s.Write(rest[:k])
			rest = rest[k:]
		}
		s.Close()
		elapsed := time.Since(start)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		heap := int64(after.HeapInuse) - int64(before.HeapInuse)
		mbps := float64(len(data)) / (1 << 20) / elapsed.Seconds()
		t.Logf("%-32s %5d MiB in %6.2fs (%6.1f MiB/s), %d reports, heap +%d MiB",
			tc.name, len(data)>>20, elapsed.Seconds(), mbps, len(s.Reports()), heap>>20)
		// Generous bounds, for loaded CI machines: the point is linear
		// time (a quadratic path would take minutes), not speed.
		if mbps < 0.5 {
			t.Errorf("%s: %.1f MiB/s", tc.name, mbps)
		}
		if heap > 64<<20 {
			t.Errorf("%s: heap grew by %d MiB", tc.name, heap>>20)
		}
		runtime.KeepAlive(s)
		runtime.KeepAlive(data)
	}
}

// benchNoise is typical console output between splats.
var benchNoise = []string{
	"EXT4-fs (ram0): mounted filesystem 1f2e3d4c-5b6a-4789-8abc-def012345678 r/w without journal. Quota mode: none.",
	"fuse: init (API version 7.44)",
	"brd: module loaded",
	"virtio_console virtio1: 1 port(s) found",
	"random: crng init done",
	"Run /init as init process",
	"  with arguments:",
	"    /init",
	"  with environment:",
	"    HOME=/",
	"    TERM=linux",
	"ACPI: PM-Timer IO Port: 0x608",
	"PCI: Using configuration type 1 for base access",
	"rcu: Hierarchical SRCU implementation.",
	"smp: Brought up 1 node, 2 CPUs",
	"Memory: 2007412K/2096632K available (16384K kernel code, 2800K rwdata, 7012K rodata, 3260K init, 2680K bss, 88964K reserved, 0K cma-reserved)",
	"clocksource: tsc: mask: 0xffffffffffffffff max_cycles: 0x2b3e459bf4c, max_idle_ns: 440795289890 ns",
	"Freeing unused kernel image (initmem) memory: 3260K",
	"x86/mm: Checked W+X mappings: passed, no W+X pages found.",
	"serial8250: ttyS0 at I/O 0x3f8 (irq = 4, base_baud = 115200) is a 16550A",
	"NET: Registered PF_INET protocol family",
	"audit: type=2000 audit(1764488112.412:1): state=initialized audit_enabled=0 res=1",
	"io scheduler mq-deadline registered",
	"Key type dns_resolver registered",
	"sched_clock: Marking stable (412345678, 12345)->(500000000, -75000000)",
}

// benchLog builds about 16 MiB of console output: boot noise with a splat
// from the corpus every 20000 lines.
func benchLog(tb testing.TB) []byte {
	var splats [][]byte
	for _, f := range []string{"warning.log", "sleeping.log", "kasan.log", "lockdep.log", "kernel_bug.log", "rcu_stall.log"} {
		splats = append(splats, goldenLog(tb, f))
	}
	var b bytes.Buffer
	for i := 0; b.Len() < 16<<20; i++ {
		fmt.Fprintf(&b, "[%5d.%06d] %s\n", 100+i/1000, i%1000*1000, benchNoise[i%len(benchNoise)])
		if i%20000 == 19999 {
			b.Write(splats[(i/20000)%len(splats)])
		}
	}
	return b.Bytes()
}

// BenchmarkScanner measures console throughput: the goal is at least
// 50 MB/s.
func BenchmarkScanner(b *testing.B) {
	log := benchLog(b)
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	var reports int
	for b.Loop() {
		s := NewScanner()
		for rest := log; len(rest) > 0; {
			n := min(32<<10, len(rest))
			s.Write(rest[:n])
			rest = rest[n:]
		}
		s.Close()
		reports = len(s.Reports())
	}
	b.ReportMetric(float64(reports), "reports")
}

// BenchmarkSplats measures the worst realistic case: a console that is all
// splats (the corpus, repeated).
func BenchmarkSplats(b *testing.B) {
	var log []byte
	for _, path := range corpusFiles(b) {
		g, err := readGolden(path)
		if err != nil {
			b.Fatal(err)
		}
		log = append(log, g.log...)
	}
	b.SetBytes(int64(len(log)))
	b.ReportAllocs()
	for b.Loop() {
		s := NewScanner()
		s.Write(log)
		s.Close()
	}
}
