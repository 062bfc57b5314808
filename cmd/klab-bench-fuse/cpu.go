package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/internal/procfs"
)

// A server's cost per request: the CPU time of the server process while a
// cell ran, over the requests of its connection that the kernel ended in
// that time. The requests are counted by the kernel, not by the server,
// so that klab's servers and libfuse's are counted alike: a perf counter
// on the fuse:fuse_request_end tracepoint (Linux 6.16+) on every CPU,
// filtered to the cell's connection. The counter only counts (no ring
// buffer, no samples), which costs a few tens of nanoseconds per request.

// tracefsDirs are where tracefs is usually mounted.
var tracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// tracepointID returns the perf id of tracepoint sys:name, mounting
// tracefs on /sys/kernel/tracing when no tracefs is mounted (as root).
func tracepointID(sys, name string) (uint64, error) {
	read := func() (uint64, error) {
		var errs []error
		for _, d := range tracefsDirs {
			b, err := os.ReadFile(filepath.Join(d, "events", sys, name, "id"))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		}
		return 0, errors.Join(errs...)
	}
	id, err := read()
	if err == nil {
		return id, nil
	}
	if _, serr := os.Stat(filepath.Join(tracefsDirs[0], "events")); serr == nil {
		// tracefs is there but has no such event.
		return 0, fmt.Errorf("tracepoint %s:%s: %w", sys, name, err)
	}
	if merr := unix.Mount("nodev", tracefsDirs[0], "tracefs", 0, ""); merr != nil && merr != unix.EBUSY {
		return 0, fmt.Errorf("tracepoint %s:%s: no tracefs, and mounting it failed: %w", sys, name, merr)
	}
	if id, err = read(); err != nil {
		return 0, fmt.Errorf("tracepoint %s:%s (Linux 6.16+ has it): %w", sys, name, err)
	}
	return id, nil
}

// reqCounter counts the requests of one FUSE connection that the kernel
// ended, on every CPU.
type reqCounter struct {
	fds []int
}

// connFilter is the tracepoint filter of connection conn (the kernel's
// dev_t of the mount, which is the fusectl connection number).
func connFilter(conn uint32) string { return "connection == " + strconv.FormatUint(uint64(conn), 10) }

// openReqCounter starts counting the ended requests of connection conn.
func openReqCounter(conn uint32) (*reqCounter, error) {
	id, err := tracepointID("fuse", "fuse_request_end")
	if err != nil {
		return nil, err
	}
	ncpu, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	filter := append([]byte(connFilter(conn)), 0)
	c := &reqCounter{}
	for cpu := 0; cpu < ncpu; cpu++ {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_TRACEPOINT, Config: id, Bits: unix.PerfBitDisabled}
		attr.Size = uint32(unsafe.Sizeof(attr))
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EINVAL) && !cpuOnline(cpu) {
			continue // a possible CPU that is not online
		}
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("perf counter on fuse:fuse_request_end, CPU %d: %w", cpu, err)
		}
		c.fds = append(c.fds, fd)
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_SET_FILTER, uintptr(unsafe.Pointer(&filter[0]))); e != 0 {
			c.Close()
			return nil, fmt.Errorf("perf filter %q: %w", filter[:len(filter)-1], e)
		}
		if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
			c.Close()
			return nil, fmt.Errorf("enable perf counter: %w", err)
		}
	}
	if len(c.fds) == 0 {
		return nil, errors.New("no CPU to count fuse:fuse_request_end on")
	}
	return c, nil
}

func cpuOnline(cpu int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/online", cpu))
	return err != nil || strings.TrimSpace(string(b)) == "1"
}

// Count returns the requests counted so far.
func (c *reqCounter) Count() (uint64, error) {
	var total uint64
	var buf [8]byte
	for _, fd := range c.fds {
		n, err := unix.Read(fd, buf[:])
		if err != nil {
			return 0, fmt.Errorf("read perf counter: %w", err)
		}
		if n != 8 {
			return 0, fmt.Errorf("read perf counter: %d bytes", n)
		}
		total += *(*uint64)(unsafe.Pointer(&buf[0]))
	}
	return total, nil
}

// Close stops counting.
func (c *reqCounter) Close() {
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
}

// costMeter measures one server's CPU time and requests over a cell.
type costMeter struct {
	pid     int // 0: this process
	reqs    *reqCounter
	cpu0    time.Duration
	count0  uint64
	started bool
	err     error
}

// startCost starts measuring the server process pid (0: this process)
// serving connection conn. Problems are kept for the result, not fatal.
func startCost(pid int, conn uint32) *costMeter {
	m := &costMeter{pid: pid}
	if m.reqs, m.err = openReqCounter(conn); m.err != nil {
		return m
	}
	if m.count0, m.err = m.reqs.Count(); m.err != nil {
		return m
	}
	if m.cpu0, m.err = procfs.CPUTime(pid); m.err != nil {
		return m
	}
	m.started = true
	return m
}

// stop ends the measurement: the server's CPU time and the requests.
func (m *costMeter) stop() (time.Duration, uint64, error) {
	if m.reqs != nil {
		defer m.reqs.Close()
	}
	if !m.started {
		return 0, 0, m.err
	}
	cpu, err := procfs.CPUTime(m.pid)
	if err != nil {
		return 0, 0, err
	}
	n, err := m.reqs.Count()
	if err != nil {
		return 0, 0, err
	}
	return cpu - m.cpu0, n - m.count0, nil
}
