package profile

import (
	"math"
	"os"
	"slices"
	"testing"
)

func TestIsIdle(t *testing.T) {
	for _, tc := range []struct {
		stack string
		idle  bool
	}{
		// The boot CPU's idle loop, reached through start_kernel.
		{"swapper;common_startup_64;x86_64_start_kernel;start_kernel;rest_init;cpu_startup_entry;do_idle;default_idle_call;default_idle;pv_native_safe_halt", true},
		{"swapper;common_startup_64;x86_64_start_kernel;__pfx_clear_bss;start_kernel;rest_init;cpu_startup_entry;schedule_idle;__schedule;finish_task_switch.isra.0", true},
		// Secondary CPUs, other idle drivers.
		{"swapper;secondary_startup_64;start_secondary;cpu_startup_entry;do_idle;cpuidle_idle_call;cpuidle_enter;cpuidle_enter_state;acpi_idle_enter;acpi_idle_do_entry;acpi_safe_halt", true},
		{"swapper;start_secondary;cpu_startup_entry;do_idle;cpuidle_enter_state;intel_idle_irq", true},
		{"swapper;start_secondary;cpu_startup_entry;do_idle;mwait_idle_with_hints", true},
		{"swapper;start_secondary;cpu_startup_entry;cpu_idle_poll", true},
		// The idle task without frames, or as swapper/N.
		{"swapper", true},
		{"swapper/1;[unknown]", true},
		// An idle loop under another name than swapper (the idle
		// thread's comm is not always kept).
		{"[unknown];start_secondary;cpu_startup_entry;do_idle;default_idle", true},
		// Interrupts and softirqs taken while idle are work.
		{"swapper;start_secondary;cpu_startup_entry;do_idle;default_idle;pv_native_safe_halt;asm_sysvec_apic_timer_interrupt;sysvec_apic_timer_interrupt;__irq_exit_rcu;handle_softirqs;rcu_core", false},
		{"swapper;start_secondary;cpu_startup_entry;do_idle;default_idle;asm_common_interrupt;common_interrupt;handle_edge_irq;vring_interrupt", false},
		{"swapper;asm_sysvec_call_function_single;flush_tlb_func", false},
		// Tasks.
		{"futimes;entry_SYSCALL_64_after_hwframe;do_syscall_64;do_utimes;fuse_setattr", false},
		{"kworker/0:1;ret_from_fork;kthread;worker_thread", false},
		{"sh;[unknown];main", false},
		{"idle;main", false}, // a process named idle is not the idle task
	} {
		if got := IsIdle(tc.stack); got != tc.idle {
			t.Errorf("IsIdle(%s) = %v, want %v", tc.stack, got, tc.idle)
		}
	}
}

// readFixture reads a folded profile under testdata.
func readFixture(t *testing.T, name string) *Profile {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := ReadFolded(f, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSplitIdle: two runs that did the same work but idled differently
// (a debug kernel's A/B). Over all samples the boot CPU's idle loop
// (rest_init, start_kernel, x86_64_start_kernel) is among the functions
// whose share changed most; over busy samples nothing changed, and the
// interrupt work done while idle stays in.
func TestSplitIdle(t *testing.T) {
	a, b := readFixture(t, "idle-a.folded"), readFixture(t, "idle-b.folded")
	busyA, idleA := a.SplitIdle()
	busyB, idleB := b.SplitIdle()
	if a.Total() != 1000 || idleA.Total() != 760 || busyA.Total() != 240 || b.Total() != 640 || idleB.Total() != 400 || busyB.Total() != 240 {
		t.Fatalf("A %d = %d busy + %d idle, B %d = %d busy + %d idle; want 1000 = 240 + 760, 640 = 240 + 400",
			a.Total(), busyA.Total(), idleA.Total(), b.Total(), busyB.Total(), idleB.Total())
	}
	var all []string
	for _, c := range Diff(a, b, 8, 0.01) {
		all = append(all, c.Func)
	}
	for _, f := range []string{"rest_init", "start_kernel", "x86_64_start_kernel"} {
		if !slices.Contains(all, f) {
			t.Errorf("over all samples, %s is not among the most changed %v: the fixture does not show the problem", f, all)
		}
	}
	for _, c := range Diff(busyA, busyB, 0, 0) {
		if math.Abs(c.Delta()) > 1e-12 {
			t.Errorf("over busy samples %s changed by %g", c.Func, c.Delta())
		}
		if c.Func == "rest_init" || c.Func == "pv_native_safe_halt" && c.A.Self > 0 {
			t.Errorf("an idle frame has a busy share: %+v", c)
		}
	}
	sh := busyA.Shares()
	if got := sh["handle_softirqs"].Inclusive; !near(got, 20.0/240) {
		t.Errorf("softirq work taken while idle: busy share %g, want %g", got, 20.0/240)
	}
	if got := sh["do_writev"].Inclusive; !near(got, 100.0/240) {
		t.Errorf("do_writev's busy share %g, want %g", got, 100.0/240)
	}
	var nilp *Profile
	if busy, idle := nilp.SplitIdle(); busy.Total() != 0 || idle.Total() != 0 {
		t.Errorf("a nil profile split into %d and %d samples", busy.Total(), idle.Total())
	}
}
