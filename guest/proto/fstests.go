package proto

// fstests configurations' file systems.
const (
	// FstestsExt4 runs fstests on ext4: TEST_DEV and SCRATCH_DEV are two
	// brd ram disks.
	FstestsExt4 = "ext4"
	// FstestsFUSE runs fstests with FSTYP=fuse: each TEST and SCRATCH
	// mount starts a FUSE server (FstestsFUSE.Server) through a
	// mount.fuse.NAME helper, over a backing directory on an ext4 brd ram
	// disk.
	FstestsFUSE = "fuse"
)

// FUSE servers an fstests FUSE configuration can mount.
const (
	// FstestsServerKlab is klab's passthrough server (guest/fuse), run
	// by the agent binary as a mount helper.
	FstestsServerKlab = "klab"
	// FstestsServerPassthroughHP is libfuse 3.18's passthrough_hp
	// (LibfusePassthroughHPPath).
	FstestsServerPassthroughHP = "passthrough_hp"
)

// Where the agent puts fstests inside the userspace root: a tmpfs at
// FstestsGuestDir holds the tree on the fstests disk, mounted read-only at
// FstestsTreeDir, check's results directory (RESULT_BASE) and its
// local.config (HOST_OPTIONS).
const (
	FstestsGuestDir   = "/var/lib/klab-fstests"
	FstestsTreeDir    = FstestsGuestDir + "/tree"
	FstestsResultsDir = FstestsGuestDir + "/results"
	FstestsConfigFile = FstestsGuestDir + "/local.config"
)

// FstestsSerial is the virtio-blk serial of the disk that carries the
// fstests tree (an ext4 image of the built tree), read-only.
const FstestsSerial = "klab-fstests"

// FstestsStep runs fstests' ./check chrooted into Root (a userspace that
// a StepUserspace mounted before) on the tests listed, in order, and
// reports each test as it ends with a KindTest message. The step's Done
// comes when check exits, or when a test hangs: the agent then kills
// check, reports that test with status hang, and ends the step with
// Done.Error saying so; the tests after it are not run (the host boots a
// fresh guest for them).
type FstestsStep struct {
	// Root is the userspace root to run in (userspace.GuestRoot).
	Root string `json:"root"`
	// Serial is the virtio-blk serial of the fstests disk (FstestsSerial).
	Serial string `json:"serial"`
	// Config is the file system and how it is mounted.
	Config FstestsConfig `json:"config"`
	// Tests are fstests test names (generic/013), run in this order.
	Tests []string `json:"tests"`
	// TestTimeoutMs bounds each test's wall time in the guest, measured
	// from fstests' marker for it in /dev/kmsg; 0 means no bound.
	TestTimeoutMs int64 `json:"test_timeout_ms,omitempty"`
	// RamdiskMiB is the size of each brd ram disk (TEST, SCRATCH, or the
	// FUSE backing disk); 0 means 512.
	RamdiskMiB int `json:"ramdisk_mib,omitempty"`
	// Env is extra KEY=VALUE pairs for check (fstests' own variables, such
	// as SOAK_DURATION, or LOAD_FACTOR).
	Env []string `json:"env,omitempty"`
	// MaxDetail bounds each test's Diff and LogTail in bytes; 0 means
	// 8 KiB.
	MaxDetail int `json:"max_detail,omitempty"`
}

// FstestsConfig is one fstests configuration.
type FstestsConfig struct {
	// Name is the configuration's name (ext4, fuse-klab-uring, ...), for
	// reports; the agent does not interpret it.
	Name string `json:"name"`
	// FSType is FstestsExt4 or FstestsFUSE.
	FSType string `json:"fstype"`
	// MkfsOptions are mkfs options for ext4 (MKFS_OPTIONS).
	MkfsOptions string `json:"mkfs_options,omitempty"`
	// MountOptions are mount options (MOUNT_OPTIONS; FUSE_MOUNT_OPTIONS for
	// fuse), e.g. lazytime.
	MountOptions string `json:"mount_options,omitempty"`
	// FUSE is set for FstestsFUSE.
	FUSE *FstestsFUSEConfig `json:"fuse,omitempty"`
}

// FstestsFUSEConfig says which server serves FstestsFUSE mounts, and how.
type FstestsFUSEConfig struct {
	// Server is FstestsServerKlab or FstestsServerPassthroughHP.
	Server string `json:"server"`
	// Transport is FUSETransportDev or FUSETransportURing.
	Transport string `json:"transport"`
}

// Test statuses, as KindTest reports them.
const (
	TestPass   = "pass"
	TestFail   = "fail"
	TestNotRun = "notrun"
	// TestHang is a test that overran its timeout (FstestsStep's, or the
	// host's when the guest stopped answering).
	TestHang = "hang"
	// TestCrash is a test during which the kernel crashed or the guest
	// died; only the host reports it.
	TestCrash = "crash"
)

// TestResult is one fstests test's outcome, sent as KindTest as soon as
// the test ends. The host bounds and cleans every string again.
type TestResult struct {
	// Step is the FstestsStep's ID.
	Step int `json:"step"`
	// Name is the test (generic/013).
	Name string `json:"name"`
	// Status is one of TestPass, TestFail, TestNotRun, TestHang.
	Status string `json:"status"`
	// Seconds is the test's wall time as the guest measured it.
	Seconds float64 `json:"seconds"`
	// Reason is why a test did not run (its .notrun), or a one-line reason
	// for a failure (output mismatch, dmesg, timeout).
	Reason string `json:"reason,omitempty"`
	// Diff is the head of the test's .out.bad diff against its golden
	// output, for failures.
	Diff string `json:"diff,omitempty"`
	// LogTail is the tail of the test's .full log (and .dmesg), for
	// failures and hangs.
	LogTail string `json:"log_tail,omitempty"`
	// Transport, for FUSE configurations, is the proof of what served
	// the test's mounts: the transports and request counts the servers
	// reported (dev=N uring=M), empty when no server reported.
	Transport string `json:"transport,omitempty"`
}
