package results

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// SchemaVersion is the version of the manifest format that this package
// writes. ReadManifest refuses manifests from a newer klab.
const SchemaVersion = 1

// maxManifest bounds what ReadManifest reads.
const maxManifest = 16 << 20

// Manifest is manifest.json: everything needed to repeat a run (klab rerun
// uses nothing else) and how it ended.
type Manifest struct {
	// Schema is the manifest format version (SchemaVersion).
	Schema int `json:"schema"`
	// RunID is the run's id in its store.
	RunID string `json:"run_id"`
	// Command is klab's own argv for this run.
	Command []string `json:"command"`
	// Kernel is the kernel that was booted.
	Kernel Kernel `json:"kernel"`
	// Initramfs is the initramfs that was booted.
	Initramfs Initramfs `json:"initramfs"`
	// AgentVersion identifies the guest agent build in the initramfs.
	AgentVersion string `json:"agent_version"`
	// QEMU is the emulator and its full command line.
	QEMU QEMU `json:"qemu"`
	// Accel is the accelerator actually used: AccelKVM or AccelTCG. Empty
	// only when the run failed before QEMU was started.
	Accel Accel `json:"accel,omitempty"`
	// AccelReason says why Accel was chosen, e.g. "kvm probe timed out".
	AccelReason string `json:"accel_reason,omitempty"`
	// TimeoutFactor multiplied every boot, step and watchdog timeout (1
	// under KVM, larger under TCG).
	TimeoutFactor float64 `json:"timeout_factor"`
	// Host is the machine that ran QEMU.
	Host Host `json:"host"`
	// Experiment is the experiment file and its parameters; nil for runs
	// that are not part of an experiment (e.g. a bare boot).
	Experiment *Experiment `json:"experiment,omitempty"`
	// Seed seeds the run's random choices (workload offsets and the like);
	// 0 when nothing random was used.
	Seed int64 `json:"seed,omitempty"`
	// Times are the run's wall-clock times.
	Times Times `json:"times"`
	// Outcome says how the run ended. Its Status is empty while the run is
	// in progress, and stays empty if klab died before finishing it.
	Outcome Outcome `json:"outcome"`
	// Truncated names the logs the size caps cut (console.log,
	// events.jsonl): the guest printed more than they keep.
	Truncated []string `json:"truncated,omitempty"`
}

// Kernel is a bootable kernel with everything klab knows about it: its
// identity and where it came from. Package images finds and caches
// kernels as this type, so the cache's kernel.json and a manifest's
// "kernel" are one format; in a manifest, the paths name the files in
// klab's cache when the run was made.
type Kernel struct {
	// Name is the human name the user gave, e.g. "debian:7.3" or a path.
	Name string `json:"name"`
	// ID is a content hash of the image and its config ("k-" + 16 hex).
	ID string `json:"id"`
	// Version is the kernel release (uname -r), when known.
	Version string `json:"version,omitempty"`
	// Source says where the kernel came from: "debian", "local", "tree",
	// "build", or "host" (the host's running kernel: no VM).
	Source string `json:"source"`
	// Package is the Debian package, for Source "debian".
	Package string `json:"package,omitempty"`
	// PackageVersion is the Debian package version, for Source "debian".
	PackageVersion string `json:"package_version,omitempty"`
	// Suite is the Debian suite the package came from.
	Suite string `json:"suite,omitempty"`
	// Image is the path of the bzImage.
	Image string `json:"image"`
	// ImageSize is the image's size when it was cached; a cache hit
	// whose image has another size is damaged, and ignored.
	ImageSize int64 `json:"image_size,omitempty"`
	// Config is the path of the kernel's .config, empty when unknown.
	Config string `json:"config,omitempty"`
	// Modules is the directory holding modules.* and kernel/**.ko*, empty
	// when the kernel has no modules shipped with it.
	Modules string `json:"modules,omitempty"`
	// Build says how the kernel was built, for Source "build".
	Build *KernelBuild `json:"build,omitempty"`
}

// KernelBuild says how a kernel was built from source: enough to build it
// again with `klab kernels build`.
type KernelBuild struct {
	// Tree is the source: the absolute path of a git tree or tarball, or
	// "debian:<series>=<package version>" for Debian's linux-source.
	Tree string `json:"tree"`
	// BaseCommit is the commit the patches apply to, when Tree is git.
	BaseCommit string `json:"base_commit,omitempty"`
	// BaseSHA256 is the hex SHA-256 of the tarball, when Tree is one.
	BaseSHA256 string `json:"base_sha256,omitempty"`
	// Patches are the applied patches, in order. An mbox holding several
	// patches gives one entry per patch.
	Patches []FileHash `json:"patches,omitempty"`
	// BaseConfig is the make target the fragments are merged onto:
	// "tinyconfig" or "defconfig".
	BaseConfig string `json:"base_config,omitempty"`
	// Fragments are the merged config fragments, in order; a fragment
	// shipped with klab has Path "lab" or "debug".
	Fragments []FileHash `json:"fragments,omitempty"`
	// ConfigSHA256 is the hex SHA-256 of the final .config.
	ConfigSHA256 string `json:"config_sha256,omitempty"`
	// Compiler is the first line of `gcc --version`.
	Compiler string `json:"compiler,omitempty"`
	// Key is the build's cache key (the results directory name).
	Key string `json:"key,omitempty"`
	// Log is the path of the full build log.
	Log string `json:"log,omitempty"`
}

// FileHash is a file and the SHA-256 of its content (lower-case hex).
type FileHash struct {
	// Path is the file as given to klab (for a patch in an mbox, the
	// mbox's path and the message number, "series.mbox#2").
	Path string `json:"path"`
	// SHA256 is the hex SHA-256 of the content.
	SHA256 string `json:"sha256"`
	// Subject is a patch's subject line, when it has one.
	Subject string `json:"subject,omitempty"`
}

// Initramfs is the initramfs that was booted.
type Initramfs struct {
	// Path is the cpio archive's path.
	Path string `json:"path"`
	// SHA256 is the hex SHA-256 of the archive.
	SHA256 string `json:"sha256"`
}

// QEMU is the emulator that ran the guest.
type QEMU struct {
	// Binary is the path of the qemu-system binary.
	Binary string `json:"binary"`
	// Version is the first line of `qemu-system-* --version`.
	Version string `json:"version"`
	// Argv is the full command line, Binary first.
	Argv []string `json:"argv"`
}

// Accel is a QEMU accelerator, or AccelHost for a run without a VM.
type Accel string

// Accelerators klab uses.
const (
	AccelKVM Accel = "kvm"
	AccelTCG Accel = "tcg"
	// AccelHost is no VM at all: the agent ran on the host itself (an
	// experiment run with --kernel host).
	AccelHost Accel = "host"
)

// Host describes the machine that ran QEMU. HostInfo fills it.
type Host struct {
	// KernelRelease is the host's uname -r.
	KernelRelease string `json:"kernel_release"`
	// CPUModel is the CPU's model name from /proc/cpuinfo.
	CPUModel string `json:"cpu_model"`
	// Hostname is the host's name; optional (leave it empty to keep host
	// names out of shared results).
	Hostname string `json:"hostname,omitempty"`
	// Arch is the host architecture (GOARCH).
	Arch string `json:"arch,omitempty"`
	// CPUs is the number of CPUs klab may use.
	CPUs int `json:"cpus"`
	// MemKiB is MemTotal from /proc/meminfo.
	MemKiB int64 `json:"mem_kib"`
}

// Experiment identifies the experiment a run belongs to.
type Experiment struct {
	// File is the experiment file's path as given to klab.
	File string `json:"file"`
	// SHA256 is the hex SHA-256 of the file's content.
	SHA256 string `json:"sha256"`
	// Params are the parameter values of this run's point in the matrix.
	Params map[string]string `json:"params,omitempty"`
}

// Times are a run's wall-clock times.
type Times struct {
	// Start is when the run began.
	Start time.Time `json:"start"`
	// End is when the run ended; zero while it is in progress.
	End time.Time `json:"end,omitzero"`
	// BootToAgentMs is the time from QEMU's start to the agent's Hello, in
	// milliseconds; 0 when the agent never answered.
	BootToAgentMs int64 `json:"boot_to_agent_ms,omitempty"`
}

// Status says how a run ended.
type Status string

// Run statuses. Every status but StatusOK is a failure; Class says whose.
const (
	// StatusOK: every step ran and reported done.
	StatusOK Status = "ok"
	// StatusKernelPanic: the console showed a kernel panic.
	StatusKernelPanic Status = "kernel-panic"
	// StatusKernelHang: the guest stopped making progress after boot.
	StatusKernelHang Status = "kernel-hang"
	// StatusBootTimeout: the agent never said hello within the boot timeout.
	StatusBootTimeout Status = "boot-timeout"
	// StatusKernelError: another kernel failure, e.g. a fatal splat.
	StatusKernelError Status = "kernel-error"
	// StatusInfraError: klab, QEMU or the host failed; says nothing about
	// the kernel.
	StatusInfraError Status = "infra-error"
	// StatusStepFailed: a step in the guest failed (non-zero exit or a
	// failed check) on a kernel that stayed up.
	StatusStepFailed Status = "step-failed"
)

// Class says who is at fault for an outcome.
type Class string

// Outcome classes.
const (
	// ClassNone is the class of StatusOK.
	ClassNone Class = ""
	// ClassKernel: the failure is a result about the kernel under test.
	ClassKernel Class = "kernel"
	// ClassInfra: the failure is the tool's or the host's.
	ClassInfra Class = "infra"
)

// Valid reports whether s is one of the Status constants.
func (s Status) Valid() bool {
	switch s {
	case StatusOK, StatusKernelPanic, StatusKernelHang, StatusBootTimeout,
		StatusKernelError, StatusInfraError, StatusStepFailed:
		return true
	}
	return false
}

// Class returns the class a status belongs to: ClassNone for StatusOK,
// ClassInfra for StatusInfraError, and ClassKernel for the others (a kernel
// that does not boot, panics, hangs, or fails a step is a result about that
// kernel). It returns ClassNone for an invalid status.
func (s Status) Class() Class {
	switch s {
	case StatusInfraError:
		return ClassInfra
	case StatusKernelPanic, StatusKernelHang, StatusBootTimeout, StatusKernelError, StatusStepFailed:
		return ClassKernel
	}
	return ClassNone
}

// Outcome is how a run ended.
type Outcome struct {
	// Status is the run's status; empty while the run is in progress.
	Status Status `json:"status"`
	// Class is Status.Class(); WriteManifest fills it when empty.
	Class Class `json:"class"`
	// Message says what happened, for humans (e.g. the panic title).
	Message string `json:"message,omitempty"`
	// ExitCode is the exit status behind the outcome (the failed step's,
	// or QEMU's); 0 when there is none.
	ExitCode int `json:"exit_code"`
}

// NewOutcome returns an Outcome with the class that status implies.
func NewOutcome(status Status, message string, exitCode int) Outcome {
	return Outcome{Status: status, Class: status.Class(), Message: message, ExitCode: exitCode}
}

// Validate checks the fields a reader relies on and returns every problem
// found, joined.
func (m *Manifest) Validate() error {
	var errs []error
	if m.Schema < 1 || m.Schema > SchemaVersion {
		errs = append(errs, fmt.Errorf("schema: %d is not supported, want 1..%d", m.Schema, SchemaVersion))
	}
	if !ValidName(m.RunID) {
		errs = append(errs, fmt.Errorf("run_id: %q is not a plain name", m.RunID))
	}
	switch m.Accel {
	case "", AccelKVM, AccelTCG, AccelHost:
	default:
		errs = append(errs, fmt.Errorf("accel: %q is not allowed, want %q, %q or %q", m.Accel, AccelKVM, AccelTCG, AccelHost))
	}
	if m.TimeoutFactor < 0 {
		errs = append(errs, fmt.Errorf("timeout_factor: %v is negative", m.TimeoutFactor))
	}
	if !m.Times.End.IsZero() && m.Times.End.Before(m.Times.Start) {
		errs = append(errs, fmt.Errorf("times: end %v is before start %v", m.Times.End, m.Times.Start))
	}
	o := m.Outcome
	switch {
	case o.Status == "":
		if o.Class != ClassNone {
			errs = append(errs, fmt.Errorf("outcome: class %q without a status", o.Class))
		}
	case !o.Status.Valid():
		errs = append(errs, fmt.Errorf("outcome: status %q is not one of ok, kernel-panic, kernel-hang, boot-timeout, kernel-error, infra-error, step-failed", o.Status))
	case o.Class != o.Status.Class():
		errs = append(errs, fmt.Errorf("outcome: class %q does not match status %q (want %q)", o.Class, o.Status, o.Status.Class()))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid manifest: %w", err)
	}
	return nil
}

// ReadManifest reads and validates dir/manifest.json. A missing manifest is
// an error wrapping fs.ErrNotExist.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	if len(data) > maxManifest {
		return nil, fmt.Errorf("read manifest %s: larger than %d bytes", path, maxManifest)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", path, err)
	}
	return &m, nil
}

// HostInfo describes this machine: the kernel release (uname -r, read from
// /proc/sys/kernel/osrelease), the CPU model from /proc/cpuinfo, MemTotal
// from /proc/meminfo, the CPU count and the host name. It fills what it can;
// the error joins whatever could not be read.
func HostInfo() (Host, error) {
	h := Host{Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	var errs []error
	if rel, err := os.ReadFile("/proc/sys/kernel/osrelease"); err != nil {
		errs = append(errs, fmt.Errorf("kernel release: %w", err))
	} else {
		h.KernelRelease = strings.TrimSpace(string(rel))
	}
	if name, err := os.Hostname(); err != nil {
		errs = append(errs, fmt.Errorf("host name: %w", err))
	} else {
		h.Hostname = name
	}
	if err := parseFile("/proc/cpuinfo", func(r io.Reader) (err error) {
		h.CPUModel, err = parseCPUModel(r)
		return err
	}); err != nil {
		errs = append(errs, err)
	}
	if err := parseFile("/proc/meminfo", func(r io.Reader) (err error) {
		h.MemKiB, err = parseMemTotal(r)
		return err
	}); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return h, fmt.Errorf("host info: %w", err)
	}
	return h, nil
}

func parseFile(path string, parse func(io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := parse(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// cpuModelKeys are the /proc/cpuinfo fields that name the CPU, by
// preference: x86, MIPS, ARM boards, POWER.
var cpuModelKeys = []string{"model name", "cpu model", "Hardware", "cpu"}

// parseCPUModel returns the CPU model from /proc/cpuinfo content.
func parseCPUModel(r io.Reader) (string, error) {
	found := map[string]string{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, seen := found[k]; !seen {
			found[k] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	for _, k := range cpuModelKeys {
		if v := found[k]; v != "" {
			return v, nil
		}
	}
	if impl, part := found["CPU implementer"], found["CPU part"]; impl != "" {
		return fmt.Sprintf("implementer %s part %s", impl, part), nil
	}
	return "", errors.New("no CPU model field")
}

// parseMemTotal returns MemTotal in KiB from /proc/meminfo content.
func parseMemTotal(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("MemTotal: %w", err)
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no MemTotal line")
}
