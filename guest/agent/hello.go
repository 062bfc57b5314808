package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
)

// MaxConfigGz is the largest /proc/config.gz the agent sends in Hello. A
// larger one is left out rather than truncated (a truncated gzip stream is
// of no use).
const MaxConfigGz = 1 << 20

// NewHello describes this guest: the agent version, uname, CPUs, memory,
// /proc/config.gz, FUSE and io_uring support, the given module load results
// and channel, and the current CLOCK_BOOTTIME. Facts it cannot read are left
// at their zero values.
func NewHello(channel string, modules []proto.ModuleLoad) *proto.Hello {
	h := &proto.Hello{
		AgentVersion: Version,
		Uname:        uname(),
		CPUs:         onlineCPUs(),
		MemKiB:       memTotalKiB(),
		ConfigGz:     configGz(),
		FUSE:         exists("/dev/fuse"),
		IOUring:      ioUringSupported(),
		FUSEUring:    readTrimmed("/sys/module/fuse/parameters/enable_uring"),
		Modules:      modules,
		Channel:      channel,
	}
	h.BootNanos = BootNanos()
	return h
}

// BootNanos returns CLOCK_BOOTTIME in nanoseconds, or 0 when it cannot be
// read.
func BootNanos() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

func uname() proto.Uname {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return proto.Uname{}
	}
	return proto.Uname{
		Sysname: unix.ByteSliceToString(u.Sysname[:]),
		Release: unix.ByteSliceToString(u.Release[:]),
		Version: unix.ByteSliceToString(u.Version[:]),
		Machine: unix.ByteSliceToString(u.Machine[:]),
	}
}

func onlineCPUs() int {
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if n, err := ParseCPUList(string(b)); err == nil && n > 0 {
			return n
		}
	}
	return runtime.NumCPU()
}

// ParseCPUList counts the CPUs in a kernel CPU list such as "0-3,6,8-9".
func ParseCPUList(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("cpu list: empty")
	}
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return 0, fmt.Errorf("cpu list %q: %w", s, err)
			}
		}
		if a < 0 || b < a {
			return 0, fmt.Errorf("cpu list %q: bad range %q", s, part)
		}
		n += b - a + 1
	}
	return n, nil
}

func memTotalKiB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	n, _ := ParseMemTotal(f)
	return n
}

// ParseMemTotal returns MemTotal in KiB from a /proc/meminfo stream.
func ParseMemTotal(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("meminfo: MemTotal: %w", err)
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("meminfo: %w", err)
	}
	return 0, fmt.Errorf("meminfo: no MemTotal")
}

func configGz() []byte {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigGz+1))
	if err != nil || len(b) > MaxConfigGz || len(b) == 0 {
		return nil
	}
	return b
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ioUringSupported reports whether io_uring_setup(2) exists: any answer but
// ENOSYS counts (EPERM under kernel.io_uring_disabled=2 included).
func ioUringSupported() bool {
	// struct io_uring_params is 120 bytes; zeroed it asks for defaults.
	var params [15]uint64
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
	if errno == 0 {
		unix.Close(int(fd))
		return true
	}
	return !errors.Is(errno, unix.ENOSYS)
}
