// Package fs turns a file system written against small per-opcode
// interfaces (Lookuper, Getattrer, Reader, ...) into a dispatch.Handler.
// The adapter decodes each request's arguments, calls the method, and
// encodes the reply; an opcode whose interface the file system does not
// implement is answered with ENOSYS, and the kernel then stops sending most
// of them.
//
// Methods return a syscall.Errno: 0 for success. They run on the
// transport's goroutine and should not block for long; a server that needs
// to hold requests (see package stuck) wraps the Handler instead.
//
// Names (and symlink targets) are passed without copying: the strings
// point into the request's buffer and are valid only until the method
// returns. A file system that keeps one must copy it (strings.Clone).
package fs

import (
	"syscall"
	"unsafe"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
)

// Request is the request a method serves; methods may read its Header
// (caller's uid, gid and pid) and use Scratch and OpenBacking.
type Request = dispatch.Request

// Lookuper serves LOOKUP.
type Lookuper interface {
	// Lookup finds name in directory parent, takes one lookup reference
	// on it and fills out.
	Lookup(r *Request, parent uint64, name string, out *abi.EntryOut) syscall.Errno
}

// Forgetter serves FORGET and BATCH_FORGET.
type Forgetter interface {
	// Forget drops n lookup references of node.
	Forget(node, n uint64)
}

// Getattrer serves GETATTR.
type Getattrer interface {
	// Getattr fills out with the attributes of r's node (or of the open
	// file in.Fh when in says so).
	Getattr(r *Request, in *abi.GetattrIn, out *abi.AttrOut) syscall.Errno
}

// Setattrer serves SETATTR.
type Setattrer interface {
	// Setattr changes what in.Valid names and fills out with the result.
	Setattr(r *Request, in *abi.SetattrIn, out *abi.AttrOut) syscall.Errno
}

// Readlinker serves READLINK.
type Readlinker interface {
	// Readlink returns the target of r's node.
	Readlink(r *Request) ([]byte, syscall.Errno)
}

// Symlinker serves SYMLINK.
type Symlinker interface {
	// Symlink creates name in parent pointing to target.
	Symlink(r *Request, parent uint64, target, name string, out *abi.EntryOut) syscall.Errno
}

// Mknoder serves MKNOD.
type Mknoder interface {
	// Mknod creates the special file name in parent.
	Mknod(r *Request, parent uint64, in *abi.MknodIn, name string, out *abi.EntryOut) syscall.Errno
}

// Mkdirer serves MKDIR.
type Mkdirer interface {
	// Mkdir creates the directory name in parent.
	Mkdir(r *Request, parent uint64, in *abi.MkdirIn, name string, out *abi.EntryOut) syscall.Errno
}

// Unlinker serves UNLINK.
type Unlinker interface {
	// Unlink removes name from parent.
	Unlink(r *Request, parent uint64, name string) syscall.Errno
}

// Rmdirer serves RMDIR.
type Rmdirer interface {
	// Rmdir removes the empty directory name from parent.
	Rmdir(r *Request, parent uint64, name string) syscall.Errno
}

// Renamer serves RENAME and RENAME2.
type Renamer interface {
	// Rename moves olddir/oldname to newdir/newname; flags are
	// renameat2's (RENAME_NOREPLACE, RENAME_EXCHANGE, ...).
	Rename(r *Request, olddir uint64, oldname string, newdir uint64, newname string, flags uint32) syscall.Errno
}

// Linker serves LINK.
type Linker interface {
	// Link makes name in parent a new name for node in.Oldnodeid.
	Link(r *Request, parent uint64, in *abi.LinkIn, name string, out *abi.EntryOut) syscall.Errno
}

// Opener serves OPEN.
type Opener interface {
	// Open opens r's node with in.Flags and fills out (file handle,
	// FOPEN_* flags, backing ID).
	Open(r *Request, in *abi.OpenIn, out *abi.OpenOut) syscall.Errno
}

// Reader serves READ.
type Reader interface {
	// Read returns up to in.Size bytes at in.Offset of file in.Fh,
	// typically in a slice of r.Scratch(int(in.Size)).
	Read(r *Request, in *abi.ReadIn) ([]byte, syscall.Errno)
}

// FdReader serves READ from a file descriptor: the transport then sends
// the data without copying them through the server where it can (see
// dispatch.Request.ReplyFd). It takes precedence over Reader.
type FdReader interface {
	// ReadFd returns the descriptor and offset that in.Size bytes at
	// in.Offset of file in.Fh are read from.
	ReadFd(r *Request, in *abi.ReadIn) (fd int, off int64, errno syscall.Errno)
}

// Writer serves WRITE.
type Writer interface {
	// Write writes data at in.Offset of file in.Fh and returns how many
	// bytes it wrote.
	Write(r *Request, in *abi.WriteIn, data []byte) (uint32, syscall.Errno)
}

// Statfser serves STATFS.
type Statfser interface {
	// Statfs fills out with the file system's statistics.
	Statfs(r *Request, out *abi.Kstatfs) syscall.Errno
}

// Releaser serves RELEASE.
type Releaser interface {
	// Release closes file in.Fh; its reply only acknowledges.
	Release(r *Request, in *abi.ReleaseIn) syscall.Errno
}

// Fsyncer serves FSYNC.
type Fsyncer interface {
	// Fsync syncs file in.Fh (data only with FUSE_FSYNC_FDATASYNC).
	Fsync(r *Request, in *abi.FsyncIn) syscall.Errno
}

// Flusher serves FLUSH.
type Flusher interface {
	// Flush is called on each close(2) of file in.Fh.
	Flush(r *Request, in *abi.FlushIn) syscall.Errno
}

// Opendirer serves OPENDIR.
type Opendirer interface {
	// Opendir opens r's node as a directory and fills out.
	Opendir(r *Request, in *abi.OpenIn, out *abi.OpenOut) syscall.Errno
}

// Readdirer serves READDIR and READDIRPLUS.
type Readdirer interface {
	// Readdir adds the entries of directory in.Fh from in.Offset to out
	// until it is full; with plus, each entry but "." and ".." is looked
	// up (and counts as a lookup).
	Readdir(r *Request, in *abi.ReadIn, plus bool, out *DirList) syscall.Errno
}

// Releasedirer serves RELEASEDIR.
type Releasedirer interface {
	// Releasedir closes directory handle in.Fh.
	Releasedir(r *Request, in *abi.ReleaseIn) syscall.Errno
}

// Fsyncdirer serves FSYNCDIR.
type Fsyncdirer interface {
	// Fsyncdir syncs directory handle in.Fh.
	Fsyncdir(r *Request, in *abi.FsyncIn) syscall.Errno
}

// Accesser serves ACCESS.
type Accesser interface {
	// Access checks mask (R_OK, W_OK, X_OK) for r's caller on r's node.
	Access(r *Request, mask uint32) syscall.Errno
}

// Creater serves CREATE.
type Creater interface {
	// Create creates and opens name in parent, filling entry and open.
	Create(r *Request, parent uint64, in *abi.CreateIn, name string, entry *abi.EntryOut, open *abi.OpenOut) syscall.Errno
}

// Fallocater serves FALLOCATE.
type Fallocater interface {
	// Fallocate allocates or punches the range of in on file in.Fh.
	Fallocate(r *Request, in *abi.FallocateIn) syscall.Errno
}

// Lseeker serves LSEEK.
type Lseeker interface {
	// Lseek answers SEEK_DATA and SEEK_HOLE on file in.Fh.
	Lseek(r *Request, in *abi.LseekIn, out *abi.LseekOut) syscall.Errno
}

// CopyFileRanger serves COPY_FILE_RANGE.
type CopyFileRanger interface {
	// CopyFileRange copies in.Len bytes between open files and returns
	// how many it copied.
	CopyFileRange(r *Request, in *abi.CopyFileRangeIn) (uint64, syscall.Errno)
}

// Xattrer serves the extended attribute opcodes on r's node.
type Xattrer interface {
	// Getxattr copies the value of name into dst, or with a nil dst
	// returns its size.
	Getxattr(r *Request, name string, dst []byte) (int, syscall.Errno)
	// Listxattr copies the NUL-separated names into dst, or with a nil
	// dst returns their size.
	Listxattr(r *Request, dst []byte) (int, syscall.Errno)
	// Setxattr sets name to value (flags XATTR_CREATE, XATTR_REPLACE).
	Setxattr(r *Request, name string, value []byte, flags uint32) syscall.Errno
	// Removexattr removes name.
	Removexattr(r *Request, name string) syscall.Errno
}

// NodeNamer is implemented by file systems that can name a node. Rule-based
// servers use it to match requests that carry only a node ID.
type NodeNamer interface {
	// NodeName returns the last path component node was looked up under,
	// or "" for an unknown node.
	NodeName(node uint64) string
}

type opFunc func(r *Request)

// Handler is a dispatch.Handler built by New.
type Handler struct {
	fsys any
	ops  [abi.OpMax]opFunc
}

// New returns a Handler serving fsys, which implements any subset of this
// package's interfaces (and dispatch.Initer to take part in INIT).
func New(fsys any) *Handler {
	h := &Handler{fsys: fsys}
	if x, ok := fsys.(Lookuper); ok {
		h.ops[abi.OpLookup] = func(r *Request) {
			out := outOf[abi.EntryOut](r)
			name, _ := abi.CString(r.Arg)
			reply(r, x.Lookup(r, r.Header.NodeID, str(name), out), out)
		}
	}
	if x, ok := fsys.(Forgetter); ok {
		h.ops[abi.OpForget] = func(r *Request) {
			if in := abi.View[abi.ForgetIn](r.Arg); in != nil {
				x.Forget(r.Header.NodeID, in.Nlookup)
			}
		}
		h.ops[abi.OpBatchForget] = func(r *Request) {
			in := abi.View[abi.BatchForgetIn](r.Arg)
			if in == nil {
				return
			}
			rest := r.Arg[8:]
			for i := uint32(0); i < in.Count; i++ {
				one := abi.View[abi.ForgetOne](rest)
				if one == nil {
					return
				}
				x.Forget(one.NodeID, one.Nlookup)
				rest = rest[16:]
			}
		}
	}
	if x, ok := fsys.(Getattrer); ok {
		h.ops[abi.OpGetattr] = func(r *Request) {
			in := abi.View[abi.GetattrIn](r.Arg)
			if in == nil {
				in = new(abi.GetattrIn) // kernels before 7.9
			}
			out := outOf[abi.AttrOut](r)
			reply(r, x.Getattr(r, in, out), out)
		}
	}
	if x, ok := fsys.(Setattrer); ok {
		h.ops[abi.OpSetattr] = func(r *Request) {
			in := abi.View[abi.SetattrIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			out := outOf[abi.AttrOut](r)
			reply(r, x.Setattr(r, in, out), out)
		}
	}
	if x, ok := fsys.(Readlinker); ok {
		h.ops[abi.OpReadlink] = func(r *Request) {
			target, errno := x.Readlink(r)
			_ = r.ReplyData(errno, nil, target)
		}
	}
	if x, ok := fsys.(Symlinker); ok {
		h.ops[abi.OpSymlink] = func(r *Request) {
			name, rest := abi.CString(r.Arg)
			target, _ := abi.CString(rest)
			out := outOf[abi.EntryOut](r)
			reply(r, x.Symlink(r, r.Header.NodeID, str(target), str(name), out), out)
		}
	}
	if x, ok := fsys.(Mknoder); ok {
		h.ops[abi.OpMknod] = func(r *Request) {
			in := abi.View[abi.MknodIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			name, _ := abi.CString(r.Arg[16:])
			out := outOf[abi.EntryOut](r)
			reply(r, x.Mknod(r, r.Header.NodeID, in, str(name), out), out)
		}
	}
	if x, ok := fsys.(Mkdirer); ok {
		h.ops[abi.OpMkdir] = func(r *Request) {
			in := abi.View[abi.MkdirIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			name, _ := abi.CString(r.Arg[8:])
			out := outOf[abi.EntryOut](r)
			reply(r, x.Mkdir(r, r.Header.NodeID, in, str(name), out), out)
		}
	}
	if x, ok := fsys.(Unlinker); ok {
		h.ops[abi.OpUnlink] = func(r *Request) {
			name, _ := abi.CString(r.Arg)
			_ = r.Reply(x.Unlink(r, r.Header.NodeID, str(name)), nil)
		}
	}
	if x, ok := fsys.(Rmdirer); ok {
		h.ops[abi.OpRmdir] = func(r *Request) {
			name, _ := abi.CString(r.Arg)
			_ = r.Reply(x.Rmdir(r, r.Header.NodeID, str(name)), nil)
		}
	}
	if x, ok := fsys.(Renamer); ok {
		h.ops[abi.OpRename] = func(r *Request) {
			in := abi.View[abi.RenameIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			oldName, rest := abi.CString(r.Arg[8:])
			newName, _ := abi.CString(rest)
			_ = r.Reply(x.Rename(r, r.Header.NodeID, str(oldName), in.Newdir, str(newName), 0), nil)
		}
		h.ops[abi.OpRename2] = func(r *Request) {
			in := abi.View[abi.Rename2In](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			oldName, rest := abi.CString(r.Arg[16:])
			newName, _ := abi.CString(rest)
			_ = r.Reply(x.Rename(r, r.Header.NodeID, str(oldName), in.Newdir, str(newName), in.Flags), nil)
		}
	}
	if x, ok := fsys.(Linker); ok {
		h.ops[abi.OpLink] = func(r *Request) {
			in := abi.View[abi.LinkIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			name, _ := abi.CString(r.Arg[8:])
			out := outOf[abi.EntryOut](r)
			reply(r, x.Link(r, r.Header.NodeID, in, str(name), out), out)
		}
	}
	if x, ok := fsys.(Opener); ok {
		h.ops[abi.OpOpen] = func(r *Request) {
			in := abi.View[abi.OpenIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			out := outOf[abi.OpenOut](r)
			reply(r, x.Open(r, in, out), out)
		}
	}
	if x, ok := fsys.(FdReader); ok {
		h.ops[abi.OpRead] = func(r *Request) {
			in := abi.View[abi.ReadIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			fd, off, errno := x.ReadFd(r, in)
			if errno != 0 {
				_ = r.Reply(errno, nil)
				return
			}
			_ = r.ReplyFd(fd, off, int(in.Size))
		}
	} else if x, ok := fsys.(Reader); ok {
		h.ops[abi.OpRead] = func(r *Request) {
			in := abi.View[abi.ReadIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			data, errno := x.Read(r, in)
			_ = r.ReplyData(errno, nil, data)
		}
	}
	if x, ok := fsys.(Writer); ok {
		h.ops[abi.OpWrite] = func(r *Request) {
			in := abi.View[abi.WriteIn](r.Arg)
			if in == nil || len(r.Arg) < 40+int(in.Size) {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			n, errno := x.Write(r, in, r.Arg[40:40+int(in.Size)])
			out := abi.WriteOut{Size: n}
			reply(r, errno, &out)
		}
	}
	if x, ok := fsys.(Statfser); ok {
		h.ops[abi.OpStatfs] = func(r *Request) {
			out := outOf[abi.Kstatfs](r)
			reply(r, x.Statfs(r, out), out)
		}
	}
	if x, ok := fsys.(Releaser); ok {
		h.ops[abi.OpRelease] = func(r *Request) {
			in := abi.View[abi.ReleaseIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			_ = r.Reply(x.Release(r, in), nil)
		}
	} else {
		h.ops[abi.OpRelease] = replyOK
	}
	if x, ok := fsys.(Fsyncer); ok {
		h.ops[abi.OpFsync] = func(r *Request) {
			in := abi.View[abi.FsyncIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			_ = r.Reply(x.Fsync(r, in), nil)
		}
	}
	if x, ok := fsys.(Flusher); ok {
		h.ops[abi.OpFlush] = func(r *Request) {
			in := abi.View[abi.FlushIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			_ = r.Reply(x.Flush(r, in), nil)
		}
	}
	if x, ok := fsys.(Opendirer); ok {
		h.ops[abi.OpOpendir] = func(r *Request) {
			in := abi.View[abi.OpenIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			out := outOf[abi.OpenOut](r)
			reply(r, x.Opendir(r, in, out), out)
		}
	}
	if x, ok := fsys.(Readdirer); ok {
		readdir := func(plus bool) opFunc {
			return func(r *Request) {
				in := abi.View[abi.ReadIn](r.Arg)
				if in == nil {
					_ = r.Reply(syscall.EINVAL, nil)
					return
				}
				l := DirList{buf: r.Scratch(int(in.Size))[:0], max: int(in.Size)}
				errno := x.Readdir(r, in, plus, &l)
				if errno != 0 && len(l.buf) > 0 {
					// Entries already added (and looked up) must reach
					// the kernel; the error will come on the next call.
					errno = 0
				}
				_ = r.ReplyData(errno, nil, l.buf)
			}
		}
		h.ops[abi.OpReaddir] = readdir(false)
		h.ops[abi.OpReaddirplus] = readdir(true)
	}
	if x, ok := fsys.(Releasedirer); ok {
		h.ops[abi.OpReleasedir] = func(r *Request) {
			in := abi.View[abi.ReleaseIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			_ = r.Reply(x.Releasedir(r, in), nil)
		}
	} else {
		h.ops[abi.OpReleasedir] = replyOK
	}
	if x, ok := fsys.(Fsyncdirer); ok {
		h.ops[abi.OpFsyncdir] = func(r *Request) {
			in := abi.View[abi.FsyncIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			_ = r.Reply(x.Fsyncdir(r, in), nil)
		}
	}
	if x, ok := fsys.(Accesser); ok {
		h.ops[abi.OpAccess] = func(r *Request) {
			in := abi.View[abi.AccessIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			_ = r.Reply(x.Access(r, in.Mask), nil)
		}
	}
	if x, ok := fsys.(Creater); ok {
		h.ops[abi.OpCreate] = func(r *Request) {
			in := abi.View[abi.CreateIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			name, _ := abi.CString(r.Arg[16:])
			out := outOf[createOut](r)
			errno := x.Create(r, r.Header.NodeID, in, str(name), &out.entry, &out.open)
			reply(r, errno, out)
		}
	}
	if x, ok := fsys.(Fallocater); ok {
		h.ops[abi.OpFallocate] = func(r *Request) {
			in := abi.View[abi.FallocateIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			_ = r.Reply(x.Fallocate(r, in), nil)
		}
	}
	if x, ok := fsys.(Lseeker); ok {
		h.ops[abi.OpLseek] = func(r *Request) {
			in := abi.View[abi.LseekIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			out := outOf[abi.LseekOut](r)
			reply(r, x.Lseek(r, in, out), out)
		}
	}
	if x, ok := fsys.(CopyFileRanger); ok {
		h.ops[abi.OpCopyFileRange] = func(r *Request) {
			in := abi.View[abi.CopyFileRangeIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			n, errno := x.CopyFileRange(r, in)
			out := abi.WriteOut{Size: uint32(min(n, 1<<32-1))}
			reply(r, errno, &out)
		}
	}
	if x, ok := fsys.(Xattrer); ok {
		h.ops[abi.OpGetxattr] = func(r *Request) {
			in := abi.View[abi.GetxattrIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			name, _ := abi.CString(r.Arg[8:])
			xattrReply(r, in.Size, func(dst []byte) (int, syscall.Errno) { return x.Getxattr(r, str(name), dst) })
		}
		h.ops[abi.OpListxattr] = func(r *Request) {
			in := abi.View[abi.GetxattrIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			xattrReply(r, in.Size, func(dst []byte) (int, syscall.Errno) { return x.Listxattr(r, dst) })
		}
		h.ops[abi.OpSetxattr] = func(r *Request) {
			in := abi.View[abi.SetxattrIn](r.Arg)
			if in == nil {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			name, rest := abi.CString(r.Arg[8:])
			if len(rest) < int(in.Size) {
				_ = r.Reply(syscall.EINVAL, nil)
				return
			}
			_ = r.Reply(x.Setxattr(r, str(name), rest[:in.Size], in.Flags), nil)
		}
		h.ops[abi.OpRemovexattr] = func(r *Request) {
			name, _ := abi.CString(r.Arg)
			_ = r.Reply(x.Removexattr(r, str(name)), nil)
		}
	}
	if _, ok := fsys.(Opendirer); !ok {
		h.ops[abi.OpOpendir] = func(r *Request) {
			out := abi.OpenOut{}
			reply(r, 0, &out)
		}
	}
	h.ops[abi.OpDestroy] = replyOK
	return h
}

func replyOK(r *Request) { _ = r.Reply(0, nil) }

// str returns b as a string without copying it (see the package comment:
// names are valid during the method call only).
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// createOut is CREATE's reply.
type createOut struct {
	entry abi.EntryOut
	open  abi.OpenOut
}

// outOf returns a zeroed T in r's reply buffer, so that building a reply
// allocates nothing.
func outOf[T any](r *Request) *T { return abi.View[T](r.ReplyBuffer()) }

// reply sends *out on success and errno otherwise.
func reply[T any](r *Request, errno syscall.Errno, out *T) {
	if errno != 0 {
		_ = r.Reply(errno, nil)
		return
	}
	_ = r.Reply(0, abi.Bytes(out))
}

// xattrReply answers GETXATTR and LISTXATTR: size 0 asks for the size.
func xattrReply(r *Request, size uint32, get func(dst []byte) (int, syscall.Errno)) {
	if size == 0 {
		n, errno := get(nil)
		out := abi.GetxattrOut{Size: uint32(n)}
		reply(r, errno, &out)
		return
	}
	buf := r.Scratch(int(size))
	n, errno := get(buf)
	_ = r.ReplyData(errno, nil, buf[:max(n, 0)])
}

// Init passes INIT to the file system when it implements dispatch.Initer.
func (h *Handler) Init(in *dispatch.Init) error {
	if x, ok := h.fsys.(dispatch.Initer); ok {
		return x.Init(in)
	}
	return nil
}

// Handle implements dispatch.Handler.
func (h *Handler) Handle(r *Request) {
	op := r.Header.Opcode
	if op < abi.OpMax {
		if f := h.ops[op]; f != nil {
			f(r)
			return
		}
	}
	if !op.NoReply() {
		_ = r.Reply(syscall.ENOSYS, nil)
	}
}

// NodeName names node when the file system implements NodeNamer, and
// returns "" otherwise.
func (h *Handler) NodeName(node uint64) string {
	if x, ok := h.fsys.(NodeNamer); ok {
		return x.NodeName(node)
	}
	return ""
}

// DirList accumulates READDIR or READDIRPLUS entries up to the size the
// kernel asked for.
type DirList struct {
	buf []byte
	max int
}

// Fits reports whether an entry named name fits (plus: a READDIRPLUS
// entry). Check it before doing a lookup for a READDIRPLUS entry, since an
// entry that is not sent must not count as a lookup.
func (l *DirList) Fits(name string, plus bool) bool {
	n := abi.Align8(abi.DirentSize + len(name))
	if plus {
		n += abi.EntryOutSize
	}
	return len(l.buf)+n <= l.max
}

// Add appends a READDIR entry; off is the offset of the next entry. It
// returns false, adding nothing, when the entry does not fit.
func (l *DirList) Add(ino, off uint64, typ uint32, name string) bool {
	if !l.Fits(name, false) {
		return false
	}
	l.appendDirent(ino, off, typ, name)
	return true
}

// AddPlus appends a READDIRPLUS entry. entry may be zero (NodeID 0) for
// an entry that was not looked up ("." and ".."). It returns false, adding
// nothing, when the entry does not fit.
func (l *DirList) AddPlus(entry *abi.EntryOut, off uint64, typ uint32, name string) bool {
	if !l.Fits(name, true) {
		return false
	}
	l.buf = append(l.buf, abi.Bytes(entry)...)
	l.appendDirent(entry.Attr.Ino, off, typ, name)
	return true
}

func (l *DirList) appendDirent(ino, off uint64, typ uint32, name string) {
	d := abi.Dirent{Ino: ino, Off: off, Namelen: uint32(len(name)), Type: typ}
	l.buf = append(l.buf, abi.Bytes(&d)...)
	l.buf = append(l.buf, name...)
	for pad := abi.Align8(len(name)) - len(name); pad > 0; pad-- {
		l.buf = append(l.buf, 0)
	}
}

// Len returns the bytes added so far.
func (l *DirList) Len() int { return len(l.buf) }
