package splat

import (
	"strings"
)

// kind says how a report is titled once its body is known.
type kind uint8

const (
	// kindPlain reports are titled by their header line alone.
	kindPlain kind = iota
	// kindPanic: "kernel panic: <reason>".
	kindPanic
	// kindFrame reports are titled "<base> in <frame>", with the frame
	// taken from the header's function, the RIP line, then the call
	// trace: WARNINGs, oopses, BUGs with a call trace, UBSAN, ...
	kindFrame
	// kindSanitizer: KASAN, KFENCE and KMSAN; like kindFrame, but the
	// first stack may have no "Call Trace:" line, and KASAN adds the
	// access ("Read", "Write").
	kindSanitizer
	// kindLockdepAt: lockdep reports titled by the function of the first
	// "at:" line after a marker line ("is trying to acquire lock").
	kindLockdepAt
	// kindHang: hung tasks, titled by the first frame that is not a
	// scheduler, lock or wait primitive.
	kindHang
	// kindStall: RCU stalls and lockups, titled by a representative
	// frame of the interrupted (not the interrupt's) stack.
	kindStall
	// kindLeak: kmemleak reports, titled by the allocation backtrace.
	kindLeak
	// kindBadPage: bad page state, titled by the page's allocation stack
	// (page_owner) or else by the call trace.
	kindBadPage
)

// header is a recognised first line of a report.
type header struct {
	typ   Type
	kind  kind
	title string // kindPlain and kindPanic: the whole title
	base  string // other kinds: the title is base + " in " + frame
	fn    string // the function named on the header line, if any
	loc   string // the source location named on the header line, if any
	// marker is the line that precedes the "at:" line (kindLockdepAt).
	marker   string
	access   bool      // KASAN: the access ("Read", "Write") follows base
	skip     *patterns // frames to skip for this format, on top of skipFrames
	banner   bool      // the report ends at a closing "=====" or "---[ end"
	wantOops bool      // an "Oops: ... [#N]" line may follow as part of it
	oopsLine bool      // this is an "Oops: ... [#N]"-style line
}

// provisional is the title known from the header line alone, for Line and
// OnReport.
func (h header) provisional() string {
	switch h.kind {
	case kindPlain, kindPanic:
		return h.title
	}
	if h.fn != "" && !skipped(h.fn, h.skip) {
		return h.base + " in " + titleFunc(h.fn)
	}
	return h.base
}

// Frames to skip for some formats, on top of skipFrames.
var (
	// skipSleep are the sleeping primitives that a "sleeping function
	// called from invalid context" or "scheduling while atomic" report
	// passes through on its way to the caller that slept.
	skipSleep = newPatterns("schedule", "msleep", "usleep", "ssleep", "cond_resched", "^wait_for_",
		"^__wait_for_", "^wait_event", "^__flush_work", "^flush_work", "^synchronize_", "^might_")
	skipUBSAN       = newPatterns("^ubsan", "^__ubsan")
	skipKernelBug   = newPatterns("^skb_")
	skipUsercopy    = newPatterns("usercopy", "__check")
	skipKMSAN       = newPatterns("^alloc_skb", "netlink_ack", "netlink_rcv_skb", "_encrypt$")
	skipPreemptible = newPatterns("preempt", "processor_id", "this_cpu", "debug_")
	skipSpinlock    = newPatterns("spin_", "_lock", "_unlock")
	skipInvalidFree = newPatterns("slab_", "kfree", "vunmap", "vfree")
	skipRefcount    = newPatterns("refcount", "kobject_")
	skipList        = newPatterns("list_")
	skipLocking     = newPatterns("lock_sock", "release_sock", "hlock_class", "check_flags", "^lock_", "^__lock_")
	skipKobject     = newPatterns("kobject_")
	skipSchedule    = newPatterns("schedule")
	skipRCUStall    = newPatterns("apic_timer_interrupt", "rcu")
	skipODEBUG      = newPatterns("debug_", "rcu", "hrtimer_", "timer_", "work_", "percpu_", "vunmap", "vfree",
		"__free_", "kobject_")
	skipLeak = newPatterns("kmemleak", "create_object", "alloc", "^kmem", "slab", "mmap", "strdup", "strndup",
		"memdup", "kasprintf", "kvasprintf", "idr_get", "list_lru_init", "pcpu_create", "ida_alloc")
	skipBadPage = newPatterns("free_page", "put_page", "get_page", "update_page", "release_page", "free_unref",
		"^_*folio", "truncate_inode_pages", "page_frag_free", "alloc", "vmap", "page_owner", "free_pages",
		"free_frozen_pages", "^free_pcp", "^free_one_page", "^__free_one_page", "^free_pcppages")
)

// dieStrings start x86 die() lines ("invalid opcode: 0000 [#1] SMP") on
// kernels that do not prefix them with "Oops: ".
var dieStrings = []string{
	"invalid opcode:", "divide error:", "stack segment:", "double fault:", "int3:",
	"bounds:", "alignment check:", "segment not present:", "invalid TSS:",
	"coprocessor segment overrun:", "kernel stack overflow", "general protection fault", "stack guard page:",
}

// detect recognises a report's first line. msg has no printk prefix.
func detect(msg string) (header, bool) {
	if len(msg) < 4 {
		return header{}, false
	}
	h, ok := detectHeader(msg)
	if !ok {
		return h, false
	}
	if h.kind == kindPlain && h.title == "" {
		h.title = string(h.typ)
	}
	return h, true
}

func detectHeader(msg string) (header, bool) {
	switch msg[0] {
	case 'K':
		if reason, ok := strings.CutPrefix(msg, "Kernel panic - not syncing:"); ok {
			t := "kernel panic"
			if r := normalise(reason); r != "" {
				t += ": " + r
			}
			return header{typ: TypePanic, kind: kindPanic, title: t}, true
		}
	case 'O':
		// die() lines always count the oopses: "Oops: 0002 [#1] SMP".
		if strings.HasPrefix(msg, "Oops") && len(msg) > 4 && strings.IndexByte(":[ ", msg[4]) >= 0 &&
			strings.Contains(msg, "[#") {
			return oopsHeader(msg), true
		}
	case 'U':
		if rest, ok := strings.CutPrefix(msg, "Unable to handle kernel "); ok {
			return badAccessHeader(rest), true
		}
		if rest, ok := strings.CutPrefix(msg, "UBSAN: "); ok {
			return ubsanHeader(rest), true
		}
	case 'B':
		if rest, ok := strings.CutPrefix(msg, "BUG: "); ok {
			return bugHeader(msg, rest), true
		}
	case '[':
		// Lockdep's "[ BUG: Invalid wait context ]".
		if rest, ok := strings.CutPrefix(msg, "[ BUG: "); ok && strings.HasSuffix(msg, " ]") {
			rest = strings.TrimSuffix(rest, " ]")
			return bugHeader("BUG: "+rest, rest), true
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
	case 'W':
		if rest, ok := strings.CutPrefix(msg, "WARNING: "); ok {
			return warningHeader(rest)
		}
	case 'I':
		if strings.HasPrefix(msg, "Internal error: ") && strings.Contains(msg, "[#") {
			return header{typ: TypeOops, kind: kindFrame, base: "Internal error", oopsLine: true}, true
		}
		if rest, ok := strings.CutPrefix(msg, "INFO: "); ok {
			return infoHeader(rest)
		}
	case 'P':
		if strings.HasPrefix(msg, "PANIC: double fault") {
			return header{typ: TypeOops, kind: kindFrame, base: "PANIC: double fault"}, true
		}
	case 'r':
		if rest, ok := strings.CutPrefix(msg, "rcu: INFO: "); ok {
			return infoHeader(rest)
		}
	case 'w', 'N':
		if rest, ok := strings.CutPrefix(strings.TrimPrefix(msg, "NMI "), "watchdog: "); ok {
			return watchdogHeader(rest)
		}
	}
	if strings.Contains(msg, "[#") {
		for _, d := range dieStrings {
			if strings.HasPrefix(msg, d) {
				return oopsHeader(msg), true
			}
		}
	}
	return header{}, false
}

// oopsHeader handles die() lines: "Oops: 0002 [#1] SMP", "Oops: general
// protection fault, probably for non-canonical address 0x...: 0000 [#1]",
// "invalid opcode: 0000 [#1] SMP".
func oopsHeader(msg string) header {
	h := header{typ: TypeOops, kind: kindFrame, oopsLine: strings.Contains(msg, "[#")}
	t := msg
	if i := strings.Index(t, "[#"); i >= 0 {
		t = t[:i]
	}
	if i := strings.Index(t, ", probably for "); i >= 0 {
		t = t[:i]
	}
	// Since 6.x x86 prefixes die() messages with "Oops: "; drop it so that
	// "Oops: general protection fault" (7.3) and "general protection
	// fault" (6.1) get the same title. Drop the error code too.
	for {
		rest, ok := strings.CutPrefix(t, "Oops: ")
		if !ok {
			break
		}
		t = rest
	}
	t = strings.TrimSpace(t)
	if i := strings.LastIndex(t, ":"); i >= 0 && isHex(strings.TrimSpace(t[i+1:])) {
		t = t[:i]
	}
	if isHex(t) || t == "" || t == "Oops" {
		t = "Oops"
	}
	h.base = trimTitle(normalise(t))
	if h.base == "" {
		h.base = "Oops"
	}
	return h
}

// badAccessHeader handles arm64's "Unable to handle kernel NULL pointer
// dereference at virtual address ...", "... paging request at ...".
func badAccessHeader(rest string) header {
	h := header{typ: TypeOops, kind: kindFrame, wantOops: true}
	switch {
	case strings.HasPrefix(rest, "NULL pointer dereference"):
		h.base = "BUG: unable to handle kernel NULL pointer dereference"
	case strings.HasPrefix(rest, "paging request"):
		h.base = "BUG: unable to handle kernel paging request"
	case strings.HasPrefix(rest, "access to user memory"):
		h.base = "BUG: unable to handle kernel access to user memory"
	default:
		h.base = "BUG: unable to handle kernel " + cutWords(normalise(rest), 4)
	}
	return h
}

// ubsanHeader handles "UBSAN: array-index-out-of-bounds in fs/x.c:1:2".
// Since 6.5 UBSAN reports sit between "cut here" and "---[ end trace ]---",
// before between two rows of '='.
func ubsanHeader(rest string) header {
	what := rest
	if i := strings.Index(what, " in "); i >= 0 {
		what = what[:i]
	}
	if strings.EqualFold(what, "Undefined behaviour") {
		what = "undefined-behaviour"
	}
	h := header{typ: TypeUBSAN, kind: kindFrame, base: "UBSAN: " + cutWords(normalise(what), 4),
		banner: true, skip: skipUBSAN}
	if i := strings.Index(rest, " in "); i >= 0 {
		h.loc = firstWord(rest[i+4:])
	}
	return h
}

// kernelBugHeader handles "kernel BUG at mm/slub.c:435!".
func kernelBugHeader(loc string) header {
	loc = trimTitle(firstWord(loc))
	h := header{typ: TypeBug, kind: kindFrame, base: "kernel BUG", loc: loc, wantOops: true,
		skip: skipKernelBug}
	switch file := locFile(loc); {
	case isLibFile(file, "list_debug.c"):
		h.typ, h.base = TypeListCorruption, "BUG: corrupted list"
	case isLibFile(file, "usercopy.c"):
		h.base, h.skip = "BUG: bad usercopy", skipUsercopy
	}
	return h
}

func leakHeader() header {
	return header{typ: TypeMemoryLeak, kind: kindLeak, base: "memory leak",
		skip: skipLeak}
}

// lockdepBugs are BUG: headers printed by lockdep, with how each is titled.
var lockdepBugs = []struct {
	prefix, base, marker string
}{
	{"BUG: Invalid wait context", "BUG: Invalid wait context", ""},
	{"BUG: looking up invalid subclass", "BUG: looking up invalid subclass", ""},
	{"BUG: held lock freed", "BUG: held lock freed", "is freeing memory"},
	{"BUG: bad unlock balance detected", "BUG: bad unlock balance", "is trying to release lock"},
	{"BUG: lock held when returning to user space", "BUG: lock held when returning to user space", "locks still held"},
	{"BUG: MAX_LOCKDEP", "", ""},
	{"BUG: key ", "", ""},
	{"BUG: TASK_", "", ""},
}

// bugHeader handles "BUG: ..." lines; rest follows "BUG: ".
func bugHeader(msg, rest string) header {
	if r, ok := strings.CutPrefix(rest, "KASAN: "); ok {
		return kasanHeader(r)
	}
	if r, ok := strings.CutPrefix(rest, "KFENCE: "); ok {
		what, fn := cutIn(r)
		return header{typ: TypeKFENCE, kind: kindSanitizer, base: "KFENCE: " + what, fn: fn, banner: true}
	}
	if r, ok := strings.CutPrefix(rest, "KMSAN: "); ok {
		what, fn := cutIn(r)
		return header{typ: TypeKMSAN, kind: kindSanitizer, base: "KMSAN: " + what, fn: fn, banner: true,
			skip: skipKMSAN}
	}
	if r, ok := strings.CutPrefix(rest, "KCSAN: "); ok {
		return header{typ: TypeKCSAN, kind: kindPlain, title: "KCSAN: " + normalise(r), banner: true}
	}
	for _, l := range lockdepBugs {
		if !strings.HasPrefix(msg, l.prefix) {
			continue
		}
		switch {
		case l.base == "":
			return header{typ: TypeLockdep, kind: kindPlain, title: normalise(msg)}
		case l.marker != "":
			return header{typ: TypeLockdep, kind: kindLockdepAt, base: l.base, marker: l.marker}
		}
		return header{typ: TypeLockdep, kind: kindFrame, base: l.base}
	}
	switch {
	case strings.HasPrefix(rest, "soft lockup"): // before 4.x, without "watchdog: "
		return softLockupHeader()
	case strings.HasPrefix(rest, "kernel NULL pointer dereference"),
		strings.HasPrefix(rest, "unable to handle kernel NULL pointer dereference"),
		strings.HasPrefix(rest, "Kernel NULL pointer dereference"):
		return header{typ: TypeBug, kind: kindFrame, base: "BUG: unable to handle kernel NULL pointer dereference", wantOops: true}
	case strings.HasPrefix(rest, "unable to handle page fault"),
		strings.HasPrefix(rest, "unable to handle kernel paging request"),
		strings.HasPrefix(rest, "Unable to handle kernel data access"):
		return header{typ: TypeBug, kind: kindFrame, base: "BUG: unable to handle kernel paging request", wantOops: true}
	case strings.HasPrefix(rest, "unable to handle kernel"):
		return header{typ: TypeBug, kind: kindFrame, base: "BUG: unable to handle kernel", wantOops: true}
	case strings.Contains(rest, "stack guard page was hit"):
		return header{typ: TypeBug, kind: kindStall, base: "BUG: stack guard page was hit", wantOops: true}
	case strings.HasPrefix(rest, "scheduling while atomic"):
		return header{typ: TypeBug, kind: kindFrame, base: "BUG: scheduling while atomic", skip: skipSleep}
	case strings.HasPrefix(rest, "sleeping function called from invalid context"):
		return header{typ: TypeBug, kind: kindFrame, base: "BUG: sleeping function called from invalid context", skip: skipSleep}
	case strings.HasPrefix(rest, "using ") && strings.Contains(rest, "() in preemptible"):
		name, _, _ := strings.Cut(rest[len("using "):], "()")
		return header{typ: TypeBug, kind: kindFrame, base: "BUG: using " + name + "() in preemptible code",
			skip: skipPreemptible}
	case strings.HasPrefix(rest, "spinlock "), strings.HasPrefix(rest, "rwlock "):
		what := rest
		if i := strings.Index(what, " on CPU"); i >= 0 {
			what = what[:i]
		}
		return header{typ: TypeBug, kind: kindFrame, base: "BUG: " + cutWords(normalise(what), 4),
			skip: skipSpinlock}
	case strings.HasPrefix(rest, "Bad page state"), strings.HasPrefix(rest, "Bad page cache"):
		return header{typ: TypeBug, kind: kindBadPage, base: "BUG: Bad page " + firstWord(rest[len("Bad page "):]),
			skip: skipBadPage}
	case strings.HasPrefix(rest, "workqueue lockup"):
		return header{typ: TypeLockup, kind: kindPlain, title: "BUG: workqueue lockup"}
	case strings.HasPrefix(rest, "memory leak"):
		return leakHeader()
	case strings.HasPrefix(rest, "Dentry ") && strings.Contains(rest, "still in use"):
		return header{typ: TypeBug, kind: kindPlain, title: "BUG: Dentry still in use"}
	case strings.Contains(rest, "still has locks held"):
		return header{typ: TypeLockdep, kind: kindLockdepAt, base: "BUG: still has locks held", marker: "still has locks held"}
	}
	t := msg
	if i := strings.Index(t, " - "); i >= 0 {
		t = t[:i]
	}
	return header{typ: TypeBug, kind: kindPlain, title: normalise(t)}
}

// kasanHeader handles what follows "BUG: KASAN: ":
// "slab-use-after-free in fuse_request_end+0x1a2/0x9b0 [fuse]",
// "double-free in kfree+0x1/0x2", "wild-memory-access in range [...]".
func kasanHeader(r string) header {
	what, fn := cutIn(r)
	h := header{typ: TypeKASAN, kind: kindSanitizer, fn: fn, banner: true, access: true}
	switch what {
	case "double-free or invalid-free", "double-free", "invalid-free":
		what, h.access = "invalid-free", false
		h.skip = skipInvalidFree
	}
	h.base = "KASAN: " + what
	return h
}

// cutIn splits "use-after-free read in foo+0x1/0x2 [mod]" into the words
// before " in " and the function after it.
func cutIn(s string) (what, fn string) {
	what = s
	if i := strings.Index(s, " in "); i >= 0 {
		what = s[:i]
		fn = symbolOf(strings.TrimSpace(s[i+4:]))
	} else if i := strings.Index(s, " on address"); i >= 0 {
		what = s[:i]
	}
	what = cutWords(normalise(what), 5)
	if what == "" {
		what = "corrupted"
	}
	return what, fn
}

// warningHeader handles "WARNING: ..." lines: __warn's
// "WARNING: CPU: 1 PID: 2 at fs/x.c:12 func+0x1/0x2 [mod]" (before 6.19),
// "WARNING: fs/x.c:12 at func+0x1/0x2 [mod], CPU#1: comm/2" (6.19 on), and
// lockdep's "WARNING: possible circular locking dependency detected".
//
// Other "WARNING: " lines are plain messages, not splats.
func warningHeader(rest string) (header, bool) {
	fn, loc := "", ""
	for _, w := range strings.Fields(rest) {
		w = strings.TrimRight(w, ",")
		if fn == "" && strings.Contains(w, "+0x") {
			fn = symbolOf(w)
		}
		if loc == "" && isSourceLoc(w) {
			loc = w
		}
	}
	warn := strings.HasPrefix(rest, "CPU: ") || strings.HasPrefix(rest, "at ") ||
		strings.Contains(rest, ", CPU#") || fn != "" || loc != ""
	if warn {
		return warnHeader(fn, loc), true
	}
	return lockdepHeader(rest, "WARNING: ")
}

// warnHeader titles a __warn report by where it is: some files hold the
// checks of other code, whose caller is the one to blame.
func warnHeader(fn, loc string) header {
	h := header{typ: TypeWarning, kind: kindFrame, base: "WARNING", fn: fn, loc: loc}
	file := locFile(loc)
	switch {
	case isLibFile(file, "refcount.c") || strings.HasPrefix(fn, "refcount_warn"):
		h.typ, h.base, h.skip = TypeRefcount, "WARNING: refcount bug", skipRefcount
	case isLibFile(file, "list_debug.c") || strings.HasPrefix(fn, "__list_") && strings.Contains(fn, "valid"):
		h.typ, h.base, h.skip = TypeListCorruption, "BUG: corrupted list", skipList
	case strings.HasSuffix(file, "kernel/locking/lockdep.c"):
		h.typ, h.base, h.skip = TypeLockdep, "WARNING: locking bug", skipLocking
	case isLibFile(file, "debugobjects.c"):
		h.base, h.skip = "WARNING: ODEBUG bug", skipODEBUG
	case strings.HasSuffix(file, "mm/usercopy.c"):
		h.base, h.skip = "WARNING: bad usercopy", skipUsercopy
	case isLibFile(file, "kobject.c"):
		h.base, h.skip = "WARNING: kobject bug", skipKobject
	}
	return h
}

// lockdepWarnings are lockdep's WARNING: (or, before 4.x, INFO:) headers,
// after that prefix, and how each is titled.
var lockdepWarnings = []struct {
	prefix, base, marker string
	skip                 *patterns
}{
	{"possible circular locking dependency", "possible deadlock", "is trying to acquire lock",
		newPatterns("process_one_work", "flush_workqueue", "drain_workqueue", "destroy_workqueue")},
	{"possible recursive locking", "possible deadlock", "is trying to acquire lock", nil},
	{"possible irq lock inversion", "possible deadlock", "just changed the state of lock", nil},
	{"inconsistent lock state", "inconsistent lock state", "", nil},
	{"suspicious RCU usage", "suspicious RCU usage", "", newPatterns("rcu", "kmem", "slab")},
	{"trying to register non-static key", "trying to register non-static key", "", newPatterns("lockdep", "register_lock_class", "__lock_acquire")},
	{"bad unlock balance detected", "bad unlock balance", "is trying to release lock", nil},
	{"held lock freed", "held lock freed", "is freeing memory", nil},
	{"lock held when returning to user space", "lock held when returning to user space", "locks still held", nil},
	{"Nested lock was not taken", "nested lock was not taken", "", nil},
	{"Invalid wait context", "Invalid wait context", "", nil},
}

// lockdepHeader handles lockdep's headers after "WARNING: " or "INFO: "
// (prefix, kept in titles that keep it, as syzkaller does).
func lockdepHeader(rest, prefix string) (header, bool) {
	for _, l := range lockdepWarnings {
		if !strings.HasPrefix(rest, l.prefix) {
			continue
		}
		base := l.base
		if base != "possible deadlock" && base != "inconsistent lock state" {
			base = prefix + base
		}
		h := header{typ: TypeLockdep, kind: kindFrame, base: base, skip: l.skip}
		if l.marker != "" {
			h.kind, h.marker = kindLockdepAt, l.marker
		}
		return h, true
	}
	switch {
	case strings.Contains(rest, "-safe -> ") && strings.Contains(rest, "-unsafe lock order"):
		return header{typ: TypeLockdep, kind: kindLockdepAt, base: "possible deadlock", marker: "is trying to acquire"}, true
	case strings.Contains(rest, "still has locks held"):
		return header{typ: TypeLockdep, kind: kindLockdepAt, base: prefix + "still has locks held", marker: "still has locks held"}, true
	case prefix == "WARNING: " && (strings.Contains(rest, "lock") || strings.Contains(rest, "IRQ-")) &&
		(strings.HasSuffix(rest, "!") || strings.HasSuffix(rest, "detected")):
		// Another lockdep report ("WARNING: ... lock ... detected!").
		return header{typ: TypeLockdep, kind: kindFrame, base: trimTitle(normalise(prefix + rest))}, true
	}
	return header{}, false
}

// infoHeader handles what follows "INFO: " (or "rcu: INFO: ").
func infoHeader(rest string) (header, bool) {
	if task, ok := strings.CutPrefix(rest, "task "); ok {
		switch {
		case strings.Contains(task, " blocked for more than "), strings.Contains(task, " blocked in I/O wait for more than "):
			return header{typ: TypeHungTask, kind: kindHang, base: "INFO: task hung"}, true
		case strings.Contains(task, " can't die for more than "):
			return header{typ: TypeHungTask, kind: kindFrame, base: "INFO: task can't die", skip: skipSchedule}, true
		}
		return header{}, false
	}
	if strings.HasPrefix(rest, "rcu") && strings.Contains(rest, "stall") {
		return header{typ: TypeRCUStall, kind: kindStall, base: "INFO: rcu detected stall",
			skip: skipRCUStall}, true
	}
	return lockdepHeader(rest, "INFO: ")
}

// watchdogHeader handles what follows "watchdog: ".
func watchdogHeader(rest string) (header, bool) {
	switch {
	case strings.HasPrefix(rest, "BUG: soft lockup"):
		return softLockupHeader(), true
	case strings.Contains(rest, "hard LOCKUP"):
		return header{typ: TypeLockup, kind: kindStall, base: "watchdog: hard LOCKUP"}, true
	}
	return header{}, false
}

func softLockupHeader() header {
	return header{typ: TypeLockup, kind: kindStall, base: "BUG: soft lockup"}
}

// firstWord returns s up to its first space.
func firstWord(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i]
	}
	return s
}

// cutWords keeps the first n words of s.
func cutWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
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
