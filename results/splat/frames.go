package splat

import "strings"

// Frame skipping. A pattern is matched against a function name without
// its ".cold"/".isra.0" suffix: "^foo" matches a prefix, "foo$" a suffix,
// "^foo$" the whole name, anything else a substring.

// skipFrames are generic helpers that never name a bug: the code that
// prints reports, sanitizer runtimes, debug checks, allocators, locks,
// string and copy helpers, printk, and compiler glue. Titles name the
// first frame of a call trace that matches none of them. The list follows
// syzkaller's choices (its titles are what klab's must equal), with the
// newer kernels' names for the same helpers.
var skipFrames = []string{
	// Stack dumping and report printing.
	"dump_stack", "show_stack", "^show_trace", "^show_regs", "^__show_regs", "walk_stack",
	"dump_backtrace", "stack_trace_save", "stack_trace_consume_entry", "arch_stack_walk",
	"print_report", "print_address_description", "print_usage_bug", "print_tainted", "print_unlock",
	"imbalance_bug", "print_hex_dump", "hex_dump_to_buffer", "^get_taint$",
	"__warn", "warn_slowpath", "warn_alloc", "warn_bogus", "^warn_", "report_bug", "fixup_bug",
	"^handle_bug$", "^__report_bug", "invalid_op", "do_error", "_trap$", "do_trap", "^exc_", "^asm_exc_",
	"panic", "^die$", "^__die", "^oops_", "nmi_cpu_backtrace", "nmi_trigger_cpumask_backtrace",
	"^trigger_.*backtrace", "^dump_cpu_task", "^sched_show_task", "^show_state", "__fortify_report",
	"assertfail", "program_check_exception", "program_check_common",
	// Sanitizer runtimes and debug checks that report rather than cause.
	"__sanitizer", "__asan", "kasan", "hwasan", "__msan", "kmsan", "kcsan_setup_watchpoint",
	"^kcsan_", "^__kcsan_", "^__tsan_", "^kfence_", "^__kfence_", "^ubsan_", "^__ubsan_",
	"check_memory_region", "check_heap_object", "check_object", "read_word_at_a_time",
	"read_once_.*nocheck", "write_once_.*nocheck", "__might_resched", "might_sleep", "might_fault",
	"^__cant_sleep", "^__cant_migrate", "lockdep", "lock_acquire", "lock_release", "lock_class",
	"mark_lock", "mark_held_locks", "reacquire_held_locks", "check_noncircular", "check_prev_add",
	"^validate_chain", "trace_hardirqs", "trace_softirqs", "debug_object", "timer_is_static_object",
	"work_is_static_object", "seqprop_assert", "^refcount_", "^kref_", "ref_tracker",
	"list_add", "list_del", "list_replace", "list_move", "list_splice", "^rb_", "^__rb_",
	"^klist_", "perf_trace", "__phys_addr", "cleanup_srcu_struct",
	// Allocators and the page cache's lookups.
	"alloc_page", "malloc", "zalloc", "calloc", "krealloc", "kmem_cache", "allocate_slab", "slab_",
	"__alloc_frozen_pages", "folio_alloc", "folio_unlock", "filemap_alloc_folio", "__filemap_get_folio",
	"find_or_create_page", "do_read_cache_folio", "read_cache_page", "pagecache_get_page",
	"grab_cache_page_write_begin", "memdup", "strdup", "strndup", "^kfree$", "^kvfree$", "kfree_skb",
	"^new_slab", "^post_alloc_hook$", "^get_page_from_freelist$", "^__get_free_pages", "^get_zeroed_page",
	"ida_free", "xas_start", "xas_load", "xas_find", "find_lock_entries", "truncate_inode_pages_range",
	// Locks, atomics, wake-ups and waits.
	"spin_lock", "spin_trylock", "spin_unlock", "raw_spin_rq", "read_lock", "read_trylock",
	"read_unlock", "write_lock", "write_trylock", "write_unlock", "^down$", "down_read", "down_write",
	"down_trylock", "up_read", "up_write", "^mutex_", "^__mutex_", "^rt_mutex_", "owner_on_cpu",
	"osq_lock", "osq_unlock", "bh_enable", "bh_disable", "__wake_up", "^complete$",
	"wait_for_completion", "finish_wait", "^lock_page", "^unlock_page", "lock_timer_base",
	"atomic_dec", "atomic_inc", "atomic_read", "atomic_set", "atomic_or", "atomic_xor", "atomic_and",
	"atomic_add", "atomic_sub", "atomic_fetch", "atomic_xchg", "atomic_cmpxchg", "atomic_try",
	"atomic64_dec", "atomic64_inc", "atomic64_read", "atomic64_set", "atomic64_or", "atomic64_xor",
	"atomic64_and", "atomic64_add", "atomic64_sub", "atomic64_fetch", "atomic64_xchg",
	"atomic64_cmpxchg", "atomic64_try", "set_bit", "clear_bit", "change_bit", "test_bit",
	// Timers and work items, whose users are the ones to blame.
	"del_timer", "__timer_delete_sync", "sk_stop_timer_sync", "__mod_timer", "flush_work",
	"__cancel_work_timer", "cancel_work_sync", "try_to_grab_pending", "flush_workqueue",
	"drain_workqueue", "destroy_workqueue", "queue_work", "insert_work", "__queue_delayed_work",
	"queue_delayed_work_on", "kthread_stop",
	// Device model and unregistration paths that run their users' code.
	"kobject_", "add_uevent_var", "get_device_parent", "device_add", "device_del", "device_unregister",
	"device_destroy", "device_release", "devres_release_all", "hwrng_unregister", "i2c_del_adapter",
	"__unregister_client", "device_for_each_child", "rollback_registered", "unregister_netdev",
	"sysfs_remove", "device_remove_file", "tty_unregister_device", "^put_device$",
	"dummy_urb_enqueue", "usb_kill_urb", "usb_kill_anchored_urbs", "usb_control_msg",
	"usb_hcd_submit_urb", "usb_submit_urb",
	// Memory, string and user copy helpers.
	"memcpy", "memcmp", "memset", "memchr", "memmove", "strcmp", "strncmp", "strcpy", "strlcpy",
	"strncpy", "strscpy", "strlen", "strstr", "strnstr", "strnlen", "strchr", "string", "pointer",
	"copy_to_user", "copy_from_user", "copy_to_iter", "copy_from_iter", "copy_page_to_iter",
	"copy_page_from_iter", "copy_folio_to_iter", "^copyin$", "^copyout$", "put_user", "get_user",
	"^raw_copy_", "^copy_user_", "^rep_movs_alternative", "^rep_stos_alternative", "^clear_user",
	"^__clear_user", "extract_user_to_sg", "extract_iter_to_sg", "rhashtable_lookup",
	"readb$", "readw$", "readl$", "readq$", "writeb$", "writew$", "writel$", "writeq$",
	"logic_in", "logic_out", "^crc16", "^crc32", "^crc64", "^crc8", "^crc7", "^crc4", "crc_itu_t",
	// Inode and dentry references.
	"^iput$", "^iput_final$", "^ihold$", "drop_nlink", "dput", "mark_buffer_dirty",
	// printk.
	"printk", "va_format", "snprintf", "scnprintf", "kasprintf", "kvasprintf", "^sprintf",
	"dev_info", "dev_notice", "dev_warn", "dev_err", "dev_alert", "dev_crit", "dev_emerg",
	// arm64 fault handling.
	"do_kernel_fault", "do_translation_fault", "do_mem_abort", "el1_abort", "el1h_64_sync",
	// Compiler and arch glue.
	"_indirect_thunk_", "__x86_return_thunk", "^__pfx_", "^__cfi_",
}

// hangSkip are the frames a hung task waits in: the title names the first
// frame past them (after skipFrames).
var hangSkip = []string{
	"sched", "_lock", "_slowlock", "down", "rwsem", "completion", "kthread", "wait", "synchronize",
	"context_switch", "__switch_to", "cancel_delayed_work", "rcu_barrier",
	// Sleeps and the freezer, which no hang is about.
	"msleep", "^__refrigerator", "^try_to_freeze", "^do_nanosleep", "^hrtimer_nanosleep",
	// FUSE's generic "send a request and wait for the server": the
	// operation that sent it tells hangs apart.
	"^__fuse_simple_request$", "^fuse_simple_request$", "^fuse_request_send$", "^__fuse_request_send$",
}

// hangWaits are the waiting and locking primitives themselves, named
// precisely: when hangSkip's words leave only a thread or syscall entry
// point (entryFrames), the title names the first frame past these.
var hangWaits = []string{
	"^schedule", "^__schedule", "^io_schedule", "^sched_", "^preempt_schedule",
	"_lock$", "_lock_nested$", "_lock_killable$", "_lock_interruptible$", "_slowlock", "_slowpath",
	"^down", "^__down", "rwsem", "_completion", "^kthread", "^wait_", "^__wait_", "_wait_",
	"_wait$", "^prepare_to_wait", "^finish_wait", "^bit_wait", "^out_of_line_wait",
	"^synchronize_", "^__synchronize_", "context_switch", "__switch_to", "cancel_delayed_work",
	"^__cancel_work", "^cancel_work", "^__flush_work", "^flush_work", "rcu_barrier", "msleep",
}

// entryFrames are where kernel threads and syscalls start: no hang is
// about them.
var entryFrames = []string{"^ret_from_fork", "^kthread$", "^entry_SYSCALL", "^do_syscall_", "^el0_svc",
	"^invoke_syscall$"}

// hangAnchors name a hung task by the primitive it waits on, when that is
// all there is to say: tasks hung on synchronize_rcu are all one bug (RCU
// is stuck), and so are tasks waiting for the rtnl lock. An empty title
// keeps the frame's own name.
var hangAnchors = []struct{ frame, title string }{
	{"rtnl_lock", ""},
	{"synchronize_rcu", "synchronize_rcu"},
	{"synchronize_srcu", "synchronize_rcu"},
	{"synchronize_net", "synchronize_rcu"},
	{"synchronize_sched", "synchronize_rcu"},
}

// stallAnchors are dispatch points (syscall entry, workqueues, kthreads,
// timers, softirqs, and the file, socket and netlink operations that tell
// syscalls apart): a stall or lockup is titled by the frame just before
// the first of them, which is more stable than the random frame the stall
// was caught in.
var stallAnchors = []string{
	// Syscall, exception and kthread entry.
	"do_syscall_", "do_fast_syscall_", "sysenter_dispatch", "tracesys_phase2", "el0_svc_handler",
	"invoke_syscall", "ret_fast_syscall", "ret_from_fork", "^kthread$", "smpboot_thread_fn",
	"start_secondary", "cpu_startup_entry", "__do_fault", "do_page_fault", "^page_fault$",
	// Work, timers, softirqs and the network receive path.
	"process_one_work", "netif_receive_skb", "do_softirq", "call_timer_fn", "_run_timers",
	"run_timer_softirq", "hrtimer_run", "run_ksoftirqd", "tasklet_action", "tasklet_hi_action",
	"smp_call_function",
	// File operations.
	"vfs_write", "vfs_read", "vfs_iter_read", "vfs_iter_write", "do_iter_read", "do_iter_write",
	"call_read_iter", "call_write_iter", "new_sync_read", "new_sync_write", "vfs_ioctl", "ksys_ioctl",
	"compat_ioctl", "compat_sys_ioctl", "blkdev_driver_ioctl", "blkdev_ioctl", "do_iter_readv_writev",
	"^call_mmap", "mmap_region", "do_mmap", "do_dentry_open", "vfs_open",
	// Socket and netlink operations.
	"^sock_sendmsg", "^sock_recvmsg", "^sock_release", "^__sock_release", "^setsockopt$",
	"kernel_setsockopt", "sock_common_setsockopt", "^listen$", "kernel_listen", "sk_common_release",
	"^sock_mmap", "^accept$", "kernel_accept", "^sock_do_ioctl", "^sock_ioctl", "^compat_sock_ioctl",
	"^nfnetlink_rcv_msg", "^rtnetlink_rcv_msg", "^netlink_dump", "^socketpair", "^connect",
	"^ioctl", "^sys_socketpair", "^sys_connect", "^sys_ioctl",
	// Return to user space.
	"__fput", "task_work_run", "exit_to_usermode",
	// Module initialisation, which runs its init function as a syscall
	// would.
	"^do_one_initcall$",
}

// syscallPrefixes are the wrappers that syscall entry points are named
// with. A title drops the one that leaves the shortest name:
// "__se_sys_write" and "ksys_write" become "write", "__x64_sys_write"
// "sys_write", as syzkaller's titles have them.
var syscallPrefixes = []string{
	"SYSC_", "SyS_", "sys_", "__x64_", "__ia32_", "__arm64_", "____sys_", "___sys_", "__sys_",
	"__se_", "__se_sys_", "__do_sys_", "compat_SYSC_", "compat_SyS_", "ksys_",
}

// patterns is a compiled list of skip patterns.
type patterns struct {
	exact  map[string]bool
	prefix map[byte][]string // by first byte
	suffix []string
	// contains are the substrings, by their first two bytes (a single
	// byte pattern by that byte and 0): a name is searched for the ones
	// that start at each of its positions, not for each of them in turn.
	contains map[[2]byte][]string
	bigrams  *[1024]uint64 // the first two bytes of contains, as a bitset
	single   bool          // contains has a one-byte pattern
	glob     [][2]string   // "^a.*b": a prefix, then a substring
	inner    [][2]string   // "a.*b": a substring, then another after it
	under    []string      // "^_*x": any underscores, then x
}

// newPatterns compiles a list of patterns.
func newPatterns(list ...string) *patterns {
	p := &patterns{exact: map[string]bool{}, prefix: map[byte][]string{}, contains: map[[2]byte][]string{}}
	for _, pat := range list {
		prefix := strings.HasPrefix(pat, "^")
		suffix := strings.HasSuffix(pat, "$")
		s := strings.TrimSuffix(strings.TrimPrefix(pat, "^"), "$")
		switch {
		case s == "":
		case prefix && suffix:
			p.exact[s] = true
		case prefix && strings.HasPrefix(s, "_*"):
			p.under = append(p.under, s[2:])
		case prefix && strings.Contains(s, ".*"):
			a, b, _ := strings.Cut(s, ".*")
			p.glob = append(p.glob, [2]string{a, b})
		case prefix:
			p.prefix[s[0]] = append(p.prefix[s[0]], s)
		case !suffix && strings.Contains(s, ".*"):
			a, b, _ := strings.Cut(s, ".*")
			p.inner = append(p.inner, [2]string{a, b})
		case suffix:
			p.suffix = append(p.suffix, s)
		default:
			k := [2]byte{s[0], 0}
			if len(s) > 1 {
				k[1] = s[1]
				if p.bigrams == nil {
					p.bigrams = new([1024]uint64)
				}
				b := uint16(k[0])<<8 | uint16(k[1])
				p.bigrams[b>>6] |= 1 << (b & 63)
			} else {
				p.single = true
			}
			p.contains[k] = append(p.contains[k], s)
		}
	}
	return p
}

// match reports whether fn matches any of the patterns. A nil *patterns
// matches nothing.
func (p *patterns) match(fn string) bool {
	if p == nil || fn == "" {
		return false
	}
	if p.exact[fn] {
		return true
	}
	for _, s := range p.prefix[fn[0]] {
		if strings.HasPrefix(fn, s) {
			return true
		}
	}
	for _, s := range p.suffix {
		if strings.HasSuffix(fn, s) {
			return true
		}
	}
	if len(p.contains) > 0 {
		for i := 0; i < len(fn); i++ {
			if p.single {
				if _, ok := p.contains[[2]byte{fn[i], 0}]; ok {
					return true
				}
			}
			if i+1 == len(fn) || p.bigrams == nil {
				continue
			}
			b := uint16(fn[i])<<8 | uint16(fn[i+1])
			if p.bigrams[b>>6]&(1<<(b&63)) == 0 {
				continue
			}
			for _, s := range p.contains[[2]byte{fn[i], fn[i+1]}] {
				if strings.HasPrefix(fn[i:], s) {
					return true
				}
			}
		}
	}
	for _, g := range p.glob {
		if strings.HasPrefix(fn, g[0]) && strings.Contains(fn[len(g[0]):], g[1]) {
			return true
		}
	}
	for _, g := range p.inner {
		if i := strings.Index(fn, g[0]); i >= 0 && strings.Contains(fn[i+len(g[0]):], g[1]) {
			return true
		}
	}
	if len(p.under) > 0 {
		t := strings.TrimLeft(fn, "_")
		for _, s := range p.under {
			if strings.HasPrefix(t, s) {
				return true
			}
		}
	}
	return false
}

// Compiled pattern lists.
var (
	genericSkip    = newPatterns(skipFrames...)
	hangSkipSet    = newPatterns(hangSkip...)
	hangWaitSet    = newPatterns(hangWaits...)
	entryFrameSet  = newPatterns(entryFrames...)
	stallAnchorSet = newPatterns(stallAnchors...)
)

// skipped reports whether fn is a generic helper, by skipFrames or by the
// format's own extra patterns.
func skipped(fn string, extra *patterns) bool {
	return genericSkip.match(fn) || extra.match(fn)
}

// titleFunc is the name a title uses for fn: without the syscall wrapper
// prefix whose removal leaves the shortest name.
func titleFunc(fn string) string {
	best := fn
	for _, p := range syscallPrefixes {
		if rest, ok := strings.CutPrefix(fn, p); ok && rest != "" && len(rest) < len(best) {
			best = rest
		}
	}
	return best
}

// funcName drops the compiler's suffixes: "foo.cold", "foo.isra.0",
// "foo.constprop.0" -> "foo".
func funcName(sym string) string {
	if i := strings.IndexByte(sym, '.'); i > 0 {
		return sym[:i]
	}
	return sym
}

func isSymStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isSymChar(c byte) bool {
	return isSymStart(c) || isDigit(c) || c == '.' || c == '$'
}

// symbolOf returns the function of "[<ffffffff81234567>] foo+0x1/0x2 [mod]",
// "[<ffffffff81234567>]  [<ffffffff81234567>] foo+0x1/0x2", "foo+0x1/0x2"
// or "foo.cold+0x1/0x2", or "".
func symbolOf(s string) string {
	s = strings.TrimLeft(s, " \t")
	for range 2 {
		if !strings.HasPrefix(s, "[<") {
			break
		}
		i := strings.IndexByte(s, ']')
		if i < 0 {
			return ""
		}
		s = strings.TrimLeft(s[i+1:], " ")
	}
	if s == "" || !isSymStart(s[0]) {
		return ""
	}
	i := 1
	for i < len(s) && isSymChar(s[i]) {
		i++
	}
	if !strings.HasPrefix(s[i:], "+0x") {
		return ""
	}
	return funcName(s[:i])
}

// parseFrame parses a call trace line: " fuse_dev_write+0x5c/0x90 [fuse]",
// " ? __warn+0x7d/0x130" (questionable: the unwinder is not sure),
// " [<ffffffff81234567>] f+0x12/0x34" (old kernels), or a line decoded by
// decode_stacktrace.sh, " f (fs/fuse/dev.c:12)".
func parseFrame(msg string) (fn string, questionable, ok bool) {
	if msg == "" || (msg[0] != ' ' && msg[0] != '\t' && !strings.HasPrefix(msg, "[<")) {
		return "", false, false
	}
	if fn, _, ok := armFrame(msg); ok {
		return fn, false, true
	}
	s := strings.TrimLeft(msg, " \t")
	if strings.HasPrefix(s, "[<") {
		i := strings.IndexByte(s, ']')
		if i < 0 {
			return "", false, false
		}
		s = strings.TrimLeft(s[i+1:], " ")
	}
	if rest, ok := strings.CutPrefix(s, "? "); ok {
		questionable, s = true, rest
	}
	if s == "" || !isSymStart(s[0]) {
		return "", false, false
	}
	i := 1
	for i < len(s) && isSymChar(s[i]) {
		i++
	}
	rest := s[i:]
	switch {
	case strings.HasPrefix(rest, "+0x"):
	case strings.HasPrefix(rest, " (") && strings.Contains(rest, ".c:"):
	default:
		return "", false, false
	}
	return funcName(s[:i]), questionable, true
}

// armFrame parses a 32-bit arm backtrace line: "[<808ea9f4>]
// (gsmld_receive_buf) from [<808dcfac>] (tty_ioctl+0x7b4/0xa6c)" names a
// function and its caller.
func armFrame(msg string) (fn, caller string, ok bool) {
	s := strings.TrimLeft(msg, " \t")
	if !strings.HasPrefix(s, "[<") {
		return "", "", false
	}
	i := strings.Index(s, "] (")
	if i < 0 {
		return "", "", false
	}
	s = s[i+len("] ("):]
	j := strings.IndexByte(s, ')')
	if j <= 0 {
		return "", "", false
	}
	fn = funcName(strings.TrimSpace(s[:j]))
	s = s[j+1:]
	k := strings.Index(s, " from [<")
	if fn == "" || !isSymStart(fn[0]) || k < 0 {
		return "", "", false
	}
	s = s[k+len(" from [<"):]
	if k := strings.Index(s, "] ("); k >= 0 {
		caller = symbolName(s[k+len("] ("):])
	}
	return fn, caller, true
}

// isUnknownFrame reports whether msg is a call trace line without a
// symbol: " ? 0xffffffffc0284000", " 0xffffffffc0284000",
// " [<ffffffffc0284000>] 0xffffffffc0284000".
func isUnknownFrame(msg string) bool {
	if msg == "" || (msg[0] != ' ' && msg[0] != '\t') {
		return false
	}
	s := strings.TrimLeft(msg, " \t")
	s = strings.TrimPrefix(s, "? ")
	return strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "[<")
}

// ripFunc returns the function of a kernel-mode instruction pointer line:
// "RIP: 0010:foo+0x1/0x2" (x86), "IP: [<ffffffff81234567>] foo+0x1/0x2"
// (x86 before 4.15), "EIP: [<c1234567>] foo+0x1/0x2" (i386), "pc :
// foo+0x1/0x2" (arm64), "PC is at foo+0x1/0x2" (arm), "NIP [c0000000]
// foo+0x1/0x2" (powerpc). ok reports whether msg is such a line at all (a
// user-mode "RIP: 0033:0x4a1b2c" is, with no function).
func ripFunc(msg string) (fn string, ok bool) {
	switch {
	case strings.HasPrefix(msg, "RIP: "), strings.HasPrefix(msg, "IP: "):
		_, rest, _ := strings.Cut(msg, ": ")
		if i := strings.IndexByte(rest, ':'); i == 4 && isHex(rest[:4]) {
			if rest[:4] == "0033" || rest[:4] == "0023" {
				return "", true // user mode
			}
			rest = rest[5:]
		}
		return symbolOf(rest), true
	case strings.HasPrefix(msg, "EIP: "):
		// "EIP: 0060:[<c1234567>] EFLAGS: ..." is a register line.
		fn := symbolOf(msg[len("EIP: "):])
		return fn, fn != ""
	case strings.HasPrefix(msg, "pc : "), strings.HasPrefix(msg, "epc : "):
		_, rest, _ := strings.Cut(msg, "pc : ")
		return symbolOf(rest), true
	case strings.HasPrefix(msg, "PC is at "):
		return symbolOf(msg[len("PC is at "):]), true
	case strings.HasPrefix(msg, "NIP ["), strings.HasPrefix(msg, "NIP:  ["):
		if i := strings.IndexByte(msg, ']'); i > 0 {
			return symbolOf(msg[i+1:]), true
		}
		return "", true
	}
	return "", false
}

// stack is one stack trace in a report.
type stack struct {
	label      string   // the line that started it ("Call Trace:", "Freed by task 12:"), or ""
	callTrace  bool     // it is a call trace ("Call Trace:" and the like)
	start, end int      // its lines, [start, end) in the report's lines
	frames     []string // its functions, innermost first
}

// stackLabels start stacks other than call traces: where an object was
// allocated or freed (KASAN, KFENCE, kmemleak, page_owner), where KMSAN's
// uninit value came from, lockdep's dependency chains.
var stackLabels = []string{
	"Allocated by task", "Freed by task", "allocated by task", "freed by task",
	"Last potentially related", "Second to last potentially related", "Uninit was created at",
	"Uninit was stored to memory at", "Local variable ", "backtrace", "page last allocated",
	"page last free", "Preemption disabled at", "-> #", "Use-after-free ", "Out-of-bounds ",
	"Invalid free of", "Invalid read at", "Invalid write at", "Corrupted memory at",
}

func isStackLabel(msg string) bool {
	if isTraceStart(msg) {
		return true
	}
	for _, l := range stackLabels {
		if strings.HasPrefix(msg, l) {
			return true
		}
	}
	return false
}

// traceMarkers open and close the parts of an x86 call trace.
func traceMarker(msg string) (irq, open, ok bool) {
	switch strings.TrimSpace(msg) {
	case "<IRQ>", "<NMI>", "<SOFTIRQ>":
		return true, true, true
	case "</IRQ>", "</NMI>", "</SOFTIRQ>", "<EOI>":
		return true, false, true
	case "<TASK>":
		return false, true, true
	case "</TASK>":
		return false, false, true
	}
	return false, false, false
}

// stacks finds the stacks in a report's lines. A RIP line before a call
// trace (an oops, a WARNING, an NMI backtrace) becomes the first frame of
// that trace; a RIP line inside one (where an interrupt hit the task) is a
// frame of it.
func findStacks(lines []string) []stack {
	var out []stack
	cur := -1 // index in out of the stack being read, or -1
	pendingRIP := ""
	end := func(i int) {
		if cur >= 0 {
			out[cur].end = i
			cur = -1
		}
	}
	for i, l := range lines {
		// kmemleak prefixes every line of its reports.
		l = strings.TrimPrefix(l, "kmemleak: ")
		if fn, q, ok := parseFrame(l); ok {
			if cur < 0 {
				out = append(out, stack{start: i})
				cur = len(out) - 1
			}
			if !q && len(out[cur].frames) < 4*MaxFrames {
				out[cur].frames = append(out[cur].frames, fn)
			}
			continue
		}
		if irq, open, ok := traceMarker(l); ok {
			if !irq && !open { // </TASK>
				end(i + 1)
			}
			continue
		}
		if fn, ok := ripFunc(l); ok {
			switch {
			case fn == "":
			case cur >= 0:
				out[cur].frames = append(out[cur].frames, fn)
			default:
				pendingRIP = fn
			}
			continue
		}
		if cur >= 0 && (strings.HasPrefix(l, "Code: ") || isRegister(l) || strings.HasPrefix(l, "FS:  ") ||
			strings.HasPrefix(l, "CS:  ") || strings.HasPrefix(l, "---[ end trace") || isUnknownFrame(l)) {
			continue
		}
		trimmed := strings.TrimLeft(l, " \t")
		if isStackLabel(trimmed) {
			end(i)
			s := stack{label: trimmed, callTrace: isTraceStart(trimmed), start: i}
			if s.callTrace && pendingRIP != "" {
				s.frames = append(s.frames, pendingRIP)
				pendingRIP = ""
			}
			out = append(out, s)
			cur = len(out) - 1
			continue
		}
		end(i)
	}
	end(len(lines))
	if pendingRIP != "" {
		// A RIP line and no call trace after it (cut off, or an arch that
		// prints none): the RIP is a stack of its own.
		out = append(out, stack{label: "RIP", callTrace: true, start: len(lines), end: len(lines),
			frames: []string{pendingRIP}})
	}
	return out
}
