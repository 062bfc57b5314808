// Package procfs reads the few /proc facts klab needs: a process's
// children, whether it still lives, its peak memory and CPU time, and the
// escaping of mountinfo paths.
package procfs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ChildNamed returns the pid of a child of ppid whose command name starts
// with prefix, or 0 when there is none.
func ChildNamed(ppid int, prefix string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		o, c := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if o < 0 || c < o {
			continue
		}
		f := strings.Fields(s[c+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) && strings.HasPrefix(s[o+1:c], prefix) {
			return pid
		}
	}
	return 0
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "State:") {
			return !strings.Contains(sc.Text(), "Z")
		}
	}
	return false
}

// PeakRSS returns pid's peak resident set size (VmHWM) in KiB, or 0 when
// it cannot be read. Unlike the rusage a wait returns, it does not include
// the process's own children (QEMU, for klab).
func PeakRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// CPUTime returns the CPU time (user and system, every thread, exited ones
// included) of process pid so far; pid 0 means this process.
func CPUTime(pid int) (time.Duration, error) {
	clock := int32(unix.CLOCK_PROCESS_CPUTIME_ID)
	if pid != 0 {
		clock = processClock(pid)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0, fmt.Errorf("CPU clock of process %d: %w", pid, err)
	}
	return time.Duration(ts.Nano()), nil
}

// processClock is clock_getcpuclockid(3) for another process: the
// kernel's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED).
func processClock(pid int) int32 {
	return int32(^uint32(pid)<<3 | 2)
}
