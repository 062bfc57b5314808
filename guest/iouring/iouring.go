//go:build linux

// Package iouring is the small subset of io_uring that klab needs, on
// golang.org/x/sys/unix alone: ring setup (with 128-byte SQEs for
// IORING_OP_URING_CMD), mapping the rings, preparing and submitting SQEs,
// reaping CQEs, an eventfd for wake-ups, and a clean close.
//
// A Ring is not safe for concurrent use: one goroutine (locked to its OS
// thread when the kernel ties state to the submitter, as FUSE does) owns it.
package iouring

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Setup flags (include/uapi/linux/io_uring.h).
const (
	SetupCQSize       = 1 << 3
	SetupClamp        = 1 << 4
	SetupCoopTaskrun  = 1 << 8
	SetupSQE128       = 1 << 10
	SetupCQE32        = 1 << 11
	SetupSingleIssuer = 1 << 12
)

// Opcodes klab uses.
const (
	OpNop       = 0
	OpReadFixed = 4
	OpRead      = 22
	OpWrite     = 23
	OpURingCmd  = 46
)

// Feature bits reported by the kernel.
const (
	FeatSingleMmap = 1 << 0
)

const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	enterGetEvents = 1 << 0

	registerFiles     = 2
	registerBuffers2  = 15
	registerEventfd   = 4
	unregisterEventfd = 5
)

// params mirrors struct io_uring_params (120 bytes).
type params struct {
	sqEntries    uint32
	cqEntries    uint32
	flags        uint32
	sqThreadCPU  uint32
	sqThreadIdle uint32
	features     uint32
	wqFd         uint32
	resv         [3]uint32
	sqOff        sqringOffsets
	cqOff        cqringOffsets
}

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// CQE is a completion: the user data of its SQE, the result (a negative
// errno on failure) and flags.
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// Err returns the CQE's result as an error, nil when Res >= 0.
func (c CQE) Err() error {
	if c.Res >= 0 {
		return nil
	}
	return unix.Errno(-c.Res)
}

// Ring is one io_uring instance with its mapped queues.
type Ring struct {
	fd       int
	flags    uint32
	features uint32

	sqMem, cqMem, sqeMem []byte
	sqHead, sqTail       *uint32
	sqMask, sqEntries    uint32
	sqArray              []uint32
	cqHead, cqTail       *uint32
	cqMask               uint32
	cqes                 []byte
	sqeSize, cqeSize     int

	// sqeTail counts SQEs handed out by GetSQE; sqeHead counts those
	// published to the kernel.
	sqeHead, sqeTail uint32
	eventfd          int
	closed           bool
}

// ErrSQFull is returned by GetSQE when every SQE is in use.
var ErrSQFull = errors.New("iouring: submission queue full")

// New sets up a ring with room for entries SQEs (rounded up by the
// kernel to a power of two) and the given Setup flags.
func New(entries uint32, flags uint32) (*Ring, error) {
	var p params
	p.flags = flags
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup(%d, %#x): %w", entries, flags, errno)
	}
	r := &Ring{fd: int(fd), flags: flags, features: p.features, eventfd: -1, sqeSize: 64, cqeSize: 16}
	if flags&SetupSQE128 != 0 {
		r.sqeSize = 128
	}
	if flags&SetupCQE32 != 0 {
		r.cqeSize = 32
	}
	if err := r.mmap(&p); err != nil {
		unix.Close(r.fd)
		return nil, err
	}
	return r, nil
}

func (r *Ring) mmap(p *params) error {
	sqSize := int(p.sqOff.array) + int(p.sqEntries)*4
	cqSize := int(p.cqOff.cqes) + int(p.cqEntries)*r.cqeSize
	single := p.features&FeatSingleMmap != 0
	if single && cqSize > sqSize {
		sqSize = cqSize
	}
	var err error
	r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap sq ring: %w", err)
	}
	if single {
		r.cqMem = r.sqMem
	} else {
		r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			unix.Munmap(r.sqMem)
			return fmt.Errorf("mmap cq ring: %w", err)
		}
	}
	r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*r.sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.unmap()
		return fmt.Errorf("mmap sqes: %w", err)
	}
	r.sqHead = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.head]))
	r.sqTail = (*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.tail]))
	r.sqMask = *(*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.ringMask]))
	r.sqEntries = *(*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.ringEntries]))
	r.sqArray = unsafe.Slice((*uint32)(unsafe.Pointer(&r.sqMem[p.sqOff.array])), p.sqEntries)
	r.cqHead = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.head]))
	r.cqTail = (*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.tail]))
	r.cqMask = *(*uint32)(unsafe.Pointer(&r.cqMem[p.cqOff.ringMask]))
	r.cqes = r.cqMem[p.cqOff.cqes:cqSize]
	return nil
}

func (r *Ring) unmap() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
		r.sqeMem = nil
	}
	if r.cqMem != nil && &r.cqMem[0] != &r.sqMem[0] {
		unix.Munmap(r.cqMem)
	}
	r.cqMem = nil
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
		r.sqMem = nil
	}
}

// Fd is the ring's file descriptor.
func (r *Ring) Fd() int { return r.fd }

// Features are the IORING_FEAT_* bits the kernel reported.
func (r *Ring) Features() uint32 { return r.features }

// SQE is one submission entry, 64 or 128 bytes, mapped in the ring. Its
// setters write the fields at their uAPI offsets.
type SQE []byte

func (s SQE) put8(off int, v uint8)   { s[off] = v }
func (s SQE) put16(off int, v uint16) { *(*uint16)(unsafe.Pointer(&s[off])) = v }
func (s SQE) put32(off int, v uint32) { *(*uint32)(unsafe.Pointer(&s[off])) = v }
func (s SQE) put64(off int, v uint64) { *(*uint64)(unsafe.Pointer(&s[off])) = v }

// SetOpcode sets the operation.
func (s SQE) SetOpcode(op uint8) { s.put8(0, op) }

// SetFlags sets the IOSQE_* flags.
func (s SQE) SetFlags(f uint8) { s.put8(1, f) }

// SetFd sets the target file descriptor.
func (s SQE) SetFd(fd int32) { s.put32(4, uint32(fd)) }

// SetOff sets the file offset (read, write).
func (s SQE) SetOff(off uint64) { s.put64(8, off) }

// SetCmdOp sets the command of an IORING_OP_URING_CMD (shares the offset
// field).
func (s SQE) SetCmdOp(op uint32) { s.put32(8, op) }

// SetAddr sets the buffer or iovec address.
func (s SQE) SetAddr(addr uintptr) { s.put64(16, uint64(addr)) }

// SetLen sets the buffer length or iovec count.
func (s SQE) SetLen(n uint32) { s.put32(24, n) }

// SetOpFlags sets the per-opcode flags (rw_flags, uring_cmd_flags).
func (s SQE) SetOpFlags(f uint32) { s.put32(28, f) }

// SetUserData sets the value echoed in the CQE.
func (s SQE) SetUserData(v uint64) { s.put64(32, v) }

// SetBufIndex sets the registered buffer index.
func (s SQE) SetBufIndex(i uint16) { s.put16(40, i) }

// Cmd is the command area of a 128-byte SQE (80 bytes at offset 48), where
// IORING_OP_URING_CMD carries its driver-specific payload.
func (s SQE) Cmd() []byte {
	if len(s) < 128 {
		return nil
	}
	return s[48:128]
}

// GetSQE returns the next free SQE, zeroed, or ErrSQFull.
func (r *Ring) GetSQE() (SQE, error) {
	head := atomic.LoadUint32(r.sqHead)
	if r.sqeTail-head >= r.sqEntries {
		return nil, ErrSQFull
	}
	idx := r.sqeTail & r.sqMask
	r.sqeTail++
	s := SQE(r.sqeMem[int(idx)*r.sqeSize : int(idx+1)*r.sqeSize])
	clear(s)
	return s, nil
}

// flush publishes the SQEs handed out since the last flush and returns
// how many the kernel has yet to consume.
func (r *Ring) flush() uint32 {
	tail := *r.sqTail
	for r.sqeHead != r.sqeTail {
		r.sqArray[tail&r.sqMask] = r.sqeHead & r.sqMask
		tail++
		r.sqeHead++
	}
	atomic.StoreUint32(r.sqTail, tail)
	return tail - atomic.LoadUint32(r.sqHead)
}

// Submit hands the prepared SQEs to the kernel and, when wait > 0, blocks
// until at least wait completions are available. It returns the number of
// SQEs consumed. EINTR is retried.
func (r *Ring) Submit(wait uint32) (int, error) {
	n := r.flush()
	var flags uintptr
	if wait > 0 {
		flags = enterGetEvents
	}
	for {
		ret, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(n), uintptr(wait), flags, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return int(ret), fmt.Errorf("io_uring_enter: %w", errno)
		}
		return int(ret), nil
	}
}

// PeekCQE returns the oldest completion without waiting, and consumes it.
func (r *Ring) PeekCQE() (CQE, bool) {
	head := atomic.LoadUint32(r.cqHead)
	if head == atomic.LoadUint32(r.cqTail) {
		return CQE{}, false
	}
	off := int(head&r.cqMask) * r.cqeSize
	c := CQE{
		UserData: *(*uint64)(unsafe.Pointer(&r.cqes[off])),
		Res:      *(*int32)(unsafe.Pointer(&r.cqes[off+8])),
		Flags:    *(*uint32)(unsafe.Pointer(&r.cqes[off+12])),
	}
	atomic.StoreUint32(r.cqHead, head+1)
	return c, true
}

// CQReady reports whether a completion is waiting to be reaped.
func (r *Ring) CQReady() bool {
	return atomic.LoadUint32(r.cqHead) != atomic.LoadUint32(r.cqTail)
}

// ParkUntilCQE blocks the calling goroutine until a completion is waiting,
// through Go's network poller rather than in io_uring_enter: the goroutine
// parks and its thread gives up its P while it waits, as for a network
// read. A ring thread that expects to stay idle for long waits this way,
// so that the Go runtime's monitor does not have to take the P away from
// a thread blocked in a system call (and then poll every 20 us for a
// while). It must not be used with IORING_SETUP_DEFER_TASKRUN, whose
// completions are only posted inside io_uring_enter.
//
// The ring's descriptor is watched only while the goroutine waits: every
// completion posted while it is watched costs a poll wake-up.
func (r *Ring) ParkUntilCQE() error {
	if r.CQReady() {
		return nil
	}
	fd, err := unix.FcntlInt(uintptr(r.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("io_uring: dup for the poller: %w", err)
	}
	// O_NONBLOCK (shared with the ring's own descriptor, which
	// io_uring_enter ignores) is what makes os.NewFile use the poller.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return fmt.Errorf("io_uring: %w", err)
	}
	f := os.NewFile(uintptr(fd), "io_uring")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("io_uring: %w", err)
	}
	if err := rc.Read(func(uintptr) bool { return r.CQReady() }); err != nil {
		return fmt.Errorf("io_uring: wait for a completion: %w", err)
	}
	return nil
}

// WaitCQE returns the oldest completion, blocking until there is one.
func (r *Ring) WaitCQE() (CQE, error) {
	for {
		if c, ok := r.PeekCQE(); ok {
			return c, nil
		}
		if _, err := r.Submit(1); err != nil {
			return CQE{}, err
		}
	}
}

// SQE flags.
const (
	// SQEFixedFile says the SQE's fd is an index into the files
	// registered with RegisterFiles.
	SQEFixedFile = 1 << 0
)

// RegisterFiles registers fds with the ring, so that SQEs can name them by
// index with SQEFixedFile and the kernel skips looking up and reference
// counting the file on every submission.
func (r *Ring) RegisterFiles(fds []int32) error {
	if len(fds) == 0 {
		return nil
	}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerFiles, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), 0, 0)
	if errno != 0 {
		return fmt.Errorf("io_uring_register(files): %w", errno)
	}
	return nil
}

// RegisterSparseBuffers gives the ring a table of n empty registered
// buffer slots, for buffers the kernel itself puts there (FUSE zero-copy
// registers a request's pages in a slot while the server serves it).
func (r *Ring) RegisterSparseBuffers(n uint32) error {
	// struct io_uring_rsrc_register with IORING_RSRC_REGISTER_SPARSE.
	reg := struct {
		nr, flags   uint32
		resv2, data uint64
		tags        uint64
	}{nr: n, flags: 1}
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerBuffers2, uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0, 0)
	if errno != 0 {
		return fmt.Errorf("io_uring_register(sparse buffers): %w", errno)
	}
	return nil
}

// RegisterEventfd makes the kernel signal an eventfd on every completion
// and returns it, so that another goroutine can poll for work.
func (r *Ring) RegisterEventfd() (int, error) {
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("eventfd: %w", err)
	}
	fd32 := int32(efd)
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerEventfd, uintptr(unsafe.Pointer(&fd32)), 1, 0, 0)
	if errno != 0 {
		unix.Close(efd)
		return -1, fmt.Errorf("io_uring_register(eventfd): %w", errno)
	}
	r.eventfd = efd
	return efd, nil
}

// Close unregisters the eventfd, unmaps the rings and closes the ring. The
// kernel cancels whatever is still pending.
func (r *Ring) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.eventfd >= 0 {
		unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), unregisterEventfd, 0, 0, 0, 0)
		unix.Close(r.eventfd)
		r.eventfd = -1
	}
	r.unmap()
	return unix.Close(r.fd)
}
