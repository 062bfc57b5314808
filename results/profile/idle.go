package profile

import "strings"

// idleFuncs are the frames of a CPU's idle loop: from the loop itself
// (cpu_startup_entry, do_idle) down to what halts or polls the CPU. A
// stack holding one of them is idle time, unless an interrupt ran on top
// of it (interruptFuncs).
var idleFuncs = map[string]bool{
	"cpu_startup_entry": true, "do_idle": true, "cpu_idle_poll": true,
	"default_idle_call": true, "default_idle": true, "arch_cpu_idle": true,
	"cpuidle_idle_call": true, "cpuidle_enter": true, "cpuidle_enter_state": true,
	"call_cpuidle": true, "schedule_idle": true, "poll_idle": true,
	"pv_native_safe_halt": true, "native_safe_halt": true, "safe_halt": true,
	"acpi_safe_halt": true, "mwait_idle": true, "mwait_idle_with_hints": true,
	"play_dead_common": true, "hlt_play_dead": true, "cpu_do_idle": true,
}

// idlePrefixes start the names of idle drivers' functions: acpi_idle_*,
// intel_idle*, amd_e400_idle and the like are caught by the first two.
var idlePrefixes = []string{"acpi_idle", "intel_idle"}

// interruptPrefixes start the frames of interrupt and softirq entry: work
// run on top of an idle loop (a timer, an I/O completion, RCU callbacks)
// is busy time.
var interruptPrefixes = []string{
	"asm_sysvec_", "sysvec_", "asm_common_interrupt", "common_interrupt",
	"__sysvec_", "irq_exit", "__irq_exit", "handle_softirqs", "__do_softirq",
	"do_softirq", "asm_exc_", "exc_", "handle_irq", "handle_edge_irq",
	"handle_fasteoi_irq",
}

// isIdleFrame reports whether a frame belongs to the idle loop.
func isIdleFrame(f string) bool {
	if idleFuncs[f] {
		return true
	}
	for _, p := range idlePrefixes {
		if strings.HasPrefix(f, p) {
			return true
		}
	}
	return false
}

// isInterruptFrame reports whether a frame enters an interrupt or a
// softirq.
func isInterruptFrame(f string) bool {
	for _, p := range interruptPrefixes {
		if strings.HasPrefix(f, p) {
			return true
		}
	}
	return false
}

// IsIdle reports whether a folded stack ("comm;outer;...;leaf") is a CPU
// idling: the stack holds a frame of the idle loop (do_idle,
// cpu_startup_entry, default_idle, pv_native_safe_halt, acpi_idle_*,
// intel_idle, mwait_idle, ...), or its process is the idle task
// ("swapper", "swapper/N"), and no interrupt or softirq runs above that
// frame. The boot CPU's idle stack (start_kernel, rest_init,
// cpu_startup_entry, ...) is idle; a timer interrupt or a block I/O
// completion taken while idle is not.
func IsIdle(stack string) bool {
	frames := strings.Split(stack, ";")
	comm := frames[0]
	from := -1
	if comm == "swapper" || strings.HasPrefix(comm, "swapper/") {
		from = 0
	}
	for i, f := range frames[1:] {
		if from < 0 && isIdleFrame(f) {
			from = i + 1
		}
	}
	if from < 0 {
		return false
	}
	for _, f := range frames[from+1:] {
		if isInterruptFrame(f) {
			return false
		}
	}
	return true
}

// SplitIdle returns p's stacks in two profiles: busy, the stacks that are
// not idle, and idle, the ones IsIdle says are. Shares of busy samples
// say where the CPUs worked, whatever the time they idled. A nil p gives
// two empty profiles.
func (p *Profile) SplitIdle() (busy, idle *Profile) {
	busy, idle = New(), New()
	if p == nil {
		return busy, idle
	}
	for s, n := range p.Stacks {
		if IsIdle(s) {
			idle.Add(s, n)
		} else {
			busy.Add(s, n)
		}
	}
	return busy, idle
}
