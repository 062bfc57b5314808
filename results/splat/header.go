package splat

import (
	"strings"
)

// header is a recognised first line of a report, and how the report is
// titled: by its header alone (rec is nil), or "<title> in <function>"
// with the function found by rec.
type header struct {
	typ Type
	// title is the whole title when rec is nil; else the words before
	// " in <function>".
	title string
	// rec finds the function; nil when the header says it all.
	rec *recipe
	// suffix follows the function: "WARNING in <caller>/usb_submit_urb".
	suffix string
	// fn is the function named on the header line, if any.
	fn string
	// loc is the source location named on the header line, if any.
	loc string
	// line is the header line from its first word, canonical: the title
	// of a report that lacks what its format needs to name a function
	// (needs, needSrc, KASAN's access line).
	line string
	// needs is a line the report must hold after its header.
	needs string
	// needSrc: the report must name a source location after its header.
	needSrc bool
	// access: KASAN's "Read" or "Write" follows title.
	access   bool
	banner   bool // the report ends at a closing "=====" or "---[ end"
	wantOops bool // an "Oops: ... [#N]" line may follow as part of it
	oopsLine bool // this is an "Oops: ... [#N]"-style line
	leak     bool // a kmemleak report: a backtrace, no call trace
	reboot   bool // "Booting the kernel.": a report only after a first boot
	// aside: a one-line report that the kernel prints periodically from
	// another task; inside another report's call trace it is other
	// output, not a new report.
	aside bool
}

// provisional is the title known from the header line alone, for Line and
// OnReport.
func (h header) provisional() string {
	if h.rec == nil {
		return h.title
	}
	if h.fn != "" && !skipped(h.fn, h.rec.skip) {
		return canonical(h.title + " in " + titleFunc(h.fn) + h.suffix)
	}
	return h.title
}

// dieStrings start x86 die() lines ("invalid opcode: 0000 [#1] SMP") on
// kernels that do not prefix them with "Oops: ", and how each is titled.
var dieStrings = []struct {
	prefix, title string
	ripOnly       bool // titled by the faulting instruction alone
}{
	{"general protection fault", "general protection fault", false},
	{"segment-related general protection fault", "general protection fault", false},
	{"stack segment", "stack segment fault", false},
	{"divide error", "divide error", true},
	{"divide_error", "divide error", true}, // a misspelling of 5.8 to 5.10
	{"invalid opcode", "invalid opcode", true},
	{"int3", "int3", false},
	{"double fault", "double fault", false},
	{"bounds", "bounds", false},
	{"alignment check", "alignment check", false},
	{"segment not present", "segment not present", false},
	{"invalid TSS", "invalid TSS", false},
	{"coprocessor segment overrun", "coprocessor segment overrun", false},
	{"kernel stack overflow", "kernel stack overflow", false},
	{"stack guard page", "stack guard page", false},
}

// panicFormats are the panic reasons with titles of their own, matched
// by prefix; the others are titled "kernel panic: <reason>".
var panicFormats = []struct {
	prefix, title string
	rec           *recipe // when the title names a function
}{
	{"corrupted stack end detected inside scheduler", "kernel panic: corrupted stack end",
		&recipe{steps: byTrace, skip: newPatterns("schedule", "retint_kernel"), pick: pickStall}},
	{"kernel stack overflow", "kernel stack overflow",
		&recipe{steps: byTrace, skip: newPatterns("bad_stack"), pick: pickStall}},
	{"Attempted to kill init!", "kernel panic: Attempted to kill init!", nil},
	{"Couldn't open N_TTY ldisc", "kernel panic: Couldn't open N_TTY ldisc", nil},
	{"Fatal exception", "kernel panic: Fatal exception", nil},
	{"panic_on_warn set", "kernel panic: panic_on_warn set", nil},
	{"hung_task: blocked tasks", "kernel panic: hung_task: blocked tasks", nil},
}

// Report formats whose titles name a function, by where it comes from.
var (
	recKASAN = &recipe{steps: byHeaderTrace,
		// KASAN_HW_TAGS reports pass through the arm64 fault handlers.
		skip: newPatterns("kernel_fault", "tag_check", "mem_abort", "^el1_", "^el1h_")}
	recKASANFree = &recipe{steps: byHeaderTrace, skip: newPatterns("slab_", "kfree", "vunmap", "vfree")}
	recKFENCE    = &recipe{steps: byHeaderFrames}
	// KMSAN: the first stack, up to where the value was created.
	recKMSAN = &recipe{steps: []step{{op: opFrames, texts: kmsanOrigins}},
		skip: newPatterns("alloc_skb", "netlink_ack", "netlink_rcv_skb", "_encrypt$", "^crypto_", "^cipher_",
			"^drbg_", "^rng_")}
	recKMSANUSB = &recipe{steps: []step{{op: opFrames, texts: kmsanOrigins}},
		skip: newPatterns("alloc_skb", "usb_submit_urb", "usb_start_wait_urb", "usb_bulk_msg",
			"usb_interrupt_msg", "usb_control_msg")}
	recStall = &recipe{steps: byRIPTrace, pick: pickStall}
	// An RCU stall: the code the timer interrupt interrupted.
	recRCU = &recipe{
		steps: rcuSteps, alts: [][]step{rcuAlt},
		skip: newPatterns("apic_timer_interrupt", "rcu"), pick: pickStall}
	// A stall the stalled CPU reports itself: since 5.x x86 dumps its
	// registers without the timer interrupt's frames, and its instruction
	// pointer is the stalled code.
	recRCUSelf = &recipe{
		steps: rcuSteps, alts: [][]step{rcuAlt, byRIPTrace},
		skip: newPatterns("apic_timer_interrupt", "rcu"), pick: pickStall}
	recHang = &recipe{steps: byTrace, pick: pickHang}
	recLeak = &recipe{steps: []step{{op: opSeek, texts: []string{"backtrace:", "backtrace (crc"}}, {op: opFrames}},
		skip: newPatterns("kmemleak", "mmap", "kmem", "slab", "alloc", "create_object", "idr_get", "list_lru_init",
			"kasprintf", "kvasprintf", "pcpu_create", "strdup", "strndup", "memdup")}
	// Bad page state: where the page was allocated (page_owner), else,
	// on kernels without page_owner, who freed it.
	recBadPage = &recipe{steps: []step{{op: opSeek, texts: []string{"page last allocated"}}, {op: opFrames}},
		alts: [][]step{byTrace},
		skip: newPatterns("free_page", "put_page", "get_page", "update_page", "release_page", "free_unref",
			"^_*folio", "truncate_inode_pages", "page_frag_free", "alloc", "vmap", "page_owner",
			// The checks of the page allocator's free path.
			"bad_page", "free_page_is_bad", "free_frozen_pages", "free_pcp", "free_one_page")}
	recUnlock    = &recipe{steps: []step{{op: opPC}, {op: opTrace}, {op: opFrames}}}
	recLockingWA = traceRecipe("lock_sock", "release_sock")
	recRCUUsage  = traceRecipe("rcu", "kmem", "slab")
	recCircular  = &recipe{steps: []step{{op: opAt}, {op: opAt}, {op: opFrames}},
		// Work items take locks of their own: a deadlock in these is
		// about the work, not the workqueue.
		skip: newPatterns("process_one_work", "flush_workqueue", "drain_workqueue", "destroy_workqueue")}

	recOops      = &recipe{steps: byRIPTrace}
	recRIPOnly   = &recipe{steps: byRIPOnly}
	recTrace     = traceRecipe()
	recKernelBug = &recipe{steps: byRIPTrace, skip: newPatterns("^skb_")} // skb helpers BUG on their callers' bugs
	recUsercopy  = traceRecipe("usercopy", "__check")
	recUBSAN     = traceRecipe("ubsan", "overflow")
	recStackChk  = traceRecipe("stack_chk")
	recSleep     = traceRecipe(sleepers...)
	recPreempt   = traceRecipe("dump_stack", "preemption", "preempt", "debug_", "processor_id", "this_cpu")
	recSpinlock  = traceRecipe("spin_", "_lock", "_unlock")
	recCantDie   = traceRecipe("schedule")
	recNonStatic = traceRecipe("stack", "lock", "IRQ")
	recWQLeak    = &recipe{steps: []step{{op: opAfter, texts: []string{"last function: "}, raw: true}}}
	recPCRaw     = rawAfter("", true)
	recAtRaw     = rawAfter("", false)
	recReturning = rawAfter("leaving the kernel with locks still held", false)
	recAcquire   = rawAfter("is trying to acquire lock", false)
	recInversion = rawAfter("just changed the state of lock", false)
	recTakes     = rawAfter("takes", false)
	recSafeOld   = rawAfter("is trying to acquire", false)
	recSafe      = &recipe{steps: []step{{op: opSeek, texts: []string{"which became "}}, {op: opFrames}}}

	recWarn = warnRecipe()
	// Debug objects are checked on behalf of their users: timers, work,
	// RCU heads, per-cpu and vmalloc'd memory, kobjects.
	recODEBUG = warnRecipe("debug_", "rcu", "hrtimer_", "timer_", "work_", "percpu_", "vunmap", "vfree", "__free_",
		"debug_check", "kobject_")
	recBadUcopy   = warnRecipe("usercopy", "__check")
	recKobject    = warnRecipe("kobject_")
	recProc       = warnRecipe("proc_")
	recRefcount   = warnRecipe("refcount", "kobject_")
	recLockingBug = warnRecipe("lock_sock", "release_sock")
	recKmalloc    = warnRecipe("kmalloc", "krealloc", "slab", "kmem")
	// USB drivers submit bad URBs: name the driver.
	recUSB = warnRecipe("usb_submit_urb", "usb_start_wait_urb", "usb_bulk_msg", "usb_interrupt_msg", "usb_control_msg")
)

var (
	rcuSteps = []step{{op: opSeek, texts: []string{"apic_timer_interrupt"}}, {op: opRIP}, {op: opFrames}}
	rcuAlt   = []step{{op: opSeek, texts: []string{"apic_timer_interrupt", "Exception stack", "el1h_64_irq"}},
		{op: opFrames}}
)

// sleepers are the primitives a task that schedules while atomic sleeps
// in: its caller is the one to blame.
var sleepers = []string{"schedule", "msleep", "usleep", "ssleep", "^wait_for_", "^__wait_for_", "^wait_event",
	"^__wait_event", "^synchronize_", "^__synchronize_"}

// kmsanOrigins end KMSAN's first stack.
var kmsanOrigins = []string{"Local variable ", "Uninit was created at"}

// bootSequence are lines that a machine prints while it boots, before the
// kernel: firmware banners and the kernel decompressor.
var bootSequence = []string{"SeaBIOS (version", "iPXE", "Booting from ", "early console in ",
	"Decompressing Linux", "Booting the kernel."}

// detect recognises a report's first line. msg has no printk prefix.
func detect(msg string) (header, bool) {
	if len(msg) < 4 {
		return header{}, false
	}
	if len(msg) < 12 && (msg[0] == 'B' || msg[0] == 'I') {
		// A header whose rest was lost.
		switch strings.TrimRight(msg, " ") {
		case "BUG:":
			return header{typ: TypeBug, title: "BUG: corrupted"}, true
		case "INFO:":
			return header{typ: TypeBug, title: "INFO: corrupted"}, true
		}
	}
	h, ok := detectHeader(msg)
	if !ok {
		return h, false
	}
	if h.title == "" {
		h.title = string(h.typ)
	}
	return h, true
}

func detectHeader(msg string) (header, bool) {
	switch msg[0] {
	case 'K':
		if reason, ok := strings.CutPrefix(msg, "Kernel panic - not syncing:"); ok {
			return panicHeader(reason), true
		}
		if rest, ok := strings.CutPrefix(msg, "Kernel BUG "); ok {
			return header{typ: TypeBug, title: canonical("kernel BUG " + rest)}, true
		}
	case 'O':
		// die() lines always count the oopses: "Oops: 0002 [#1] SMP".
		if strings.HasPrefix(msg, "Oops") && len(msg) > 4 && strings.IndexByte(":[ ", msg[4]) >= 0 &&
			strings.Contains(msg, "[#") {
			return oopsHeader(msg), true
		}
	case 'U':
		if rest, ok := strings.CutPrefix(msg, "Unable to handle kernel "); ok {
			return badAccessHeader(msg, rest), true
		}
		if rest, ok := strings.CutPrefix(msg, "UBSAN: "); ok {
			return ubsanHeader(msg, rest), true
		}
		if strings.HasPrefix(msg, "Unhandled fault:") {
			return header{typ: TypeOops, title: "Unhandled fault", rec: recOops, wantOops: true}, true
		}
	case 'A':
		if strings.HasPrefix(msg, "Alignment trap:") {
			return header{typ: TypeOops, title: "Alignment trap", rec: recOops, wantOops: true}, true
		}
	case 'B':
		if rest, ok := strings.CutPrefix(msg, "BUG: "); ok {
			return bugHeader(msg, rest), true
		}
		if strings.HasPrefix(msg, "BUG kmalloc-") && strings.Contains(msg, ": Object already free") {
			return header{typ: TypeBug, title: "BUG: Object already free"}, true
		}
		if strings.TrimSpace(msg) == "Booting the kernel." {
			return header{typ: TypePanic, title: "unexpected kernel reboot", reboot: true}, true
		}
	case 'V':
		switch {
		case strings.HasPrefix(msg, "VFS: Close: file count is 0"):
			return header{typ: TypeBug, title: "VFS: Close: file count is zero (use-after-free)"}, true
		case strings.HasPrefix(msg, "VFS: Busy inodes after unmount"):
			return header{typ: TypeBug, title: "VFS: Busy inodes after unmount (use-after-free)"}, true
		}
	case '[':
		// Lockdep's "[ BUG: Invalid wait context ]" and, before 4.x,
		// "[ INFO: possible circular locking dependency detected ]".
		if rest, ok := strings.CutPrefix(msg, "[ BUG: "); ok && strings.HasSuffix(msg, " ]") {
			rest = strings.TrimSuffix(rest, " ]")
			return bugHeader("BUG: "+rest, rest), true
		}
		if rest, ok := strings.CutPrefix(msg, "[ INFO: "); ok && strings.HasSuffix(msg, " ]") {
			return infoHeader(msg[2:], rest)
		}
	case 'k':
		if loc, ok := strings.CutPrefix(msg, "kernel BUG at "); ok {
			return kernelBugHeader(loc), true
		}
		if strings.HasPrefix(msg, "kmemleak: unreferenced object 0x") {
			return leakHeader(), true
		}
	case 'u':
		if strings.HasPrefix(msg, "unreferenced object 0x") {
			return leakHeader(), true
		}
		if rest, ok := strings.CutPrefix(msg, "unregister_netdevice: waiting for "); ok &&
			strings.Contains(rest, " to become free") {
			// A leaked reference to a network device.
			return header{typ: TypeRefcount, title: "unregister_netdevice: waiting for DEV to become free",
				aside: true}, true
		}
	case 'W':
		if rest, ok := strings.CutPrefix(msg, "WARNING:"); ok {
			if strings.TrimSpace(rest) == "" {
				return header{typ: TypeWarning, title: "WARNING: corrupted"}, true
			}
			if rest, ok := strings.CutPrefix(rest, " "); ok {
				return warningHeader(msg, rest)
			}
		}
	case 'I':
		if strings.HasPrefix(msg, "Internal error: ") && strings.Contains(msg, "[#") {
			return header{typ: TypeOops, title: "Internal error", rec: recOops, oopsLine: true}, true
		}
		if rest, ok := strings.CutPrefix(msg, "INFO: "); ok {
			return infoHeader(msg, rest)
		}
	case 'P':
		if strings.HasPrefix(msg, "PANIC: double fault") {
			return header{typ: TypeOops, title: "PANIC: double fault", rec: recRIPOnly}, true
		}
	case 'r':
		if rest, ok := strings.CutPrefix(msg, "rcu: INFO: "); ok {
			return infoHeader(msg[len("rcu: "):], rest)
		}
	case 'w', 'N':
		if rest, ok := strings.CutPrefix(strings.TrimPrefix(msg, "NMI "), "watchdog: "); ok {
			return watchdogHeader(rest)
		}
	}
	if strings.Contains(msg, "[#") {
		for _, d := range dieStrings {
			if strings.HasPrefix(msg, d.prefix) {
				return oopsHeader(msg), true
			}
		}
	}
	return header{}, false
}

// panicHeader handles what follows "Kernel panic - not syncing:".
func panicHeader(reason string) header {
	r := strings.TrimSpace(reason)
	h := header{typ: TypePanic}
	if fn, ok := strings.CutPrefix(r, "stack-protector: Kernel stack is corrupted in:"); ok {
		// The function, when the kernel could name it (%pB), else an
		// address and the call trace.
		h.title = "kernel panic: stack is corrupted"
		if name := symbolName(fn); name != "" && len(strings.TrimSpace(fn)) > len(name) {
			h.title += " in " + name
		} else {
			h.rec = recStackChk
		}
		return h
	}
	for _, f := range panicFormats {
		if strings.HasPrefix(r, f.prefix) {
			h.title, h.rec = f.title, f.rec
			return h
		}
	}
	h.title = "kernel panic"
	if r := canonical(r); r != "" {
		h.title += ": " + r
	}
	return h
}

// oopsHeader handles die() lines: "Oops: 0002 [#1] SMP", "Oops: general
// protection fault, probably for non-canonical address 0x...: 0000 [#1]",
// "invalid opcode: 0000 [#1] SMP".
func oopsHeader(msg string) header {
	h := header{typ: TypeOops, oopsLine: strings.Contains(msg, "[#"), rec: recOops}
	t := msg
	if i := strings.Index(t, "[#"); i >= 0 {
		t = t[:i]
	}
	// Since 6.x x86 prefixes die() messages with "Oops: "; drop it so that
	// "Oops: general protection fault" (7.3) and "general protection
	// fault" (6.1) get the same title.
	for {
		rest, ok := strings.CutPrefix(t, "Oops: ")
		if !ok {
			break
		}
		t = rest
	}
	for _, d := range dieStrings {
		if strings.HasPrefix(t, d.prefix) {
			h.title = d.title
			if d.ripOnly {
				h.rec = recRIPOnly
			}
			return h
		}
	}
	h.title = "Oops"
	if t = strings.TrimSpace(t); t != "" && !strings.HasPrefix(t, "Oops") && !isHex(t) {
		if i := strings.IndexByte(t, ':'); i > 0 {
			t = t[:i]
		}
		if t = trimTitle(canonical(t)); t != "" {
			h.title = t
		}
	}
	return h
}

// badAccessHeader handles arm's "Unable to handle kernel NULL pointer
// dereference at virtual address ...", "... paging request at ...".
func badAccessHeader(msg, rest string) header {
	h := header{typ: TypeOops, wantOops: true}
	for _, what := range []string{"paging request", "NULL pointer dereference", "access to user memory"} {
		if strings.HasPrefix(rest, what) {
			h.title, h.rec = "BUG: unable to handle kernel "+what, recOops
			return h
		}
	}
	h.title = canonical(msg)
	return h
}

// ubsanHeader handles "UBSAN: array-index-out-of-bounds in fs/x.c:1:2".
// Since 6.5 UBSAN reports sit between "cut here" and "---[ end trace ]---",
// before between two rows of '='.
func ubsanHeader(msg, rest string) header {
	h := header{typ: TypeUBSAN, banner: true}
	what, where, ok := strings.Cut(rest, " in ")
	if !ok {
		h.title = canonical(msg)
		return h
	}
	if what == "Undefined behaviour" {
		what = "undefined-behaviour"
	}
	h.title, h.rec, h.loc = "UBSAN: "+canonical(what), recUBSAN, firstWord(where)
	return h
}

// kernelBugHeader handles "kernel BUG at mm/slub.c:435!".
func kernelBugHeader(loc string) header {
	loc = trimTitle(firstWord(loc))
	h := header{typ: TypeBug, title: "kernel BUG", loc: loc, wantOops: true,
		rec: recKernelBug}
	switch file := locFile(loc); {
	case isLibFile(file, "list_debug.c"):
		h.typ, h.title, h.rec = TypeListCorruption, "BUG: corrupted list", recTrace
	case strings.HasSuffix(file, "mm/usercopy.c"):
		h.title, h.rec = "BUG: bad usercopy", recUsercopy
	}
	return h
}

func leakHeader() header {
	return header{typ: TypeMemoryLeak, title: "memory leak", rec: recLeak, leak: true}
}

// spinlockBugs are the spinlock and rwlock debugging reports titled by
// their caller.
var spinlockBugs = []string{"lockup suspected", "already unlocked", "recursion", "cpu recursion",
	"bad magic", "wrong owner", "wrong CPU", "trylock failure on UP"}

// fixedBugs are BUG: reports titled by these words alone.
var fixedBugs = []string{"Bad rss-counter state", "non-zero nr_ptes on freeing mm",
	"non-zero nr_pmds on freeing mm", "Bad page map"}

// bugHeader handles "BUG: ..." lines; rest follows "BUG: ".
func bugHeader(msg, rest string) header {
	line := canonical(msg)
	if r, ok := strings.CutPrefix(rest, "KASAN: "); ok {
		return kasanHeader(r)
	}
	if r, ok := strings.CutPrefix(rest, "KFENCE: "); ok {
		return kfenceHeader(line, r)
	}
	if r, ok := strings.CutPrefix(rest, "KMSAN: "); ok {
		h := header{typ: TypeKMSAN, banner: true, title: line}
		what, fn := cutIn(r)
		if fn == "" || !isWord(what) {
			return h
		}
		h.title, h.fn, h.rec = "KMSAN: "+what, fn, recKMSAN
		if what == "kernel-usb-infoleak" {
			h.rec = recKMSANUSB
		}
		return h
	}
	if r, ok := strings.CutPrefix(rest, "KCSAN: "); ok {
		return header{typ: TypeKCSAN, title: canonical("KCSAN: " + r), banner: true}
	}
	if strings.TrimSpace(rest) == "" {
		return header{typ: TypeBug, title: "BUG: corrupted"}
	}
	lockdep := header{typ: TypeLockdep, line: line}
	switch {
	case strings.HasPrefix(rest, "Invalid wait context"):
		// arm64 prints this as a BUG, x86 as a WARNING: one title.
		lockdep.title, lockdep.rec = "WARNING: locking bug", recLockingWA
		return lockdep
	case strings.HasPrefix(rest, "held lock freed"):
		lockdep.title, lockdep.rec = "BUG: held lock freed", recPCRaw
		return lockdep
	case strings.HasPrefix(rest, "bad unlock balance detected"):
		lockdep.title, lockdep.rec = "BUG: bad unlock balance", recUnlock
		return lockdep
	case strings.HasPrefix(rest, "lock held when returning to user space"):
		lockdep.title, lockdep.needs = "BUG: lock held when returning to user space", "leaving the kernel with locks still held"
		lockdep.rec = recReturning
		return lockdep
	case strings.Contains(rest, "still has locks held!"):
		lockdep.title, lockdep.rec = "BUG: still has locks held", recPCRaw
		return lockdep
	case strings.HasPrefix(rest, "MAX_LOCKDEP"), strings.HasPrefix(rest, "MAX_STACK_TRACE_ENTRIES"),
		strings.HasPrefix(rest, "key "), strings.HasPrefix(rest, "TASK_"),
		strings.HasPrefix(rest, "looking up invalid subclass"):
		lockdep.title = line
		return lockdep
	}
	h := header{typ: TypeBug, line: line}
	switch {
	case strings.HasPrefix(rest, "soft lockup"): // before 4.x, without "watchdog: "
		return softLockupHeader()
	case strings.HasPrefix(rest, "kernel NULL pointer dereference"),
		strings.HasPrefix(rest, "unable to handle kernel NULL pointer dereference"),
		strings.HasPrefix(rest, "Kernel NULL pointer dereference"):
		h.title, h.rec, h.wantOops = "BUG: unable to handle kernel NULL pointer dereference", recOops, true
	case strings.HasPrefix(rest, "unable to handle page fault"),
		strings.HasPrefix(rest, "unable to handle kernel paging request"),
		strings.HasPrefix(rest, "Unable to handle kernel data access"):
		h.title, h.rec, h.wantOops = "BUG: unable to handle kernel paging request", recOops, true
	case strings.HasPrefix(rest, "unable to handle kernel"), strings.HasPrefix(rest, "Unable to handle kernel"):
		// The rest of the line is a second printk that may be lost.
		h.title, h.wantOops = "BUG: unable to handle kernel", true
	case strings.Contains(rest, "stack guard page was hit at"):
		h.title, h.rec, h.wantOops = "BUG: stack guard page was hit", recStall, true
	case strings.HasPrefix(rest, "scheduling while atomic"):
		h.title, h.rec = "BUG: scheduling while atomic", recSleep
	case strings.HasPrefix(rest, "sleeping function called from invalid context at "):
		h.title, h.rec = "BUG: sleeping function called from invalid context", recTrace
	case strings.HasPrefix(rest, "using ") && strings.Contains(rest, "() in preemptible"):
		name, _, _ := strings.Cut(rest[len("using "):], "()")
		h.title = "BUG: using " + name + "() in preemptible code"
		h.rec = recPreempt
	case strings.HasPrefix(rest, "spinlock "), strings.HasPrefix(rest, "rwlock "):
		kind, what, _ := strings.Cut(rest, " ")
		h.title = line
		for _, s := range spinlockBugs {
			if strings.HasPrefix(what, s) {
				h.title, h.rec = "BUG: "+kind+" "+s, recSpinlock
				break
			}
		}
	case strings.HasPrefix(rest, "Bad page state"), strings.HasPrefix(rest, "Bad page cache"):
		h.title, h.rec = "BUG: Bad page "+firstWord(rest[len("Bad page "):]), recBadPage
	case strings.HasPrefix(rest, "workqueue lockup"):
		h.typ, h.title = TypeLockup, "BUG: workqueue lockup"
	case strings.HasPrefix(rest, "workqueue leaked lock or atomic"):
		h.title, h.needs = "BUG: workqueue leaked lock or atomic", "last function: "
		h.rec = recWQLeak
	case strings.HasPrefix(rest, "memory leak"):
		return leakHeader()
	case strings.HasPrefix(rest, "Dentry ") && strings.Contains(rest, "still in use"):
		h.title = line
		if strings.Contains(rest, "[unmount of ") {
			h.title = "BUG: Dentry still in use in unmount"
		}
	default:
		h.title = line
		for _, f := range fixedBugs {
			if strings.HasPrefix(rest, f) {
				h.title = "BUG: " + f
			}
		}
	}
	return h
}

// kasanHeader handles what follows "BUG: KASAN: ":
// "slab-use-after-free in fuse_request_end+0x1a2/0x9b0 [fuse]",
// "double-free in kfree+0x1/0x2", "wild-memory-access on address ...",
// and before 4.x "use-after-free in foo+0x1/0x2 at addr ffff...".
func kasanHeader(r string) header {
	h := header{typ: TypeKASAN, banner: true, line: canonical("KASAN: " + r), access: true}
	what, fn := cutIn(r)
	switch {
	case fn != "" && (what == "double-free or invalid-free" || what == "double-free" || what == "invalid-free"):
		h.title, h.fn, h.rec, h.access = "KASAN: invalid-free", fn, recKASANFree, false
	case fn != "" && isWord(what):
		h.title, h.fn, h.rec = "KASAN: "+what, fn, recKASAN
	case strings.Contains(r, " on address") && isWord(firstWord(r)):
		h.title = "KASAN: " + firstWord(r)
	default:
		h.title, h.access = h.line, false
	}
	return h
}

// kfenceFormats are KFENCE's reports, after "BUG: KFENCE: ".
var kfenceFormats = []string{"use-after-free read", "use-after-free write", "out-of-bounds read",
	"out-of-bounds write", "invalid free", "invalid read", "invalid write", "memory corruption"}

func kfenceHeader(line, r string) header {
	h := header{typ: TypeKFENCE, banner: true, title: line}
	what, fn := cutIn(r)
	for _, f := range kfenceFormats {
		if what == f && fn != "" {
			h.title, h.fn, h.rec = "KFENCE: "+what, fn, recKFENCE
		}
	}
	return h
}

// cutIn splits "use-after-free read in foo+0x1/0x2 [mod]" into the words
// before " in " and the function after it ("" when none is named).
func cutIn(s string) (what, fn string) {
	what, where, ok := strings.Cut(s, " in ")
	if !ok {
		return s, ""
	}
	return what, symbolOf(where)
}

// isWord reports whether s is one lower-case word of a sanitizer's
// report kind: "slab-use-after-free", "uninit-value".
func isWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '-' && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// warningHeader handles "WARNING: ..." lines; rest follows "WARNING: ".
// __warn prints "WARNING: CPU: 1 PID: 2 at fs/x.c:12 func+0x1/0x2 [mod]"
// (before 6.19), "WARNING: fs/x.c:12 at func+0x1/0x2 [mod], CPU#1: comm/2"
// (6.19 on); lockdep and the stack unwinder print their own.
//
// Other "WARNING: " lines are plain messages, not splats.
func warningHeader(msg, rest string) (header, bool) {
	fn, loc, afterLoc := "", "", ""
	for _, w := range strings.Fields(rest) {
		w = strings.TrimRight(w, ",")
		if fn == "" && strings.Contains(w, "+0x") {
			fn = symbolOf(w)
		}
		if loc == "" && isSourceLoc(w) {
			loc = w
			_, afterLoc, _ = strings.Cut(rest, w)
		}
	}
	warn := strings.HasPrefix(rest, "CPU: ") || strings.HasPrefix(rest, "at ") ||
		strings.Contains(rest, ", CPU#") || fn != "" || loc != ""
	switch {
	case strings.HasPrefix(rest, "kernel stack regs at ") && strings.Contains(rest, " has bad "):
		// The unwinder: "WARNING: kernel stack regs at ffff88801234 in
		// syz-executor1:16059 has bad 'bp' value ffff88801235".
		t := "WARNING: kernel stack regs has bad value"
		if what, ok := badValue(rest); ok {
			t = "WARNING: kernel stack regs has bad '" + what + "' value"
		}
		return header{typ: TypeWarning, title: t}, true
	case strings.HasPrefix(rest, "kernel stack frame pointer at ") && strings.Contains(rest, " has bad value"):
		t := "WARNING: kernel stack regs has bad value"
		if _, ok := badValue(rest); ok {
			t = "WARNING: kernel stack frame pointer has bad value"
		}
		return header{typ: TypeWarning, title: t}, true
	case warn:
		return warnHeader(fn, loc, afterLoc, rest), true
	}
	return lockdepHeader(msg, rest, false)
}

// badValue parses the rest of "kernel stack regs at ADDR in COMM has bad
// 'bp' value ..." or "kernel stack frame pointer at ADDR in COMM has bad
// value ...": what is bad, and whether the line has that shape (an
// address, a task name without spaces).
func badValue(rest string) (what string, ok bool) {
	f := strings.Fields(rest)
	i := 0
	for i < len(f) && f[i] != "at" {
		i++
	}
	if i+5 >= len(f) || !isHex(f[i+1]) || f[i+2] != "in" || f[i+4] != "has" || f[i+5] != "bad" {
		return "", false
	}
	if i+6 < len(f) && strings.HasPrefix(f[i+6], "'") && strings.HasSuffix(f[i+6], "'") && len(f[i+6]) > 2 {
		return strings.Trim(f[i+6], "'"), true
	}
	return "", true
}

// warnHeader titles a __warn report by where it is: some files hold the
// checks of other code, whose caller is the one to blame. afterLoc is the
// header after the source location.
func warnHeader(fn, loc, afterLoc, rest string) header {
	h := header{typ: TypeWarning, title: "WARNING", fn: fn, loc: loc, rec: recWarn}
	file := locFile(loc)
	switch {
	case isLibFile(file, "debugobjects.c"):
		h.title, h.rec = "WARNING: ODEBUG bug", recODEBUG
	case strings.HasSuffix(file, "mm/usercopy.c"):
		h.title, h.rec = "WARNING: bad usercopy", recBadUcopy
	case isLibFile(file, "kobject.c"):
		h.title, h.rec = "WARNING: kobject bug", recKobject
	case strings.HasSuffix(file, "fs/proc/generic.c"):
		h.title, h.rec = "WARNING: proc registration bug", recProc
	case isLibFile(file, "refcount.c") || strings.HasPrefix(fn, "refcount_warn"):
		h.typ, h.title, h.rec = TypeRefcount, "WARNING: refcount bug", recRefcount
	case strings.HasSuffix(file, "kernel/locking/lockdep.c") && strings.Contains(afterLoc, "lock_"):
		h.typ, h.title, h.rec = TypeLockdep, "WARNING: locking bug", recLockingBug
	case isLibFile(file, "list_debug.c") || strings.HasPrefix(fn, "__list_") && strings.Contains(fn, "valid"):
		h.typ, h.title, h.rec = TypeListCorruption, "BUG: corrupted list", recWarn
	case strings.Contains(file, "mm/") && isKmalloc(afterLoc):
		h.title, h.rec = "WARNING: kmalloc bug", recKmalloc
	case strings.HasSuffix(file, "mm/vmalloc.c") && strings.Contains(afterLoc, "__vmalloc_node"):
		h.title = "WARNING: zero-size vmalloc"
	case strings.Contains(rest, " usb_submit_urb"):
		h.suffix, h.rec = "/usb_submit_urb", recUSB
	}
	return h
}

// isKmalloc reports whether s names a kmalloc-family function after a
// space: " kmalloc_slab+0x1", " kvmalloc_node+0x1".
func isKmalloc(s string) bool {
	for i := strings.Index(s, "malloc"); i >= 0; {
		if i >= 1 && s[i-1] == ' ' || i >= 2 && s[i-2] == ' ' || i >= 3 && s[i-3] == ' ' && s[i-2] == 'k' {
			return true
		}
		j := strings.Index(s[i+1:], "malloc")
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// lockdepFormat is one of lockdep's reports, after "WARNING: " (5.x on)
// or "INFO: " (before).
type lockdepFormat struct {
	prefix string
	title  string
	needs  string
	// rec and old: how the function is found after WARNING: and INFO:.
	rec, old *recipe
	needSrc  bool
}

// lockdepFormats are lockdep's reports. Old kernels named the function of
// the lock's "at:" reference; newer titles may look at the call trace.
var lockdepFormats = []lockdepFormat{
	{"possible circular locking dependency detected", "possible deadlock", "is trying to acquire lock",
		recCircular, recAcquire, false},
	{"possible irq lock inversion dependency detected", "possible deadlock", "just changed the state of lock",
		recInversion, recInversion, false},
	{"possible recursive locking detected", "possible deadlock", "is trying to acquire lock",
		recAcquire, recAcquire, false},
	{"inconsistent lock state", "inconsistent lock state", "takes", recTrace, recTakes, false},
	{"suspicious RCU usage", "suspicious RCU usage", "", recRCUUsage, recRCUUsage, true},
	{"trying to register non-static key", "trying to register non-static key", "",
		recNonStatic, recNonStatic, false},
	{"bad unlock balance detected", "bad unlock balance", "", recUnlock, recUnlock, false},
	{"held lock freed", "held lock freed", "", recAtRaw, recPCRaw, false},
	{"lock held when returning to user space", "lock held when returning to user space",
		"leaving the kernel with locks still held", recReturning, recReturning, false},
	{"Nested lock was not taken", "nested lock was not taken", "", recWarn, recWarn, false},
}

// lockdepHeader handles lockdep's headers after "WARNING: " or "INFO: "
// (old): msg is the header line from that word, rest follows it.
func lockdepHeader(msg, rest string, old bool) (header, bool) {
	prefix, _, _ := strings.Cut(msg, " ")
	prefix += " "
	line := canonical(msg)
	for _, l := range lockdepFormats {
		if !strings.HasPrefix(rest, l.prefix) {
			continue
		}
		h := header{typ: TypeLockdep, title: l.title, rec: l.rec, needs: l.needs, needSrc: l.needSrc, line: line}
		if old {
			h.rec = l.old
		}
		if l.title != "possible deadlock" && l.title != "inconsistent lock state" {
			h.title = prefix + l.title
		}
		return h, true
	}
	h := header{typ: TypeLockdep, title: "possible deadlock", line: line}
	switch {
	case strings.Contains(rest, "-safe -> ") && strings.Contains(rest, "-unsafe lock order"):
		if old {
			h.rec, h.needs = recSafeOld, "is trying to acquire"
		} else {
			h.rec = recSafe
		}
		return h, true
	case strings.Contains(rest, "still has locks held!"):
		h.title = prefix + "still has locks held"
		h.rec = recAtRaw
		if old {
			h.rec = recPCRaw
		}
		return h, true
	case !old && (strings.Contains(rest, "lock") || strings.Contains(rest, "IRQ-")) &&
		(strings.HasSuffix(rest, "!") || strings.HasSuffix(rest, "detected")):
		// Another lockdep report ("WARNING: ... lock ... detected!").
		h.title, h.rec = line, nil
		return h, true
	}
	return header{}, false
}

// infoHeader handles "INFO: ..." (or "rcu: INFO: ..."): msg is the line
// from "INFO:", rest follows "INFO: ".
func infoHeader(msg, rest string) (header, bool) {
	if task, ok := strings.CutPrefix(rest, "task "); ok {
		switch {
		case strings.Contains(task, " blocked for more than "), strings.Contains(task, " blocked in I/O wait for more than "):
			return header{typ: TypeHungTask, title: "INFO: task hung", rec: recHang}, true
		case strings.Contains(task, " can't die for more than "):
			return header{typ: TypeHungTask, title: "INFO: task can't die", rec: recCantDie}, true
		}
		return header{}, false
	}
	if strings.HasPrefix(rest, "rcu") && strings.Contains(rest, "stall") {
		h := header{typ: TypeRCUStall, title: "INFO: rcu detected stall", rec: recRCU}
		if strings.Contains(rest, "self-detected") {
			h.rec = recRCUSelf
		}
		return h, true
	}
	if strings.HasPrefix(rest, "Freed in ") || strings.HasPrefix(rest, "Allocated in ") {
		// SLUB's object history, printed by old KASAN reports.
		return header{typ: TypeBug, title: canonical(msg)}, true
	}
	if strings.TrimSpace(rest) == "" {
		return header{typ: TypeBug, title: "INFO: corrupted"}, true
	}
	return lockdepHeader(msg, rest, true)
}

// watchdogHeader handles what follows "watchdog: ".
func watchdogHeader(rest string) (header, bool) {
	switch {
	case strings.HasPrefix(rest, "BUG: soft lockup"):
		return softLockupHeader(), true
	case strings.Contains(rest, "hard LOCKUP"):
		return header{typ: TypeLockup, title: "watchdog: hard LOCKUP", rec: recStall}, true
	}
	return header{}, false
}

func softLockupHeader() header {
	return header{typ: TypeLockup, title: "BUG: soft lockup", rec: recStall}
}

// firstWord returns s up to its first space.
func firstWord(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i]
	}
	return s
}

// locFile returns the file of "fs/fuse/dev.c:123[:45]".
func locFile(loc string) string {
	if i := strings.IndexByte(loc, ':'); i >= 0 {
		return loc[:i]
	}
	return loc
}

// isLibFile reports whether file is lib/<name>: "lib/refcount.c", or the
// bare "refcount.c" that some builds print.
func isLibFile(file, name string) bool {
	return file == name || strings.HasSuffix(file, "lib/"+name)
}
