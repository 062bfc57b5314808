package splat

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// goldenLog returns the raw log of a testdata file.
func goldenLog(t testing.TB, name string) []byte {
	t.Helper()
	g, err := readGolden("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return g.log
}

// Feeding the same console in any chunking gives the same reports.
func TestChunking(t *testing.T) {
	for _, path := range corpusFiles(t) {
		g, err := readGolden(path)
		if err != nil {
			t.Fatal(err)
		}
		data := g.log
		want := scanAll(data)

		byLine := NewScanner()
		for l := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
			byLine.Line(l)
		}
		byLine.Close()
		byByte := NewScanner()
		for i := range data {
			byByte.Write(data[i : i+1])
		}
		byByte.Close()
		odd := NewScanner()
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 7+len(rest)%13)
			odd.Write(rest[:n])
			rest = rest[n:]
		}
		odd.Close()
		for name, s := range map[string]*Scanner{"Line": byLine, "byte": byByte, "chunks": odd} {
			if got := s.Reports(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s fed by %s: reports differ from one Write\n got %+v\nwant %+v", path, name, got, want)
			}
		}
	}
}

// A panic is reported by the Line call that sees its first line.
func TestLineReportsAtStart(t *testing.T) {
	s := NewScanner()
	var seen []Report
	s.OnReport(func(r Report) { seen = append(seen, r) })
	for i, l := range strings.Split(string(goldenLog(t, "sysrq.log")), "\n") {
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
		want := Report{Type: TypePanic, Title: "kernel panic: sysrq triggered crash", Line: 12, Time: 2.101301,
			Text: "Kernel panic - not syncing: sysrq triggered crash", Frames: []string{}, Fatal: true}
		if !reflect.DeepEqual(*r, want) {
			t.Errorf("line 12: %+v, want %+v", *r, want)
		}
	}
	if len(seen) != 1 || seen[0].Line != 12 {
		t.Errorf("OnReport saw %+v, want the panic once", seen)
	}
}

// OnReport sees provisional titles at the header; OnDone sees final ones,
// in console order, with Fatal set by a later panic.
func TestCallbacks(t *testing.T) {
	s := NewScanner()
	var started, done []string
	s.OnReport(func(r Report) {
		// Callbacks run without the lock: calling back in must not deadlock.
		_ = s.Reports()
		started = append(started, r.Title)
	})
	s.OnDone(func(r Report) {
		done = append(done, fmt.Sprintf("%s fatal=%v", r.Title, r.Fatal))
	})
	s.Write(goldenLog(t, "null_deref_panic.log"))
	wantStarted := []string{"BUG: unable to handle kernel NULL pointer dereference", "kernel panic: Fatal exception"}
	if !reflect.DeepEqual(started, wantStarted) {
		t.Errorf("OnReport saw %q, want %q", started, wantStarted)
	}
	// The panic ends with "---[ end Kernel panic ...": both are done
	// before Close.
	wantDone := []string{"BUG: unable to handle kernel NULL pointer dereference in fuse_uring_commit_fetch fatal=true",
		"kernel panic: Fatal exception fatal=true"}
	if !reflect.DeepEqual(done, wantDone) {
		t.Errorf("OnDone before Close saw %q, want %q", done, wantDone)
	}
	s.Close()
	if !reflect.DeepEqual(done, wantDone) {
		t.Errorf("OnDone after Close saw %q, want %q", done, wantDone)
	}
}

// TestHeaders checks which lines start reports, their type and the title
// known from the header line alone.
func TestHeaders(t *testing.T) {
	for _, tc := range []struct {
		line  string
		typ   Type // "" for no report
		title string
	}{
		// Panics.
		{"Kernel panic - not syncing: sysrq triggered crash", TypePanic, "kernel panic: sysrq triggered crash"},
		{"Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b", TypePanic, "kernel panic: Attempted to kill init!"},
		{"Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)", TypePanic, "kernel panic: VFS: Unable to mount root fs on unknown-block(NUM,NUM)"},
		{"Kernel panic - not syncing: kernel: panic_on_warn set ...", TypePanic, "kernel panic: kernel: panic_on_warn set ..."},
		{"Kernel panic - not syncing: panic_on_warn set ...", TypePanic, "kernel panic: panic_on_warn set"},
		{"Kernel panic - not syncing: Fatal exception in interrupt", TypePanic, "kernel panic: Fatal exception"},
		{"Kernel panic - not syncing: stack-protector: Kernel stack is corrupted in: br_dev_xmit+0x1a/0x20", TypePanic, "kernel panic: stack is corrupted in br_dev_xmit"},
		{"Kernel panic - not syncing: stack-protector: Kernel stack is corrupted in: ffffffff81234567", TypePanic, "kernel panic: stack is corrupted"},
		{"Kernel panic - not syncing: corrupted stack end detected inside scheduler", TypePanic, "kernel panic: corrupted stack end"},
		{"Kernel panic - not syncing: ", TypePanic, "kernel panic"},
		// Oopses.
		{"Oops: 0002 [#1] SMP PTI", TypeOops, "Oops"},
		{"Oops: Oops: 0000 [#1] PREEMPT SMP NOPTI", TypeOops, "Oops"},
		{"Oops[#1]:", TypeOops, "Oops"},
		{"Oops: general protection fault, probably for non-canonical address 0xdffffc0000000005: 0000 [#1] PREEMPT SMP KASAN NOPTI", TypeOops, "general protection fault"},
		{"general protection fault: 0000 [#1] SMP", TypeOops, "general protection fault"},
		{"general protection fault, probably for non-canonical address 0x6b6b6b6b6b6b6b6b: 0000 [#1] SMP PTI", TypeOops, "general protection fault"},
		{"invalid opcode: 0000 [#1] SMP PTI", TypeOops, "invalid opcode"},
		{"Oops: invalid opcode: 0000 [#1] PREEMPT SMP NOPTI", TypeOops, "invalid opcode"},
		{"stack segment: 0000 [#1] SMP KASAN", TypeOops, "stack segment fault"},
		{"segment-related general protection fault: beec [#2] PREEMPT SMP KASAN PTI", TypeOops, "general protection fault"},
		{"divide_error: 0000 [#1] PREEMPT SMP KASAN", TypeOops, "divide error"},
		{"int3: 0000 [#1] PREEMPT SMP KASAN", TypeOops, "int3"},
		{"Unable to handle kernel access to user memory at virtual address 0000000000000008", TypeOops, "BUG: unable to handle kernel access to user memory"},
		{"Unable to handle kernel execute from non-executable memory at virtual address ffff800012345678", TypeOops, "Unable to handle kernel execute from non-executable memory at virtual address ADDR"},
		{"Unhandled fault: page domain fault (0x01b) at 0x00000000", TypeOops, "Unhandled fault"},
		{"Alignment trap: not handling instruction e1932f9f at [<8031f2b4>]", TypeOops, "Alignment trap"},
		{"Oops: divide error: 0000 [#1] SMP NOPTI", TypeOops, "divide error"},
		{"Internal error: Oops: 0000000096000005 [#1] PREEMPT SMP", TypeOops, "Internal error"},
		{"Unable to handle kernel paging request at virtual address ffff800012345678", TypeOops, "BUG: unable to handle kernel paging request"},
		{"Unable to handle kernel NULL pointer dereference at virtual address 0000000000000008", TypeOops, "BUG: unable to handle kernel NULL pointer dereference"},
		{"PANIC: double fault, error_code: 0x0", TypeOops, "PANIC: double fault"},
		// BUGs.
		{"BUG: unable to handle page fault for address: ffffffffc0a5b000", TypeBug, "BUG: unable to handle kernel paging request"},
		{"BUG: unable to handle kernel NULL pointer dereference at 0000000000000008", TypeBug, "BUG: unable to handle kernel NULL pointer dereference"},
		{"BUG: kernel NULL pointer dereference, address: 0000000000000000", TypeBug, "BUG: unable to handle kernel NULL pointer dereference"},
		{"BUG: sleeping function called from invalid context at fs/fuse/dev.c:1234", TypeBug, "BUG: sleeping function called from invalid context"},
		{"BUG: scheduling while atomic: swapper/0/0/0x00000002", TypeBug, "BUG: scheduling while atomic"},
		{"BUG: workqueue lockup - pool cpus=1 node=0 flags=0x0 nice=0 stuck for 33s!", TypeLockup, "BUG: workqueue lockup"},
		{"BUG: using smp_processor_id() in preemptible [00000000] code: fio/623", TypeBug, "BUG: using smp_processor_id() in preemptible code"},
		{"BUG: using __this_cpu_read() in preemptible [00000000] code: fio/623", TypeBug, "BUG: using __this_cpu_read() in preemptible code"},
		{"BUG: Bad page state in process fio  pfn:10a5c", TypeBug, "BUG: Bad page state"},
		{"BUG: Bad rss-counter state mm:00000000c1a7e5b3 type:MM_FILEPAGES val:-1 Comm:fio Pid:623", TypeBug, "BUG: Bad rss-counter state"},
		{"BUG: workqueue leaked lock or atomic: kworker/0:1/0x00000000/17", TypeBug, "BUG: workqueue leaked lock or atomic"},
		{"BUG: Dentry ffff88801234abcd{i=4,n=x}  still in use (1) [unmount of ext4 loop0]", TypeBug, "BUG: Dentry still in use in unmount"},
		{"BUG kmalloc-8 (Tainted: G    B         ): Object already free", TypeBug, "BUG: Object already free"},
		{"BUG:", TypeBug, "BUG: corrupted"},
		{"BUG: MAX_STACK_TRACE_ENTRIES too low!", TypeLockdep, "BUG: MAX_STACK_TRACE_ENTRIES too low!"},
		{"BUG: spinlock bad magic on CPU#0, fio/123", TypeBug, "BUG: spinlock bad magic"},
		{"BUG: TASK stack guard page was hit at ffffc90000a3ff98 (stack is ffffc90000a40000..ffffc90000a44000)", TypeBug, "BUG: stack guard page was hit"},
		{"BUG: KCSAN: data-race in fuse_request_end / fuse_dev_do_read", TypeKCSAN, "KCSAN: data-race in fuse_request_end / fuse_dev_do_read"},
		{"BUG: KASAN: use-after-free in fuse_dev_do_read+0x1a2/0x9b0 [fuse]", TypeKASAN, "KASAN: use-after-free in fuse_dev_do_read"},
		{"BUG: KASAN: slab-out-of-bounds in foo+0x1/0x2 at addr ffff8801d2c8faf4", TypeKASAN, "KASAN: slab-out-of-bounds in foo"},
		{"BUG: KASAN: wild-memory-access on address ffe7fff80000f5b8", TypeKASAN, "KASAN: wild-memory-access"},
		{"BUG: KASAN: null-ptr-deref in range [0x0000000000000008-0x000000000000000f]", TypeKASAN, "KASAN: null-ptr-deref in range [ADDR-ADDR]"},
		{"BUG: KASAN: double-free in fuse_put_request+0x3b5/0x5d0", TypeKASAN, "KASAN: invalid-free in fuse_put_request"},
		{"BUG: KFENCE: use-after-free read in test_uaf+0xb3/0x143", TypeKFENCE, "KFENCE: use-after-free read in test_uaf"},
		{"BUG: KFENCE: memory corruption in test_corrupt+0x1/0x2", TypeKFENCE, "KFENCE: memory corruption in test_corrupt"},
		{"BUG: KMSAN: uninit-value in fuse_fill_super+0x12/0x340", TypeKMSAN, "KMSAN: uninit-value in fuse_fill_super"},
		{"BUG: memory leak", TypeMemoryLeak, "memory leak"},
		{"UBSAN: array-index-out-of-bounds in fs/fuse/dev.c:123:45", TypeUBSAN, "UBSAN: array-index-out-of-bounds"},
		{"UBSAN: Undefined behaviour in fs/fuse/dev.c:123:45", TypeUBSAN, "UBSAN: undefined-behaviour"},
		{"UBSAN: shift-out-of-bounds in fs/fuse/dev.c:123:45", TypeUBSAN, "UBSAN: shift-out-of-bounds"},
		{"kernel BUG at mm/slub.c:435!", TypeBug, "kernel BUG"},
		{"kernel BUG at lib/list_debug.c:29!", TypeListCorruption, "BUG: corrupted list"},
		{"kernel BUG at mm/usercopy.c:72!", TypeBug, "BUG: bad usercopy"},
		{"unreferenced object 0xffff888003b4c000 (size 64):", TypeMemoryLeak, "memory leak"},
		{"kmemleak: unreferenced object 0xffff888003b4c000 (size 64):", TypeMemoryLeak, "memory leak"},
		// WARNINGs, old and new __warn formats.
		{"WARNING: CPU: 3 PID: 1 at mm/debug_vm_pgtable.c:493 pud_advanced_tests+0x8a/0x2f0", TypeWarning, "WARNING in pud_advanced_tests"},
		{"WARNING: CPU: 0 PID: 612 at fs/fuse/inode.c:2077 fuse_fill_super_common+0x5a0/0x5b0 [fuse]", TypeWarning, "WARNING in fuse_fill_super_common"},
		{"WARNING: fs/fuse/inode.c:2077 at fuse_fill_super_common+0x5a0/0x5b0 [fuse], CPU#0: mount/612", TypeWarning, "WARNING in fuse_fill_super_common"},
		{"WARNING: at fuse_fill_super_common+0x5a0/0x5b0, CPU#1: mount/612", TypeWarning, "WARNING in fuse_fill_super_common"},
		{"WARNING: at fs/fuse/file.c:123 fuse_foo+0x12/0x30()", TypeWarning, "WARNING in fuse_foo"},
		{"WARNING: fs/fuse/file.c:123 at 0xffffffffc0123456, CPU#1: fio/7", TypeWarning, "WARNING"},
		{"WARNING: CPU: 1 PID: 7 at 0xffffffffc0123456", TypeWarning, "WARNING"},
		{"WARNING: CPU: 0 PID: 1 at lib/refcount.c:28 refcount_warn_saturate+0x13e/0x210", TypeRefcount, "WARNING: refcount bug"},
		{"WARNING: lib/list_debug.c:62 at __list_del_entry_valid_or_report+0xd6/0x100, CPU#0: fio/7", TypeListCorruption, "BUG: corrupted list"},
		{"WARNING: CPU: 0 PID: 1 at kernel/locking/lockdep.c:232 __lock_acquire+0x1b2/0x2400", TypeLockdep, "WARNING: locking bug"},
		{"WARNING: CPU: 0 PID: 1 at lib/debugobjects.c:263 debug_print_object+0x1/0x2", TypeWarning, "WARNING: ODEBUG bug"},
		{"WARNING: CPU: 0 PID: 1 at mm/usercopy.c:76 usercopy_warn+0x1/0x2", TypeWarning, "WARNING: bad usercopy"},
		{"WARNING: CPU: 0 PID: 1 at lib/kobject.c:597 kobject_add_internal+0x1/0x2", TypeWarning, "WARNING: kobject bug"},
		{"WARNING: CPU: 0 PID: 1 at fs/proc/generic.c:330 proc_register+0x1/0x2", TypeWarning, "WARNING: proc registration bug"},
		{"WARNING: CPU: 0 PID: 1 at mm/slab_common.c:996 kmalloc_slab+0x1/0x2", TypeWarning, "WARNING: kmalloc bug"},
		{"WARNING: mm/util.c:597 at kvmalloc_node_noprof+0x1/0x2, CPU#0: fio/1", TypeWarning, "WARNING: kmalloc bug"},
		{"WARNING: CPU: 0 PID: 1 at mm/vmalloc.c:2880 __vmalloc_node_range+0x1/0x2", TypeWarning, "WARNING: zero-size vmalloc"},
		{"WARNING: CPU: 0 PID: 1 at drivers/usb/core/urb.c:471 usb_submit_urb+0x1/0x2", TypeWarning, "WARNING"},
		{"WARNING: kernel stack regs at ffff8801d100fea8 in syz-executor1:16059 has bad 'bp' value ffff8801d100ff28", TypeWarning, "WARNING: kernel stack regs has bad 'bp' value"},
		{"WARNING: kernel stack frame pointer at ffff88003e1f7f40 in migration/1:14 has bad value ffffffff85632fb0", TypeWarning, "WARNING: kernel stack frame pointer has bad value"},
		{"WARNING: kernel stack regs at         (ptrval) in syzkaller547737:4493 has bad 'bp' value         (ptrval)", TypeWarning, "WARNING: kernel stack regs has bad value"},
		{"WARNING:", TypeWarning, "WARNING: corrupted"},
		// Lockdep.
		{"WARNING: possible circular locking dependency detected", TypeLockdep, "possible deadlock"},
		{"WARNING: possible recursive locking detected", TypeLockdep, "possible deadlock"},
		{"WARNING: inconsistent lock state", TypeLockdep, "inconsistent lock state"},
		{"WARNING: suspicious RCU usage", TypeLockdep, "WARNING: suspicious RCU usage"},
		{"WARNING: bad unlock balance detected!", TypeLockdep, "WARNING: bad unlock balance"},
		{"WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected", TypeLockdep, "possible deadlock"},
		{"WARNING: possible irq lock inversion dependency detected", TypeLockdep, "possible deadlock"},
		{"INFO: trying to register non-static key.", TypeLockdep, "INFO: trying to register non-static key"},
		{"INFO: possible circular locking dependency detected ]", TypeLockdep, "possible deadlock"},
		{"[ INFO: possible circular locking dependency detected ]", TypeLockdep, "possible deadlock"},
		{"[ INFO: inconsistent lock state ]", TypeLockdep, "inconsistent lock state"},
		{"[ INFO: suspicious RCU usage. ]", TypeLockdep, "INFO: suspicious RCU usage"},
		{"[ INFO: possible recursive locking detected ]", TypeLockdep, "possible deadlock"},
		{"WARNING: lock held when returning to user space!", TypeLockdep, "WARNING: lock held when returning to user space"},
		{"WARNING: Nested lock was not taken", TypeLockdep, "WARNING: nested lock was not taken"},
		{"BUG: Invalid wait context", TypeLockdep, "WARNING: locking bug"},
		{"[ BUG: Invalid wait context ]", TypeLockdep, "WARNING: locking bug"},
		{"BUG: held lock freed!", TypeLockdep, "BUG: held lock freed"},
		{"BUG: MAX_LOCKDEP_KEYS too low!", TypeLockdep, "BUG: MAX_LOCKDEP_KEYS too low!"},
		// Hung tasks, lockups, stalls.
		{"INFO: task jbd2/ram0-8:88 blocked for more than 245 seconds.", TypeHungTask, "INFO: task hung"},
		{"INFO: task fuse server:4242 blocked for more than 120 seconds.", TypeHungTask, "INFO: task hung"},
		{"INFO: task fio:12 can't die for more than 143 seconds.", TypeHungTask, "INFO: task can't die"},
		{"watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [swapper/0:1]", TypeLockup, "BUG: soft lockup"},
		{"BUG: soft lockup - CPU#0 stuck for 23s! [fio:612]", TypeLockup, "BUG: soft lockup"},
		{"NMI watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [kworker/1:2:93]", TypeLockup, "BUG: soft lockup"},
		{"NMI watchdog: Watchdog detected hard LOCKUP on cpu 1", TypeLockup, "watchdog: hard LOCKUP"},
		{"watchdog: CPU1: Watchdog detected hard LOCKUP on cpu 1", TypeLockup, "watchdog: hard LOCKUP"},
		{"rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", TypeRCUStall, "INFO: rcu detected stall"},
		{"rcu: INFO: rcu_preempt self-detected stall on CPU", TypeRCUStall, "INFO: rcu detected stall"},
		{"INFO: rcu_sched detected stalls on CPUs/tasks: { 1} (detected by 0, t=21002 jiffies, g=123, c=122, q=5)", TypeRCUStall, "INFO: rcu detected stall"},
		{"rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: { 1-... } 21 jiffies s: 297 root: 0x2/.", TypeRCUStall, "INFO: rcu detected stall"},
		{"INFO: rcu_tasks detected stalls on tasks:", TypeRCUStall, "INFO: rcu detected stall"},
		// Formats without a call trace of their own.
		{"INFO: Freed in fasync_free_rcu+0x14/0x20 age=57 cpu=0 pid=18338", TypeBug, "INFO: Freed in fasync_free_rcu age=NUM cpu=NUM pid=NUM"},
		{"INFO: Allocated in fasync_helper+0x29/0x90 age=1 cpu=1 pid=2", TypeBug, "INFO: Allocated in fasync_helper age=NUM cpu=NUM pid=NUM"},
		{"INFO:", TypeBug, "INFO: corrupted"},
		{"unregister_netdevice: waiting for lo to become free. Usage count = 5", TypeRefcount, "unregister_netdevice: waiting for DEV to become free"},
		{"VFS: Close: file count is 0", TypeBug, "VFS: Close: file count is zero (use-after-free)"},
		{"VFS: Busy inodes after unmount of sda1. Self-destruct in 5 seconds.  Have a nice day...", TypeBug, "VFS: Busy inodes after unmount (use-after-free)"},
		{"BUG: KCSAN: data-race in e1000_clean_rx_irq+0x551/0xb10", TypeKCSAN, "KCSAN: data-race in e1000_clean_rx_irq"},
		// Not reports.
		{"WARNING: You are running an unofficial kernel", "", ""},
		{"WARNING: workqueue cpumask: online intersect > possible intersect", "", ""},
		{"INFO: NMI handler (perf_event_nmi_handler) took too long to run: 1.234 msecs", "", ""},
		{"INFO: lockdep is turned off.", "", ""},
		{"INFO: task fio:623 is blocked on a mutex likely owned by task fio:601.", "", ""},
		{"Oopsie", "", ""},
		{"Oops: file not found", "", ""},
		{"general protection fault ip:7f1c2b51f3d4 sp:7ffd8c6b2a38 error:0 in libc.so.6", "", ""},
		{"kernel BUGS: none", "", ""},
		{"rcu: Hierarchical RCU implementation.", "", ""},
		{"watchdog: Disabling watchdog on nohz_full cores by default", "", ""},
		{"NMI watchdog: Perf NMI watchdog permanently disabled", "", ""},
		{" Kernel panic - not syncing: indented", "", ""},
		{"sysrq: Trigger a crash", "", ""},
		{"sysrq: Show Blocked State", "", ""},
		{"task:kworker/0:1     state:D stack:0     pid:12    tgid:12    ppid:2      flags:0x00004000", "", ""},
		{"NMI backtrace for cpu 1", "", ""},
		{"---[ end Kernel panic - not syncing: sysrq triggered crash ]---", "", ""},
		{"list_add corruption. prev->next should be next (ffff888004a1c0b8), but was 0000000000000000.", "", ""},
		{"refcount_t: underflow; use-after-free.", "", ""},
		{"kmemleak: 2 new suspected memory leaks (see /sys/kernel/debug/kmemleak)", "", ""},
		{"BUG", "", ""},
		{"Booting the kernel (entry_offset: 0x0000000000000000).", "", ""},
		{"unregister_netdevice: waiting for lo", "", ""},
		{"BUG fasync_cache (Tainted: G    B          ): kasan: bad access detected", "", ""},
		{"WARNING: foo", "", ""},
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
		in, msg, ctx string
		ts           float64
		hasTS        bool
	}{
		{"[    2.101301] Kernel panic\r\n", "Kernel panic", "", 2.101301, true},
		{"[12345.678901] x", "x", "", 12345.678901, true},
		{"[   14.003521][  T312] BUG: x", "BUG: x", "T312", 14.003521, true},
		{"[   14.003521][    C1] BUG: x", "BUG: x", "C1", 14.003521, true},
		{"[  T312] BUG: x", "BUG: x", "T312", 0, false},
		{"[    5.211100]  <TASK>", " <TASK>", "", 5.2111, true},
		{"[    5.211100] ", "", "", 5.2111, true},
		{"<4>[    5.211100] WARNING: x", "WARNING: x", "", 5.2111, true},
		{"Jobs: 1 [W(1)][50.0%]\r[    6.4] BUG: y", "BUG: y", "", 6.4, true},
		{"Jobs: 1 [W(1)][50.0%][    6.400000] BUG: y", "BUG: y", "", 6.4, true},
		{"no timestamp [here]", "no timestamp [here]", "", 0, false},
		{"[    1.] x", "[    1.] x", "", 0, false},
		{"[", "[", "", 0, false},
		{"", "", "", 0, false},
		{"\r", "", "", 0, false},
	} {
		p := parseLine(tc.in)
		if p.msg != tc.msg || p.ctx != tc.ctx || p.hasTS != tc.hasTS || (p.hasTS && p.ts != tc.ts) {
			t.Errorf("parseLine(%q) = {msg %q ctx %q ts %v %v}, want {msg %q ctx %q ts %v %v}",
				tc.in, p.msg, p.ctx, p.ts, p.hasTS, tc.msg, tc.ctx, tc.ts, tc.hasTS)
		}
	}
}

func TestParseFrame(t *testing.T) {
	for _, tc := range []struct {
		in           string
		fn           string
		questionable bool
		ok           bool
	}{
		{" fuse_dev_write+0x5c/0x90 [fuse]", "fuse_dev_write", false, true},
		{"  ? __warn+0x7d/0x130", "__warn", true, true},
		{" __handle_sysrq.cold+0x91/0x141", "__handle_sysrq", false, true},
		{" __mutex_lock.constprop.0+0x56e/0xa30", "__mutex_lock", false, true},
		{" [<ffffffff81234567>] fuse_foo+0x12/0x34", "fuse_foo", false, true},
		{" [<ffffffff81234567>] ? fuse_foo+0x12/0x34", "fuse_foo", true, true},
		{" fuse_foo (fs/fuse/dev.c:123)", "fuse_foo", false, true},
		{" show_stack+0x18/0x24 (C)", "show_stack", false, true},
		{"    kmalloc_trace+0x2b/0x90", "kmalloc_trace", false, true},
		{"fuse_foo+0x12/0x34", "", false, false}, // not indented: not a trace line
		{" 0xffffffffc0123456", "", false, false},
		{" <TASK>", "", false, false},
		{" #0: ffff888004a1c0b8 (&fc->lock){+.+.}-{3:3}, at: fuse_foo+0x1/0x2", "", false, false},
		{" ", "", false, false},
	} {
		fn, q, ok := parseFrame(tc.in)
		if fn != tc.fn || q != tc.questionable || ok != tc.ok {
			t.Errorf("parseFrame(%q) = %q, %v, %v; want %q, %v, %v", tc.in, fn, q, ok, tc.fn, tc.questionable, tc.ok)
		}
	}
}

func TestRipFunc(t *testing.T) {
	for _, tc := range []struct {
		in     string
		fn     string
		ripped bool
	}{
		{"RIP: 0010:fuse_dev_do_write+0x9b4/0xd10", "fuse_dev_do_write", true},
		{"RIP: 0010:splatgen_bug+0x5/0x7 [splatgen]", "splatgen_bug", true},
		{"RIP: 0033:0x408ace", "", true},
		{"RIP: 0010:0x0", "", true},
		{"RIP: fuse_foo+0x1/0x2", "fuse_foo", true},
		{"pc : fuse_uring_cmd+0x3c/0x1a0 [fuse]", "fuse_uring_cmd", true},
		{"PC is at fuse_foo+0x1/0x2", "fuse_foo", true},
		{"NIP [c000000000123456] fuse_foo+0x1/0x2", "fuse_foo", true},
		{"RSP: 0018:ffffc90000bf7d28 EFLAGS: 00010202", "", false},
	} {
		fn, ok := ripFunc(tc.in)
		if fn != tc.fn || ok != tc.ripped {
			t.Errorf("ripFunc(%q) = %q, %v; want %q, %v", tc.in, fn, ok, tc.fn, tc.ripped)
		}
	}
}

// matchPattern matches fn against one skip pattern.
func matchPattern(fn, p string) bool {
	return newPatterns(p).match(fn)
}

func TestMatchPattern(t *testing.T) {
	for _, tc := range []struct {
		fn, pattern string
		want        bool
	}{
		{"__might_resched", "^__might_resched", true},
		{"x__might_resched", "^__might_resched", false},
		{"kfree", "^kfree$", true},
		{"kfree_skb", "^kfree$", false},
		{"fuse_dev_read_lock", "_lock$", true},
		{"dump_stack_lvl", "dump_stack", true},
		{"trigger_all_cpu_backtrace", "^trigger_.*backtrace", true},
		{"trigger_single_cpu", "^trigger_.*backtrace", false},
		{"__folio_put", "^_*folio", true},
		{"put_folio", "^_*folio", false},
	} {
		if got := matchPattern(tc.fn, tc.pattern); got != tc.want {
			t.Errorf("matchPattern(%q, %q) = %v, want %v", tc.fn, tc.pattern, got, tc.want)
		}
	}
}

// TestTitles checks final titles of small reports, one rule at a time.
func TestTitles(t *testing.T) {
	trace := func(frames ...string) []string {
		out := []string{"Call Trace:", " <TASK>"}
		for _, f := range frames {
			out = append(out, " "+f+"+0x10/0x20")
		}
		return append(out, " </TASK>")
	}
	join := func(parts ...[]string) string {
		var all []string
		for _, p := range parts {
			all = append(all, p...)
		}
		return strings.Join(all, "\n")
	}
	for _, tc := range []struct {
		name, log, title string
		corrupted        bool
	}{
		{"warning skips the reporting helpers", join(
			[]string{"------------[ cut here ]------------", "WARNING: CPU: 0 PID: 1 at fs/fuse/dev_uring.c:12 fuse_uring_cmd+0x1/0x2", "RIP: 0010:fuse_uring_cmd+0x1/0x2"},
			trace("fuse_uring_cmd", "io_uring_cmd", "io_issue_sqe")),
			"WARNING in fuse_uring_cmd", false},
		{"refcount warning names the caller", join(
			[]string{"------------[ cut here ]------------", "refcount_t: underflow; use-after-free.",
				"WARNING: CPU: 0 PID: 1 at lib/refcount.c:28 refcount_warn_saturate+0x1/0x2", "RIP: 0010:refcount_warn_saturate+0x1/0x2"},
			trace("__refcount_sub_and_test", "fuse_put_request", "fuse_request_end")),
			"WARNING: refcount bug in fuse_put_request", false},
		{"sleeping in atomic skips might_resched and locks", join(
			[]string{"BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580"},
			trace("dump_stack_lvl", "__might_resched", "__mutex_lock", "mutex_lock_nested", "fuse_uring_create_queue", "fuse_uring_cmd")),
			"BUG: sleeping function called from invalid context in fuse_uring_create_queue", false},
		{"kmalloc wrappers are skipped", join(
			[]string{"BUG: sleeping function called from invalid context at include/linux/sched/mm.h:321"},
			trace("dump_stack_lvl", "__might_resched", "__kmalloc_cache_noprof", "kmalloc_trace", "fuse_alloc_forget")),
			"BUG: sleeping function called from invalid context in fuse_alloc_forget", false},
		{"syscall wrappers lose their prefix", join(
			[]string{"BUG: kernel NULL pointer dereference, address: 0000000000000000", "RIP: 0010:memset_orig+0x1/0x2"},
			trace("__x64_sys_fsconfig", "do_syscall_64")),
			"BUG: unable to handle kernel NULL pointer dereference in sys_fsconfig", false},
		{"circular deadlock is titled by the lock being taken", join(
			[]string{"WARNING: possible circular locking dependency detected", "fio/512 is trying to acquire lock:",
				"ffff888004c1a0e8 (&fc->lock){+.+.}-{3:3}, at: fuse_dev_do_read+0x9c/0x1d0", "",
				"but task is already holding lock:", "ffff888004a1c0b8 (&fiq->lock){+.+.}-{3:3}, at: fuse_request_end+0x4a/0x120"},
			trace("dump_stack_lvl", "print_circular_bug", "lock_acquire", "_raw_spin_lock", "fuse_dev_do_read")),
			"possible deadlock in fuse_dev_do_read", false},
		{"hung task skips the wait primitives", join(
			[]string{"INFO: task fio:12 blocked for more than 120 seconds.", "task:fio state:D stack:0 pid:12"},
			trace("__schedule", "schedule", "schedule_preempt_disabled", "__mutex_lock", "mutex_lock", "fuse_flush", "filp_flush")),
			"INFO: task hung in fuse_flush", false},
		{"hung task on synchronize_rcu", join(
			[]string{"INFO: task kworker/0:1:12 blocked for more than 120 seconds."},
			trace("__schedule", "schedule", "schedule_timeout", "__wait_for_common", "__synchronize_srcu", "fuse_conn_put")),
			"INFO: task hung in synchronize_rcu", false},
		{"soft lockup is titled before the syscall entry", join(
			[]string{"watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [fio:123]", "RIP: 0010:fuse_copy_do+0x1/0x2"},
			trace("fuse_copy_args", "fuse_dev_do_read", "fuse_dev_read", "vfs_read", "ksys_read", "do_syscall_64")),
			"BUG: soft lockup in fuse_dev_read", false},
		{"rcu stall ignores the interrupt's frames", join(
			[]string{"rcu: INFO: rcu_preempt self-detected stall on CPU", "Call Trace:", " <IRQ>", " rcu_dump_cpu_stacks+0x1/0x2",
				" rcu_sched_clock_irq+0x1/0x2", " </IRQ>", " <TASK>", " asm_sysvec_apic_timer_interrupt+0x1/0x2",
				"RIP: 0010:fuse_uring_next_fuse_req+0x2e/0x80", " fuse_uring_commit_fetch+0x1/0x2", " fuse_uring_cmd+0x1/0x2",
				" io_uring_cmd+0x1/0x2", " __x64_sys_io_uring_enter+0x1/0x2", " do_syscall_64+0x1/0x2", " </TASK>"}),
			"INFO: rcu detected stall in sys_io_uring_enter", false},
		{"KASAN names the access", join(
			[]string{"==================================================================",
				"BUG: KASAN: slab-out-of-bounds in fuse_copy_fill+0x1/0x2 [fuse]", "Write of size 8 at addr ffff888004a1c0b8 by task fio/623"},
			trace("dump_stack_lvl", "print_report", "kasan_report", "fuse_copy_fill"),
			[]string{"=================================================================="}),
			"KASAN: slab-out-of-bounds Write in fuse_copy_fill", false},
		{"a WARNING without a call trace is corrupted", join(
			[]string{"WARNING: CPU: 0 PID: 1 at lib/refcount.c:28 refcount_warn_saturate+0x1/0x2", "Modules linked in: fuse"}),
			"WARNING: refcount bug in corrupted", true},
		{"a kernel BUG without a trace", join(
			[]string{"kernel BUG at fs/fuse/dev.c:2131!"}),
			"kernel BUG in corrupted", true},
		{"a kernel BUG is titled by its RIP, past skb helpers", join(
			[]string{"kernel BUG at include/linux/skbuff.h:2069!", "invalid opcode: 0000 [#1] SMP KASAN", "RIP: 0010:skb_pull+0xd5/0xf0"},
			trace("esp6_gro_receive", "ipv6_gro_receive")),
			"kernel BUG in esp6_gro_receive", false},
		{"an oops without a RIP line is corrupted", join(
			[]string{"general protection fault: 0000 [#1] SMP KASAN", "Modules linked in:"},
			trace("fuse_dev_do_read")),
			"general protection fault in corrupted", true},
		{"divide error is titled by its RIP alone", join(
			[]string{"divide error: 0000 [#1] SMP KASAN", "RIP: 0010:tabledist+0x1/0x2"}, trace("netem_enqueue")),
			"divide error in tabledist", false},
		{"old x86 IP line", join(
			[]string{"BUG: unable to handle kernel paging request at ffff88002bde1e40", "IP: [<ffffffff82d4e304>] __memset+0x24/0x30",
				"Oops: 0002 [#1] SMP", "RIP: 0010:[<ffffffff82d4e304>]  [<ffffffff82d4e304>] __memset+0x24/0x30"},
			trace("__memset", "ext4_read_super")),
			"BUG: unable to handle kernel paging request in ext4_read_super", false},
		{"arm Backtrace", join(
			[]string{"Unable to handle kernel NULL pointer dereference at virtual address 00000000",
				"Internal error: Oops: 80000207 [#1] PREEMPT SMP ARM", "PC is at 0x0", "LR is at gsmld_receive_buf+0xc0/0x15c",
				"Backtrace: ", "[<808ea9f4>] (gsmld_receive_buf) from [<808dcfac>] (tty_ioctl+0x7b4/0xa6c)",
				"[<808dc7f8>] (tty_ioctl) from [<804b9814>] (sys_ioctl+0x110/0xa74)"}),
			"BUG: unable to handle kernel NULL pointer dereference in gsmld_receive_buf", false},
		{"KASAN names the accessing function, past the debug objects", join(
			[]string{"==================================================================",
				"BUG: KASAN: use-after-free in debug_object_activate+0x1/0x2", "Read of size 8 at addr ffff888004a1c0b8 by task fio/623"},
			trace("dump_stack", "kasan_report", "debug_object_activate", "work_is_static_object", "strp_check_rcv"),
			[]string{"=================================================================="}),
			"KASAN: use-after-free Read in strp_check_rcv", false},
		{"old KASAN without an access line keeps its header", join(
			[]string{"BUG: KASAN: slab-out-of-bounds in do_raw_write_lock+0x1/0x2 at addr ffff8801d2c8faf4"},
			trace("do_raw_write_lock")),
			"KASAN: slab-out-of-bounds in do_raw_write_lock at addr ADDR", true},
		{"hung task in a primitive with wait in its name", join(
			[]string{"INFO: task fio:12 blocked for more than 120 seconds."},
			trace("__schedule", "schedule", "__mutex_lock", "splatgen_waiter", "kthread", "ret_from_fork")),
			"INFO: task hung in splatgen_waiter", false},
		{"hung task on rtnl_lock", join(
			[]string{"INFO: task ip:12 blocked for more than 120 seconds."},
			trace("__schedule", "schedule", "__mutex_lock", "rtnl_lock", "devinet_ioctl")),
			"INFO: task hung in rtnl_lock", false},
		{"workqueue leaked lock names the work function", join(
			[]string{"BUG: workqueue leaked lock or atomic: kworker/0:1/0x00000000/17", "     last function: addrconf_dad_work"}),
			"BUG: workqueue leaked lock or atomic in addrconf_dad_work", false},
		{"old lockdep names the lock's at: line", join(
			[]string{"[ INFO: possible circular locking dependency detected ]", "4.4.0 #1 Not tainted",
				"kacpi_hotplug/246 is trying to acquire lock:",
				" (kacpid){+.+.+.}, at: [<ffffffff8105bbd0>] flush_workqueue+0x0/0xb0", "",
				"but task is already holding lock:", " (&x){+.+.+.}, at: [<ffffffff8105bbd0>] acpi_foo+0x0/0xb0"},
			trace("dump_stack", "flush_workqueue")),
			"possible deadlock in flush_workqueue", false},
		{"old inconsistent lock state", join(
			[]string{"[ INFO: inconsistent lock state ]", "syz-executor3/5076 [HC0[0]:SC0[0]:HE1:SE1] takes:",
				" (&(&hashinfo->ehash_locks[i])->rlock){+.?...}, at: [<ffffffff83a6a370>] inet_ehash_insert+0x240/0xad0"},
			trace("dump_stack", "inet_ehash_insert")),
			"inconsistent lock state in inet_ehash_insert", false},
		{"suspicious RCU usage without its source line", join(
			[]string{"WARNING: suspicious RCU usage", "4.15.0 #1 Not tainted", "-----------------------------"},
			trace("dump_stack", "foo")),
			"WARNING: suspicious RCU usage", true},
		{"memory leak names the allocator's caller", join(
			[]string{"unreferenced object 0xffff888003b4c000 (size 64):", "  comm \"fio\", pid 123, jiffies 4294893680",
				"  backtrace (crc 5d2c8e1f):", "    kmalloc_trace+0x1/0x2", "    fuse_request_alloc+0x1/0x2",
				"    fuse_get_req+0x1/0x2", "    fuse_simple_request+0x1/0x2"}),
			"memory leak in fuse_get_req", false},
	} {
		s := NewScanner()
		for l := range strings.SplitSeq(tc.log, "\n") {
			s.Line(l)
		}
		s.Close()
		rs := s.Reports()
		if len(rs) != 1 {
			t.Errorf("%s: %d reports, want 1: %+v", tc.name, len(rs), rs)
			continue
		}
		if rs[0].Title != tc.title || rs[0].Corrupted != tc.corrupted {
			t.Errorf("%s: title %q corrupted %v (%s), want %q corrupted %v", tc.name, rs[0].Title, rs[0].Corrupted,
				rs[0].CorruptedReason, tc.title, tc.corrupted)
		}
	}
}

// A kernel without CONFIG_PRINTK_TIME prints no timestamps: headers still
// count. Once timestamps are seen, an untimed header is user space.
func TestUntimedHeaders(t *testing.T) {
	s := NewScanner()
	s.Line("Linux version 6.1.0")
	if r := s.Line("Kernel panic - not syncing: No working init found."); r == nil || r.Title != "kernel panic: No working init found." {
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

// "Booting the kernel." is a reboot only when something was printed before
// the machine's boot sequence: a first boot's decompressor prints it too.
func TestReboot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lines  []string
		reboot bool
	}{
		{"first boot", []string{"", "SeaBIOS (version 1.16.2)", "early console in extract_kernel",
			"Decompressing Linux... Parsing ELF... done.", "Booting the kernel.", "[    0.000000] Linux version 6.1.0"}, false},
		{"first boot, decompressor only", []string{"Decompressing Linux... Parsing ELF... done.", "Booting the kernel."}, false},
		{"after program output", []string{"executing program 3:", "mmap(0x7f0000000000, 0x1000)", "SeaBIOS (version 1.8.2)",
			"Decompressing Linux... Parsing ELF... done.", "Booting the kernel."}, true},
		{"after the kernel", []string{"[  500.720631] a", "[  500.720632] b", "[  500.720633] c", "[  500.720634] d",
			"[  500.720635] e", "[  500.720636] f", "[  500.720637] g", "[  500.720638] h",
			"[  500.720639] EFER = 0x0000000000000d01", "SeaBIOS (version 1.8.2)",
			"Decompressing Linux... Parsing ELF... done.", "Booting the kernel.", "[    0.000000] Linux version 4.20.0"}, true},
	} {
		s := NewScanner()
		for _, l := range tc.lines {
			s.Line(l)
		}
		s.Close()
		rs := s.Reports()
		got := len(rs) == 1 && rs[0].Title == "unexpected kernel reboot" && rs[0].Fatal
		if got != tc.reboot || len(rs) > 1 {
			t.Errorf("%s: reports %+v, want a reboot: %v", tc.name, rs, tc.reboot)
		}
	}
}

// Old kernels print a WARNING's stack from panic() when panic_on_warn is
// set: the panic's call trace titles the WARNING too, and both are
// reported.
func TestPanicAdoptsTrace(t *testing.T) {
	s := NewScanner()
	var done []Report
	s.OnDone(func(r Report) { done = append(done, r) })
	for _, l := range []string{
		"[   44.466577] ------------[ cut here ]------------",
		"[   44.471332] WARNING: CPU: 1 PID: 2992 at lib/refcount.c:186 refcount_sub_and_test+0x167/0x1b0",
		"[   44.479978] Kernel panic - not syncing: panic_on_warn set ...",
		"[   44.487309] CPU: 1 PID: 2992 Comm: syz-executor Not tainted 4.14.0-rc5+ #91",
		"[   44.503948] Call Trace:",
		"[   44.506504]  dump_stack+0x194/0x257",
		"[   44.514735]  panic+0x1e4/0x417",
		"[   44.530498]  __warn+0x1c4/0x1d9",
		"[   44.538466]  report_bug+0x211/0x2d0",
		"[   44.577201]  do_invalid_op+0x1b/0x20",
		"[   44.580618]  invalid_op+0x18/0x20",
		"[   44.580618] RIP: 0010:refcount_sub_and_test+0x167/0x1b0",
		"[   44.669090]  sctp_wfree+0x183/0x620",
		"[   44.682043]  skb_release_head_state+0x124/0x200",
		"[   44.690000] Kernel Offset: disabled",
	} {
		s.Line(l)
	}
	s.Close()
	rs := s.Reports()
	if len(rs) != 2 || rs[0].Title != "WARNING: refcount bug in sctp_wfree" || !rs[0].Fatal || rs[0].Corrupted ||
		rs[1].Title != "kernel panic: panic_on_warn set" {
		t.Fatalf("reports %+v", rs)
	}
	if !strings.Contains(rs[0].Text, "sctp_wfree") || !strings.Contains(rs[1].Text, "sctp_wfree") {
		t.Errorf("the call trace is not in both reports:\n%s\n---\n%s", rs[0].Text, rs[1].Text)
	}
	if len(done) != 2 || done[0].Line != 2 || done[1].Line != 3 || !reflect.DeepEqual(done, rs) {
		t.Errorf("OnDone saw %+v, want the reports in console order", done)
	}
}

// A report is fatal when a panic that it caused follows.
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
		{"ended, caused", append(warn[:4:4], "[   10.000400] ---[ end trace 0000000000000000 ]---",
			"[   10.000500] Kernel panic - not syncing: Fatal exception"), true},
		{"ended, unrelated panic", append(warn[:4:4], "[   10.000400] ---[ end trace 0000000000000000 ]---",
			"[   11.000000] sysrq: Trigger a crash", "[   11.000100] Kernel panic - not syncing: sysrq triggered crash"), false},
		{"no panic", append(warn[:4:4], "[   10.000400] ---[ end trace 0000000000000000 ]---"), false},
	} {
		s := NewScanner()
		var done []Report
		s.OnDone(func(r Report) { done = append(done, r) })
		for _, l := range tc.lines {
			s.Line(l)
		}
		s.Close()
		rs := s.Reports()
		if len(rs) == 0 || rs[0].Type != TypeWarning {
			t.Fatalf("%s: reports %+v", tc.name, rs)
		}
		if rs[0].Fatal != tc.fatal || done[0].Fatal != tc.fatal {
			t.Errorf("%s: warning Fatal = %v (OnDone %v), want %v", tc.name, rs[0].Fatal, done[0].Fatal, tc.fatal)
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
		t.Errorf("panic %d lines later marked the warning fatal", MaxReportLines)
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
}

// With CONFIG_PRINTK_CALLER, lines of other tasks are left out of a
// report, and a header of another task cuts it off.
func TestPrintkCaller(t *testing.T) {
	s := NewScanner()
	for _, l := range []string{
		"[   10.000000][  T100] ------------[ cut here ]------------",
		"[   10.000001][  T100] WARNING: CPU: 0 PID: 100 at fs/fuse/dev.c:1 fuse_foo+0x1/0x2",
		"[   10.000002][  T200] fuse: something else",
		"[   10.000003][  T100] Call Trace:",
		"[   10.000004][  T100]  <TASK>",
		"[   10.000005][  T200] EXT4-fs (ram0): mounted filesystem",
		"[   10.000006][  T100]  fuse_foo+0x1/0x2",
		"[   10.000007][  T100]  fuse_bar+0x1/0x2",
		"[   10.000008][  T100]  </TASK>",
		"[   10.000009][  T100] ---[ end trace 0000000000000000 ]---",
	} {
		s.Line(l)
	}
	s.Close()
	rs := s.Reports()
	if len(rs) != 1 || rs[0].Title != "WARNING in fuse_foo" || rs[0].Corrupted {
		t.Fatalf("reports %+v", rs)
	}
	if strings.Contains(rs[0].Text, "something else") || strings.Contains(rs[0].Text, "EXT4") {
		t.Errorf("text holds lines of another task:\n%s", rs[0].Text)
	}
	if want := []string{"fuse_foo", "fuse_bar"}; !reflect.DeepEqual(rs[0].Frames, want) {
		t.Errorf("frames %q, want %q", rs[0].Frames, want)
	}
}

// Reports that are cut off or interleaved are Corrupted.
func TestCorrupted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lines  []string
		reason string // of the first report, "" for not corrupted
	}{
		{"other output inside the call trace", []string{
			"[    1.000000] WARNING: CPU: 0 PID: 1 at fs/fuse/dev.c:1 fuse_foo+0x1/0x2",
			"[    1.000001] Call Trace:",
			"[    1.000002]  <TASK>",
			"[    1.000003]  fuse_foo+0x1/0x2",
			"[    1.000004] fuse: another message",
			"[    1.000005]  fuse_bar+0x1/0x2",
			"[    1.000006]  </TASK>",
		}, "interleaved with other output"},
		{"user space output inside the call trace is not kernel output", []string{
			"[    0.000000] a", "[    0.000001] b", "[    0.000002] c", "[    0.000003] d",
			"[    0.000004] e", "[    0.000005] f", "[    0.000006] g", "[    0.000007] h",
			"[    1.000000] WARNING: CPU: 0 PID: 1 at fs/fuse/dev.c:1 fuse_foo+0x1/0x2",
			"[    1.000001] Call Trace:",
			"[    1.000002]  <TASK>",
			"[    1.000003]  fuse_foo+0x1/0x2",
			"fio: job 1 done",
			"[    1.000005]  fuse_bar+0x1/0x2",
			"[    1.000006]  </TASK>",
		}, ""},
		{"console ends in the call trace", []string{
			"[    1.000000] WARNING: CPU: 0 PID: 1 at fs/fuse/dev.c:1 fuse_foo+0x1/0x2",
			"[    1.000001] Call Trace:",
			"[    1.000002]  <TASK>",
			"[    1.000003]  fuse_foo+0x1/0x2",
		}, "cut off in its call trace"},
		{"another report before the call trace", []string{
			"[    1.000000] WARNING: CPU: 0 PID: 1 at fs/fuse/dev.c:1 fuse_foo+0x1/0x2",
			"[    1.000001] Modules linked in: fuse",
			"[    1.000002] BUG: kernel NULL pointer dereference, address: 0000000000000000",
		}, "cut off by another report before its call trace"},
		{"KASAN without its closing line", []string{
			"[    1.000000] ==================================================================",
			"[    1.000001] BUG: KASAN: use-after-free in fuse_foo+0x1/0x2",
			"[    1.000002] Read of size 8 at addr ffff888004a1c0b8 by task fio/623",
			"[    1.000003] Call Trace:",
			"[    1.000004]  fuse_foo+0x1/0x2",
		}, "cut off before its closing line"},
		{"a complete report", []string{
			"[    1.000000] WARNING: CPU: 0 PID: 1 at fs/fuse/dev.c:1 fuse_foo+0x1/0x2",
			"[    1.000001] Call Trace:",
			"[    1.000002]  <TASK>",
			"[    1.000003]  fuse_foo+0x1/0x2",
			"[    1.000004]  </TASK>",
			"[    1.000005] ---[ end trace 0000000000000000 ]---",
		}, ""},
	} {
		s := NewScanner()
		for _, l := range tc.lines {
			s.Line(l)
		}
		s.Close()
		rs := s.Reports()
		if len(rs) == 0 {
			t.Errorf("%s: no report", tc.name)
			continue
		}
		if rs[0].CorruptedReason != tc.reason || rs[0].Corrupted != (tc.reason != "") {
			t.Errorf("%s: corrupted %v %q, want %q", tc.name, rs[0].Corrupted, rs[0].CorruptedReason, tc.reason)
		}
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
		if len(rs[0].Frames) != MaxFrames {
			t.Errorf("%d frames, want %d", len(rs[0].Frames), MaxFrames)
		}
	})
	t.Run("report bytes", func(t *testing.T) {
		s := NewScanner()
		s.Line("[    1.000000] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x1/0x2")
		long := "[    1.000000]  " + strings.Repeat("y", 4000)
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
		if len(rs) != 1 || len(first) > MaxLineBytes || s.Lines() != 2 {
			t.Errorf("long line: %d reports, first text line %d bytes, %d lines", len(rs), len(first), s.Lines())
		}
		if len(rs[0].Title) > MaxTitleBytes {
			t.Errorf("title is %d bytes, want <= %d", len(rs[0].Title), MaxTitleBytes)
		}
		if len(s.pending) != 0 {
			t.Errorf("pending %d bytes after a newline", len(s.pending))
		}
	})
	t.Run("report count", func(t *testing.T) {
		s := NewScanner()
		started, done := 0, 0
		s.OnReport(func(Report) { started++ })
		s.OnDone(func(Report) { done++ })
		var b bytes.Buffer
		for i := range MaxReports + 100 {
			fmt.Fprintf(&b, "[ %5d.000000] WARNING: CPU: 0 PID: 1 at x.c:1 f+0x1/0x2\n", i)
		}
		s.Write(b.Bytes())
		s.Close()
		if n := len(s.Reports()); n != MaxReports {
			t.Errorf("%d reports kept, want %d", n, MaxReports)
		}
		if s.Dropped() != 100 || started != MaxReports+100 || done != MaxReports+100 {
			t.Errorf("Dropped %d, OnReport %d, OnDone %d; want 100, %d, %d", s.Dropped(), started, done, MaxReports+100, MaxReports+100)
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
		s.Close()
		total := 0
		for _, r := range s.Reports() {
			total += len(r.Text)
			if r.Text == "" {
				t.Fatal("a report lost its header line")
			}
		}
		if total > MaxTotalBytes+MaxReports*MaxLineBytes {
			t.Errorf("total text %d bytes", total)
		}
	})
}

func TestFlushAndClose(t *testing.T) {
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

	s = NewScanner()
	var done []string
	s.OnDone(func(r Report) { done = append(done, r.Title) })
	s.Write([]byte("[    1.000000] boot\n[    2.000000] Kernel panic - not syncing: cut short"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"kernel panic: cut short"}; !reflect.DeepEqual(done, want) {
		t.Errorf("Close passed %q to OnDone, want %q", done, want)
	}
}

// Reports returns copies: changing them does not change the scanner.
func TestReportsCopy(t *testing.T) {
	s := NewScanner()
	s.Write(goldenLog(t, "warning.log"))
	rs := s.Reports()
	rs[0].Title = "changed"
	if s.Reports()[0].Title == "changed" {
		t.Error("Reports returned the scanner's own slice")
	}
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"BUG: spinlock bad magic on CPU#0, fio/123", "BUG: spinlock bad magic on CPU, fio/NUM"},
		{"KCSAN: data-race in foo+0x551/0xb10 / bar.isra.0+0x1/0x2", "KCSAN: data-race in foo / bar.isra.NUM"},
		{"VFS: Unable to mount root fs on unknown-block(0,0)", "VFS: Unable to mount root fs on unknown-block(NUM,NUM)"},
		{"INFO: Freed in fasync_free_rcu+0x14/0x20 age=57 cpu=0 pid=3", "INFO: Freed in fasync_free_rcu age=NUM cpu=NUM pid=NUM"},
		{"KASAN: slab-out-of-bounds in foo+0x5ad/0x660 at addr ffff8801d2c8faf4", "KASAN: slab-out-of-bounds in foo at addr ADDR"},
		{"KASAN: null-ptr-deref in range [0x0000000000000008-0x000000000000000f]", "KASAN: null-ptr-deref in range [ADDR-ADDR]"},
		{"f+0x1/0x2 0x1234 0x12345678", "f+0x1/0x2 0x1234 ADDR"},
		{"UBSAN: shift-out-of-bounds in fs/fuse/dev.c:123:45", "UBSAN: shift-out-of-bounds in fs/fuse/dev.c:LINE"},
		{"task syz-executor.3/1234 and syzkaller12345:77 at 10.0.2.15", "task syz-executor and syzkaller at IP"},
		{"mkdir ./testdir1234567 failed", "mkdir ./testdirNUM failed"},
		{"nl80211_foo cfg80211_bar in  two\tspaces", "nl80211_foo cfg80211_bar in two spaces"},
		{"a\x01b\x7fc", "abc"},
		{"1 2,3 x4 5x", "1 NUM,NUM x4 5x"},
		{"\t", ""},
	} {
		if got := canonical(tc.in); got != tc.want {
			t.Errorf("canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := canonical(tc.want); again != tc.want {
			t.Errorf("canonical(%q) = %q, want it unchanged", tc.want, again)
		}
	}
	long := strings.Repeat("x", 300)
	if got := canonical(long); len(got) != maxCanonicalTitle {
		t.Errorf("canonical of %d bytes: %d bytes, want %d", len(long), len(got), maxCanonicalTitle)
	}
}

func TestParseType(t *testing.T) {
	for _, typ := range Types() {
		if got, err := ParseType(string(typ)); err != nil || got != typ {
			t.Errorf("ParseType(%q) = %q, %v", typ, got, err)
		}
	}
	if _, err := ParseType("oopsie"); err == nil || !strings.Contains(err.Error(), "want one of panic, oops") {
		t.Errorf("ParseType(oopsie) error %v, want the list of types", err)
	}
}

// The diagnostics klab asks a hung guest for (sysrq w, t, l, p, m, q) dump
// task states, call traces and registers: none of it is a splat, even when
// tasks are blocked and the dumps follow real reports.
func TestSysrqDiagnostics(t *testing.T) {
	for _, name := range []string{"real-6.1-sysrq-show.log", "real-7.3-sysrq-show.log"} {
		log := string(goldenLog(t, name))
		for _, want := range []string{"sysrq: Show Blocked State", "sysrq: Show State", "state:D", "Call Trace:",
			"sysrq: Show backtrace of all active CPUs", "NMI backtrace for cpu", "sysrq: Show Regs"} {
			if !strings.Contains(log, want) {
				t.Errorf("%s: the capture has no %q", name, want)
			}
		}
		if rs := scanAll([]byte(log)); len(rs) != 0 {
			t.Errorf("%s: %d reports in sysrq output, first %q at line %d", name, len(rs), rs[0].Title, rs[0].Line)
		}
	}
	// Blocked-task dumps right after hung task reports stay out of them.
	for _, r := range scanAll(goldenLog(t, "real-7.3-hung.log")) {
		if strings.Contains(r.Text, "sysrq") || strings.Count(r.Text, "Call Trace:") != 1 {
			t.Errorf("line %d: %q holds sysrq output:\n%s", r.Line, r.Title, r.Text)
		}
	}
}
