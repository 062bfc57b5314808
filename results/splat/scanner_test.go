package splat

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// wantReport is an expected report: Text must be console lines From..To
// (1-based, inclusive) of the log.
type wantReport struct {
	typ      Type
	title    string
	line     int
	fatal    bool
	from, to int
}

// corpus lists the hand-written logs in testdata and the reports in each.
var corpus = []struct {
	file string
	want []wantReport
}{
	{"sysrq.log", []wantReport{
		{TypePanic, "kernel panic: sysrq triggered crash", 12, true, 12, 37},
	}},
	{"null_deref_panic.log", []wantReport{
		{TypeBug, "BUG: kernel NULL pointer dereference", 3, true, 3, 41},
		{TypePanic, "kernel panic: Fatal exception", 45, true, 45, 47},
	}},
	{"warning.log", []wantReport{
		{TypeWarning, "WARNING in fuse_dev_do_write", 3, false, 2, 34},
		{TypeWarning, "WARNING in fuse_dev_do_write", 37, false, 36, 52},
	}},
	{"sleeping.log", []wantReport{
		{TypeBug, "BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580", 2, false, 2, 28},
		{TypeBug, "BUG: scheduling while atomic: fio", 30, false, 30, 43},
	}},
	{"kasan.log", []wantReport{
		{TypeKASAN, "BUG: KASAN: slab-use-after-free in fuse_request_end", 3, false, 2, 58},
	}},
	{"lockdep.log", []wantReport{
		{TypeLockdep, "WARNING: possible circular locking dependency detected", 4, false, 3, 57},
	}},
	{"hung_task.log", []wantReport{
		{TypeHungTask, "INFO: task fio blocked", 2, false, 2, 22},
		{TypeHungTask, "INFO: task kworker blocked", 23, true, 23, 34},
		{TypePanic, "kernel panic: hung_task: blocked tasks", 42, true, 42, 55},
	}},
	{"softlockup.log", []wantReport{
		{TypeLockup, "watchdog: BUG: soft lockup [fuse-server]", 2, true, 2, 24},
		{TypePanic, "kernel panic: softlockup: hung tasks", 25, true, 25, 35},
	}},
	{"rcu_stall.log", []wantReport{
		{TypeRCUStall, "INFO: rcu_preempt detected stall", 2, false, 2, 33},
		{TypeRCUStall, "INFO: rcu_sched detected stall", 35, false, 35, 42},
	}},
	{"kernel_bug.log", []wantReport{
		{TypeBug, "kernel BUG at fs/fuse/dev.c:2131", 3, false, 2, 22},
	}},
	{"gpf_kasan.log", []wantReport{
		{TypeOops, "general protection fault", 2, false, 2, 18},
		{TypeOops, "general protection fault", 19, false, 19, 26},
	}},
	{"arm64_oops.log", []wantReport{
		{TypeOops, "Unable to handle kernel NULL pointer dereference", 2, false, 2, 29},
	}},
	{"noise.log", nil},
}

func readLog(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestCorpus(t *testing.T) {
	for _, tc := range corpus {
		t.Run(strings.TrimSuffix(tc.file, ".log"), func(t *testing.T) {
			data := readLog(t, tc.file)
			lines := strings.Split(string(data), "\n")
			s := NewScanner()
			if _, err := s.Write(data); err != nil {
				t.Fatal(err)
			}
			got := s.Reports()
			if len(got) != len(tc.want) {
				for _, r := range got {
					t.Logf("got %s %q at %d fatal=%v", r.Type, r.Title, r.Line, r.Fatal)
				}
				t.Fatalf("%d reports, want %d", len(got), len(tc.want))
			}
			for i, w := range tc.want {
				r := got[i]
				if r.Type != w.typ || r.Title != w.title || r.Line != w.line || r.Fatal != w.fatal {
					t.Errorf("report %d = {%s %q line %d fatal %v}, want {%s %q line %d fatal %v}",
						i, r.Type, r.Title, r.Line, r.Fatal, w.typ, w.title, w.line, w.fatal)
				}
				text := strings.Split(r.Text, "\n")
				if len(text) != w.to-w.from+1 {
					t.Errorf("report %d: text has lines %d.., %d of them, want %d..%d:\n%s",
						i, w.from, len(text), w.from, w.to, r.Text)
					continue
				}
				for j, tl := range text {
					// A text line is the console line without "\r" and
					// without user-space output before the timestamp.
					cl := strings.TrimRight(lines[w.from-1+j], "\r")
					if tl == "" || !strings.HasSuffix(cl, tl) {
						t.Errorf("report %d text line %d = %q, want (a suffix of) %q", i, j, tl, cl)
						break
					}
				}
			}
		})
	}
}

// Feeding the same console in any chunking gives the same reports.
func TestChunking(t *testing.T) {
	for _, tc := range corpus {
		data := readLog(t, tc.file)
		whole := NewScanner()
		whole.Write(data)
		want := whole.Reports()

		byLine := NewScanner()
		for l := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
			byLine.Line(l)
		}
		byByte := NewScanner()
		for i := range data {
			byByte.Write(data[i : i+1])
		}
		odd := NewScanner()
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 7+len(rest)%13)
			odd.Write(rest[:n])
			rest = rest[n:]
		}
		for name, s := range map[string]*Scanner{"Line": byLine, "byte": byByte, "chunks": odd} {
			if got := s.Reports(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s fed by %s: reports differ from one Write\n got %+v\nwant %+v", tc.file, name, got, want)
			}
			if s.Lines() != whole.Lines() {
				t.Errorf("%s fed by %s: %d lines, want %d", tc.file, name, s.Lines(), whole.Lines())
			}
		}
	}
}

// A panic is reported by the Line call that sees its first line.
func TestLineReportsAtStart(t *testing.T) {
	s := NewScanner()
	var seen []Report
	s.OnReport(func(r Report) { seen = append(seen, r) })
	for i, l := range strings.Split(string(readLog(t, "sysrq.log")), "\n") {
		r := s.Line(l)
		if i+1 != 12 {
			if r != nil {
				t.Errorf("line %d: unexpected report %+v", i+1, r)
			}
			continue
		}
		if r == nil {
			t.Fatal("line 12: no report at the panic line")
		}
		want := Report{Type: TypePanic, Title: "kernel panic: sysrq triggered crash", Line: 12,
			Text: "[    2.101301] Kernel panic - not syncing: sysrq triggered crash", Fatal: true}
		if *r != want {
			t.Errorf("line 12: %+v, want %+v", *r, want)
		}
	}
	if len(seen) != 1 || seen[0].Line != 12 {
		t.Errorf("OnReport saw %+v, want the panic once", seen)
	}
}

func TestOnReportWrite(t *testing.T) {
	s := NewScanner()
	var titles []string
	s.OnReport(func(r Report) {
		// Callbacks run without the lock: calling back in must not deadlock.
		_ = s.Reports()
		titles = append(titles, r.Title)
	})
	s.Write(readLog(t, "null_deref_panic.log"))
	want := []string{"BUG: kernel NULL pointer dereference", "kernel panic: Fatal exception"}
	if !reflect.DeepEqual(titles, want) {
		t.Errorf("callbacks saw %q, want %q", titles, want)
	}
}

func TestTitles(t *testing.T) {
	for _, tc := range []struct {
		line  string
		typ   Type // "" for no report
		title string
	}{
		// Panics.
		{"Kernel panic - not syncing: sysrq triggered crash", TypePanic, "kernel panic: sysrq triggered crash"},
		{"Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b", TypePanic, "kernel panic: Attempted to kill init"},
		{"Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)", TypePanic, "kernel panic: VFS: Unable to mount root fs on unknown-block(0,0)"},
		{"Kernel panic - not syncing: kernel: panic_on_warn set ...", TypePanic, "kernel panic: kernel: panic_on_warn set"},
		{"Kernel panic - not syncing: Fatal exception in interrupt", TypePanic, "kernel panic: Fatal exception in interrupt"},
		{"Kernel panic - not syncing: ", TypePanic, "kernel panic"},
		// Oopses.
		{"Oops: 0002 [#1] SMP PTI", TypeOops, "Oops: 0002"},
		{"Oops: Oops: 0000 [#1] PREEMPT SMP NOPTI", TypeOops, "Oops: 0000"},
		{"Oops[#1]:", TypeOops, "Oops"},
		{"Oops: general protection fault, probably for non-canonical address 0xdffffc0000000005: 0000 [#1] PREEMPT SMP KASAN NOPTI", TypeOops, "general protection fault"},
		{"general protection fault: 0000 [#1] SMP", TypeOops, "general protection fault"},
		{"general protection fault, probably for non-canonical address 0x6b6b6b6b6b6b6b6b: 0000 [#1] SMP PTI", TypeOops, "general protection fault"},
		{"invalid opcode: 0000 [#1] SMP PTI", TypeOops, "invalid opcode"},
		{"Oops: invalid opcode: 0000 [#1] PREEMPT SMP NOPTI", TypeOops, "invalid opcode"},
		{"stack segment: 0000 [#1] SMP KASAN", TypeOops, "stack segment"},
		{"Internal error: Oops: 0000000096000005 [#1] PREEMPT SMP", TypeOops, "Internal error: Oops"},
		{"Unable to handle kernel paging request at virtual address ffff800012345678", TypeOops, "Unable to handle kernel paging request"},
		// BUGs.
		{"BUG: unable to handle page fault for address: ffffffffc0a5b000", TypeBug, "BUG: unable to handle page fault"},
		{"BUG: unable to handle kernel NULL pointer dereference at 0000000000000008", TypeBug, "BUG: unable to handle kernel NULL pointer dereference"},
		{"BUG: unable to handle kernel NULL pointer dereference at           (null)", TypeBug, "BUG: unable to handle kernel NULL pointer dereference"},
		{"BUG: kernel NULL pointer dereference, address: 0000000000000000", TypeBug, "BUG: kernel NULL pointer dereference"},
		{"BUG: sleeping function called from invalid context at fs/fuse/dev.c:1234", TypeBug, "BUG: sleeping function called from invalid context at fs/fuse/dev.c:1234"},
		{"BUG: scheduling while atomic: swapper/0/0/0x00000002", TypeBug, "BUG: scheduling while atomic: swapper"},
		{"BUG: workqueue lockup - pool cpus=1 node=0 flags=0x0 nice=0 stuck for 33s!", TypeBug, "BUG: workqueue lockup"},
		{"BUG: using smp_processor_id() in preemptible [00000000] code: fio/623", TypeBug, "BUG: using smp_processor_id() in preemptible code: fio"},
		{"BUG: Bad page state in process fio  pfn:10a5c", TypeBug, "BUG: Bad page state in process fio pfn"},
		{"BUG: KCSAN: data-race in fuse_request_end / fuse_dev_do_read", TypeBug, "BUG: KCSAN: data-race in fuse_request_end / fuse_dev_do_read"},
		{"UBSAN: array-index-out-of-bounds in fs/fuse/dev.c:123:45", TypeBug, "UBSAN: array-index-out-of-bounds in fs/fuse/dev.c:123:45"},
		{"kernel BUG at mm/slub.c:435!", TypeBug, "kernel BUG at mm/slub.c:435"},
		{"BUG: KASAN: use-after-free in fuse_dev_do_read+0x1a2/0x9b0 [fuse]", TypeKASAN, "BUG: KASAN: use-after-free in fuse_dev_do_read"},
		{"BUG: KASAN: null-ptr-deref in fuse_uring_cmd+0x3b5/0x5d0", TypeKASAN, "BUG: KASAN: null-ptr-deref in fuse_uring_cmd"},
		// WARNINGs, old and new __warn formats.
		{"WARNING: CPU: 3 PID: 1 at mm/debug_vm_pgtable.c:493 pud_advanced_tests+0x8a/0x2f0", TypeWarning, "WARNING in pud_advanced_tests"},
		{"WARNING: CPU: 0 PID: 612 at fs/fuse/inode.c:2077 fuse_fill_super_common+0x5a0/0x5b0 [fuse]", TypeWarning, "WARNING in fuse_fill_super_common"},
		{"WARNING: fs/fuse/inode.c:2077 at fuse_fill_super_common+0x5a0/0x5b0 [fuse], CPU#0: mount/612", TypeWarning, "WARNING in fuse_fill_super_common"},
		{"WARNING: at fuse_fill_super_common+0x5a0/0x5b0, CPU#1: mount/612", TypeWarning, "WARNING in fuse_fill_super_common"},
		{"WARNING: at fs/fuse/file.c:123 fuse_foo+0x12/0x30()", TypeWarning, "WARNING in fuse_foo"},
		{"WARNING: fs/fuse/file.c:123 at 0xffffffffc0123456, CPU#1: fio/7", TypeWarning, "WARNING at fs/fuse/file.c:123"},
		{"WARNING: CPU: 1 PID: 7 at 0xffffffffc0123456", TypeWarning, "WARNING"},
		// Lockdep.
		{"WARNING: possible circular locking dependency detected", TypeLockdep, "WARNING: possible circular locking dependency detected"},
		{"WARNING: possible recursive locking detected", TypeLockdep, "WARNING: possible recursive locking detected"},
		{"WARNING: inconsistent lock state", TypeLockdep, "WARNING: inconsistent lock state"},
		{"WARNING: suspicious RCU usage", TypeLockdep, "WARNING: suspicious RCU usage"},
		{"WARNING: bad unlock balance detected!", TypeLockdep, "WARNING: bad unlock balance detected"},
		{"WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected", TypeLockdep, "WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected"},
		{"INFO: trying to register non-static key.", TypeLockdep, "INFO: trying to register non-static key"},
		{"BUG: Invalid wait context", TypeLockdep, "BUG: Invalid wait context"},
		// Hung tasks, lockups, stalls.
		{"INFO: task jbd2/ram0-8:88 blocked for more than 245 seconds.", TypeHungTask, "INFO: task jbd2 blocked"},
		{"INFO: task fuse server:4242 blocked for more than 120 seconds.", TypeHungTask, "INFO: task fuse server blocked"},
		{"watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [swapper/0:1]", TypeLockup, "watchdog: BUG: soft lockup [swapper]"},
		{"BUG: soft lockup - CPU#0 stuck for 23s! [fio:612]", TypeLockup, "watchdog: BUG: soft lockup [fio]"},
		{"NMI watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [kworker/1:2:93]", TypeLockup, "watchdog: BUG: soft lockup [kworker]"},
		{"NMI watchdog: Watchdog detected hard LOCKUP on cpu 1", TypeLockup, "watchdog: Watchdog detected hard LOCKUP"},
		{"watchdog: CPU1: Watchdog detected hard LOCKUP on cpu 1", TypeLockup, "watchdog: Watchdog detected hard LOCKUP"},
		{"rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", TypeRCUStall, "INFO: rcu_preempt detected stall"},
		{"rcu: INFO: rcu_preempt self-detected stall on CPU", TypeRCUStall, "INFO: rcu_preempt detected stall"},
		{"INFO: rcu_sched detected stalls on CPUs/tasks: { 1} (detected by 0, t=21002 jiffies, g=123, c=122, q=5)", TypeRCUStall, "INFO: rcu_sched detected stall"},
		{"rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: { 1-... } 21 jiffies s: 297 root: 0x2/.", TypeRCUStall, "INFO: rcu_preempt detected expedited stall"},
		{"INFO: rcu_tasks detected stalls on tasks:", TypeRCUStall, "INFO: rcu_tasks detected stall"},
		// Not reports.
		{"WARNING: You are running an unofficial kernel", "", ""},
		{"INFO: NMI handler (perf_event_nmi_handler) took too long to run: 1.234 msecs", "", ""},
		{"INFO: lockdep is turned off.", "", ""},
		{"INFO: task fio:623 is blocked on a mutex likely owned by task fio:601.", "", ""},
		{"Oopsie", "", ""},
		{"kernel BUGS: none", "", ""},
		{"rcu: Hierarchical RCU implementation.", "", ""},
		{"watchdog: Disabling watchdog on nohz_full cores by default", "", ""},
		{"NMI watchdog: Perf NMI watchdog permanently disabled", "", ""},
		{" Kernel panic - not syncing: indented", "", ""},
		{"sysrq: Trigger a crash", "", ""},
		{"---[ end Kernel panic - not syncing: sysrq triggered crash ]---", "", ""},
	} {
		for _, prefix := range []string{"", "[   12.345678] ", "[   12.345678][  T123] ", "[ 1234.000001][    C1] "} {
			s := NewScanner()
			r := s.Line(prefix + tc.line + "\r\n")
			if tc.typ == "" {
				if r != nil {
					t.Errorf("%q: got %s %q, want no report", prefix+tc.line, r.Type, r.Title)
				}
				continue
			}
			if r == nil {
				t.Errorf("%q: no report, want %s %q", prefix+tc.line, tc.typ, tc.title)
				continue
			}
			if r.Type != tc.typ || r.Title != tc.title {
				t.Errorf("%q: got %s %q, want %s %q", prefix+tc.line, r.Type, r.Title, tc.typ, tc.title)
			}
		}
	}
}

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		in, raw, msg string
		ts           float64
		hasTS        bool
	}{
		{"[    2.101301] Kernel panic\r\n", "[    2.101301] Kernel panic", "Kernel panic", 2.101301, true},
		{"[12345.678901] x", "[12345.678901] x", "x", 12345.678901, true},
		{"[   14.003521][  T312] BUG: x", "[   14.003521][  T312] BUG: x", "BUG: x", 14.003521, true},
		{"[   14.003521][    C1] BUG: x", "[   14.003521][    C1] BUG: x", "BUG: x", 14.003521, true},
		{"[  T312] BUG: x", "[  T312] BUG: x", "BUG: x", 0, false},
		{"[    5.211100]  <TASK>", "[    5.211100]  <TASK>", " <TASK>", 5.2111, true},
		{"[    5.211100] ", "[    5.211100] ", "", 5.2111, true},
		{"Jobs: 1 [W(1)][50.0%]\r[    6.4] BUG: y", "[    6.4] BUG: y", "BUG: y", 6.4, true},
		{"Jobs: 1 [W(1)][50.0%][    6.400000] BUG: y", "[    6.400000] BUG: y", "BUG: y", 6.4, true},
		{"no timestamp [here]", "no timestamp [here]", "no timestamp [here]", 0, false},
		{"[    1.] x", "[    1.] x", "[    1.] x", 0, false},
		{"[", "[", "[", 0, false},
		{"", "", "", 0, false},
		{"\r", "", "", 0, false},
	} {
		p := parseLine(tc.in)
		if p.raw != tc.raw || p.msg != tc.msg || p.hasTS != tc.hasTS || (p.hasTS && fmt.Sprintf("%.6f", p.ts) != fmt.Sprintf("%.6f", tc.ts)) {
			t.Errorf("parseLine(%q) = {raw %q msg %q ts %v %v}, want {raw %q msg %q ts %v %v}",
				tc.in, p.raw, p.msg, p.ts, p.hasTS, tc.raw, tc.msg, tc.ts, tc.hasTS)
		}
	}
}

// A kernel without CONFIG_PRINTK_TIME prints no timestamps: headers still
// count. Once timestamps are seen, an untimed header is user space.
func TestUntimedHeaders(t *testing.T) {
	s := NewScanner()
	s.Line("Linux version 6.1.0")
	if r := s.Line("Kernel panic - not syncing: No working init found."); r == nil || r.Title != "kernel panic: No working init found" {
		t.Errorf("untimed kernel: got %+v, want the panic", r)
	}

	s = NewScanner()
	for i := range tsTrust {
		s.Line(fmt.Sprintf("[    0.%06d] boot line", i))
	}
	if r := s.Line("BUG: user space says so"); r != nil {
		t.Errorf("untimed header after timed lines: got %+v", r)
	}
	if r := s.Line("[    1.000000] BUG: kernel says so"); r == nil {
		t.Error("timed header: no report")
	}
}

// Oops marked fatal only by a panic that it caused.
func TestFatal(t *testing.T) {
	warn := []string{
		"[   10.000000] ------------[ cut here ]------------",
		"[   10.000100] WARNING: CPU: 0 PID: 1 at fs/fuse/dev.c:1 fuse_foo+0x1/0x2",
		"[   10.000200] Call Trace:",
		"[   10.000300]  fuse_foo+0x1/0x2",
	}
	for _, tc := range []struct {
		name  string
		lines []string
		fatal bool
	}{
		{"panic_on_warn while open", append(warn[:4:4], "[   10.000400] Kernel panic - not syncing: kernel: panic_on_warn set ..."), true},
		{"closed, caused", append(warn[:4:4], "[   10.000400] ---[ end trace 0000000000000000 ]---",
			"[   10.000500] Kernel panic - not syncing: Fatal exception"), true},
		{"closed, unrelated panic", append(warn[:4:4], "[   10.000400] ---[ end trace 0000000000000000 ]---",
			"[   11.000000] sysrq: Trigger a crash", "[   11.000100] Kernel panic - not syncing: sysrq triggered crash"), false},
		{"no panic", append(warn[:4:4], "[   10.000400] ---[ end trace 0000000000000000 ]---"), false},
	} {
		s := NewScanner()
		for _, l := range tc.lines {
			s.Line(l)
		}
		rs := s.Reports()
		if len(rs) == 0 || rs[0].Type != TypeWarning {
			t.Fatalf("%s: reports %+v", tc.name, rs)
		}
		if rs[0].Fatal != tc.fatal {
			t.Errorf("%s: warning Fatal = %v, want %v", tc.name, rs[0].Fatal, tc.fatal)
		}
	}

	// A caused panic far after the report does not mark it.
	s := NewScanner()
	for _, l := range warn {
		s.Line(l)
	}
	s.Line("[   10.000400] ---[ end trace 0000000000000000 ]---")
	for i := range MaxReportLines + 1 {
		s.Line(fmt.Sprintf("[   11.%06d] noise", i))
	}
	s.Line("[   12.000000] Kernel panic - not syncing: Fatal exception")
	if rs := s.Reports(); rs[0].Fatal {
		t.Error("panic 200 lines later marked the warning fatal")
	}
}

// A report without a trace ends at a jump in printk time.
func TestTimeGap(t *testing.T) {
	s := NewScanner()
	s.Line("[   10.000000] BUG: Bad rss-counter state mm:00000000c1a7e5b3 type:MM_FILEPAGES val:-1 Comm:fio Pid:623")
	s.Line("[   10.000100] same burst")
	s.Line("[   30.000000] much later")
	s.Line("[   30.000100] later still")
	rs := s.Reports()
	if len(rs) != 1 || strings.Count(rs[0].Text, "\n") != 1 {
		t.Errorf("reports %+v, want one with 2 lines", rs)
	}
	if want := "BUG: Bad rss-counter state mm type:MM_FILEPAGES val Comm:fio Pid"; rs[0].Title != want {
		t.Errorf("title %q, want %q", rs[0].Title, want)
	}
}

func TestBounds(t *testing.T) {
	t.Run("report lines", func(t *testing.T) {
		s := NewScanner()
		s.Line("[    1.000000] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x1/0x2")
		s.Line("[    1.000000] Call Trace:")
		for range 1000 {
			s.Line("[    1.000000]  f+0x1/0x2")
		}
		if r := s.Line("[    1.000000] Kernel panic - not syncing: Fatal exception"); r == nil {
			t.Error("header after a long report: not seen")
		}
		rs := s.Reports()
		if n := strings.Count(rs[0].Text, "\n") + 1; n != MaxReportLines {
			t.Errorf("text has %d lines, want %d", n, MaxReportLines)
		}
	})
	t.Run("report bytes", func(t *testing.T) {
		s := NewScanner()
		s.Line("[    1.000000] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x1/0x2")
		long := "[    1.000000]  " + strings.Repeat("y", 3000)
		for range 100 {
			s.Line(long)
		}
		if n := len(s.Reports()[0].Text); n > MaxReportBytes {
			t.Errorf("text is %d bytes, want <= %d", n, MaxReportBytes)
		}
	})
	t.Run("line length", func(t *testing.T) {
		s := NewScanner()
		s.Write([]byte("[    1.000000] BUG: " + strings.Repeat("z", 10000) + "\nnext\n"))
		rs := s.Reports()
		first, _, _ := strings.Cut(rs[0].Text, "\n")
		if len(rs) != 1 || len(first) != MaxLineBytes || s.Lines() != 2 {
			t.Errorf("long line: %d reports, first text line %d bytes, %d lines", len(rs), len(first), s.Lines())
		}
		if len(s.pending) != 0 {
			t.Errorf("pending %d bytes after a newline", len(s.pending))
		}
	})
	t.Run("report count", func(t *testing.T) {
		s := NewScanner()
		calls := 0
		s.OnReport(func(Report) { calls++ })
		var b bytes.Buffer
		for i := range MaxReports + 100 {
			fmt.Fprintf(&b, "[ %5d.000000] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x1/0x2\n", i)
		}
		s.Write(b.Bytes())
		if n := len(s.Reports()); n != MaxReports {
			t.Errorf("%d reports kept, want %d", n, MaxReports)
		}
		if s.Dropped() != 100 || calls != MaxReports+100 {
			t.Errorf("Dropped %d, callbacks %d; want 100, %d", s.Dropped(), calls, MaxReports+100)
		}
	})
	t.Run("total bytes", func(t *testing.T) {
		s := NewScanner()
		trace := "[    1.000000]  " + strings.Repeat("f", 4000)
		for range 400 {
			s.Line("[    1.000000] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x1/0x2")
			for range 16 {
				s.Line(trace)
			}
		}
		total := 0
		for _, r := range s.Reports() {
			total += len(r.Text)
			if r.Text == "" {
				t.Fatal("a report lost its first line")
			}
		}
		if total > MaxTotalBytes+MaxReports*MaxLineBytes {
			t.Errorf("total text %d bytes", total)
		}
	})
}

func TestFlush(t *testing.T) {
	s := NewScanner()
	s.Write([]byte("[    1.000000] boot\n[    2.000000] Kernel panic - not syncing: cut short"))
	if len(s.Reports()) != 0 {
		t.Fatal("partial line scanned before Flush")
	}
	if r := s.Flush(); r == nil || r.Type != TypePanic {
		t.Errorf("Flush = %+v, want the panic", r)
	}
	if r := s.Flush(); r != nil {
		t.Errorf("second Flush = %+v", r)
	}
}

// Reports returns copies: changing them does not change the scanner.
func TestReportsCopy(t *testing.T) {
	s := NewScanner()
	s.Write(readLog(t, "warning.log"))
	rs := s.Reports()
	rs[0].Title = "changed"
	if s.Reports()[0].Title == "changed" {
		t.Error("Reports returned the scanner's own slice")
	}
}

func TestNormalise(t *testing.T) {
	for in, want := range map[string]string{
		"fio/123/0x00000002":                     "fio",
		"CPU: 1 PID: 2 at x.c:12 f":              "at x.c:12 f",
		"task kworker/u8:3:97":                   "task kworker/u8",
		"stuck for 26s! on cpu 3":                "stuck for",
		"refcount_t: underflow; use-after-free.": "refcount_t: underflow; use-after-free",
		"list_add corruption. prev->next should be next (ffff888004a1c0b8), but was 0000000000000000. (prev=ffff888004a1c0c0).": "list_add corruption. prev->next should be next but was",
	} {
		if got := normalise(in); got != want {
			t.Errorf("normalise(%q) = %q, want %q", in, got, want)
		}
	}
}
