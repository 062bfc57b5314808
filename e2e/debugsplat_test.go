package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/internal/testenv"
	"klab/lab"
)

// The capture kernel of the splat corpus: Debian's 7.3 with the lab and
// debug configs, kmemleak, and splatgen built in (see
// results/splat/testdata/README.md). Writing a mode to splatgen's
// parameter provokes its report in the running guest.
const (
	captureConfig = "lab,debug,results/splat/testdata/capture/capture.config"
	capturePatch  = "results/splat/testdata/capture/splatgen-builtin.patch"
	splatgenWhat  = "/sys/module/splatgen/parameters/what"
)

// debugClasses are the report classes of a debug kernel, each provoked by
// splatgen, with the klab boot flags that make the kernel report it soon,
// the guest command, and the title and type klab must give it: the titles
// of the corpus's real-7.3-debug-*.log files.
var debugClasses = []struct {
	name   string
	flags  []string
	script string
	title  string
	typ    string
}{
	{name: "kasan-uaf", script: "echo kasan_uaf > " + splatgenWhat,
		title: "KASAN: slab-use-after-free Read in splatgen_uaf", typ: "kasan"},
	{name: "kasan-oob", script: "echo kasan_oob > " + splatgenWhat,
		title: "KASAN: slab-out-of-bounds Read in splatgen_oob", typ: "kasan"},
	{name: "lockdep", script: "echo lockdep > " + splatgenWhat,
		title: "possible deadlock in splatgen_order_ba", typ: "lockdep"},
	{name: "atomic-sleep", script: "echo atomic_sleep > " + splatgenWhat,
		title: "BUG: sleeping function called from invalid context in splatgen_atomic_sleep", typ: "bug"},
	// kmemleak reports an object older than 5 s that two scans find no
	// pointer to (the first records its checksum); verbose prints what a
	// scan finds on the console.
	{name: "kmemleak", flags: []string{"--append", "kmemleak.verbose=1"},
		script: "echo kmemleak > " + splatgenWhat + "; sleep 6; echo scan > /sys/kernel/debug/kmemleak; echo scan > /sys/kernel/debug/kmemleak",
		title:  "memory leak in splatgen_leak", typ: "memory-leak"},
	// A kthread sleeps 12 s holding a mutex, another waits for it. The
	// hung task's stack is printed at info level, which klab's guest
	// lets through to the console (guest/agent's consoleLogLevel):
	// without it the report has no stack and is titled "INFO: task hung
	// in corrupted" (real-7.3-debug-hung-quiet.log).
	{name: "hung", flags: []string{"--sysctl", "kernel.hung_task_timeout_secs=2"},
		script: "echo hung > " + splatgenWhat + "; sleep 15",
		title:  "INFO: task hung in splatgen_holder", typ: "hung-task"},
	// A kthread spins 12 s in an RCU read-side section, preemption off,
	// while another waits for a grace period.
	{name: "rcu-stall", flags: []string{"--append", "rcupdate.rcu_cpu_stall_timeout=3"},
		script: "echo rcu_stall > " + splatgenWhat + "; sleep 20",
		title:  "INFO: rcu detected stall in splatgen_stall_fn", typ: "rcu-stall"},
	// A kthread spins 6 s with preemption off.
	{name: "softlockup", flags: []string{"--sysctl", "kernel.watchdog_thresh=1"},
		script: "echo softlockup > " + splatgenWhat + "; sleep 10",
		title:  "BUG: soft lockup in splatgen_spinner", typ: "lockup"},
}

// TestDebugKernelSplatClasses builds the splat corpus's capture kernel
// (Debian's 7.3, lab and debug configs, kmemleak, splatgen built in) and,
// for each class of report a debug kernel prints (KASAN use-after-free and
// out-of-bounds, a lockdep circular dependency, sleeping in atomic
// context, a kmemleak leak, a hung task, an RCU stall, a soft lockup),
// provokes it in a guest whose command succeeds: klab boot must fail the
// run by default (exit 126), name the report in its summary, and save it
// in splats.json with the title and type of the corpus's capture. Its cold
// build takes 15 to 25 minutes on 2 cores, so it runs only when
// KLAB_E2E_DEBUG_BUILD=1.
func TestDebugKernelSplatClasses(t *testing.T) {
	testenv.E2E(t)
	if os.Getenv("KLAB_E2E_DEBUG_BUILD") != "1" {
		t.Skip("needs a cold lab,debug kernel build (15 to 25 minutes on 2 cores): set KLAB_E2E_DEBUG_BUILD=1")
	}
	requiresBuildTools(t)
	args := []string{"kernels", "build", "--source", "debian:7.3", "--config", captureConfig,
		"--patches", capturePatch, "--name", "capture-debug"}
	if r := runLong(t, 60*time.Minute, args...); r.code != 0 {
		t.Fatalf("%v: exit %d", args, r.code)
	} else {
		t.Logf("capture-debug took %.1fs", r.wall.Seconds())
	}
	for _, c := range debugClasses {
		t.Run(c.name, func(t *testing.T) {
			golden := filepath.Join("..", "results", "splat", "testdata", "real-7.3-debug-"+c.name+".log")
			if g, err := os.ReadFile(golden); err != nil {
				t.Error(err)
			} else if head, _, _ := strings.Cut(string(g), "\n\n"); !strings.Contains(head+"\n", "TITLE: "+c.title+"\n") {
				t.Errorf("%s has no TITLE: %s", golden, c.title)
			}
			runs := t.TempDir()
			// A KASAN kernel boots in 50 to 110 s under TCG on a busy host:
			// more than the default boot timeout (30 s, scaled by 4).
			args := append([]string{"boot", "--kernel", "build:capture-debug", "--boot-timeout", "90"}, c.flags...)
			r := runTimeout(t, runs, 15*time.Minute, append(args, "--", "sh", "-c", c.script)...)
			if r.code != lab.ExitKernel {
				t.Errorf("exit %d, want %d: a %s report fails the run", r.code, lab.ExitKernel, c.typ)
			}
			failing := ""
			for _, l := range strings.Split(r.stderr, "\n") {
				if strings.Contains(l, "failing splat(s): ") {
					failing = l
				}
			}
			if !strings.Contains(failing, c.title) {
				t.Errorf("stderr does not name %q as a failing splat: %q", c.title, failing)
			}
			b, err := os.ReadFile(filepath.Join(onlyRun(t, runs), "splats.json"))
			if err != nil {
				t.Fatal(err)
			}
			var saved []struct{ Title, Type string }
			if err := json.Unmarshal(b, &saved); err != nil {
				t.Fatalf("splats.json: %v", err)
			}
			found := false
			for _, s := range saved {
				t.Logf("splat: %s: %s", s.Type, s.Title)
				found = found || s.Title == c.title && s.Type == c.typ
			}
			if !found {
				t.Errorf("splats.json has no %s report %q", c.typ, c.title)
			}
		})
	}
}
