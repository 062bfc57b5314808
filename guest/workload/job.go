package workload

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
)

// layoutChunk is the write size used to lay out read files (untimed).
const layoutChunk = 1 << 20

// job is one of a run's jobs: its file, buffers and counters. Everything
// but the pub* totals belongs to the job's goroutine; Run reads res, hist
// and err after the goroutine ended.
type job struct {
	n   *normalized
	idx int

	path    string
	fd      int
	buf     []byte // page-aligned, from mmap
	mapping []byte // the file, for mmap patterns
	bs      int64
	size    int64
	blocks  uint64 // size / bs
	pos     int64  // next sequential offset
	rng     uint64 // splitmix64 state

	// create: the path is pathPrefix + filenum + pathSuffix + NUL.
	pathBuf    []byte
	pathPrefix string
	pathSuffix string
	filenum    int

	// futimes: the two times it alternates between.
	times [2][2]unix.Timespec
	flip  int
	// fstat: where the attributes land.
	stat unix.Stat_t

	op func() (int64, error)
	// now is the job's clock, in nanoseconds since the run's start: the
	// run's monotonic clock, or a virtual one in tests.
	now func() int64
	// after, when set, runs after each timed operation, untimed.
	after func() error
	// A size-based job ends after targetBytes measured bytes (data
	// patterns) or targetOps measured operations (create, futimes, fstat).
	targetBytes, targetOps int64

	hist Histogram
	res  jobResult
	err  error

	// Running totals since the start, ramp included, for the sampler.
	pubOps, pubBytes, pubLat atomic.Int64
}

// next returns the job's next pseudo-random number (splitmix64).
func (j *job) next() uint64 {
	j.rng += 0x9e3779b97f4a7c15
	z := j.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// randOffset returns a uniformly random block-aligned offset in
// [0, size-bs], as fio's norandommap picks them.
func (j *job) randOffset() int64 {
	hi, _ := bits.Mul64(j.next(), j.blocks)
	return int64(hi) * j.bs
}

// setup opens the job's file and prepares buffers. It runs on the job's
// locked thread before the clock starts.
func (j *job) setup() error {
	n := j.n
	j.rng = n.Seed ^ (uint64(j.idx+1) * 0xd1b54a32d192ed03)
	j.bs, j.size = n.BlockSize, n.FileSize
	j.targetBytes, j.targetOps = n.FileSize, int64(n.Files)
	if j.bs > 0 {
		j.blocks = uint64(j.size / j.bs)
	}
	j.path = filepath.Join(n.Dir, FileName(n.FilenameFormat, n.Name, j.idx, 0))
	var err error
	switch n.Pattern {
	case proto.PatternSeqWrite, proto.PatternRandWrite, proto.PatternFtruncate:
		err = j.setupWrite()
	case proto.PatternSeqRead, proto.PatternRandRead, proto.PatternDirectSeqRead, proto.PatternDirectRandRead:
		err = j.setupRead()
	case proto.PatternMmapSeqRead, proto.PatternMmapRandRead:
		err = j.setupMmap()
	case proto.PatternCreate:
		err = j.setupCreate()
	case proto.PatternFutimes:
		err = j.setupFutimes()
	case proto.PatternFstat:
		err = j.setupFstat()
	default:
		err = fmt.Errorf("pattern %q has no implementation", n.Pattern)
	}
	if err != nil {
		return fmt.Errorf("job %d: %w", j.idx, err)
	}
	return nil
}

// teardown releases what setup took.
func (j *job) teardown() {
	if j.mapping != nil {
		_ = unix.Munmap(j.mapping)
		j.mapping = nil
	}
	if j.buf != nil {
		_ = unix.Munmap(j.buf)
		j.buf = nil
	}
	if j.fd >= 0 {
		_ = unix.Close(j.fd)
		j.fd = -1
	}
}

// allocBuf maps a page-aligned buffer of bs bytes filled with
// pseudo-random data (fio's default buffer contents).
func (j *job) allocBuf() error {
	b, err := unix.Mmap(-1, 0, int(j.bs), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("buffer of %s: %w", FormatSize(j.bs), err)
	}
	for i := 0; i+8 <= len(b); i += 8 {
		*(*uint64)(unsafe.Pointer(&b[i])) = j.next()
	}
	j.buf = b
	return nil
}

// fadviseHint tells the kernel the access pattern, as fio's default
// fadvise_hint=1 does.
func (j *job) fadviseHint() error {
	adv := unix.FADV_SEQUENTIAL
	if isRandom(j.n.Pattern) {
		adv = unix.FADV_RANDOM
	}
	if err := unix.Fadvise(j.fd, 0, j.size, adv); err != nil {
		return fmt.Errorf("fadvise %s: %w", j.path, err)
	}
	return nil
}

func mkdirFor(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create job directory: %w", err)
	}
	return nil
}

// setupWrite creates the job's file afresh, as fio does for writes without
// overwrite: unlink, create, preallocate as asked.
func (j *job) setupWrite() error {
	if err := mkdirFor(j.path); err != nil {
		return err
	}
	if err := unix.Unlink(j.path); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unlink %s: %w", j.path, err)
	}
	flags := unix.O_RDWR | unix.O_CREAT | unix.O_CLOEXEC
	if j.n.OSync {
		flags |= unix.O_SYNC
	}
	fd, err := unix.Open(j.path, flags, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", j.path, err)
	}
	j.fd = fd
	// As fio does: native and posix preallocation are best effort (fio
	// ignores their failure, ENOSPC included); keep and truncate fail the
	// job.
	switch j.n.Fallocate {
	case proto.FallocateNative, proto.FallocatePosix:
		_ = unix.Fallocate(fd, 0, 0, j.size)
	case proto.FallocateKeep:
		if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, j.size); err != nil {
			return fmt.Errorf("fallocate=keep %s: %w", j.path, err)
		}
	case proto.FallocateTruncate:
		if err := unix.Ftruncate(fd, j.size); err != nil {
			return fmt.Errorf("fallocate=truncate %s: %w", j.path, err)
		}
	}
	if err := j.fadviseHint(); err != nil {
		return err
	}
	if err := j.allocBuf(); err != nil {
		return err
	}
	switch j.n.Pattern {
	case proto.PatternSeqWrite:
		j.op = j.seqWrite
	case proto.PatternRandWrite:
		j.op = j.randWrite
	case proto.PatternFtruncate:
		j.op = j.ftruncate
	}
	return nil
}

// layout makes sure the job's file holds at least size bytes, writing it
// when it does not (fio lays read files out the same way, and keeps an
// existing file that is large enough).
func (j *job) layout() error {
	if err := mkdirFor(j.path); err != nil {
		return err
	}
	if fi, err := os.Stat(j.path); err == nil && fi.Mode().IsRegular() && fi.Size() >= j.size {
		return nil
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("lay out %s: %w", j.path, err)
	}
	chunk := make([]byte, min(int64(layoutChunk), j.size))
	for i := 0; i+8 <= len(chunk); i += 8 {
		*(*uint64)(unsafe.Pointer(&chunk[i])) = j.next()
	}
	for left := j.size; left > 0; {
		w := min(left, int64(len(chunk)))
		if _, err := f.Write(chunk[:w]); err != nil {
			f.Close()
			return fmt.Errorf("lay out %s: %w", j.path, err)
		}
		left -= w
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("lay out %s: %w", j.path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("lay out %s: %w", j.path, err)
	}
	return nil
}

// openRead lays the file out and opens it for reading, dropping its page
// cache unless NoInvalidate.
func (j *job) openRead(direct bool) error {
	if err := j.layout(); err != nil {
		return err
	}
	flags := unix.O_RDONLY | unix.O_CLOEXEC
	if direct {
		flags |= unix.O_DIRECT
	}
	fd, err := unix.Open(j.path, flags, 0)
	if err != nil {
		if direct && errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("open %s with O_DIRECT: %w (the filesystem does not support direct I/O)", j.path, err)
		}
		return fmt.Errorf("open %s: %w", j.path, err)
	}
	j.fd = fd
	if !j.n.NoInvalidate {
		if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("invalidate %s: %w", j.path, err)
		}
	}
	return j.fadviseHint()
}

func (j *job) setupRead() error {
	if err := j.openRead(isDirect(j.n.Pattern)); err != nil {
		return err
	}
	if err := j.allocBuf(); err != nil {
		return err
	}
	if isRandom(j.n.Pattern) {
		j.op = j.randRead
	} else {
		j.op = j.seqRead
	}
	return nil
}

func (j *job) setupMmap() error {
	if err := j.openRead(false); err != nil {
		return err
	}
	m, err := unix.Mmap(j.fd, 0, int(j.size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", j.path, err)
	}
	j.mapping = m
	adv := unix.MADV_SEQUENTIAL
	if isRandom(j.n.Pattern) {
		adv = unix.MADV_RANDOM
	}
	if err := unix.Madvise(m, adv); err != nil {
		return fmt.Errorf("madvise %s: %w", j.path, err)
	}
	// A fault on the mapping (the file shrank, an I/O error) must fail the
	// job, not crash the agent.
	debug.SetPanicOnFault(true)
	if err := j.allocBuf(); err != nil {
		return err
	}
	if isRandom(j.n.Pattern) {
		j.op = j.mmapRandRead
	} else {
		j.op = j.mmapSeqRead
	}
	return nil
}

// setupCreate prepares the job's directory and removes files left from an
// earlier run, so that every operation really creates a file.
func (j *job) setupCreate() error {
	f := strings.NewReplacer("$jobname", j.n.Name, "$jobnum", strconv.Itoa(j.idx)).Replace(j.n.FilenameFormat)
	pre, suf, _ := strings.Cut(f, "$filenum")
	j.pathPrefix = filepath.Join(j.n.Dir, pre)
	if strings.HasSuffix(pre, "/") {
		j.pathPrefix += "/"
	}
	j.pathSuffix = suf
	if err := mkdirFor(j.pathPrefix + "0" + suf); err != nil {
		return err
	}
	for i := 0; i < j.n.Files; i++ {
		p := j.pathPrefix + strconv.Itoa(i) + suf
		if err := unix.Unlink(p); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove old %s: %w", p, err)
		}
	}
	j.pathBuf = make([]byte, 0, len(j.pathPrefix)+len(suf)+24)
	j.nextName()
	j.op = j.create
	j.after = j.createClose
	return nil
}

// openOwn opens the job's file with flags, creating it (and its
// directory) when it is missing.
func (j *job) openOwn(flags int) error {
	if err := mkdirFor(j.path); err != nil {
		return err
	}
	fd, err := unix.Open(j.path, flags|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", j.path, err)
	}
	j.fd = fd
	return nil
}

func (j *job) setupFutimes() error {
	if err := j.openOwn(unix.O_RDWR); err != nil {
		return err
	}
	// Two distinct (atime, mtime) pairs, so every call changes the inode.
	j.times[0] = [2]unix.Timespec{{Sec: 1_000_000_000}, {Sec: 1_000_000_000}}
	j.times[1] = [2]unix.Timespec{{Sec: 1_500_000_000, Nsec: 1}, {Sec: 1_500_000_000, Nsec: 1}}
	j.op = j.futimes
	return nil
}

// The operations. Each makes exactly one system call, and returns the
// bytes it counts.

func (j *job) seqWrite() (int64, error) {
	if j.pos+j.bs > j.size {
		if _, err := unix.Seek(j.fd, 0, 0); err != nil {
			return 0, fmt.Errorf("seek %s: %w", j.path, err)
		}
		j.pos = 0
	}
	n, err := unix.Write(j.fd, j.buf)
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", j.path, err)
	}
	j.pos += int64(n)
	return int64(n), nil
}

func (j *job) randWrite() (int64, error) {
	n, err := unix.Pwrite(j.fd, j.buf, j.randOffset())
	if err != nil {
		return 0, fmt.Errorf("pwrite %s: %w", j.path, err)
	}
	return int64(n), nil
}

// ftruncate is fio's ftruncate engine: the I/O's offset becomes the file's
// new size, and the I/O counts as bs bytes written.
func (j *job) ftruncate() (int64, error) {
	if err := unix.Ftruncate(j.fd, j.randOffset()); err != nil {
		return 0, fmt.Errorf("ftruncate %s: %w", j.path, err)
	}
	return j.bs, nil
}

func (j *job) seqRead() (int64, error) {
	if j.pos+j.bs > j.size {
		if _, err := unix.Seek(j.fd, 0, 0); err != nil {
			return 0, fmt.Errorf("seek %s: %w", j.path, err)
		}
		j.pos = 0
	}
	n, err := unix.Read(j.fd, j.buf)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", j.path, err)
	}
	if n == 0 {
		// The file shrank under us: start over, and fail if it is empty.
		if j.pos == 0 {
			return 0, fmt.Errorf("read %s: file is empty", j.path)
		}
		j.pos = j.size
		return 0, nil
	}
	j.pos += int64(n)
	return int64(n), nil
}

func (j *job) randRead() (int64, error) {
	n, err := unix.Pread(j.fd, j.buf, j.randOffset())
	if err != nil {
		return 0, fmt.Errorf("pread %s: %w", j.path, err)
	}
	return int64(n), nil
}

func (j *job) mmapSeqRead() (int64, error) {
	if j.pos+j.bs > j.size {
		j.pos = 0
	}
	copy(j.buf, j.mapping[j.pos:j.pos+j.bs])
	j.pos += j.bs
	return j.bs, nil
}

func (j *job) mmapRandRead() (int64, error) {
	off := j.randOffset()
	copy(j.buf, j.mapping[off:off+j.bs])
	return j.bs, nil
}

// create opens the next file, creating it. Its name was built before
// the clock started (nextName), and its close (createClose) follows
// outside the timed operation: fio, too, times only the open.
func (j *job) create() (int64, error) {
	fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(&j.pathBuf[0])),
		uintptr(unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC), 0o600, 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("create %s: %w", j.pathBuf[:len(j.pathBuf)-1], errno)
	}
	j.fd = int(fd)
	return 0, nil
}

// createClose closes the file create made and names the next one.
func (j *job) createClose() error {
	fd := j.fd
	j.fd = -1
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close %s: %w", j.pathBuf[:len(j.pathBuf)-1], err)
	}
	j.nextName()
	return nil
}

// nextName puts the NUL-terminated path of file filenum into pathBuf and
// advances filenum.
func (j *job) nextName() {
	b := append(j.pathBuf[:0], j.pathPrefix...)
	b = strconv.AppendInt(b, int64(j.filenum), 10)
	b = append(b, j.pathSuffix...)
	j.pathBuf = append(b, 0)
	j.filenum++
}

// setupFstat opens the job's file, created empty when it is missing.
func (j *job) setupFstat() error {
	if err := j.openOwn(unix.O_RDONLY); err != nil {
		return err
	}
	j.op = j.fstat
	return nil
}

// fstat reads the file's attributes through its descriptor.
func (j *job) fstat() (int64, error) {
	_, _, errno := unix.Syscall(unix.SYS_FSTAT, uintptr(j.fd), uintptr(unsafe.Pointer(&j.stat)), 0)
	if errno != 0 {
		return 0, fmt.Errorf("fstat %s: %w", j.path, errno)
	}
	return 0, nil
}

// futimes sets the file's times through its descriptor, as glibc's
// futimes(3) does: utimensat(fd, NULL, times, 0).
func (j *job) futimes() (int64, error) {
	ts := &j.times[j.flip]
	j.flip ^= 1
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(j.fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("futimens %s: %w", j.path, errno)
	}
	return 0, nil
}

// atFDCWD is unix.AT_FDCWD (-100) as a system call argument.
const atFDCWD = ^uintptr(-unix.AT_FDCWD - 1)
