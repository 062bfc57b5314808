// Package passthrough is klab's loopback FUSE file system: every operation
// on the mount is done on a backing directory (tmpfs or ext4 in the guest),
// like libfuse's passthrough_ll. Nodes hold O_PATH descriptors of their
// backing inodes, keyed by (st_dev, st_ino) so that hard links share one
// node; file handles are the backing files' descriptors.
//
// Its knobs are those of passthrough_ll — attr and entry timeouts and the
// writeback cache — plus passthrough_hp's kernel passthrough: with
// KernelPassthrough, OPEN and CREATE register the backing file with the
// kernel (FUSE_PASSTHROUGH, needs CAP_SYS_ADMIN) so that reads and writes
// bypass the server.
package passthrough

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
	"klab/guest/fuse/fs"
)

// Options configure the file system.
type Options struct {
	// Root is the backing directory.
	Root string
	// AttrTimeout and EntryTimeout are how long the kernel may cache
	// attributes and names; passthrough_ll's default is 1 s for both.
	AttrTimeout, EntryTimeout time.Duration
	// Writeback asks for the kernel's writeback cache
	// (FUSE_WRITEBACK_CACHE), as passthrough_ll -o writeback.
	Writeback bool
	// KernelPassthrough asks for FUSE_PASSTHROUGH backing files, as
	// passthrough_hp does by default. It excludes Writeback. When the kernel
	// does not offer it, or registering a backing file fails (no
	// CAP_SYS_ADMIN), files are served through the server instead.
	KernelPassthrough bool
	// NoReaddirplus turns READDIRPLUS off.
	NoReaddirplus bool
	// Xattr serves extended attributes, as passthrough_ll -o xattr. It is
	// off by default, as there: the kernel then learns from the first
	// ENOSYS not to ask, whereas with it on every write asks for
	// security.capability first (a GETXATTR per WRITE).
	Xattr bool
	// ZeroCopyReads marks read-only opens FOPEN_IO_URING_ZERO_COPY: on
	// an io_uring transport whose queues are zero-copy, the kernel then
	// lends the client's pages to the server, which reads the backing
	// file straight into them. Files opened for writing are left out, so
	// that WRITE data always arrive in the request.
	ZeroCopyReads bool
	// Log receives warnings; nil discards them.
	Log *slog.Logger
}

// DefaultTimeout is the attr and entry timeout of passthrough_ll.
const DefaultTimeout = time.Second

type devIno struct{ dev, ino uint64 }

type node struct {
	id      uint64
	fd      int // O_PATH
	key     devIno
	symlink bool

	nlookup uint64 // guarded by FS.mu
	name    string // guarded by FS.mu

	// With kernel passthrough, every open of an inode must use the same
	// backing file (as in passthrough_hp): nopen counts the opens that
	// share backingID.
	nopen     int   // guarded by FS.mu
	backingID int32 // guarded by FS.mu
}

type dirHandle struct {
	mu     sync.Mutex // guards everything below
	fd     int
	buf    []byte
	pos    int
	end    int
	offset uint64
}

// FS is the loopback file system. Create it with New and serve it with
// fs.New(f).
type FS struct {
	opts  Options
	log   *slog.Logger
	root  *node
	euid  uint32
	umask uint32

	mu    sync.Mutex // guards the node table's changes and every node's nlookup and name
	nodes *nodeTable // lookups by ID take no lock

	dmu     sync.Mutex // guards dirs, nextDir
	dirs    map[uint64]*dirHandle
	nextDir uint64

	fmu   sync.Mutex // guards files
	files fdSet

	writeback   atomic.Bool
	passthrough atomic.Bool
	warnOnce    sync.Once

	// writtenBytes counts the backing-file bytes Write wrote (see
	// WrittenBytes).
	writtenBytes atomic.Uint64
}

// WrittenBytes is how many bytes of WRITE requests the server wrote to
// backing files. Unlike the process's wchar it leaves out whatever else
// the process, and the children it reaped, wrote. (What it read is counted
// by the transport: dispatch.Stats.ReadBytes.)
func (f *FS) WrittenBytes() uint64 { return f.writtenBytes.Load() }

// New opens the backing directory.
func New(o Options) (*FS, error) {
	if o.Root == "" {
		return nil, errors.New("passthrough: no backing directory")
	}
	if o.Writeback && o.KernelPassthrough {
		return nil, errors.New("passthrough: writeback cache and kernel passthrough exclude each other (as in passthrough_hp)")
	}
	fd, err := unix.Open(o.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("passthrough: open backing directory %s: %w", o.Root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("passthrough: stat %s: %w", o.Root, err)
	}
	f := &FS{
		opts:  o,
		log:   o.Log,
		euid:  uint32(os.Geteuid()),
		umask: processUmask(),
		nodes: newNodeTable(abi.RootID),
		dirs:  make(map[uint64]*dirHandle),
	}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	f.root = &node{fd: fd, key: devIno{st.Dev, st.Ino}, nlookup: 2, name: "/"}
	f.nodes.add(f.root) // the first ID: abi.RootID
	return f, nil
}

// Close closes every descriptor the file system holds, open files
// included (the kernel sends no RELEASE once the connection ended). Use it
// after the connection ended and no handler runs any more.
func (f *FS) Close() error {
	f.fmu.Lock()
	f.files.each(func(fd int) { unix.Close(fd) })
	f.files = fdSet{}
	f.fmu.Unlock()
	f.mu.Lock()
	f.nodes.all(func(n *node) { unix.Close(n.fd) })
	f.nodes = newNodeTable(abi.RootID)
	f.mu.Unlock()
	f.dmu.Lock()
	for _, h := range f.dirs {
		unix.Close(h.fd)
	}
	f.dirs = map[uint64]*dirHandle{}
	f.dmu.Unlock()
	return nil
}

// Nodes returns the number of nodes the kernel holds lookups on (the root
// included).
func (f *FS) Nodes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodes.count
}

// Passthrough reports whether kernel passthrough is in use.
func (f *FS) Passthrough() bool { return f.passthrough.Load() }

// processUmask reads the umask from /proc/self/status without changing it
// (umask(2) is process-wide and would race other goroutines).
func processUmask() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(m)
				}
			}
		}
	}
	return 0o022
}

// Init implements dispatch.Initer: it asks for what passthrough_ll asks
// for, and for the writeback cache and kernel passthrough when configured.
func (f *FS) Init(in *dispatch.Init) error {
	in.Want |= abi.InitAsyncRead | abi.InitParallelDirops | abi.InitAutoInvalData | abi.InitAsyncDIO | abi.InitAtomicOTrunc
	// O_DIRECT opens are direct_io files (finishOpen): this keeps
	// mmap working on them.
	in.Want |= abi.InitDirectIOAllowMmap
	if !f.opts.NoReaddirplus {
		in.Want |= abi.InitDoReaddirplus | abi.InitReaddirplusAuto
	}
	if f.opts.Writeback {
		if in.Offered&abi.InitWritebackCache == 0 {
			f.log.Warn("passthrough: the kernel does not offer the writeback cache")
		} else {
			in.Want |= abi.InitWritebackCache
			f.writeback.Store(true)
		}
	}
	if f.opts.KernelPassthrough {
		if in.Offered&abi.InitPassthrough == 0 {
			f.log.Warn("passthrough: the kernel does not offer FUSE_PASSTHROUGH (CONFIG_FUSE_PASSTHROUGH); serving reads and writes")
		} else {
			in.Want |= abi.InitPassthrough
			// The backing file system has stack depth 0; FUSE adds one.
			in.Out.MaxStackDepth = 1
			f.passthrough.Store(true)
		}
	}
	return nil
}

// node returns the node with ID id, or nil; it takes no lock.
func (f *FS) node(id uint64) *node {
	return f.nodes.get(id)
}

// NodeName implements fs.NodeNamer.
func (f *FS) NodeName(id uint64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.nodes.get(id); n != nil {
		return n.name
	}
	return ""
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

var emptyPath = [1]byte{}

// fstatEmpty is fstatat(fd, "", st, AT_EMPTY_PATH|AT_SYMLINK_NOFOLLOW)
// without allocating the empty path.
func fstatEmpty(fd int, st *unix.Stat_t) error {
	_, _, e := unix.Syscall6(unix.SYS_NEWFSTATAT, uintptr(fd), uintptr(unsafe.Pointer(&emptyPath[0])), uintptr(unsafe.Pointer(st)),
		unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// nameMax is the longest file name (NAME_MAX).
const nameMax = 255

// openat is unix.Openat for a file name, without allocating: the name is
// made NUL-terminated on the stack. LOOKUP and CREATE call it on every
// request.
func openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	var buf [nameMax + 1]byte
	if len(name) > nameMax {
		return unix.Openat(dirfd, name, flags, mode)
	}
	copy(buf[:], name)
	buf[len(name)] = 0
	for {
		fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(flags), uintptr(mode), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(fd), nil
	}
}

// unlinkat is unix.Unlinkat for a file name, without allocating.
func unlinkat(dirfd int, name string, flags int) error {
	var buf [nameMax + 1]byte
	if len(name) > nameMax {
		return unix.Unlinkat(dirfd, name, flags)
	}
	copy(buf[:], name)
	buf[len(name)] = 0
	if _, _, e := unix.Syscall(unix.SYS_UNLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(flags)); e != 0 {
		return e
	}
	return nil
}

func procPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

func fillAttr(a *abi.Attr, st *unix.Stat_t) {
	a.Ino = st.Ino
	a.Size = uint64(st.Size)
	a.Blocks = uint64(st.Blocks)
	a.Atime, a.Atimensec = uint64(st.Atim.Sec), uint32(st.Atim.Nsec)
	a.Mtime, a.Mtimensec = uint64(st.Mtim.Sec), uint32(st.Mtim.Nsec)
	a.Ctime, a.Ctimensec = uint64(st.Ctim.Sec), uint32(st.Ctim.Nsec)
	a.Mode = st.Mode
	a.Nlink = uint32(st.Nlink)
	a.UID, a.GID = st.Uid, st.Gid
	a.Rdev = uint32(st.Rdev)
	a.Blksize = uint32(st.Blksize)
}

func split(d time.Duration) (uint64, uint32) {
	if d <= 0 {
		return 0, 0
	}
	return uint64(d / time.Second), uint32(d % time.Second)
}

func (f *FS) attrTimeout() time.Duration {
	if f.opts.AttrTimeout < 0 {
		return 0
	}
	return f.opts.AttrTimeout
}

func (f *FS) fillEntry(out *abi.EntryOut, n *node, st *unix.Stat_t) {
	out.NodeID = n.id
	out.EntryValid, out.EntryValidNsec = split(f.opts.EntryTimeout)
	out.AttrValid, out.AttrValidNsec = split(f.attrTimeout())
	fillAttr(&out.Attr, st)
}

// lookup finds name under parent and takes one lookup reference on it.
func (f *FS) lookup(parent *node, name string, out *abi.EntryOut) syscall.Errno {
	fd, err := openat(parent.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return errno(err)
	}
	var st unix.Stat_t
	if err := fstatEmpty(fd, &st); err != nil {
		unix.Close(fd)
		return errno(err)
	}
	key := devIno{st.Dev, st.Ino}
	f.mu.Lock()
	n := f.nodes.byKey(key)
	if n != nil {
		n.nlookup++
		if n.name != name {
			n.name = strings.Clone(name)
		}
	} else {
		n = &node{fd: fd, key: key, nlookup: 1, name: strings.Clone(name), symlink: st.Mode&unix.S_IFMT == unix.S_IFLNK}
		if !f.nodes.add(n) {
			f.mu.Unlock()
			unix.Close(fd)
			return syscall.ENFILE
		}
	}
	f.mu.Unlock()
	if n.fd != fd {
		unix.Close(fd)
	}
	f.fillEntry(out, n, &st)
	return 0
}

// Lookup implements fs.Lookuper.
func (f *FS) Lookup(r *fs.Request, parent uint64, name string, out *abi.EntryOut) syscall.Errno {
	p := f.node(parent)
	if p == nil {
		return syscall.ESTALE
	}
	return f.lookup(p, name, out)
}

// Forget implements fs.Forgetter.
func (f *FS) Forget(id, n uint64) {
	f.mu.Lock()
	nd := f.nodes.get(id)
	if nd == nil || id == abi.RootID {
		f.mu.Unlock()
		return
	}
	if nd.nlookup > n {
		nd.nlookup -= n
		f.mu.Unlock()
		return
	}
	f.nodes.remove(nd)
	f.mu.Unlock()
	unix.Close(nd.fd)
}

// Getattr implements fs.Getattrer.
func (f *FS) Getattr(r *fs.Request, in *abi.GetattrIn, out *abi.AttrOut) syscall.Errno {
	var st unix.Stat_t
	var err error
	if in.GetattrFlags&abi.GetattrFh != 0 {
		err = unix.Fstat(int(in.Fh), &st)
	} else {
		n := f.node(r.Header.NodeID)
		if n == nil {
			return syscall.ESTALE
		}
		err = fstatEmpty(n.fd, &st)
	}
	if err != nil {
		return errno(err)
	}
	out.AttrValid, out.AttrValidNsec = split(f.attrTimeout())
	fillAttr(&out.Attr, &st)
	return 0
}

func timespec(sec uint64, nsec uint32, set, now bool) unix.Timespec {
	switch {
	case now:
		return unix.Timespec{Nsec: unix.UTIME_NOW}
	case set:
		return unix.Timespec{Sec: int64(sec), Nsec: int64(nsec)}
	default:
		return unix.Timespec{Nsec: unix.UTIME_OMIT}
	}
}

// Setattr implements fs.Setattrer.
func (f *FS) Setattr(r *fs.Request, in *abi.SetattrIn, out *abi.AttrOut) syscall.Errno {
	n := f.node(r.Header.NodeID)
	if n == nil {
		return syscall.ESTALE
	}
	fh := -1
	if in.Valid&abi.FattrFh != 0 {
		fh = int(in.Fh)
	}
	if in.Valid&abi.FattrMode != 0 {
		var err error
		if fh >= 0 {
			err = unix.Fchmod(fh, in.Mode&0o7777)
		} else {
			err = unix.Fchmodat(unix.AT_FDCWD, procPath(n.fd), in.Mode&0o7777, 0)
		}
		if err != nil {
			return errno(err)
		}
	}
	if in.Valid&(abi.FattrUID|abi.FattrGID) != 0 {
		uid, gid := -1, -1
		if in.Valid&abi.FattrUID != 0 {
			uid = int(in.UID)
		}
		if in.Valid&abi.FattrGID != 0 {
			gid = int(in.GID)
		}
		if err := unix.Fchownat(n.fd, "", uid, gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return errno(err)
		}
	}
	if in.Valid&abi.FattrSize != 0 {
		var err error
		if fh >= 0 {
			err = unix.Ftruncate(fh, int64(in.Size))
		} else {
			err = unix.Truncate(procPath(n.fd), int64(in.Size))
		}
		if err != nil {
			return errno(err)
		}
	}
	if in.Valid&(abi.FattrAtime|abi.FattrMtime|abi.FattrAtimeNow|abi.FattrMtimeNow) != 0 {
		ts := [2]unix.Timespec{
			timespec(in.Atime, in.Atimensec, in.Valid&abi.FattrAtime != 0, in.Valid&abi.FattrAtimeNow != 0),
			timespec(in.Mtime, in.Mtimensec, in.Valid&abi.FattrMtime != 0, in.Valid&abi.FattrMtimeNow != 0),
		}
		var e syscall.Errno
		if fh >= 0 {
			_, _, e = unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fh), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
		} else {
			_, _, e = unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(n.fd), uintptr(unsafe.Pointer(&emptyPath[0])), uintptr(unsafe.Pointer(&ts[0])), unix.AT_EMPTY_PATH, 0, 0)
			if e == unix.EINVAL && !n.symlink {
				// Kernels without AT_EMPTY_PATH for utimensat.
				e = errno(unix.UtimesNanoAt(unix.AT_FDCWD, procPath(n.fd), ts[:], 0))
			}
		}
		if e != 0 {
			return e
		}
	}
	return f.Getattr(r, &abi.GetattrIn{}, out)
}

// Readlink implements fs.Readlinker.
func (f *FS) Readlink(r *fs.Request) ([]byte, syscall.Errno) {
	n := f.node(r.Header.NodeID)
	if n == nil {
		return nil, syscall.ESTALE
	}
	buf := r.Scratch(unix.PathMax + 1)
	k, err := unix.Readlinkat(n.fd, "", buf)
	if err != nil {
		return nil, errno(err)
	}
	return buf[:k], 0
}

// owned gives a new object the caller's ownership when the server runs as
// root and the caller is someone else (a non-root server creates files as
// itself, like passthrough_ll).
func (f *FS) owned(r *fs.Request, parent *node, dirfd int, name string, fd int) {
	if f.euid != 0 || (r.Header.UID == 0 && r.Header.GID == 0) {
		return
	}
	gid := int(r.Header.GID)
	var pst unix.Stat_t
	if fstatEmpty(parent.fd, &pst) == nil && pst.Mode&unix.S_ISGID != 0 {
		gid = -1 // inherited from a setgid directory
	}
	if fd >= 0 {
		_ = unix.Fchown(fd, int(r.Header.UID), gid)
	} else {
		_ = unix.Fchownat(dirfd, name, int(r.Header.UID), gid, unix.AT_SYMLINK_NOFOLLOW)
	}
}

// fixMode undoes the server's own umask on a new object: the kernel
// already applied the caller's.
func (f *FS) fixMode(dirfd int, name string, fd int, mode uint32) {
	if mode&f.umask&0o777 == 0 {
		return
	}
	if fd >= 0 {
		_ = unix.Fchmod(fd, mode&0o7777)
	} else {
		_ = unix.Fchmodat(dirfd, name, mode&0o7777, 0)
	}
}

// Symlink implements fs.Symlinker.
func (f *FS) Symlink(r *fs.Request, parent uint64, target, name string, out *abi.EntryOut) syscall.Errno {
	p := f.node(parent)
	if p == nil {
		return syscall.ESTALE
	}
	if err := unix.Symlinkat(target, p.fd, name); err != nil {
		return errno(err)
	}
	f.owned(r, p, p.fd, name, -1)
	return f.lookup(p, name, out)
}

// Mknod implements fs.Mknoder.
func (f *FS) Mknod(r *fs.Request, parent uint64, in *abi.MknodIn, name string, out *abi.EntryOut) syscall.Errno {
	p := f.node(parent)
	if p == nil {
		return syscall.ESTALE
	}
	if err := unix.Mknodat(p.fd, name, in.Mode, int(in.Rdev)); err != nil {
		return errno(err)
	}
	f.fixMode(p.fd, name, -1, in.Mode)
	f.owned(r, p, p.fd, name, -1)
	return f.lookup(p, name, out)
}

// Mkdir implements fs.Mkdirer.
func (f *FS) Mkdir(r *fs.Request, parent uint64, in *abi.MkdirIn, name string, out *abi.EntryOut) syscall.Errno {
	p := f.node(parent)
	if p == nil {
		return syscall.ESTALE
	}
	if err := unix.Mkdirat(p.fd, name, in.Mode); err != nil {
		return errno(err)
	}
	f.fixMode(p.fd, name, -1, in.Mode)
	f.owned(r, p, p.fd, name, -1)
	return f.lookup(p, name, out)
}

// Unlink implements fs.Unlinker.
func (f *FS) Unlink(r *fs.Request, parent uint64, name string) syscall.Errno {
	p := f.node(parent)
	if p == nil {
		return syscall.ESTALE
	}
	return errno(unlinkat(p.fd, name, 0))
}

// Rmdir implements fs.Rmdirer.
func (f *FS) Rmdir(r *fs.Request, parent uint64, name string) syscall.Errno {
	p := f.node(parent)
	if p == nil {
		return syscall.ESTALE
	}
	return errno(unlinkat(p.fd, name, unix.AT_REMOVEDIR))
}

// Rename implements fs.Renamer.
func (f *FS) Rename(r *fs.Request, olddir uint64, oldname string, newdir uint64, newname string, flags uint32) syscall.Errno {
	op, np := f.node(olddir), f.node(newdir)
	if op == nil || np == nil {
		return syscall.ESTALE
	}
	return errno(unix.Renameat2(op.fd, oldname, np.fd, newname, uint(flags)))
}

// Link implements fs.Linker.
func (f *FS) Link(r *fs.Request, parent uint64, in *abi.LinkIn, name string, out *abi.EntryOut) syscall.Errno {
	p, n := f.node(parent), f.node(in.Oldnodeid)
	if p == nil || n == nil {
		return syscall.ESTALE
	}
	err := unix.Linkat(n.fd, "", p.fd, name, unix.AT_EMPTY_PATH)
	if err == unix.ENOENT || err == unix.EPERM {
		// AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH.
		err = unix.Linkat(unix.AT_FDCWD, procPath(n.fd), p.fd, name, unix.AT_SYMLINK_FOLLOW)
	}
	if err != nil {
		return errno(err)
	}
	return f.lookup(p, name, out)
}

// openFlags adapts open(2) flags for the backing file.
func (f *FS) openFlags(flags uint32) int {
	fl := int(flags) &^ unix.O_NOFOLLOW
	fl |= unix.O_CLOEXEC
	if !f.passthrough.Load() {
		// The kernel already does O_DIRECT on the FUSE side; the data we
		// get sits at arbitrary offsets of the request buffer, which
		// O_DIRECT on the backing file would refuse.
		fl &^= unix.O_DIRECT
	}
	if f.writeback.Load() {
		// The kernel may read pages of a write-only file, and it handles
		// O_APPEND itself.
		if fl&unix.O_ACCMODE == unix.O_WRONLY {
			fl = fl&^unix.O_ACCMODE | unix.O_RDWR
		}
		fl &^= unix.O_APPEND
	}
	return fl
}

// finishOpen fills out for backing descriptor fd of node n, opened with
// open(2) flags flags.
func (f *FS) finishOpen(r *fs.Request, n *node, fd int, flags uint32, out *abi.OpenOut) {
	out.Fh = uint64(fd)
	f.fmu.Lock()
	f.files.add(fd)
	f.fmu.Unlock()
	if !f.passthrough.Load() {
		if flags&unix.O_DIRECT != 0 {
			// An O_DIRECT open bypasses the page cache either way; as a
			// direct_io file, its reads and writes go the kernel's
			// synchronous direct path (the client waits for its own
			// request and releases its pages itself) instead of the
			// asynchronous one, whose completion work the server's
			// thread would do, and writes to one file may run in
			// parallel. passthrough_hp does the same.
			out.OpenFlags |= abi.FopenDirectIO | abi.FopenParallelDirectWrites
		}
		if f.opts.ZeroCopyReads && flags&unix.O_ACCMODE == unix.O_RDONLY {
			out.OpenFlags |= abi.FopenIOURingZeroCopy
		}
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n.backingID == 0 {
		id, err := r.OpenBacking(fd)
		if err != nil {
			f.warnOnce.Do(func() {
				f.log.Warn("passthrough: registering a backing file failed; serving reads and writes instead", "err", err)
			})
			f.passthrough.Store(false)
			return
		}
		n.backingID = id
	}
	n.nopen++
	out.BackingID = n.backingID
	out.OpenFlags |= abi.FopenPassthrough
}

// Open implements fs.Opener.
func (f *FS) Open(r *fs.Request, in *abi.OpenIn, out *abi.OpenOut) syscall.Errno {
	n := f.node(r.Header.NodeID)
	if n == nil {
		return syscall.ESTALE
	}
	fd, err := unix.Openat(unix.AT_FDCWD, procPath(n.fd), f.openFlags(in.Flags), 0)
	if err != nil {
		return errno(err)
	}
	f.finishOpen(r, n, fd, in.Flags, out)
	return 0
}

// Create implements fs.Creater.
func (f *FS) Create(r *fs.Request, parent uint64, in *abi.CreateIn, name string, entry *abi.EntryOut, open *abi.OpenOut) syscall.Errno {
	p := f.node(parent)
	if p == nil {
		return syscall.ESTALE
	}
	fd, err := openat(p.fd, name, f.openFlags(in.Flags)|unix.O_CREAT, in.Mode&0o7777)
	if err != nil {
		return errno(err)
	}
	f.fixMode(p.fd, name, fd, in.Mode)
	f.owned(r, p, p.fd, name, fd)
	if e := f.lookup(p, name, entry); e != 0 {
		unix.Close(fd)
		return e
	}
	f.finishOpen(r, f.node(entry.NodeID), fd, in.Flags, open)
	return 0
}

// Read implements fs.Reader.
func (f *FS) Read(r *fs.Request, in *abi.ReadIn) ([]byte, syscall.Errno) {
	buf := r.Scratch(int(in.Size))
	for {
		n, err := unix.Pread(int(in.Fh), buf, int64(in.Offset))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, errno(err)
		}
		return buf[:n], 0
	}
}

// ReadFd implements fs.FdReader: the data come straight from the backing
// file, which the transport may splice to the kernel.
func (f *FS) ReadFd(r *fs.Request, in *abi.ReadIn) (int, int64, syscall.Errno) {
	return int(in.Fh), int64(in.Offset), 0
}

// Write implements fs.Writer.
func (f *FS) Write(r *fs.Request, in *abi.WriteIn, data []byte) (uint32, syscall.Errno) {
	for {
		n, err := unix.Pwrite(int(in.Fh), data, int64(in.Offset))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, errno(err)
		}
		f.writtenBytes.Add(uint64(n))
		return uint32(n), 0
	}
}

// Flush implements fs.Flusher: close a duplicate, so that the backing
// file system sees a close(2) (passthrough_ll does the same).
func (f *FS) Flush(r *fs.Request, in *abi.FlushIn) syscall.Errno {
	fd, err := unix.Dup(int(in.Fh))
	if err != nil {
		return errno(err)
	}
	return errno(unix.Close(fd))
}

// Release implements fs.Releaser.
func (f *FS) Release(r *fs.Request, in *abi.ReleaseIn) syscall.Errno {
	fd := int(in.Fh)
	if f.Passthrough() {
		var id int32
		f.mu.Lock()
		if n := f.nodes.get(r.Header.NodeID); n != nil && n.nopen > 0 {
			n.nopen--
			if n.nopen == 0 {
				id, n.backingID = n.backingID, 0
			}
		}
		f.mu.Unlock()
		if id != 0 {
			_ = r.CloseBacking(id)
		}
	}
	f.fmu.Lock()
	ok := f.files.remove(fd)
	f.fmu.Unlock()
	if ok {
		unix.Close(fd)
	}
	return 0
}

// Fsync implements fs.Fsyncer.
func (f *FS) Fsync(r *fs.Request, in *abi.FsyncIn) syscall.Errno {
	if in.FsyncFlags&abi.FsyncFdatasync != 0 {
		return errno(unix.Fdatasync(int(in.Fh)))
	}
	return errno(unix.Fsync(int(in.Fh)))
}

// Statfs implements fs.Statfser.
func (f *FS) Statfs(r *fs.Request, out *abi.Kstatfs) syscall.Errno {
	n := f.node(r.Header.NodeID)
	if n == nil {
		n = f.root
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(n.fd, &st); err != nil {
		return errno(err)
	}
	*out = abi.Kstatfs{
		Blocks: st.Blocks, Bfree: st.Bfree, Bavail: st.Bavail, Files: st.Files, Ffree: st.Ffree,
		Bsize: uint32(st.Bsize), Namelen: uint32(st.Namelen), Frsize: uint32(st.Frsize),
	}
	return 0
}

// Opendir implements fs.Opendirer.
func (f *FS) Opendir(r *fs.Request, in *abi.OpenIn, out *abi.OpenOut) syscall.Errno {
	n := f.node(r.Header.NodeID)
	if n == nil {
		return syscall.ESTALE
	}
	fd, err := unix.Openat(n.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return errno(err)
	}
	h := &dirHandle{fd: fd}
	f.dmu.Lock()
	f.nextDir++
	id := f.nextDir
	f.dirs[id] = h
	f.dmu.Unlock()
	out.Fh = id
	return 0
}

// Releasedir implements fs.Releasedirer.
func (f *FS) Releasedir(r *fs.Request, in *abi.ReleaseIn) syscall.Errno {
	f.dmu.Lock()
	h := f.dirs[in.Fh]
	delete(f.dirs, in.Fh)
	f.dmu.Unlock()
	if h != nil {
		unix.Close(h.fd)
	}
	return 0
}

// Fsyncdir implements fs.Fsyncdirer.
func (f *FS) Fsyncdir(r *fs.Request, in *abi.FsyncIn) syscall.Errno {
	f.dmu.Lock()
	h := f.dirs[in.Fh]
	f.dmu.Unlock()
	if h == nil {
		return syscall.EBADF
	}
	if in.FsyncFlags&abi.FsyncFdatasync != 0 {
		return errno(unix.Fdatasync(h.fd))
	}
	return errno(unix.Fsync(h.fd))
}

// Readdir implements fs.Readdirer.
func (f *FS) Readdir(r *fs.Request, in *abi.ReadIn, plus bool, out *fs.DirList) syscall.Errno {
	f.dmu.Lock()
	h := f.dirs[in.Fh]
	f.dmu.Unlock()
	if h == nil {
		return syscall.EBADF
	}
	var parent *node
	if plus {
		if parent = f.node(r.Header.NodeID); parent == nil {
			return syscall.ESTALE
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if in.Offset != h.offset {
		if _, err := unix.Seek(h.fd, int64(in.Offset), 0); err != nil {
			return errno(err)
		}
		h.offset, h.pos, h.end = in.Offset, 0, 0
	}
	if h.buf == nil {
		h.buf = make([]byte, 32<<10)
	}
	for {
		if h.pos >= h.end {
			n, err := unix.Getdents(h.fd, h.buf)
			if err != nil {
				return errno(err)
			}
			if n == 0 {
				return 0
			}
			h.pos, h.end = 0, n
		}
		b := h.buf[h.pos:h.end]
		ino := *(*uint64)(unsafe.Pointer(&b[0]))
		off := *(*uint64)(unsafe.Pointer(&b[8]))
		reclen := int(*(*uint16)(unsafe.Pointer(&b[16])))
		typ := uint32(b[18])
		nameB, _ := abi.CString(b[19:reclen])
		name := string(nameB)
		if !out.Fits(name, plus) {
			return 0
		}
		if plus {
			var e abi.EntryOut
			if name == "." || name == ".." {
				e.Attr.Ino = ino
				e.Attr.Mode = typ << 12
			} else if errno := f.lookup(parent, name, &e); errno != 0 {
				if errno != syscall.ENOENT {
					return errno
				}
				// Removed since getdents: skip it.
				h.pos += reclen
				h.offset = off
				continue
			}
			out.AddPlus(&e, off, typ, name)
		} else {
			out.Add(ino, off, typ, name)
		}
		h.pos += reclen
		h.offset = off
	}
}

// Fallocate implements fs.Fallocater.
func (f *FS) Fallocate(r *fs.Request, in *abi.FallocateIn) syscall.Errno {
	return errno(unix.Fallocate(int(in.Fh), in.Mode, int64(in.Offset), int64(in.Length)))
}

// Lseek implements fs.Lseeker.
func (f *FS) Lseek(r *fs.Request, in *abi.LseekIn, out *abi.LseekOut) syscall.Errno {
	off, err := unix.Seek(int(in.Fh), int64(in.Offset), int(in.Whence))
	if err != nil {
		return errno(err)
	}
	out.Offset = uint64(off)
	return 0
}

// CopyFileRange implements fs.CopyFileRanger.
func (f *FS) CopyFileRange(r *fs.Request, in *abi.CopyFileRangeIn) (uint64, syscall.Errno) {
	offIn, offOut := int64(in.OffIn), int64(in.OffOut)
	n, err := unix.CopyFileRange(int(in.FhIn), &offIn, int(in.FhOut), &offOut, int(in.Len), int(in.Flags))
	if err != nil {
		return 0, errno(err)
	}
	return uint64(n), 0
}

// xattrPath returns the path extended attribute calls use for the node of
// r; symlinks have none that can be reached race-free (as passthrough_ll).
func (f *FS) xattrPath(r *fs.Request) (string, syscall.Errno) {
	if !f.opts.Xattr {
		return "", syscall.ENOSYS
	}
	n := f.node(r.Header.NodeID)
	if n == nil {
		return "", syscall.ESTALE
	}
	if n.symlink {
		return "", syscall.EPERM
	}
	return procPath(n.fd), 0
}

// Getxattr implements fs.Xattrer.
func (f *FS) Getxattr(r *fs.Request, name string, dst []byte) (int, syscall.Errno) {
	p, e := f.xattrPath(r)
	if e != 0 {
		return 0, e
	}
	n, err := unix.Getxattr(p, name, dst)
	return n, errno(err)
}

// Listxattr implements fs.Xattrer.
func (f *FS) Listxattr(r *fs.Request, dst []byte) (int, syscall.Errno) {
	p, e := f.xattrPath(r)
	if e != 0 {
		return 0, e
	}
	n, err := unix.Listxattr(p, dst)
	return n, errno(err)
}

// Setxattr implements fs.Xattrer.
func (f *FS) Setxattr(r *fs.Request, name string, value []byte, flags uint32) syscall.Errno {
	p, e := f.xattrPath(r)
	if e != 0 {
		return e
	}
	return errno(unix.Setxattr(p, name, value, int(flags)))
}

// Removexattr implements fs.Xattrer.
func (f *FS) Removexattr(r *fs.Request, name string) syscall.Errno {
	p, e := f.xattrPath(r)
	if e != 0 {
		return e
	}
	return errno(unix.Removexattr(p, name))
}
