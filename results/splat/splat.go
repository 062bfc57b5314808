// Package splat finds kernel splats in console output and gives each one a
// stable title, so that runs and kernels can be compared by what went wrong.
//
// A splat is any report the kernel prints about itself: panics, oopses,
// BUGs, WARNINGs, sanitizer reports (KASAN, KFENCE, KMSAN, KCSAN, UBSAN),
// lockdep reports, hung tasks, soft and hard lockups, RCU stalls, list
// corruption, refcount warnings, kmemleak reports, and one-line reports
// such as a leaked network device or an unexpected reboot. Scanner reads a
// console as it arrives (Line, Write) and returns Reports.
//
// Titles are syzkaller's (pkg/report), so that klab's reports and
// syzbot's can be matched: the kind of report and the function to blame
// ("WARNING in fuse_uring_cmd", "KASAN: slab-use-after-free Read in
// fuse_request_end", "possible deadlock in fuse_dev_do_read", "INFO: task
// hung in fuse_flush"). Each report format has a recipe (recipe.go) that
// says where that function comes from: the faulting instruction (RIP, pc),
// the call trace, the function on the header line, lockdep's "at:" lines,
// skipping generic helpers (skipFrames) and the format's own; a stall is
// named by the frame before its dispatch point and a hung task past its
// wait primitives. A report whose function is lost (cut off, interleaved
// with another report, no usable frame) is titled "... in corrupted".
// Titles are canonical: addresses, numbers and line numbers become ADDR,
// NUM and LINE, so that equal titles mean the same bug across runs and
// across kernels.
//
// On top of the scanner: Dedup groups a run's reports by title with counts,
// Compare diffs the reports of two kernels (new, gone, in both), and Policy
// decides whether a run's reports fail it.
//
// The console is untrusted input: lines, reports and the number of reports
// kept are bounded, so a guest that floods its console cannot grow the
// host's memory without limit, and no input takes more than linear time.
package splat

import (
	"fmt"
	"strings"
)

// Type is the kind of a splat.
type Type string

// Splat types.
const (
	TypePanic          Type = "panic"           // Kernel panic - not syncing: ...
	TypeOops           Type = "oops"            // Oops, general protection fault, invalid opcode, ...
	TypeBug            Type = "bug"             // BUG: ..., kernel BUG at ...
	TypeWarning        Type = "warning"         // WARNING: ... at file:line func+0x...
	TypeHungTask       Type = "hung-task"       // INFO: task ... blocked for more than N seconds
	TypeLockup         Type = "lockup"          // soft lockup, hard LOCKUP, workqueue lockup
	TypeRCUStall       Type = "rcu-stall"       // rcu: INFO: rcu_preempt detected stalls
	TypeLockdep        Type = "lockdep"         // possible circular locking dependency, ...
	TypeKASAN          Type = "kasan"           // BUG: KASAN: ...
	TypeKFENCE         Type = "kfence"          // BUG: KFENCE: ...
	TypeKMSAN          Type = "kmsan"           // BUG: KMSAN: ...
	TypeKCSAN          Type = "kcsan"           // BUG: KCSAN: ...
	TypeUBSAN          Type = "ubsan"           // UBSAN: ...
	TypeListCorruption Type = "list-corruption" // list_add corruption, kernel BUG at lib/list_debug.c
	TypeRefcount       Type = "refcount"        // refcount_t: underflow; WARNING at lib/refcount.c
	TypeMemoryLeak     Type = "memory-leak"     // kmemleak: unreferenced object ...
)

// Types returns every splat type, in a fixed order.
func Types() []Type {
	return []Type{
		TypePanic, TypeOops, TypeBug, TypeWarning, TypeHungTask, TypeLockup, TypeRCUStall,
		TypeLockdep, TypeKASAN, TypeKFENCE, TypeKMSAN, TypeKCSAN, TypeUBSAN,
		TypeListCorruption, TypeRefcount, TypeMemoryLeak,
	}
}

// ParseType returns the Type named s, or an error that lists the names
// allowed.
func ParseType(s string) (Type, error) {
	for _, t := range Types() {
		if string(t) == s {
			return t, nil
		}
	}
	names := make([]string, 0, len(Types()))
	for _, t := range Types() {
		names = append(names, string(t))
	}
	return "", fmt.Errorf("unknown splat type %q, want one of %s", s, strings.Join(names, ", "))
}

// Limits on what the scanner keeps.
const (
	// MaxLineBytes is the longest console line kept; the rest of a longer
	// line is dropped.
	MaxLineBytes = 4 << 10
	// MaxReportLines bounds the lines of one report's Text.
	MaxReportLines = 1000
	// MaxReportBytes bounds one report's Text.
	MaxReportBytes = 128 << 10
	// MaxReports is the most reports a Scanner keeps; later ones are
	// still returned by Line, passed to OnReport and OnDone callbacks,
	// and counted by Dropped.
	MaxReports = 1000
	// MaxTotalBytes bounds the Text of all kept reports together. Past
	// it, new reports keep only their header line.
	MaxTotalBytes = 8 << 20
	// MaxFrames bounds Report.Frames.
	MaxFrames = 64
	// MaxTitleBytes bounds Report.Title.
	MaxTitleBytes = 200
)

// Report is one splat found on the console. Its JSON form is what
// splats.json holds and what `klab splats parse --json` prints.
type Report struct {
	// Type is the kind of splat.
	Type Type `json:"type"`
	// Title is a one-line summary in syzkaller's style without
	// addresses, pids, offsets or line numbers, so that equal titles mean
	// the same bug, in one run and across kernels.
	Title string `json:"title"`
	// Line is the 1-based console line of the report's header (the
	// "WARNING:", "BUG:", ... line).
	Line int `json:"line"`
	// Time is the printk time of the header in seconds, or 0 when the
	// console has no timestamps.
	Time float64 `json:"time,omitempty"`
	// Text is the report: its console lines from the banner before the
	// header to its end, without printk timestamps and caller prefixes,
	// bounded by MaxReportLines and MaxReportBytes.
	Text string `json:"report"`
	// Frames are the functions of the call trace that the title was
	// taken from, innermost first, without offsets and without the
	// uncertain "? " frames; at most MaxFrames. Empty, not nil, when the
	// report has no call trace.
	Frames []string `json:"frames"`
	// Guilty is the function named by the title, when it names one.
	Guilty string `json:"guilty,omitempty"`
	// CallTrace is the console text of that call trace.
	CallTrace string `json:"call_trace,omitempty"`
	// Fatal is true for a panic, and for a report that a panic followed
	// (an Oops with panic_on_oops, a WARNING with panic_on_warn, a hung
	// task with hung_task_panic, ...).
	Fatal bool `json:"fatal"`
	// Corrupted is true when the report is cut off (another report or
	// the end of the console came before its end, or its call trace is
	// missing) or interleaved with other output, so that its title may
	// be wrong.
	Corrupted bool `json:"corrupted"`
	// CorruptedReason says why Corrupted is set.
	CorruptedReason string `json:"corrupted_reason,omitempty"`
}
