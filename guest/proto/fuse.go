package proto

// FUSE server kinds a FUSEStep can start.
const (
	// FUSEPassthrough is klab's loopback server over FUSEStep.Backing.
	FUSEPassthrough = "passthrough"
	// FUSEStuck is the passthrough server with FUSEStep.Stuck rules that
	// hold requests (never reply, delay, reply after abort).
	FUSEStuck = "stuck"
	// FUSEInterrupt is the passthrough server with FUSEStep.Interrupt's
	// hold rules and interrupt policy.
	FUSEInterrupt = "interrupt"
	// FUSELibfusePassthroughLL is libfuse's example passthrough_ll, built
	// on the host from the distro's libfuse3-dev examples and put into the
	// initramfs at LibfusePassthroughLLPath.
	FUSELibfusePassthroughLL = "libfuse-passthrough_ll"
	// FUSELibfusePassthroughHP is libfuse 3.18's example passthrough_hp,
	// built on the host from Debian's fuse3 source with FUSE-over-io_uring
	// and put into the initramfs at LibfusePassthroughHPPath. It serves
	// both transports.
	FUSELibfusePassthroughHP = "libfuse-passthrough_hp"
)

// LibfusePassthroughLLPath is where the initramfs carries passthrough_ll.
const LibfusePassthroughLLPath = "/usr/bin/passthrough_ll"

// LibfusePassthroughHPPath is where the initramfs carries passthrough_hp.
const LibfusePassthroughHPPath = "/usr/bin/passthrough_hp"

// FUSE transports.
const (
	// FUSETransportDev serves the connection by reading and writing
	// /dev/fuse.
	FUSETransportDev = "dev"
	// FUSETransportURing is FUSE-over-io_uring (Linux 6.14+): the agent
	// sets the fuse module's enable_uring when it is off.
	FUSETransportURing = "uring"
)

// FUSEStep mounts a FUSE server in the guest, runs Then against the mount,
// and always tears the mount down: a normal unmount when all went well,
// else an abort through /sys/fs/fuse/connections/N/abort and a lazy
// unmount, so that a broken server never hangs the guest.
type FUSEStep struct {
	// Server is the server kind: passthrough (default), stuck, interrupt,
	// libfuse-passthrough_ll or libfuse-passthrough_hp.
	Server string `json:"server,omitempty"`
	// Transport is how the server talks to the kernel: dev (default) or
	// uring (klab's servers and libfuse-passthrough_hp).
	Transport string `json:"transport,omitempty"`
	// QueueDepth is the number of io_uring entries per queue (per
	// possible CPU) over uring; 0 means 8 (passthrough_hp's
	// io_uring_q_depth too).
	QueueDepth int `json:"queue_depth,omitempty"`
	// ZeroCopy makes klab's passthrough server's io_uring queues
	// zero-copy (Linux 7.3+): READs of read-only files go from the
	// backing file straight into the client's pages.
	ZeroCopy bool `json:"zero_copy,omitempty"`
	// NoSplice makes klab's servers copy READ data over /dev/fuse: read
	// into the server's memory and written with the reply, rather than
	// spliced from the backing file (klab fuse serve --no-splice).
	// Absent, as from hosts that predate it, they splice. libfuse's
	// servers never splice READ replies here: passthrough_hp runs with
	// --nosplice, and passthrough_ll keeps libfuse's default, which
	// writes replies without splice. Over uring nothing is spliced.
	NoSplice bool `json:"no_splice,omitempty"`
	// Mountpoint is where to mount; it is created when missing.
	Mountpoint string `json:"mountpoint"`
	// Backing is the directory the server mirrors; it is created when
	// missing.
	Backing string `json:"backing"`
	// MountOptions are FUSE mount options: allow_other,
	// default_permissions, max_read=N, ro, noatime, fsname=NAME, ...
	MountOptions []string `json:"mount_options,omitempty"`
	// Threads is the number of server threads: /dev/fuse workers over
	// dev (0 means 1), ring threads over uring (0 means one per queue),
	// libfuse's max_threads for passthrough_ll and passthrough_hp's
	// --num-threads (0 means libfuse's default; over uring libfuse adds
	// one ring thread per queue).
	Threads int `json:"threads,omitempty"`
	// Passthrough holds the file system knobs, for every server kind.
	Passthrough FUSEPassthroughOptions `json:"passthrough,omitempty"`
	// RequestTimeoutSec, when non-zero, is sent in the INIT reply
	// (FUSE_REQUEST_TIMEOUT); the kernel uses at least 15 s. The sysctls
	// fs.fuse.default_request_timeout and max_request_timeout are set with
	// sysctl steps before this one.
	RequestTimeoutSec int `json:"request_timeout_s,omitempty"`
	// MaxWrite is the largest WRITE request in bytes; 0 means 1 MiB.
	MaxWrite int `json:"max_write,omitempty"`
	// Stuck are the stuck server's rules, "OP[:NAME]=never",
	// "OP[:NAME]=after-abort" or "OP[:NAME]=delay:DURATION".
	Stuck []string `json:"stuck,omitempty"`
	// Interrupt configures the interrupt server.
	Interrupt *FUSEInterruptOptions `json:"interrupt,omitempty"`
	// Then is the step run while the server is mounted. Its ID, when 0,
	// becomes this step's ID, so that its output is attributed to it.
	Then *Step `json:"then,omitempty"`
}

// FUSEPassthroughOptions are passthrough_ll's knobs, plus passthrough_hp's
// kernel passthrough.
type FUSEPassthroughOptions struct {
	// AttrTimeoutMs and EntryTimeoutMs are the kernel's cache times;
	// nil means 1000 (passthrough_ll's default).
	AttrTimeoutMs  *int64 `json:"attr_timeout_ms,omitempty"`
	EntryTimeoutMs *int64 `json:"entry_timeout_ms,omitempty"`
	// Writeback turns the kernel's writeback cache on.
	Writeback bool `json:"writeback,omitempty"`
	// KernelPassthrough registers backing files with the kernel
	// (FUSE_PASSTHROUGH, needs CAP_SYS_ADMIN); excludes Writeback.
	KernelPassthrough bool `json:"kernel_passthrough,omitempty"`
	// Xattr serves extended attributes (passthrough_ll -o xattr). Off,
	// the kernel stops asking after the first ENOSYS; on, every write
	// costs a GETXATTR of security.capability.
	Xattr bool `json:"xattr,omitempty"`
}

// FUSEInterruptOptions configure the interrupt server.
type FUSEInterruptOptions struct {
	// Policy is what the server does with FUSE_INTERRUPT: cancel
	// (default), ignore, enosys, eagain or eagain:N.
	Policy string `json:"policy,omitempty"`
	// Hold are rules "OP[:NAME]=DURATION" for requests the server holds
	// before serving them, e.g. "lookup:held*=2s".
	Hold []string `json:"hold,omitempty"`
}

// FUSEStats are a FUSE step's server counters, sent in its Done.
type FUSEStats struct {
	// Server and Transport name what served the mount.
	Server    string `json:"server"`
	Transport string `json:"transport"`
	// InitFlags are the INIT flags granted (klab's servers).
	InitFlags string `json:"init_flags,omitempty"`
	// RequestTimeoutS is the request timeout sent in INIT.
	RequestTimeoutS int `json:"request_timeout_s,omitempty"`
	// Interrupts counts INTERRUPT requests; InterruptsEAGAIN and
	// InterruptsENOSYS the replies of those kinds.
	Interrupts       uint64 `json:"interrupts,omitempty"`
	InterruptsEAGAIN uint64 `json:"interrupts_eagain,omitempty"`
	InterruptsENOSYS uint64 `json:"interrupts_enosys,omitempty"`
	// ReplyENOENT counts replies the kernel refused with ENOENT;
	// ReplyErrors other failed replies.
	ReplyENOENT uint64 `json:"reply_enoent,omitempty"`
	ReplyErrors uint64 `json:"reply_errors,omitempty"`
	// RingRequests counts requests received over io_uring.
	RingRequests uint64 `json:"ring_requests,omitempty"`
	// ServerReadBytes and ServerWrittenBytes are what the server served
	// of file data during the wrapped step: for klab's servers their own
	// count of the file data READ replies carried (spliced or not) and of
	// WRITE data written; for libfuse's, their process's rchar and wchar
	// (/proc/PID/io). -1 when unknown.
	ServerReadBytes    int64 `json:"server_read_bytes"`
	ServerWrittenBytes int64 `json:"server_written_bytes"`
	// ServerCPUNs is the CPU time (user and system) the server's process
	// used during the wrapped step: the agent's own for klab's servers,
	// which run in it, the libfuse process's for libfuse's. -1 when
	// unknown.
	ServerCPUNs int64 `json:"server_cpu_ns"`
}
