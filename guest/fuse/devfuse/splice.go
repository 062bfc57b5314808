package devfuse

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/guest/fuse/abi"
)

// READ replies on /dev/fuse, spliced. A reply is one write of the out
// header followed by the data. Read into the server's memory and written
// back with writev, the data are copied twice (file to buffer, buffer to
// the kernel's request); spliced from the backing file through a pipe,
// the file's pages are only referenced until /dev/fuse copies them once
// into the request, as libfuse does. The header must come first in the
// pipe and state the length, which is only known once the file was read
// (a short read at the end of the file), so the data go through a first
// pipe and are moved (by reference) behind the header in a second one:
//
//	splice(file -> data pipe)        n bytes, by reference
//	write(msg pipe, header(16+n))
//	splice(data pipe -> msg pipe)    by reference
//	splice(msg pipe -> /dev/fuse)    the one copy
//
// Four system calls instead of two, so only replies of at least
// spliceMin bytes are spliced, and at most what a pipe holds (fs.pipe-
// max-size, 1 MiB by default, less room for the header and a partial
// page at each end); other sizes, and files that cannot be spliced, are
// read and written as before.

// spliceMin is the smallest READ reply that is spliced: below it, the
// two extra system calls cost more than the copy they save.
const spliceMin = 32 << 10

// pipeSize is the capacity asked for each pipe.
const pipeSize = 1 << 20

// maxFreePipes bounds the pipe pairs a Device keeps for reuse.
const maxFreePipes = 64

// pipePair is the two pipes of one spliced reply in flight.
type pipePair struct {
	data, msg [2]int // [0] read end, [1] write end
	max       int    // the largest reply data they take
}

func newPipePair() (*pipePair, error) {
	p := &pipePair{data: [2]int{-1, -1}, msg: [2]int{-1, -1}}
	for _, fds := range []*[2]int{&p.data, &p.msg} {
		if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			p.close()
			return nil, err
		}
	}
	size := pipeSize
	for _, fds := range []*[2]int{&p.data, &p.msg} {
		got, err := unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, pipeSize)
		if err != nil {
			// Above fs.pipe-max-size without CAP_SYS_RESOURCE: keep the
			// size the pipe has.
			if got, err = unix.FcntlInt(uintptr(fds[1]), unix.F_GETPIPE_SZ, 0); err != nil {
				p.close()
				return nil, err
			}
		}
		size = min(size, got)
	}
	// A page for the header, and a partial page at each end of data at
	// an unaligned offset.
	p.max = size - 3*4096
	return p, nil
}

func (p *pipePair) close() {
	for _, fd := range []int{p.data[0], p.data[1], p.msg[0], p.msg[1]} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// getPipes takes a pipe pair from the free list or makes one; nil when
// pipes cannot be made (the caller copies instead).
func (d *Device) getPipes() *pipePair {
	d.pmu.Lock()
	if n := len(d.pfree); n > 0 {
		p := d.pfree[n-1]
		d.pfree = d.pfree[:n-1]
		d.pmu.Unlock()
		return p
	}
	d.pmu.Unlock()
	p, err := newPipePair()
	if err != nil {
		return nil
	}
	return p
}

// putPipes gives back a pair whose pipes are empty.
func (d *Device) putPipes(p *pipePair) {
	d.pmu.Lock()
	if !d.pclosed && len(d.pfree) < maxFreePipes {
		d.pfree = append(d.pfree, p)
		d.pmu.Unlock()
		return
	}
	d.pmu.Unlock()
	p.close()
}

// closePipes closes the free pipes; pairs in use are closed when given
// back.
func (d *Device) closePipes() {
	d.pmu.Lock()
	free := d.pfree
	d.pfree, d.pclosed = nil, true
	d.pmu.Unlock()
	for _, p := range free {
		p.close()
	}
}

// splice is splice(2) without offsets on the output.
func splice(in int, off *int64, out int, n int, flags int) (int, syscall.Errno) {
	for {
		k, err := unix.Splice(in, off, out, nil, n, flags)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err.(syscall.Errno)
		}
		return int(k), 0
	}
}

// WriteReplyFd splices a READ reply of up to size bytes of fd at off to
// /dev/fuse (see the top of this file). It implements dispatch.FdReplier:
// sizes below spliceMin or above what a pipe holds, and descriptors that
// cannot be spliced, are left to the caller.
func (d *Device) WriteReplyFd(unique uint64, fd int, off int64, size int) (bool, int, syscall.Errno, error) {
	if size < spliceMin || !d.splice.Load() {
		return false, 0, 0, nil
	}
	p := d.getPipes()
	if p == nil {
		return false, 0, 0, nil
	}
	if size > p.max {
		d.putPipes(p)
		return false, 0, 0, nil
	}
	// The file's pages into the data pipe.
	n := 0
	for n < size {
		k, e := splice(fd, &off, p.data[1], size-n, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		if e != 0 {
			if n == 0 {
				// Not spliceable (EINVAL), or a read error that the
				// caller's own read will report.
				d.putPipes(p)
				return false, 0, 0, nil
			}
			break // send what was read, as a short read
		}
		if k == 0 {
			break // end of file
		}
		n += k
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		p.close()
		return true, 0, 0, syscall.ENODEV
	}
	hdr := abi.OutHeader{Len: uint32(abi.OutHeaderSize + n), Unique: unique}
	if _, _, e := unix.Syscall(unix.SYS_WRITE, uintptr(p.msg[1]), uintptr(unsafe.Pointer(&hdr)), uintptr(abi.OutHeaderSize)); e != 0 {
		p.close()
		return true, 0, 0, e
	}
	for m := 0; m < n; {
		k, e := splice(p.data[0], nil, p.msg[1], n-m, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		if e != 0 || k == 0 {
			if e == 0 {
				e = syscall.EIO
			}
			p.close()
			return true, 0, 0, e
		}
		m += k
	}
	k, e := splice(p.msg[0], nil, d.fd, abi.OutHeaderSize+n, 0)
	if e != 0 {
		// ENOENT: the kernel no longer waits for the request. The pipe
		// may hold what was not taken: drop the pair.
		p.close()
		return true, 0, 0, e
	}
	if k != abi.OutHeaderSize+n {
		p.close()
		return true, 0, 0, syscall.EIO
	}
	d.putPipes(p)
	d.spliced.Add(uint64(n))
	d.splicedReplies.Add(1)
	return true, n, 0, nil
}

// Stats are a Device's counters.
type Stats struct {
	// SplicedReplies and SplicedBytes count the READ replies spliced from
	// backing files, and their data bytes: the server never read those
	// bytes into its memory (they do not show in its rchar).
	SplicedReplies uint64 `json:"spliced_replies"`
	SplicedBytes   uint64 `json:"spliced_bytes"`
	// Requests counts the requests read from /dev/fuse that a transport
	// carries (all but INIT, FORGET, BATCH_FORGET and INTERRUPT): over
	// io_uring it stays 0 once the rings serve.
	Requests uint64 `json:"requests"`
}

// Stats returns the device's counters.
func (d *Device) Stats() Stats {
	return Stats{SplicedReplies: d.splicedReplies.Load(), SplicedBytes: d.spliced.Load(), Requests: d.requests.Load()}
}

// SetSplice turns spliced READ replies on or off (off for a new Device).
func (d *Device) SetSplice(on bool) { d.splice.Store(on) }
