// Package devfuse is the /dev/fuse transport of klab's FUSE servers, and
// the mount plumbing around it: opening the device, mount(2) with an fd=N
// option, finding the connection's number under /sys/fs/fuse/connections,
// aborting a connection, and unmounting.
//
// The device is opened with unix.Open, not os.Open, so that reads block in
// the kernel instead of going through the Go netpoller; each worker
// goroutine owns one read buffer and one OS thread while it waits, and
// keeps its P (GOMAXPROCS is raised to leave one per worker, and workers
// yield now and then: see dispatch.Yielder). READ replies from a backing
// file can be spliced (splice.go, Device.SetSplice).
package devfuse

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
	"klab/internal/procfs"
)

// DevicePath is the FUSE device.
const DevicePath = "/dev/fuse"

// ConnectionsDir is where fusectl lists connections.
const ConnectionsDir = "/sys/fs/fuse/connections"

// Device is an open /dev/fuse file descriptor. It is the transport's
// Replier, FdReplier and Backer: replies are written (or spliced) to it,
// and passthrough backing files are registered on it.
type Device struct {
	mu     sync.RWMutex // guards fd against Close while replies are written
	fd     int
	closed bool

	pmu     sync.Mutex // guards pfree and pclosed
	pfree   []*pipePair
	pclosed bool

	splice                  atomic.Bool // see SetSplice
	spliced, splicedReplies atomic.Uint64
	// requests counts what Stats.Requests says, on a cache line apart
	// from the reply counters.
	_        [64]byte
	requests atomic.Uint64
}

// Open opens /dev/fuse for reading and writing, blocking, close-on-exec.
func Open() (*Device, error) {
	fd, err := unix.Open(DevicePath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", DevicePath, err)
	}
	return &Device{fd: fd}, nil
}

// Fd returns the descriptor, for the fd= mount option.
func (d *Device) Fd() int { return d.fd }

// Close closes the descriptor. Replies written afterwards fail with
// ENODEV. Closing the last descriptor of a mounted connection aborts it.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.closePipes()
	return unix.Close(d.fd)
}

// WriteReply writes one reply with writev. It implements dispatch.Replier.
func (d *Device) WriteReply(hdr abi.OutHeader, out, data []byte) error {
	var iov [3]unix.Iovec
	n := 0
	iov[n].Base = (*byte)(unsafe.Pointer(&hdr))
	iov[n].SetLen(abi.OutHeaderSize)
	n++
	if len(out) > 0 {
		iov[n].Base = unsafe.SliceData(out)
		iov[n].SetLen(len(out))
		n++
	}
	if len(data) > 0 {
		iov[n].Base = unsafe.SliceData(data)
		iov[n].SetLen(len(data))
		n++
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return syscall.ENODEV
	}
	for {
		_, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(d.fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(n))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// OpenBacking registers fd as a FUSE passthrough backing file
// (FUSE_DEV_IOC_BACKING_OPEN, which needs CAP_SYS_ADMIN) and returns its ID.
func (d *Device) OpenBacking(fd int) (int32, error) {
	m := abi.BackingMap{Fd: int32(fd)}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return 0, syscall.ENODEV
	}
	id, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), abi.DevIocBackingOpen, uintptr(unsafe.Pointer(&m)))
	if e != 0 {
		return 0, fmt.Errorf("FUSE_DEV_IOC_BACKING_OPEN: %w", e)
	}
	return int32(id), nil
}

// CloseBacking drops a backing ID (FUSE_DEV_IOC_BACKING_CLOSE).
func (d *Device) CloseBacking(id int32) error {
	v := uint32(id)
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return syscall.ENODEV
	}
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), abi.DevIocBackingClose, uintptr(unsafe.Pointer(&v)))
	if e != 0 {
		return fmt.Errorf("FUSE_DEV_IOC_BACKING_CLOSE: %w", e)
	}
	return nil
}

// Transport serves a Device with a pool of worker goroutines, each reading
// a request, dispatching it and (usually) replying before reading the next.
type Transport struct {
	dev     *Device
	workers int
}

// NewTransport returns a transport reading dev with workers goroutines
// (at least 1).
func NewTransport(dev *Device, workers int) *Transport {
	return &Transport{dev: dev, workers: max(workers, 1)}
}

// Serve implements dispatch.Transport: it runs the workers until the
// kernel ends the connection. It returns the error the first worker saw;
// ENODEV is what a clean unmount and an abort both look like.
func (t *Transport) Serve(c *dispatch.Conn) error {
	dispatch.EnsureProcs(t.workers + 1)
	errs := make(chan error, t.workers)
	var wg sync.WaitGroup
	for i := 0; i < t.workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := t.work(c)
			c.SetGone(err)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// work is one worker's loop.
func (t *Transport) work(c *dispatch.Conn) error {
	size := c.BufferSize()
	var buf, scratch []byte
	req := new(dispatch.Request)
	var y dispatch.Yielder
	for {
		y.Tick()
		if buf == nil {
			buf = make([]byte, size)
		}
		n, err := t.read(buf)
		if err != nil {
			switch err {
			case unix.EINTR, unix.EAGAIN:
				// A signal, or the request vanished while being copied
				// (it was interrupted before we got it).
				continue
			case unix.ENOENT:
				continue
			}
			return fmt.Errorf("read %s: %w", DevicePath, err)
		}
		if err := req.Reset(buf[:n], t.dev, scratch); err != nil {
			// The kernel never sends malformed requests; don't spin on it.
			return err
		}
		if transportRequest(req.Header.Opcode) {
			t.dev.requests.Add(1)
		}
		c.Dispatch(req)
		if req.Done() {
			scratch = req.ScratchBuffer()
			continue
		}
		// The handler kept the request: give it the buffers.
		buf, scratch, req = nil, nil, new(dispatch.Request)
	}
}

// transportRequest reports whether the kernel sends requests of opcode
// op over the connection's transport: all but INIT, FORGET, BATCH_FORGET
// and INTERRUPT, which come over /dev/fuse whatever the transport.
func transportRequest(op abi.Opcode) bool {
	switch op {
	case abi.OpInit, abi.OpForget, abi.OpBatchForget, abi.OpInterrupt:
		return false
	}
	return true
}

func (t *Transport) read(buf []byte) (int, error) {
	n, _, e := unix.Syscall(unix.SYS_READ, uintptr(t.dev.fd), uintptr(unsafe.Pointer(unsafe.SliceData(buf))), uintptr(len(buf)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// MountOptions say how to mount a FUSE file system.
type MountOptions struct {
	// FSName is the source shown in /proc/mounts; empty means "klab".
	FSName string
	// Subtype makes the type "fuse.<Subtype>"; empty means plain "fuse".
	Subtype string
	// Options are mount options: allow_other, default_permissions,
	// max_read=N, blksize=N, ro, rw, nosuid, suid, nodev, dev, noexec, exec,
	// noatime, relatime, strictatime, nodiratime, sync, dirsync,
	// fsname=NAME, subtype=NAME. nosuid and nodev are the defaults, as with
	// libfuse.
	Options []string
}

// mountArgs turns o into mount(2) flags and data for device fd.
func (o MountOptions) mountArgs(fd int) (source, fstype string, flags uintptr, data string, err error) {
	flags = unix.MS_NOSUID | unix.MS_NODEV
	source, subtype := o.FSName, o.Subtype
	var opts []string
	var bad []string
	for _, raw := range o.Options {
		for _, opt := range strings.Split(raw, ",") {
			opt = strings.TrimSpace(opt)
			k, v, hasV := strings.Cut(opt, "=")
			switch {
			case opt == "":
			case opt == "allow_other" || opt == "default_permissions":
				opts = append(opts, opt)
			case (k == "max_read" || k == "blksize") && hasV:
				if _, perr := strconv.ParseUint(v, 10, 32); perr != nil {
					bad = append(bad, opt)
					continue
				}
				opts = append(opts, opt)
			case k == "fsname" && hasV:
				source = v
			case k == "subtype" && hasV:
				subtype = v
			case opt == "ro":
				flags |= unix.MS_RDONLY
			case opt == "rw":
				flags &^= unix.MS_RDONLY
			case opt == "nosuid":
				flags |= unix.MS_NOSUID
			case opt == "suid":
				flags &^= unix.MS_NOSUID
			case opt == "nodev":
				flags |= unix.MS_NODEV
			case opt == "dev":
				flags &^= unix.MS_NODEV
			case opt == "noexec":
				flags |= unix.MS_NOEXEC
			case opt == "exec":
				flags &^= unix.MS_NOEXEC
			case opt == "noatime":
				flags |= unix.MS_NOATIME
			case opt == "relatime":
				flags |= unix.MS_RELATIME
			case opt == "strictatime":
				flags |= unix.MS_STRICTATIME
			case opt == "nodiratime":
				flags |= unix.MS_NODIRATIME
			case opt == "sync":
				flags |= unix.MS_SYNCHRONOUS
			case opt == "dirsync":
				flags |= unix.MS_DIRSYNC
			default:
				bad = append(bad, opt)
			}
		}
	}
	if len(bad) > 0 {
		return "", "", 0, "", fmt.Errorf("unknown FUSE mount option(s) %s: want allow_other, default_permissions, max_read=N, blksize=N, fsname=NAME, subtype=NAME, ro, rw, [no]suid, [no]dev, [no]exec, noatime, relatime, strictatime, nodiratime, sync, dirsync", strings.Join(bad, ", "))
	}
	if source == "" {
		source = "klab"
	}
	fstype = "fuse"
	if subtype != "" {
		fstype = "fuse." + subtype
	}
	data = fmt.Sprintf("fd=%d,rootmode=40000,user_id=%d,group_id=%d", fd, os.Getuid(), os.Getgid())
	if len(opts) > 0 {
		data += "," + strings.Join(opts, ",")
	}
	return source, fstype, flags, data, nil
}

// Mount mounts dev at mountpoint. The kernel queues INIT at once; it is
// answered when a transport serves dev.
func Mount(dev *Device, mountpoint string, o MountOptions) error {
	source, fstype, flags, data, err := o.mountArgs(dev.fd)
	if err != nil {
		return err
	}
	if err := unix.Mount(source, mountpoint, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s (%s): %w", fstype, mountpoint, data, err)
	}
	return nil
}

// Unmount unmounts mountpoint; lazy detaches it even while busy
// (MNT_DETACH).
func Unmount(mountpoint string, lazy bool) error {
	flags := 0
	if lazy {
		flags = unix.MNT_DETACH
	}
	for {
		err := unix.Unmount(mountpoint, flags)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", mountpoint, err)
		}
		return nil
	}
}

// MountInfo is one line of /proc/self/mountinfo.
type MountInfo struct {
	// Major and Minor are st_dev of the mount's root.
	Major, Minor uint32
	// Mountpoint is where it is mounted.
	Mountpoint string
	// FSType is the file system type, e.g. "fuse.klab".
	FSType string
	// Source is the mount source.
	Source string
}

// ConnID returns the connection's number under ConnectionsDir (the
// kernel's dev_t of the super block).
func (m MountInfo) ConnID() uint32 { return m.Major<<20 | m.Minor }

// FindMount returns the last mount at mountpoint in /proc/self/mountinfo.
// It reads no file on the mount, so it never waits for a FUSE server.
func FindMount(mountpoint string) (MountInfo, error) {
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return MountInfo{}, err
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return MountInfo{}, err
	}
	var found *MountInfo
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f := strings.Fields(pre)
		g := strings.Fields(post)
		if len(f) < 5 || len(g) < 2 || procfs.UnescapeMountinfo(f[4]) != abs {
			continue
		}
		maj, min, ok := strings.Cut(f[2], ":")
		if !ok {
			continue
		}
		ma, err1 := strconv.ParseUint(maj, 10, 32)
		mi, err2 := strconv.ParseUint(min, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		found = &MountInfo{Major: uint32(ma), Minor: uint32(mi), Mountpoint: abs, FSType: g[0], Source: procfs.UnescapeMountinfo(g[1])}
	}
	if found == nil {
		return MountInfo{}, fmt.Errorf("%s is not a mount point: %w", abs, os.ErrNotExist)
	}
	return *found, nil
}

// ensureFusectl mounts fusectl on ConnectionsDir unless it is there.
func ensureFusectl() error {
	if _, err := os.Stat(filepath.Join(ConnectionsDir, ".")); err != nil {
		return fmt.Errorf("%s: %w (is the fuse module loaded?)", ConnectionsDir, err)
	}
	if m, err := FindMount(ConnectionsDir); err == nil && m.FSType == "fusectl" {
		return nil
	}
	if err := unix.Mount("fusectl", ConnectionsDir, "fusectl", 0, ""); err != nil && err != unix.EBUSY {
		return fmt.Errorf("mount fusectl on %s: %w", ConnectionsDir, err)
	}
	return nil
}

// ConnFile returns the path of file (abort, waiting, max_background,
// congestion_threshold) for connection id, mounting fusectl if needed.
func ConnFile(id uint32, file string) (string, error) {
	if err := ensureFusectl(); err != nil {
		return "", err
	}
	return filepath.Join(ConnectionsDir, strconv.FormatUint(uint64(id), 10), file), nil
}

// Abort aborts connection id through fusectl: every request in flight
// ends with ECONNABORTED, later ones get ENOTCONN, and the server's reads
// fail.
func Abort(id uint32) error {
	p, err := ConnFile(id, "abort")
	if err != nil {
		return err
	}
	if err := os.WriteFile(p, []byte("1"), 0); err != nil {
		return fmt.Errorf("abort FUSE connection %d: %w", id, err)
	}
	return nil
}

// Waiting returns the number of requests waiting on connection id (the
// fusectl "waiting" file).
func Waiting(id uint32) (int, error) {
	p, err := ConnFile(id, "waiting")
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return n, nil
}

// IsGone reports whether err says the FUSE connection ended: ENODEV from
// the device, or ECONNABORTED when FUSE_ABORT_ERROR was negotiated.
func IsGone(err error) bool {
	return errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ECONNABORTED)
}
