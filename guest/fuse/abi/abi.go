// Package abi is the FUSE wire format that klab's servers speak: the
// opcodes, INIT flags and little-endian structs of the kernel's
// include/uapi/linux/fuse.h (protocol 7.45, the subset klab uses), laid out
// exactly as the kernel lays them out so that a request buffer can be viewed
// in place and a reply written without encoding.
//
// The structs are only meaningful on little-endian machines with the
// kernel's natural alignment (amd64, arm64); layout_test.go pins their sizes
// and offsets.
package abi

import (
	"fmt"
	"strings"
	"unsafe"
)

// Protocol version klab speaks. A server replies with the kernel's minor
// when it is lower.
const (
	// KernelVersion is the FUSE major version.
	KernelVersion = 7
	// KernelMinorVersion is the highest minor version klab implements.
	KernelMinorVersion = 45
)

// RootID is the node ID of the mount's root.
const RootID = 1

// MinReadBuffer is the smallest read buffer /dev/fuse accepts.
const MinReadBuffer = 8192

// BufferHeaderSize is what a read buffer needs beyond max_write: the in
// header, the largest per-op header, and slack (libfuse uses one page).
const BufferHeaderSize = 4096

// DefaultMaxPages is the kernel's max_pages without FUSE_MAX_PAGES.
const DefaultMaxPages = 32

// InterruptBit marks the unique of an INTERRUPT request and of the reply
// to it: the target's unique with the low bit set (FUSE_INT_REQ_BIT).
const InterruptBit uint64 = 1

// UniqueResend marks a request the kernel resent (FUSE_UNIQUE_RESEND).
const UniqueResend uint64 = 1 << 63

// Opcode is a FUSE request type.
type Opcode uint32

// FUSE opcodes (enum fuse_opcode).
const (
	OpLookup          Opcode = 1
	OpForget          Opcode = 2 // no reply
	OpGetattr         Opcode = 3
	OpSetattr         Opcode = 4
	OpReadlink        Opcode = 5
	OpSymlink         Opcode = 6
	OpMknod           Opcode = 8
	OpMkdir           Opcode = 9
	OpUnlink          Opcode = 10
	OpRmdir           Opcode = 11
	OpRename          Opcode = 12
	OpLink            Opcode = 13
	OpOpen            Opcode = 14
	OpRead            Opcode = 15
	OpWrite           Opcode = 16
	OpStatfs          Opcode = 17
	OpRelease         Opcode = 18
	OpFsync           Opcode = 20
	OpSetxattr        Opcode = 21
	OpGetxattr        Opcode = 22
	OpListxattr       Opcode = 23
	OpRemovexattr     Opcode = 24
	OpFlush           Opcode = 25
	OpInit            Opcode = 26
	OpOpendir         Opcode = 27
	OpReaddir         Opcode = 28
	OpReleasedir      Opcode = 29
	OpFsyncdir        Opcode = 30
	OpGetlk           Opcode = 31
	OpSetlk           Opcode = 32
	OpSetlkw          Opcode = 33
	OpAccess          Opcode = 34
	OpCreate          Opcode = 35
	OpInterrupt       Opcode = 36
	OpBmap            Opcode = 37
	OpDestroy         Opcode = 38
	OpIoctl           Opcode = 39
	OpPoll            Opcode = 40
	OpNotifyReply     Opcode = 41
	OpBatchForget     Opcode = 42 // no reply
	OpFallocate       Opcode = 43
	OpReaddirplus     Opcode = 44
	OpRename2         Opcode = 45
	OpLseek           Opcode = 46
	OpCopyFileRange   Opcode = 47
	OpSetupmapping    Opcode = 48
	OpRemovemapping   Opcode = 49
	OpSyncfs          Opcode = 50
	OpTmpfile         Opcode = 51
	OpStatx           Opcode = 52
	OpCopyFileRange64 Opcode = 53

	// OpMax is one past the highest opcode klab knows; tables indexed by
	// opcode have this size.
	OpMax Opcode = 54
)

var opNames = [OpMax]string{
	OpLookup: "LOOKUP", OpForget: "FORGET", OpGetattr: "GETATTR", OpSetattr: "SETATTR",
	OpReadlink: "READLINK", OpSymlink: "SYMLINK", OpMknod: "MKNOD", OpMkdir: "MKDIR",
	OpUnlink: "UNLINK", OpRmdir: "RMDIR", OpRename: "RENAME", OpLink: "LINK", OpOpen: "OPEN",
	OpRead: "READ", OpWrite: "WRITE", OpStatfs: "STATFS", OpRelease: "RELEASE", OpFsync: "FSYNC",
	OpSetxattr: "SETXATTR", OpGetxattr: "GETXATTR", OpListxattr: "LISTXATTR",
	OpRemovexattr: "REMOVEXATTR", OpFlush: "FLUSH", OpInit: "INIT", OpOpendir: "OPENDIR",
	OpReaddir: "READDIR", OpReleasedir: "RELEASEDIR", OpFsyncdir: "FSYNCDIR", OpGetlk: "GETLK",
	OpSetlk: "SETLK", OpSetlkw: "SETLKW", OpAccess: "ACCESS", OpCreate: "CREATE",
	OpInterrupt: "INTERRUPT", OpBmap: "BMAP", OpDestroy: "DESTROY", OpIoctl: "IOCTL",
	OpPoll: "POLL", OpNotifyReply: "NOTIFY_REPLY", OpBatchForget: "BATCH_FORGET",
	OpFallocate: "FALLOCATE", OpReaddirplus: "READDIRPLUS", OpRename2: "RENAME2",
	OpLseek: "LSEEK", OpCopyFileRange: "COPY_FILE_RANGE", OpSetupmapping: "SETUPMAPPING",
	OpRemovemapping: "REMOVEMAPPING", OpSyncfs: "SYNCFS", OpTmpfile: "TMPFILE", OpStatx: "STATX",
	OpCopyFileRange64: "COPY_FILE_RANGE_64",
}

// String returns the opcode's name without the FUSE_ prefix, e.g. "LOOKUP".
func (o Opcode) String() string {
	if o < OpMax && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("OPCODE_%d", uint32(o))
}

// ParseOpcode returns the opcode named s, in any case and with or without
// the FUSE_ prefix ("lookup", "LOOKUP", "FUSE_LOOKUP"), or its number.
func ParseOpcode(s string) (Opcode, error) {
	u := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "FUSE_")
	for i, n := range opNames {
		if n != "" && n == u {
			return Opcode(i), nil
		}
	}
	var n uint32
	if _, err := fmt.Sscanf(u, "%d", &n); err == nil && fmt.Sprint(n) == u && n > 0 {
		return Opcode(n), nil
	}
	return 0, fmt.Errorf("unknown FUSE opcode %q, want a name such as lookup, getattr, read, write, create", s)
}

// NoReply reports whether the kernel expects no reply to requests of this
// opcode (FORGET, BATCH_FORGET). INTERRUPT replies are optional.
func (o Opcode) NoReply() bool { return o == OpForget || o == OpBatchForget }

// InitFlags are the INIT capability bits, with fuse_init_in/out.flags2 as
// the upper 32 bits.
type InitFlags uint64

// INIT flags (FUSE_ASYNC_READ ... FUSE_REQUEST_TIMEOUT).
const (
	InitAsyncRead         InitFlags = 1 << 0
	InitPosixLocks        InitFlags = 1 << 1
	InitFileOps           InitFlags = 1 << 2
	InitAtomicOTrunc      InitFlags = 1 << 3
	InitExportSupport     InitFlags = 1 << 4
	InitBigWrites         InitFlags = 1 << 5
	InitDontMask          InitFlags = 1 << 6
	InitSpliceWrite       InitFlags = 1 << 7
	InitSpliceMove        InitFlags = 1 << 8
	InitSpliceRead        InitFlags = 1 << 9
	InitFlockLocks        InitFlags = 1 << 10
	InitHasIoctlDir       InitFlags = 1 << 11
	InitAutoInvalData     InitFlags = 1 << 12
	InitDoReaddirplus     InitFlags = 1 << 13
	InitReaddirplusAuto   InitFlags = 1 << 14
	InitAsyncDIO          InitFlags = 1 << 15
	InitWritebackCache    InitFlags = 1 << 16
	InitNoOpenSupport     InitFlags = 1 << 17
	InitParallelDirops    InitFlags = 1 << 18
	InitHandleKillpriv    InitFlags = 1 << 19
	InitPosixACL          InitFlags = 1 << 20
	InitAbortError        InitFlags = 1 << 21
	InitMaxPages          InitFlags = 1 << 22
	InitCacheSymlinks     InitFlags = 1 << 23
	InitNoOpendirSupport  InitFlags = 1 << 24
	InitExplicitInvalData InitFlags = 1 << 25
	InitMapAlignment      InitFlags = 1 << 26
	InitSubmounts         InitFlags = 1 << 27
	InitHandleKillprivV2  InitFlags = 1 << 28
	InitSetxattrExt       InitFlags = 1 << 29
	InitExt               InitFlags = 1 << 30
	InitReserved          InitFlags = 1 << 31
	InitSecurityCtx       InitFlags = 1 << 32
	InitHasInodeDAX       InitFlags = 1 << 33
	InitCreateSuppGroup   InitFlags = 1 << 34
	InitHasExpireOnly     InitFlags = 1 << 35
	InitDirectIOAllowMmap InitFlags = 1 << 36
	InitPassthrough       InitFlags = 1 << 37
	InitNoExportSupport   InitFlags = 1 << 38
	InitHasResend         InitFlags = 1 << 39
	InitAllowIdmap        InitFlags = 1 << 40
	InitOverIOUring       InitFlags = 1 << 41
	InitRequestTimeout    InitFlags = 1 << 42
	// InitHasIOUringBufpool is offered by kernels whose io_uring queues
	// take buffer pools and zero-copy reads and writes (FUSE 7.46).
	InitHasIOUringBufpool InitFlags = 1 << 43
)

var initNames = []string{
	"ASYNC_READ", "POSIX_LOCKS", "FILE_OPS", "ATOMIC_O_TRUNC", "EXPORT_SUPPORT", "BIG_WRITES",
	"DONT_MASK", "SPLICE_WRITE", "SPLICE_MOVE", "SPLICE_READ", "FLOCK_LOCKS", "HAS_IOCTL_DIR",
	"AUTO_INVAL_DATA", "DO_READDIRPLUS", "READDIRPLUS_AUTO", "ASYNC_DIO", "WRITEBACK_CACHE",
	"NO_OPEN_SUPPORT", "PARALLEL_DIROPS", "HANDLE_KILLPRIV", "POSIX_ACL", "ABORT_ERROR",
	"MAX_PAGES", "CACHE_SYMLINKS", "NO_OPENDIR_SUPPORT", "EXPLICIT_INVAL_DATA", "MAP_ALIGNMENT",
	"SUBMOUNTS", "HANDLE_KILLPRIV_V2", "SETXATTR_EXT", "INIT_EXT", "INIT_RESERVED",
	"SECURITY_CTX", "HAS_INODE_DAX", "CREATE_SUPP_GROUP", "HAS_EXPIRE_ONLY",
	"DIRECT_IO_ALLOW_MMAP", "PASSTHROUGH", "NO_EXPORT_SUPPORT", "HAS_RESEND", "ALLOW_IDMAP",
	"OVER_IO_URING", "REQUEST_TIMEOUT", "HAS_IO_URING_BUFPOOL",
}

// String lists the set flags by name, e.g. "ASYNC_READ|MAX_PAGES".
func (f InitFlags) String() string {
	var parts []string
	for i := 0; i < 64; i++ {
		if f&(1<<i) == 0 {
			continue
		}
		if i < len(initNames) {
			parts = append(parts, initNames[i])
		} else {
			parts = append(parts, fmt.Sprintf("BIT%d", i))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// FOPEN_* flags of OpenOut.OpenFlags.
const (
	FopenDirectIO             uint32 = 1 << 0
	FopenKeepCache            uint32 = 1 << 1
	FopenNonseekable          uint32 = 1 << 2
	FopenCacheDir             uint32 = 1 << 3
	FopenStream               uint32 = 1 << 4
	FopenNoflush              uint32 = 1 << 5
	FopenParallelDirectWrites uint32 = 1 << 6
	FopenPassthrough          uint32 = 1 << 7
	// FopenIOURingZeroCopy asks for zero-copy reads and writes over
	// io_uring; the kernel honors it on zero-copy queues only (7.46).
	FopenIOURingZeroCopy uint32 = 1 << 8
)

// FATTR_* bits of SetattrIn.Valid.
const (
	FattrMode        uint32 = 1 << 0
	FattrUID         uint32 = 1 << 1
	FattrGID         uint32 = 1 << 2
	FattrSize        uint32 = 1 << 3
	FattrAtime       uint32 = 1 << 4
	FattrMtime       uint32 = 1 << 5
	FattrFh          uint32 = 1 << 6
	FattrAtimeNow    uint32 = 1 << 7
	FattrMtimeNow    uint32 = 1 << 8
	FattrLockOwner   uint32 = 1 << 9
	FattrCtime       uint32 = 1 << 10
	FattrKillSuidgid uint32 = 1 << 11
)

// GetattrFh says GetattrIn.Fh is valid.
const GetattrFh uint32 = 1 << 0

// FsyncFdatasync asks for fdatasync rather than fsync.
const FsyncFdatasync uint32 = 1 << 0

// WriteCache marks a write from the page cache (writeback).
const WriteCache uint32 = 1 << 0

// Device ioctls on /dev/fuse.
const (
	// DevIocClone is FUSE_DEV_IOC_CLONE: _IOR(229, 0, uint32).
	DevIocClone = 0x8004e500
	// DevIocBackingOpen is FUSE_DEV_IOC_BACKING_OPEN: _IOW(229, 1, struct fuse_backing_map).
	DevIocBackingOpen = 0x4010e501
	// DevIocBackingClose is FUSE_DEV_IOC_BACKING_CLOSE: _IOW(229, 2, uint32).
	DevIocBackingClose = 0x4004e502
)

// InHeader is struct fuse_in_header, which starts every request.
type InHeader struct {
	Len         uint32
	Opcode      Opcode
	Unique      uint64
	NodeID      uint64
	UID         uint32
	GID         uint32
	PID         uint32
	TotalExtlen uint16
	Padding     uint16
}

// OutHeader is struct fuse_out_header, which starts every reply.
type OutHeader struct {
	Len    uint32
	Error  int32
	Unique uint64
}

// Sizes of the headers.
const (
	InHeaderSize  = int(unsafe.Sizeof(InHeader{}))
	OutHeaderSize = int(unsafe.Sizeof(OutHeader{}))
)

// Attr is struct fuse_attr.
type Attr struct {
	Ino       uint64
	Size      uint64
	Blocks    uint64
	Atime     uint64
	Mtime     uint64
	Ctime     uint64
	Atimensec uint32
	Mtimensec uint32
	Ctimensec uint32
	Mode      uint32
	Nlink     uint32
	UID       uint32
	GID       uint32
	Rdev      uint32
	Blksize   uint32
	Flags     uint32
}

// EntryOut is struct fuse_entry_out, the reply to LOOKUP, MKNOD, MKDIR,
// SYMLINK, LINK and the first part of CREATE's.
type EntryOut struct {
	NodeID         uint64
	Generation     uint64
	EntryValid     uint64
	AttrValid      uint64
	EntryValidNsec uint32
	AttrValidNsec  uint32
	Attr           Attr
}

// ForgetIn is struct fuse_forget_in.
type ForgetIn struct{ Nlookup uint64 }

// ForgetOne is struct fuse_forget_one, an element of BATCH_FORGET.
type ForgetOne struct {
	NodeID  uint64
	Nlookup uint64
}

// BatchForgetIn is struct fuse_batch_forget_in; Count ForgetOnes follow.
type BatchForgetIn struct {
	Count uint32
	Dummy uint32
}

// GetattrIn is struct fuse_getattr_in.
type GetattrIn struct {
	GetattrFlags uint32
	Dummy        uint32
	Fh           uint64
}

// AttrOut is struct fuse_attr_out, the reply to GETATTR and SETATTR.
type AttrOut struct {
	AttrValid     uint64
	AttrValidNsec uint32
	Dummy         uint32
	Attr          Attr
}

// MknodIn is struct fuse_mknod_in; the name follows.
type MknodIn struct {
	Mode    uint32
	Rdev    uint32
	Umask   uint32
	Padding uint32
}

// MkdirIn is struct fuse_mkdir_in; the name follows.
type MkdirIn struct {
	Mode  uint32
	Umask uint32
}

// RenameIn is struct fuse_rename_in; old and new names follow.
type RenameIn struct{ Newdir uint64 }

// Rename2In is struct fuse_rename2_in; old and new names follow.
type Rename2In struct {
	Newdir  uint64
	Flags   uint32
	Padding uint32
}

// LinkIn is struct fuse_link_in; the new name follows.
type LinkIn struct{ Oldnodeid uint64 }

// SetattrIn is struct fuse_setattr_in.
type SetattrIn struct {
	Valid     uint32
	Padding   uint32
	Fh        uint64
	Size      uint64
	LockOwner uint64
	Atime     uint64
	Mtime     uint64
	Ctime     uint64
	Atimensec uint32
	Mtimensec uint32
	Ctimensec uint32
	Mode      uint32
	Unused4   uint32
	UID       uint32
	GID       uint32
	Unused5   uint32
}

// OpenIn is struct fuse_open_in (OPEN and OPENDIR).
type OpenIn struct {
	Flags     uint32
	OpenFlags uint32
}

// CreateIn is struct fuse_create_in; the name follows.
type CreateIn struct {
	Flags     uint32
	Mode      uint32
	Umask     uint32
	OpenFlags uint32
}

// OpenOut is struct fuse_open_out.
type OpenOut struct {
	Fh        uint64
	OpenFlags uint32
	BackingID int32
}

// ReleaseIn is struct fuse_release_in (RELEASE and RELEASEDIR).
type ReleaseIn struct {
	Fh           uint64
	Flags        uint32
	ReleaseFlags uint32
	LockOwner    uint64
}

// FlushIn is struct fuse_flush_in.
type FlushIn struct {
	Fh        uint64
	Unused    uint32
	Padding   uint32
	LockOwner uint64
}

// ReadIn is struct fuse_read_in (READ, READDIR, READDIRPLUS).
type ReadIn struct {
	Fh        uint64
	Offset    uint64
	Size      uint32
	ReadFlags uint32
	LockOwner uint64
	Flags     uint32
	Padding   uint32
}

// WriteIn is struct fuse_write_in; the data follows.
type WriteIn struct {
	Fh         uint64
	Offset     uint64
	Size       uint32
	WriteFlags uint32
	LockOwner  uint64
	Flags      uint32
	Padding    uint32
}

// WriteOut is struct fuse_write_out.
type WriteOut struct {
	Size    uint32
	Padding uint32
}

// Kstatfs is struct fuse_kstatfs, the reply to STATFS.
type Kstatfs struct {
	Blocks  uint64
	Bfree   uint64
	Bavail  uint64
	Files   uint64
	Ffree   uint64
	Bsize   uint32
	Namelen uint32
	Frsize  uint32
	Padding uint32
	Spare   [6]uint32
}

// FsyncIn is struct fuse_fsync_in (FSYNC and FSYNCDIR).
type FsyncIn struct {
	Fh         uint64
	FsyncFlags uint32
	Padding    uint32
}

// SetxattrIn is struct fuse_setxattr_in as sent without FUSE_SETXATTR_EXT
// (8 bytes: size and flags); name and value follow.
type SetxattrIn struct {
	Size  uint32
	Flags uint32
}

// GetxattrIn is struct fuse_getxattr_in (GETXATTR and LISTXATTR).
type GetxattrIn struct {
	Size    uint32
	Padding uint32
}

// GetxattrOut is struct fuse_getxattr_out, the reply to a size query.
type GetxattrOut struct {
	Size    uint32
	Padding uint32
}

// AccessIn is struct fuse_access_in.
type AccessIn struct {
	Mask    uint32
	Padding uint32
}

// InitIn is struct fuse_init_in.
type InitIn struct {
	Major        uint32
	Minor        uint32
	MaxReadahead uint32
	Flags        uint32
	Flags2       uint32
	Unused       [11]uint32
}

// Flags64 returns Flags with Flags2 as the upper half (Flags2 only counts
// when INIT_EXT is set).
func (in *InitIn) Flags64() InitFlags {
	f := InitFlags(in.Flags)
	if f&InitExt != 0 {
		f |= InitFlags(in.Flags2) << 32
	}
	return f
}

// InitOut is struct fuse_init_out.
type InitOut struct {
	Major               uint32
	Minor               uint32
	MaxReadahead        uint32
	Flags               uint32
	MaxBackground       uint16
	CongestionThreshold uint16
	MaxWrite            uint32
	TimeGran            uint32
	MaxPages            uint16
	MapAlignment        uint16
	Flags2              uint32
	MaxStackDepth       uint32
	RequestTimeout      uint16
	Unused              [11]uint16
}

// SetFlags64 stores f into Flags and Flags2.
func (o *InitOut) SetFlags64(f InitFlags) {
	o.Flags = uint32(f)
	o.Flags2 = uint32(f >> 32)
}

// Flags64 returns Flags and Flags2 as one value.
func (o *InitOut) Flags64() InitFlags { return InitFlags(o.Flags) | InitFlags(o.Flags2)<<32 }

// InterruptIn is struct fuse_interrupt_in.
type InterruptIn struct{ Unique uint64 }

// FallocateIn is struct fuse_fallocate_in.
type FallocateIn struct {
	Fh      uint64
	Offset  uint64
	Length  uint64
	Mode    uint32
	Padding uint32
}

// LseekIn is struct fuse_lseek_in.
type LseekIn struct {
	Fh      uint64
	Offset  uint64
	Whence  uint32
	Padding uint32
}

// LseekOut is struct fuse_lseek_out.
type LseekOut struct{ Offset uint64 }

// CopyFileRangeIn is struct fuse_copy_file_range_in.
type CopyFileRangeIn struct {
	FhIn      uint64
	OffIn     uint64
	NodeIDOut uint64
	FhOut     uint64
	OffOut    uint64
	Len       uint64
	Flags     uint64
}

// Dirent is the fixed part of struct fuse_dirent; the name follows and
// the record is padded to 8 bytes.
type Dirent struct {
	Ino     uint64
	Off     uint64
	Namelen uint32
	Type    uint32
}

// DirentSize is the size of Dirent without its name.
const DirentSize = int(unsafe.Sizeof(Dirent{}))

// EntryOutSize is the size of EntryOut.
const EntryOutSize = int(unsafe.Sizeof(EntryOut{}))

// BackingMap is struct fuse_backing_map, the argument of
// FUSE_DEV_IOC_BACKING_OPEN.
type BackingMap struct {
	Fd      int32
	Flags   uint32
	Padding uint64
}

// Align8 rounds n up to a multiple of 8 (FUSE_REC_ALIGN).
func Align8(n int) int { return (n + 7) &^ 7 }

// View returns the T at the start of b, or nil when b is too short. The
// result aliases b.
func View[T any](b []byte) *T {
	var zero T
	if len(b) < int(unsafe.Sizeof(zero)) {
		return nil
	}
	return (*T)(unsafe.Pointer(unsafe.SliceData(b)))
}

// Bytes returns the bytes of *v, aliasing it.
func Bytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// CString returns the bytes of b up to its first NUL, and the rest after
// it. Without a NUL the whole of b is the string and rest is nil.
func CString(b []byte) (s []byte, rest []byte) {
	for i, c := range b {
		if c == 0 {
			return b[:i], b[i+1:]
		}
	}
	return b, nil
}
