// RunGuest, one guest's share of an fstests run: a kernel with the
// test-suite userspace and the fstests disk attached, brd ram disks sized
// on its command line, a StepUserspace and a StepFstests, and the per-test
// results the agent reports. A guest whose kernel crashes or hangs
// mid-list names the test that was running (the last fstests marker on
// the console) and the tests left, for the caller to boot a fresh guest
// for them.

package fstests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"klab/guest/proto"
	imgfstests "klab/images/fstests"
	"klab/images/userspace"
	"klab/internal/textsafe"
	"klab/lab"
	"klab/results"
	"klab/results/suite/statusline"
)

// Defaults of a GuestRequest.
const (
	// DefaultMemMB is the guest memory: the ram disks, the tree's copy
	// and the tests share it.
	DefaultMemMB = 2048
	// DefaultRamdiskMiB is each brd ram disk's size.
	DefaultRamdiskMiB = 512
	// setupAllowance bounds, beyond the tests' own timeouts, the step's
	// set-up (copying the tree, mkfs) and check's own work.
	setupAllowance = 15 * time.Minute
	// unboundedStep bounds the fstests step when tests have no timeout.
	unboundedStep = 24 * time.Hour
)

// GuestRequest is one guest's share of an fstests run.
type GuestRequest struct {
	// Kernel is the kernel to boot, resolved (lab.Opener.ResolveKernel).
	Kernel *results.Kernel
	// Userspace is the userspace to run check in (userspace.Build).
	Userspace *userspace.Image
	// Fstests is the built fstests tree (images/fstests.Build); its disk
	// is made on first use.
	Fstests *imgfstests.Built
	// Config is the file system configuration.
	Config proto.FstestsConfig
	// Tests are the tests to run, in order.
	Tests []string
	// TestTimeout bounds each test's wall time in the guest; 0 means no
	// bound.
	TestTimeout time.Duration
	// RamdiskMiB is each ram disk's size; 0 means DefaultRamdiskMiB.
	RamdiskMiB int
	// Env are extra KEY=VALUE pairs for check.
	Env []string
	// MaxDetail bounds each test's Diff and LogTail; 0 means the agent's
	// 8 KiB.
	MaxDetail int
	// MemMB and CPUs size the guest; 0 means DefaultMemMB and one CPU.
	MemMB, CPUs int
	// Cmdline is extra kernel command line, after the ram disks' sizes.
	Cmdline string
	// RunsDir, when set, is where the guest's run directory is made.
	RunsDir string
	// BootTimeout bounds boot to agent under KVM (scaled under TCG); 0
	// means lab's default.
	BootTimeout time.Duration
	// Console, when set, also receives the guest's console.
	Console io.Writer
	// Progress, when set, receives the run's progress lines.
	Progress io.Writer
	// OnTest, when set, sees each test's result as it comes.
	OnTest func(proto.TestResult)
	// Command is klab's own argv, for the manifest.
	Command []string
}

// GuestResult is what one guest ran.
type GuestResult struct {
	// Tests are the results the agent reported, in the order the tests
	// ended; a test that overran its timeout in the guest is among them,
	// with status hang.
	Tests []proto.TestResult
	// Running is the test that was running when the kernel crashed or
	// hung, or the guest died, with no result of its own; "" when there
	// was none. RunningStatus is then proto.TestCrash or proto.TestHang
	// (the kernel hung), and Stopped the kernel's message.
	Running, RunningStatus string
	// Remaining are the tests that did not run, Running excluded, in
	// order: the caller boots a fresh guest for them.
	Remaining []string
	// Stopped says why the list stopped before its end ("" when it did
	// not): the agent's error for a test that hung, or the kernel's.
	Stopped string
	// XUnit is check's result.xml, when check finished.
	XUnit string
	// RunDir is the guest's run directory; Console its console log.
	RunDir, Console string
	// BootToAgent is from QEMU's start to the agent's Hello.
	BootToAgent time.Duration
	// Mount is the userspace step's time and Step the fstests step's
	// (set-up and check), both as the guest measured them.
	Mount, Step time.Duration
}

// Cmdline is the kernel command line that sizes a built-in brd: n ram
// disks of mib MiB. A brd module takes the same parameters from the
// agent when it loads it.
func Cmdline(n, mib int) string {
	return fmt.Sprintf("brd.rd_nr=%d brd.rd_size=%d", n, mib<<10)
}

// ramdisks is how many ram disks a configuration uses.
func ramdisks(fstype string) int {
	if fstype == proto.FstestsFUSE {
		return 1
	}
	return 2
}

// RunGuest boots one guest of req.Kernel and runs req.Tests in it. It
// returns an error, with whatever result there is, only when the guest
// ran no test it could be charged to: it did not boot, its set-up
// failed, or check ended without running the tests. A test that hangs
// (the agent's timeout) or during which the kernel crashed or hung ends
// the guest with a result whose Remaining are the tests left to run.
func RunGuest(ctx context.Context, opener lab.Opener, req GuestRequest) (*GuestResult, error) {
	if req.Kernel == nil || req.Userspace == nil || req.Fstests == nil {
		return nil, errors.New("fstests guest: a kernel, a userspace and fstests are needed")
	}
	if len(req.Tests) == 0 {
		return nil, errors.New("fstests guest: no tests")
	}
	disk, err := req.Fstests.Disk(ctx)
	if err != nil {
		return nil, err
	}
	att, err := userspace.Attach(req.Userspace, req.Kernel)
	if err != nil {
		return nil, err
	}
	mib := req.RamdiskMiB
	if mib == 0 {
		mib = DefaultRamdiskMiB
	}
	step := proto.Step{Kind: proto.StepFstests, Fstests: &proto.FstestsStep{
		Root: userspace.GuestRoot, Serial: proto.FstestsSerial, Config: req.Config, Tests: req.Tests,
		TestTimeoutMs: req.TestTimeout.Milliseconds(), RamdiskMiB: mib, Env: req.Env, MaxDetail: req.MaxDetail,
	}}
	limit := unboundedStep
	if req.TestTimeout > 0 {
		limit = time.Duration(len(req.Tests))*req.TestTimeout + setupAllowance
	}
	step.TimeoutMs = limit.Milliseconds()
	mem := req.MemMB
	if mem == 0 {
		mem = DefaultMemMB
	}
	markers := &markerWatch{}
	console := io.Writer(markers)
	if req.Console != nil {
		console = io.MultiWriter(markers, req.Console)
	}
	res := &GuestResult{}
	var mu sync.Mutex // guards res.Tests
	breq := lab.BootRequest{
		Kernel: req.Kernel.Name, Resolved: req.Kernel,
		MemMB: mem, CPUs: req.CPUs,
		Cmdline:     strings.TrimSpace(Cmdline(ramdisks(req.Config.FSType), mib) + " " + req.Cmdline),
		QEMUArgs:    append(append([]string(nil), att.QEMUArgs...), imgfstests.DiskQEMUArgs(disk)...),
		Modules:     att.Modules,
		BootTimeout: req.BootTimeout,
		StepTimeout: limit,
		Console:     console,
		Progress:    req.Progress,
		RunsDir:     req.RunsDir,
		RunKind:     "fstests",
		Command:     req.Command,
		// A kernel splat is charged to a test by the caller (the
		// markers), not a reason to fail the guest.
		IgnoreSplats: true,
		// The initramfs gets what the steps need: libfuse's
		// passthrough_hp for its configurations.
		Prepare: []proto.Step{att.Step, step},
		OnMessage: func(m *proto.Message) {
			if m.Kind != proto.KindTest {
				return
			}
			mu.Lock()
			res.Tests = append(res.Tests, *m.Test)
			mu.Unlock()
			if req.OnTest != nil {
				req.OnTest(*m.Test)
			}
		},
	}
	g, err := opener.Open(ctx, breq)
	if err != nil {
		if g != nil {
			if br, _ := g.Close(); br != nil {
				res.RunDir, res.Console = br.RunDir, filepath.Join(br.RunDir, results.ConsoleFile)
			}
		}
		return res, fmt.Errorf("fstests guest: %w", err)
	}
	done, runErr := g.Run(ctx, []proto.Step{att.Step, step})
	br, closeErr := g.Close()
	if br != nil {
		res.RunDir, res.Console, res.BootToAgent = br.RunDir, filepath.Join(br.RunDir, results.ConsoleFile), br.BootToAgent
	}
	for _, d := range done {
		switch d.Step.Kind {
		case proto.StepUserspace:
			res.Mount = time.Duration(d.Done.DurationNs)
		case proto.StepFstests:
			res.Step = time.Duration(d.Done.DurationNs)
			res.XUnit = d.Done.XUnit
			if d.Done.Error != "" {
				res.Stopped = textsafe.OneLine(d.Done.Error)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	reported := map[string]bool{}
	hung := false
	for _, t := range res.Tests {
		reported[t.Name] = true
		hung = hung || t.Status == proto.TestHang
	}
	err = runErr
	if err == nil {
		err = closeErr
	}
	var ke *lab.KernelError
	if errors.As(err, &ke) {
		res.Running = markers.running(req.Tests, reported)
		if res.Running != "" {
			res.RunningStatus = proto.TestCrash
			if ke.Status == string(results.StatusKernelHang) {
				res.RunningStatus = proto.TestHang
			}
			reported[res.Running] = true
			res.Stopped = textsafe.OneLine(ke.Status + ": " + ke.Msg)
		}
	}
	for _, t := range req.Tests {
		if !reported[t] {
			res.Remaining = append(res.Remaining, t)
		}
	}
	switch {
	case res.Running != "" || (hung && err != nil):
		return res, nil // charged to a test; the caller goes on with Remaining
	case err != nil:
		return res, fmt.Errorf("fstests guest: %w", err)
	case len(res.Remaining) > 0:
		return res, fmt.Errorf("fstests guest: no result for %s", strings.Join(res.Remaining, " "))
	}
	return res, nil
}

// markerWatch reads the console for fstests' markers ("run fstests
// generic/013 at ..."), which check writes to /dev/kmsg before each test.
type markerWatch struct {
	mu      sync.Mutex // guards the fields below
	partial []byte
	seen    []string
}

func (w *markerWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		if name, ok := ConsoleMarker(string(w.partial[:i])); ok {
			w.seen = append(w.seen, name)
		}
		w.partial = w.partial[i+1:]
	}
	if len(w.partial) > 64<<10 {
		w.partial = w.partial[:0]
	}
	return len(p), nil
}

// running is the test that was running: the last marked test of tests
// without a result, or, with no marker seen, the first test without one
// once some test had a result.
func (w *markerWatch) running(tests []string, reported map[string]bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.seen) - 1; i >= 0; i-- {
		if n := w.seen[i]; slices.Contains(tests, n) && !reported[n] {
			return n
		}
	}
	if len(reported) == 0 || len(w.seen) > 0 {
		return ""
	}
	for _, t := range tests {
		if !reported[t] {
			return t
		}
	}
	return ""
}

// ConsoleMarker returns the test that a console line marks as starting
// ("[   12.345678] run fstests generic/013 at 2024-01-02 03:04:05").
func ConsoleMarker(line string) (string, bool) {
	return statusline.Marker(line)
}
