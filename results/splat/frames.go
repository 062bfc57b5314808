package splat

import "strings"

// Frame skipping. A pattern is matched against a function name without
// its ".cold"/".isra.0" suffix: "^foo" matches a prefix, "foo$" a suffix,
// "^foo$" the whole name, anything else a substring.

// skipFrames are generic helpers that never name a bug: the code that
// prints reports, sanitizer runtimes, debug checks, allocators, locks,
// string and copy helpers, printk, and compiler glue. Titles name the
// first frame of a call trace that matches none of them.
var skipFrames = []string{
	// Stack dumping and report printing.
	"dump_stack", "show_stack", "^show_trace", "^show_regs", "^__show_regs", "walk_stack",
	"dump_backtrace", "stack_trace_", "arch_stack_walk", "^unwind_", "print_report",
	"print_address_description", "print_usage_bug", "print_tainted", "print_circular_bug",
	"print_unlock", "^print_.*bug", "^print_lock", "^register_lock_class", "^__warn", "warn_slowpath",
	"^warn_", "report_bug", "^handle_bug$",
	"fixup_bug", "^__report_bug", "^exc_invalid_op$", "^asm_exc_", "^do_trap", "do_error_trap",
	"^die$", "^__die", "^oops_", "^panic$", "^vpanic$", "^nmi_panic", "check_panic_on_warn",
	"nmi_cpu_backtrace", "nmi_trigger_cpumask_backtrace", "^trigger_.*backtrace",
	"^dump_cpu_task", "^sched_show_task", "^show_state", "bad_page", "^free_page_is_bad",
	"hex_dump", "^__fortify_report", "^__fortify_panic",
	// Sanitizer runtimes and debug checks that report rather than cause.
	"^kasan_", "^__kasan_", "^__asan_", "^kmsan_", "^__kmsan_", "^__msan_", "^kcsan_",
	"^__kcsan_", "^__tsan_", "^kfence_", "^__kfence_", "^ubsan_", "^__ubsan_", "^__sanitizer",
	"check_memory_region", "check_heap_object", "check_object", "^__might_resched",
	"^__might_sleep", "^___might_sleep", "^might_sleep", "might_fault", "^__cant_sleep",
	"^__cant_migrate", "^__schedule_bug", "^schedule_debug", "debug_smp_processor_id",
	"check_preemption_disabled", "lockdep", "check_noncircular", "check_prev_add",
	"validate_chain", "^__lock_acquire", "^lock_acquire", "^lock_release", "^lock_acquired",
	"^lock_contended", "^mark_lock", "^mark_held_locks", "^debug_object", "^__debug_object",
	"^debug_check_no", "^refcount_", "^__refcount_", "^kref_", "__list_add_valid",
	"__list_del_entry_valid", "list_valid_slowpath", "^__list_", "^list_add", "^list_del",
	"^list_move", "^list_splice", "^list_replace", "^hlist_", "^__hlist_",
	// Allocators.
	"kmalloc", "^kzalloc", "^kcalloc", "^kvmalloc", "^__kvmalloc", "^kvzalloc", "^kvcalloc",
	"^krealloc", "^kvrealloc", "vmalloc", "^vzalloc", "^kmem_cache_", "^__kmem_cache_",
	"^kmemdup", "^kstrdup", "^kstrndup", "^memdup", "^slab_", "^__slab_", "^___slab_alloc",
	"^allocate_slab", "^new_slab", "alloc_pages", "^alloc_frozen_pages", "^folio_alloc",
	"^__folio_alloc", "^kfree$", "^kvfree$", "^__kfree", "^kfree_", "^free_large_kmalloc",
	"^vfree$", "^__vfree", "^vunmap$", "^kmem_cache_free", "^__filemap_get_folio", "^filemap_alloc_folio",
	"^filemap_get_folio", "^__get_free_pages", "^get_zeroed_page", "^post_alloc_hook$",
	"^get_page_from_freelist$",
	// Locks and atomics.
	"^_raw_spin_", "^_raw_read_", "^_raw_write_", "^do_raw_", "^raw_spin_", "spin_lock",
	"spin_unlock", "spin_trylock", "queued_spin_lock_slowpath", "^queued_read_", "^queued_write_",
	"^read_lock", "^read_unlock", "^write_lock", "^write_unlock", "^mutex_lock", "^mutex_unlock",
	"^mutex_trylock", "^__mutex_", "^rt_mutex", "^__rt_mutex", "^rt_spin_", "^down$", "^down_",
	"^__down", "^up$", "^up_read", "^up_write", "rwsem_down", "rwsem_wake", "^percpu_down_",
	"^percpu_up_", "^__percpu_down", "percpu_rwsem_wait", "^osq_lock", "^osq_unlock",
	"^local_bh_enable", "^__local_bh_enable", "^_local_bh_enable", "^preempt_count_",
	"^atomic_", "^atomic64_", "^arch_atomic", "^bit_spin_", "^wake_up_bit", "^__wake_up", "^wake_up$",
	"^wake_up_process$", "^try_to_wake_up$", "^complete$", "^complete_all$",
	// Memory, string and user copy helpers.
	"^memcpy", "^__memcpy", "^memset", "^__memset", "^memmove", "^__memmove", "^memcmp",
	"^__memcmp", "^memchr", "^strlen$", "^strnlen$", "^strcpy$", "^strncpy$", "^strscpy",
	"^sized_strscpy", "^strlcpy$", "^strcmp$", "^strncmp$", "^strchr$", "^strrchr$", "^strstr$",
	"^strnstr$", "^copy_to_user", "^_copy_to_user", "^copy_from_user", "^_copy_from_user",
	"^__copy_to_user", "^__copy_from_user", "^raw_copy_", "^copy_user_", "copy_to_iter",
	"copy_from_iter", "copy_page_to_iter", "copy_page_from_iter", "copy_folio_to_iter",
	"^rep_movs_alternative", "^rep_stos_alternative", "^__get_user", "^__put_user",
	"^get_user$", "^put_user$", "^strncpy_from_user", "^clear_user", "^__clear_user",
	// printk.
	"printk", "^_printk", "^dev_printk", "^__dev_printk", "^_dev_err", "^_dev_warn",
	"^_dev_info", "^_dev_notice", "^dev_err", "^dev_warn", "^vsnprintf", "^snprintf",
	"^scnprintf", "^vscnprintf", "^sprintf", "^kasprintf", "^kvasprintf",
	// Compiler and arch glue.
	"__x86_indirect_thunk", "__x86_return_thunk", "^__pfx_", "_indirect_thunk_",
	"^__sanitizer_cov", "^__cfi_",
}

// hangSkip are the frames a hung task waits in: the title names the first
// frame past them (after skipFrames).
var hangSkip = []string{
	"^schedule", "^__schedule", "^io_schedule", "^sched_", "^preempt_schedule",
	"_lock$", "_lock_nested$", "_lock_killable$", "_lock_interruptible$", "_slowlock", "_slowpath",
	"^down", "^__down", "rwsem", "_completion", "^kthread", "^wait_", "^__wait_", "_wait_",
	"_wait$", "^prepare_to_wait", "^finish_wait", "^bit_wait", "^out_of_line_wait",
	"^synchronize_", "^__synchronize_", "context_switch", "__switch_to", "cancel_delayed_work",
	"^__cancel_work", "^cancel_work", "^__flush_work", "^flush_work", "rcu_barrier", "msleep",
	"percpu_rwsem", "^__refrigerator", "^try_to_freeze", "^do_nanosleep", "^hrtimer_nanosleep",
	"^folio_wait", "^__folio_lock", "^__lock_page", "^lock_page",
	// FUSE's generic "send a request and wait for the server": the
	// operation that sent it tells hangs apart.
	"^__fuse_simple_request$", "^fuse_simple_request$", "^fuse_request_send$", "^__fuse_request_send$",
}

// hangAnchors name a hung task by the primitive it waits on, when that is
// all there is to say: tasks hung on synchronize_rcu are all one bug (RCU
// is stuck), and so are tasks waiting for the rtnl lock.
var hangAnchors = []struct{ frame, title string }{
	{"rtnl_lock", "rtnl_lock"},
	{"synchronize_rcu", "synchronize_rcu"},
	{"synchronize_srcu", "synchronize_rcu"},
	{"synchronize_net", "synchronize_rcu"},
	{"synchronize_sched", "synchronize_rcu"},
}

// stallAnchors are dispatch points (syscall entry, workqueues, kthreads,
// timers, and the VFS calls that discriminate a syscall): a stall or lockup
// is titled by the frame just before the first of them, which is more
// stable than the random frame the stall was caught in.
var stallAnchors = []string{
	"^do_syscall_", "^do_fast_syscall_", "^entry_SYSCALL", "^invoke_syscall$", "^el0_svc",
	"^ret_from_fork", "^kthread$", "^worker_thread$", "^process_one_work$",
	"^smpboot_thread_fn$", "^do_idle$", "^cpu_startup_entry$", "^start_secondary$",
	"^call_timer_fn$", "^run_timer_softirq$", "^__run_timers", "^hrtimer_run",
	"^handle_softirqs$", "^__do_softirq$", "^do_softirq$", "^run_ksoftirqd$",
	"^tasklet_action", "^net_rx_action$", "^netif_receive_skb", "^vfs_read$", "^vfs_write$",
	"^vfs_readv$", "^vfs_writev$", "^vfs_iter_read$", "^vfs_iter_write$", "^vfs_ioctl$",
	"^do_vfs_ioctl$", "^__x64_sys_ioctl$", "^new_sync_read$", "^new_sync_write$",
	"^do_iter_readv_writev$", "^do_dentry_open$", "^vfs_open$", "^__fput$", "^task_work_run$",
	"^exit_to_user_mode", "^mmap_region$", "^do_mmap$", "^__do_fault$", "^do_user_addr_fault$",
	"^sock_sendmsg$", "^sock_recvmsg$", "^__sock_release$", "^do_one_initcall$",
	"smp_call_function",
}

// syscallPrefixes are dropped from the function a title names, so that
// "__x64_sys_write", "__se_sys_write" and "ksys_write" are all "write".
var syscallPrefixes = []string{
	"__x64_sys_", "__ia32_sys_", "__arm64_sys_", "__riscv_sys_", "__s390x_sys_",
	"__se_compat_sys_", "__do_compat_sys_", "compat_sys_", "__se_sys_", "__do_sys_",
	"____sys_", "___sys_", "__sys_", "ksys_", "sys_",
}

// patterns is a compiled list of skip patterns.
type patterns struct {
	exact    map[string]bool
	prefix   map[byte][]string // by first byte
	suffix   []string
	contains []string
	glob     [][2]string // "^a.*b": a prefix, then a substring
	under    []string    // "^_*x": any underscores, then x
}

// newPatterns compiles a list of patterns.
func newPatterns(list ...string) *patterns {
	p := &patterns{exact: map[string]bool{}, prefix: map[byte][]string{}}
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
		case suffix:
			p.suffix = append(p.suffix, s)
		default:
			p.contains = append(p.contains, s)
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
	for _, s := range p.contains {
		if strings.Contains(fn, s) {
			return true
		}
	}
	for _, g := range p.glob {
		if strings.HasPrefix(fn, g[0]) && strings.Contains(fn[len(g[0]):], g[1]) {
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
	stallSkipSet   = newPatterns(stallSkip...)
	stallAnchorSet = newPatterns(stallAnchors...)
)

// skipped reports whether fn is a generic helper, by skipFrames or by the
// format's own extra patterns.
func skipped(fn string, extra *patterns) bool {
	return genericSkip.match(fn) || extra.match(fn)
}

// titleFunc is the name a title uses for fn: without syscall wrapper
// prefixes.
func titleFunc(fn string) string {
	for _, p := range syscallPrefixes {
		if rest, ok := strings.CutPrefix(fn, p); ok && rest != "" {
			return rest
		}
	}
	return fn
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
// "foo+0x1/0x2" or "foo.cold+0x1/0x2", or "".
func symbolOf(s string) string {
	s = strings.TrimLeft(s, " \t")
	if strings.HasPrefix(s, "[<") {
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
	if msg == "" || (msg[0] != ' ' && msg[0] != '\t') {
		return "", false, false
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
// "RIP: 0010:foo+0x1/0x2" (x86), "pc : foo+0x1/0x2" (arm64), "PC is at
// foo+0x1/0x2" (arm), "NIP [c0000000] foo+0x1/0x2" (powerpc). ok reports
// whether msg is such a line at all (a user-mode "RIP: 0033:0x4a1b2c" is,
// with no function).
func ripFunc(msg string) (fn string, ok bool) {
	switch {
	case strings.HasPrefix(msg, "RIP: "):
		rest := msg[len("RIP: "):]
		if i := strings.IndexByte(rest, ':'); i == 4 && isHex(rest[:4]) {
			if rest[:4] == "0033" || rest[:4] == "0023" {
				return "", true // user mode
			}
			rest = rest[5:]
		}
		return symbolOf(rest), true
	case strings.HasPrefix(msg, "pc : "):
		return symbolOf(msg[len("pc : "):]), true
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
	label      string  // the line that started it ("Call Trace:", "Freed by task 12:"), or ""
	callTrace  bool    // it is a call trace ("Call Trace:" and the like)
	start, end int     // its lines, [start, end) in the report's lines
	frames     []frame // innermost first
}

// frame is one function of a stack.
type frame struct {
	fn  string
	irq bool // printed inside <IRQ>, <NMI> or <SOFTIRQ>
	rip bool // from a RIP line: where an interrupt or exception hit
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
	inIRQ := false
	end := func(i int) {
		if cur >= 0 {
			out[cur].end = i
			cur = -1
		}
		inIRQ = false
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
				out[cur].frames = append(out[cur].frames, frame{fn: fn, irq: inIRQ})
			}
			continue
		}
		if irq, open, ok := traceMarker(l); ok {
			if !irq && !open { // </TASK>
				end(i + 1)
				continue
			}
			inIRQ = irq && open
			continue
		}
		if fn, ok := ripFunc(l); ok {
			switch {
			case fn == "":
			case cur >= 0:
				out[cur].frames = append(out[cur].frames, frame{fn: fn, rip: true})
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
				s.frames = append(s.frames, frame{fn: pendingRIP, rip: true})
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
			frames: []frame{{fn: pendingRIP, rip: true}}})
	}
	return out
}
