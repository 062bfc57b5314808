package proto

// Pattern names one workload of klab's Go I/O engine (guest/workload).
type Pattern string

// The patterns of the Go engine. Each has a fio equivalent except
// PatternFutimes (see workload.FioArgs).
const (
	// PatternSeqWrite writes BlockSize blocks sequentially with write(2),
	// each job to its own file (fio rw=write ioengine=sync).
	PatternSeqWrite Pattern = "seqwrite"
	// PatternRandWrite writes BlockSize blocks at random aligned offsets
	// with pwrite(2) (fio rw=randwrite ioengine=psync norandommap).
	PatternRandWrite Pattern = "randwrite"
	// PatternFtruncate is fio's ftruncate ioengine with rw=randwrite: each
	// operation is ftruncate(2) of the job's file to a random
	// BlockSize-aligned size in [0, FileSize). It counts as a write of
	// BlockSize bytes, as fio counts it.
	PatternFtruncate Pattern = "ftruncate"
	// PatternSeqRead reads sequentially through the page cache with
	// read(2) (fio rw=read ioengine=sync).
	PatternSeqRead Pattern = "seqread"
	// PatternRandRead reads at random aligned offsets through the page
	// cache with pread(2) (fio rw=randread ioengine=psync norandommap).
	PatternRandRead Pattern = "randread"
	// PatternDirectSeqRead reads sequentially with O_DIRECT into
	// page-aligned buffers (fio rw=read direct=1 ioengine=psync).
	PatternDirectSeqRead Pattern = "dio-seqread"
	// PatternDirectRandRead reads at random offsets with O_DIRECT (fio
	// rw=randread direct=1 ioengine=psync).
	PatternDirectRandRead Pattern = "dio-randread"
	// PatternMmapSeqRead maps each job's file and copies BlockSize bytes
	// per operation from it, sequentially (fio rw=read ioengine=mmap).
	PatternMmapSeqRead Pattern = "mmap-seqread"
	// PatternMmapRandRead is PatternMmapSeqRead at random offsets (fio
	// rw=randread ioengine=mmap).
	PatternMmapRandRead Pattern = "mmap-randread"
	// PatternCreate creates Files empty files per job, each job in its own
	// directory: one open(O_CREAT) is one operation, and its latency; the
	// close follows untimed (fio ioengine=filecreate create_on_open=1
	// openfiles=1, which times the open alone).
	PatternCreate Pattern = "create"
	// PatternFutimes is the FUSE interrupt seed's loop: each job opens its
	// file and sets its times with futimens(2), alternating between two
	// values, as fast as it can. It has no fio equivalent.
	PatternFutimes Pattern = "futimes"
	// PatternFstat opens each job's file (created empty when missing) and calls
	// fstat(2) on it as fast as it can: on a FUSE mount that caches no
	// attributes, one GETATTR round trip per call, the smallest request a
	// server answers. It has no fio equivalent.
	PatternFstat Pattern = "fstat"
)

// Patterns lists every pattern, in documentation order.
func Patterns() []Pattern {
	return []Pattern{
		PatternSeqWrite, PatternRandWrite, PatternFtruncate,
		PatternSeqRead, PatternRandRead, PatternDirectSeqRead, PatternDirectRandRead,
		PatternMmapSeqRead, PatternMmapRandRead, PatternCreate, PatternFutimes, PatternFstat,
	}
}

// Fallocate modes, named as fio's fallocate option names them.
const (
	// FallocateNone does not preallocate (the Go engine's default).
	FallocateNone = "none"
	// FallocateNative calls fallocate(2) with mode 0 for FileSize (fio's
	// default on Linux). Like fio, a failure (ENOSPC, EOPNOTSUPP) is
	// ignored.
	FallocateNative = "native"
	// FallocatePosix is posix_fallocate(3); here the same call as
	// FallocateNative, failures ignored too.
	FallocatePosix = "posix"
	// FallocateKeep is fallocate(2) with FALLOC_FL_KEEP_SIZE.
	FallocateKeep = "keep"
	// FallocateTruncate sets the size with ftruncate(2).
	FallocateTruncate = "truncate"
)

// WorkloadStep runs one pattern of klab's Go I/O engine in the guest. Its
// fields follow fio's options of the same meaning, so that a step can be
// rerun with fio (workload.FioArgs) and the two compared. Nothing has a
// silent default when a zero would be meaningless: a zero Jobs or
// BlockSize is an error, not "the default".
type WorkloadStep struct {
	// Name is the job name; files are named after it like fio names them
	// ("$jobname.$jobnum.$filenum"). Empty means the pattern's name.
	Name string `json:"name,omitempty"`
	// Pattern is what each job does.
	Pattern Pattern `json:"pattern"`
	// Dir is the directory the job files go in; it and the job
	// directories FilenameFormat names are created when missing.
	Dir string `json:"dir"`
	// Jobs is the number of jobs (fio numjobs), each on its own OS
	// thread: 1..1024.
	Jobs int `json:"jobs"`
	// BlockSize is bytes per operation (fio bs): 512..64M. Not used by
	// create and futimes.
	BlockSize int64 `json:"bs,omitempty"`
	// FileSize is each job's file size in bytes (fio size/filesize):
	// BlockSize..1T. Reads lay files out to this size first (untimed);
	// writes wrap at it; ftruncate picks sizes below it. Not used by create
	// and futimes.
	FileSize int64 `json:"size,omitempty"`
	// Files is the number of files each create job makes (fio nrfiles):
	// 1..10000000. Only for create.
	Files int `json:"files,omitempty"`
	// Fallocate is how write jobs preallocate their file: one of the
	// Fallocate* constants; empty means FallocateNone.
	Fallocate string `json:"fallocate,omitempty"`
	// OSync opens written files with O_SYNC (fio sync=1).
	OSync bool `json:"osync,omitempty"`
	// RampMs runs the jobs this long before measuring (fio ramp_time):
	// 0..3600000.
	RampMs int64 `json:"ramp_ms,omitempty"`
	// RuntimeMs bounds the measured part (fio runtime): 0..86400000, 0
	// meaning no bound. With TimeBased the jobs run exactly this long,
	// wrapping around their files; without it each job stops after
	// FileSize bytes (Files creates), or at RuntimeMs if that comes first.
	RuntimeMs int64 `json:"runtime_ms,omitempty"`
	// TimeBased runs for RuntimeMs whatever the size (fio time_based).
	TimeBased bool `json:"time_based,omitempty"`
	// FilenameFormat names each job's files like fio's filename_format,
	// relative to Dir, with $jobname, $jobnum and $filenum. Empty means
	// "$jobname.$jobnum.$filenum", and "$jobnum/f.$filenum" for create
	// (one directory per job).
	FilenameFormat string `json:"filename_format,omitempty"`
	// Seed seeds the random offsets; job i uses Seed+i. 0 is a valid,
	// fixed seed: runs are repeatable.
	Seed uint64 `json:"seed,omitempty"`
	// SampleMs is the interval of the streamed samples: 100..60000; 0
	// means 1000.
	SampleMs int64 `json:"sample_ms,omitempty"`
	// NoInvalidate keeps the page cache of read files instead of dropping
	// it before the run (fio invalidate=0).
	NoInvalidate bool `json:"no_invalidate,omitempty"`
	// Profile takes a CPU profile of the guest agent while the jobs run
	// and returns it in Metrics.CPUProfile (pprof format).
	Profile bool `json:"profile,omitempty"`
}

// FioStep runs fio in the guest and maps its JSON output into Metrics. Set
// exactly one of JobFile, Args and CommandLine.
type FioStep struct {
	// Name labels the result; empty means the first job's name.
	Name string `json:"name,omitempty"`
	// JobFile is a fio job file, used verbatim.
	JobFile string `json:"job_file,omitempty"`
	// Args are fio's arguments, without the program name
	// (["--name=w", "--rw=write", ...]).
	Args []string `json:"args,omitempty"`
	// CommandLine is a fio command line as the seeds give it, split like a
	// POSIX shell splits words (quotes, backslashes, line continuations;
	// no expansion). A leading "fio" is dropped.
	CommandLine string `json:"command_line,omitempty"`
	// Dir is fio's working directory (relative --directory and job file
	// paths resolve against it); it is created when missing. Empty means
	// /tmp.
	Dir string `json:"dir,omitempty"`
	// MakeDirs are directories to create before fio starts, relative to
	// Dir or absolute (fio refuses a --directory that does not exist; the
	// seeds mkdir it first).
	MakeDirs []string `json:"make_dirs,omitempty"`
	// Binary is the fio program; empty means "fio" in PATH.
	Binary string `json:"binary,omitempty"`
	// SampleMs is fio's --status-interval, which the samples come from:
	// 100..60000; 0 means 1000.
	SampleMs int64 `json:"sample_ms,omitempty"`
}

// Engine names who produced a Sample or Metrics.
type Engine string

// Engines.
const (
	// EngineGo is klab's Go engine (guest/workload).
	EngineGo Engine = "go"
	// EngineFio is fio.
	EngineFio Engine = "fio"
)

// Sample is one interval of a running workload, streamed while it runs.
type Sample struct {
	// Step is the step the sample belongs to.
	Step int `json:"step"`
	// Engine produced the sample.
	Engine Engine `json:"engine"`
	// Name is the workload's name.
	Name string `json:"name,omitempty"`
	// ElapsedMs is the end of the interval, from the start of the jobs.
	ElapsedMs int64 `json:"elapsed_ms"`
	// IntervalMs is the interval's length.
	IntervalMs int64 `json:"interval_ms"`
	// Ramp is true while the jobs are ramping up (not measured).
	Ramp bool `json:"ramp,omitempty"`
	// Ops is the number of operations completed in the interval.
	Ops int64 `json:"ops"`
	// Bytes is the number of bytes moved in the interval.
	Bytes int64 `json:"bytes"`
	// OpsPerSec is Ops over the interval.
	OpsPerSec float64 `json:"ops_per_sec"`
	// BytesPerSec is Bytes over the interval.
	BytesPerSec float64 `json:"bytes_per_sec"`
	// MeanLatNs is the mean operation latency in the interval, 0 when no
	// operation completed.
	MeanLatNs int64 `json:"mean_lat_ns"`
}

// Latency summarises operation latencies, in nanoseconds. Percentiles
// come from a log-linear histogram with a relative error under 1/64.
type Latency struct {
	// Count is the number of latencies recorded.
	Count int64 `json:"count"`
	// MinNs is the smallest latency (exact).
	MinNs int64 `json:"min_ns"`
	// MaxNs is the largest latency (exact).
	MaxNs int64 `json:"max_ns"`
	// MeanNs is the mean latency (exact).
	MeanNs int64 `json:"mean_ns"`
	// P50Ns is the median.
	P50Ns int64 `json:"p50_ns"`
	// P90Ns is the 90th percentile.
	P90Ns int64 `json:"p90_ns"`
	// P99Ns is the 99th percentile.
	P99Ns int64 `json:"p99_ns"`
	// P999Ns is the 99.9th percentile.
	P999Ns int64 `json:"p999_ns"`
}

// CPU is the CPU time the jobs' threads used while measured, in
// nanoseconds.
type CPU struct {
	// UserNs is time in user space: the engine's own cost.
	UserNs int64 `json:"user_ns"`
	// SysNs is time in the kernel on the jobs' behalf.
	SysNs int64 `json:"sys_ns"`
	// PerOpNs is (UserNs+SysNs)/Ops.
	PerOpNs float64 `json:"per_op_ns"`
	// UserPerOpNs is UserNs/Ops.
	UserPerOpNs float64 `json:"user_per_op_ns"`
}

// Metrics are the final numbers of a workload or fio step. Both engines
// fill the same fields with the same units, so that they can be compared.
type Metrics struct {
	// Engine produced the numbers.
	Engine Engine `json:"engine"`
	// EngineVersion is the fio version ("fio-3.33") or the agent's.
	EngineVersion string `json:"engine_version,omitempty"`
	// Name is the workload's name.
	Name string `json:"name"`
	// Pattern is the Go pattern, or for fio "<rw>/<ioengine>" of the first
	// job.
	Pattern string `json:"pattern"`
	// Jobs is the number of jobs (threads or processes) that ran.
	Jobs int `json:"jobs"`
	// Ops is the number of operations measured (after the ramp).
	Ops int64 `json:"ops"`
	// Bytes is the number of bytes those operations moved.
	Bytes int64 `json:"bytes"`
	// RuntimeNs is the measured time: the longest job's, as fio's group
	// reporting uses.
	RuntimeNs int64 `json:"runtime_ns"`
	// OpsPerSec is Ops/RuntimeNs, in operations per second.
	OpsPerSec float64 `json:"ops_per_sec"`
	// BytesPerSec is Bytes/RuntimeNs, in bytes per second.
	BytesPerSec float64 `json:"bytes_per_sec"`
	// Latency summarises per-operation latency.
	Latency Latency `json:"latency"`
	// CPU is what the jobs cost.
	CPU CPU `json:"cpu"`
	// RampNs is how long the jobs ran before measuring.
	RampNs int64 `json:"ramp_ns,omitempty"`
	// Errors counts failed operations (fio's per-job error, or the Go
	// engine's first error per job).
	Errors int64 `json:"errors,omitempty"`
	// CPUProfile is a pprof CPU profile of the agent during the run, when
	// WorkloadStep.Profile asked for one.
	CPUProfile []byte `json:"cpu_profile,omitempty"`
}
