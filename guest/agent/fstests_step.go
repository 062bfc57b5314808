package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
)

// Bounds of an fstests step's reports.
const (
	// defaultMaxDetail bounds a test's Diff and LogTail when the step sets
	// no MaxDetail.
	defaultMaxDetail = 8 << 10
	// maxXUnit bounds Done.XUnit.
	maxXUnit = 256 << 10
	// maxReason bounds a test's one-line Reason.
	maxReason = 512
	// defaultRamdiskMiB is the size of each ram disk when the step sets
	// none.
	defaultRamdiskMiB = 512
	// fstestsDiffLines is how much of a failed test's diff check prints
	// (its DIFF_LENGTH), unless the step's Env says otherwise.
	fstestsDiffLines = 200
	// fstestsBacking is where, inside the root, the ext4 disk that backs
	// FUSE configurations' mounts is mounted.
	fstestsBacking = "/mnt/klab-backing"
	// killWait bounds the wait for check after its process group was
	// killed: a task stuck in the kernel may never go.
	killWait = 10 * time.Second
)

// runFstests runs fstests' ./check chrooted into a userspace
// (StepFstests): it mounts the tree on the fstests disk read-only in the
// root, with local.config and the results directory on a tmpfs beside it,
// prepares the ram disks, runs check on the
// step's tests and reports each test as it ends (KindTest). A test that
// overruns the step's per-test timeout gets check's process group killed
// and is reported as a hang; the step then ends with an error.
func runFstests(ctx context.Context, a *Agent, s *proto.Step) proto.Done {
	f := s.Fstests
	fail := func(format string, args ...any) proto.Done {
		return proto.Done{ExitCode: -1, Error: "fstests: " + fmt.Sprintf(format, args...)}
	}
	if f == nil {
		return fail("step without its fstests field")
	}
	if err := checkGuestDir(f.Root); err != nil {
		return fail("root: %v", err)
	}
	if len(f.Tests) == 0 {
		return fail("no tests to run")
	}
	for _, t := range f.Tests {
		if !testNameRe.MatchString(t) {
			return fail("test %q: want a test name such as generic/013", t)
		}
	}
	if err := validEnv(f.Env); err != nil {
		return fail("%v", err)
	}
	if f.TestTimeoutMs < 0 || f.RamdiskMiB < 0 || f.MaxDetail < 0 {
		return fail("negative timeout, ram disk size or detail bound")
	}
	dir := filepath.Join(f.Root, proto.FstestsGuestDir)
	t0 := time.Now()
	if err := installFstests(f.Root, f.Serial, dir); err != nil {
		return fail("%v", err)
	}
	a.Logf("fstests: tree mounted read-only at %s in %.1fs", proto.FstestsTreeDir, time.Since(t0).Seconds())
	config, proof, err := prepareFstestsDevices(ctx, a, f)
	if err != nil {
		return fail("%v", err)
	}
	if err := os.WriteFile(filepath.Join(f.Root, proto.FstestsConfigFile), []byte(renderLocalConfig(config)), 0o644); err != nil {
		return fail("local.config: %v", err)
	}
	r := &fstestsRun{a: a, step: s.ID, f: f, results: filepath.Join(f.Root, proto.FstestsResultsDir), proof: proof,
		maxDetail: f.MaxDetail, reported: map[string]bool{}}
	if r.maxDetail == 0 {
		r.maxDetail = defaultMaxDetail
	}
	return r.run(ctx)
}

// installFstests puts a tmpfs of its own on dir, so that each step starts
// with an empty results directory and a fresh local.config, and mounts the
// tree on the disk with serial read-only inside it (FstestsTreeDir): check
// runs from the disk as built, with nothing copied.
func installFstests(root, serial, dir string) error {
	if serial == "" {
		serial = proto.FstestsSerial
	}
	dev, err := diskBySerial("/sys/block", serial, diskWait)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%s must be writable in the userspace (a writable directory of its userspace step): %w", proto.FstestsGuestDir, err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", dir, err)
	}
	tree := filepath.Join(root, proto.FstestsTreeDir)
	for _, d := range []string{tree, filepath.Join(root, proto.FstestsResultsDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount(dev, tree, "ext4", unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID, "noload"); err != nil {
		return fmt.Errorf("mount the fstests disk %s: %w", dev, err)
	}
	if _, err := os.Stat(filepath.Join(tree, "check")); err != nil {
		return fmt.Errorf("the fstests disk has no check script: %w", err)
	}
	return nil
}

// prepareFstestsDevices makes the ram disks and the mount points, and
// returns local.config's lines and, for FUSE, the transport proof.
func prepareFstestsDevices(ctx context.Context, a *Agent, f *proto.FstestsStep) ([]string, func() string, error) {
	size := f.RamdiskMiB
	if size == 0 {
		size = defaultRamdiskMiB
	}
	for _, m := range []string{fstestsTestDir, fstestsScratchMnt} {
		if err := os.MkdirAll(filepath.Join(f.Root, m), 0o755); err != nil {
			return nil, nil, fmt.Errorf("mount point %s: %w", m, err)
		}
	}
	switch f.Config.FSType {
	case proto.FstestsExt4:
		disks, err := ramDisks(2, size)
		if err != nil {
			return nil, nil, err
		}
		mkfs := []string{"mkfs.ext4", "-F", "-q"}
		mkfs = append(mkfs, strings.Fields(f.Config.MkfsOptions)...)
		if out, err := chrootRun(ctx, f.Root, append(mkfs, disks[0])...); err != nil {
			return nil, nil, fmt.Errorf("mkfs.ext4 %s (TEST_DEV): %w: %s", disks[0], err, tailBytes(out, 1024))
		}
		return ext4LocalConfig(&f.Config, disks[0], disks[1]), nil, nil
	case proto.FstestsFUSE:
		if f.Config.FUSE == nil {
			return nil, nil, errors.New("a fuse configuration without its server")
		}
		disks, err := ramDisks(1, size)
		if err != nil {
			return nil, nil, err
		}
		if out, err := chrootRun(ctx, f.Root, "mkfs.ext4", "-F", "-q", disks[0]); err != nil {
			return nil, nil, fmt.Errorf("mkfs.ext4 %s (the FUSE backing disk): %w: %s", disks[0], err, tailBytes(out, 1024))
		}
		backing := filepath.Join(f.Root, fstestsBacking)
		if err := os.MkdirAll(backing, 0o755); err != nil {
			return nil, nil, fmt.Errorf("backing directory: %w", err)
		}
		if err := unix.Mount(disks[0], backing, "ext4", 0, ""); err != nil {
			return nil, nil, fmt.Errorf("mount the backing disk %s: %w", disks[0], err)
		}
		lines, proof, err := prepareFstestsFUSE(ctx, f.Root, f.Config.FUSE, backing)
		if err != nil {
			return nil, nil, fmt.Errorf("fuse: %w", err)
		}
		if f.Config.MountOptions != "" {
			// The configuration's options come after klab's own.
			lines = append(lines, "export FUSE_MOUNT_OPTIONS=\"$FUSE_MOUNT_OPTIONS\""+shellQuote(","+f.Config.MountOptions))
		}
		a.Logf("fstests: %s served by %s over %s, backing %s on %s", f.Config.Name, f.Config.FUSE.Server, f.Config.FUSE.Transport, fstestsBacking, disks[0])
		return lines, proof, nil
	default:
		return nil, nil, fmt.Errorf("file system %q: want %s or %s", f.Config.FSType, proto.FstestsExt4, proto.FstestsFUSE)
	}
}

// ramDisks returns n brd ram disks of at least mib MiB each: the ones
// there are (brd built in, sized by brd.rd_nr and brd.rd_size on the
// command line), or brd loaded from the initramfs's spare modules with
// that many and that size.
func ramDisks(n, mib int) ([]string, error) {
	if _, err := os.Stat("/dev/ram0"); err != nil {
		spares, err := ReadSpare(ModulesDir)
		if err != nil {
			return nil, err
		}
		m, ok := FindSpare(spares, "brd")
		if !ok {
			return nil, fmt.Errorf("no /dev/ram0 and no brd module: give a kernel with brd (klab's lab config has it built in; boot it with brd.rd_nr=%d brd.rd_size=%d)", n, mib<<10)
		}
		if err := loadSpare(ModulesDir, m, fmt.Sprintf("rd_nr=%d rd_size=%d", n, mib<<10)); err != nil {
			return nil, fmt.Errorf("brd: %w", err)
		}
	}
	var disks []string
	for i := 0; i < n; i++ {
		name := "ram" + strconv.Itoa(i)
		var sectors int64
		deadline := time.Now().Add(diskWait)
		for {
			b, err := os.ReadFile(filepath.Join("/sys/block", name, "size"))
			if err == nil {
				sectors, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("no /dev/%s: brd has fewer than %d ram disks (boot with brd.rd_nr=%d brd.rd_size=%d)", name, n, n, mib<<10)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if sectors*512 < int64(mib)<<20 {
			return nil, fmt.Errorf("/dev/%s has %d MiB, want %d (boot with brd.rd_size=%d)", name, sectors>>11, mib, mib<<10)
		}
		if _, err := os.Stat("/dev/" + name); err != nil {
			return nil, fmt.Errorf("/dev/%s: %w", name, err)
		}
		disks = append(disks, "/dev/"+name)
	}
	return disks, nil
}

// chrootRun runs argv chrooted into root and returns its combined output.
func chrootRun(ctx context.Context, root string, argv ...string) (string, error) {
	path, err := lookPathIn(root, argv[0], chrootPath)
	if err != nil {
		return "", err
	}
	// path is inside root: the child runs it once chrooted.
	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Args[0], cmd.Dir, cmd.Env = argv[0], "/", chrootEnv(nil)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Setpgid: true}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// fstestsRun is one run of ./check and what it reported so far.
type fstestsRun struct {
	a       *Agent
	step    int
	f       *proto.FstestsStep
	results string
	proof   func() string
	// maxDetail bounds Diff and LogTail.
	maxDetail int

	// running is the test the last kmsg marker named, since started; it
	// is "" once that test has ended.
	running string
	started time.Time
	// lastEnd is when the last test ended (or check started).
	lastEnd time.Time
	// pending is a failed test held until check moves on, so that its
	// files and diff are whole; diff collects the diff check prints.
	pending *proto.TestResult
	diff    strings.Builder
	// reported are the tests sent.
	reported map[string]bool
}

// checkLine is a line of check's standard output, or its end.
type checkLine struct {
	text string
	eof  bool
}

func (r *fstestsRun) run(ctx context.Context) proto.Done {
	f := r.f
	argv := append([]string{filepath.Join(proto.FstestsTreeDir, "check"), "-R", "xunit-quiet"}, f.Tests...)
	env := chrootEnv(append([]string{"DIFF_LENGTH=" + strconv.Itoa(fstestsDiffLines),
		"HOST_OPTIONS=" + proto.FstestsConfigFile, "RESULT_BASE=" + proto.FstestsResultsDir}, f.Env...))
	outR, outW, err := os.Pipe()
	if err != nil {
		return proto.Done{ExitCode: -1, Error: "fstests: " + err.Error()}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return proto.Done{ExitCode: -1, Error: "fstests: " + err.Error()}
	}
	cmd := &exec.Cmd{
		Path: argv[0], Args: argv, Env: env, Dir: proto.FstestsTreeDir,
		Stdout: outW, Stderr: errW,
		SysProcAttr: &syscall.SysProcAttr{Chroot: f.Root, Setpgid: true},
	}
	markers := make(chan string, 64)
	kctx, stopKmsg := context.WithCancel(ctx)
	defer stopKmsg()
	go watchKmsg(kctx, markers)

	r.lastEnd = time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return proto.Done{ExitCode: -1, Error: "fstests: start check: " + err.Error()}
	}
	fw := &forwarder{a: r.a, step: r.step}
	stderrTail := &tailBuffer{max: 4 << 10}
	lines := make(chan checkLine, 64)
	go readCheckOutput(outR, fw, lines)
	defer func(lines <-chan checkLine) {
		// Nothing the host gets after the Done; the readers drain what
		// processes left behind may still write.
		fw.detach()
		go func() {
			for range lines {
			}
		}()
	}(lines)
	go func() {
		defer errR.Close()
		buf := make([]byte, proto.MaxChunk)
		for {
			n, err := errR.Read(buf)
			if n > 0 {
				fw.send(proto.Stderr, buf[:n])
				stderrTail.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	timeout := time.Duration(f.TestTimeoutMs) * time.Millisecond
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var hung, canceled string
	outDone := false
	var waitErr error
	exited := false
	for !(exited && outDone) && hung == "" && canceled == "" {
		select {
		case name := <-markers:
			r.flush()
			if slices.Contains(f.Tests, name) && !r.reported[name] {
				r.running, r.started = name, time.Now()
			}
		case l := <-lines:
			if l.eof {
				outDone = true
				lines = nil
				continue
			}
			r.line(l.text)
		case waitErr = <-waited:
			exited = true
			waited = nil
		case <-tick.C:
			if timeout <= 0 {
				continue
			}
			name, since := r.current()
			if name != "" && time.Since(since) > timeout {
				hung = name
			}
		case <-ctx.Done():
			canceled = ctx.Err().Error()
		}
	}
	d := proto.Done{}
	switch {
	case hung != "":
		killGroup(cmd.Process.Pid)
		r.flush()
		r.send(&proto.TestResult{Name: hung, Status: proto.TestHang, Seconds: time.Since(r.startOf(hung)).Seconds(),
			Reason:  fmt.Sprintf("no result within the per-test timeout of %v; check was killed", timeout),
			LogTail: r.logTail(hung)})
		d.ExitCode, d.TimedOut = -1, true
		d.Error = fmt.Sprintf("fstests: %s hung (no result within %v); the tests after it did not run", hung, timeout)
		r.waitKilled(waited)
	case canceled != "":
		killGroup(cmd.Process.Pid)
		r.flush()
		d.ExitCode, d.Error = -1, "fstests: canceled: "+canceled
		r.waitKilled(waited)
	default:
		r.flush()
		var missing []string
		for _, t := range f.Tests {
			if !r.reported[t] {
				missing = append(missing, t)
			}
		}
		if len(missing) > 0 {
			code := -1
			var ee *exec.ExitError
			if errors.As(waitErr, &ee) {
				code = ee.ExitCode()
			} else if waitErr == nil {
				code = 0
			}
			d.ExitCode = -1
			d.Error = fmt.Sprintf("fstests: check exited (status %d) without a result for %s: %s",
				code, strings.Join(missing, " "), strings.TrimSpace(stderrTail.String()))
		}
	}
	if b, err := os.ReadFile(filepath.Join(r.results, "result.xml")); err == nil {
		d.XUnit = headBytes(string(b), maxXUnit)
	}
	return d
}

// waitKilled waits a little for check after its group was killed.
func (r *fstestsRun) waitKilled(waited <-chan error) {
	if waited == nil {
		return
	}
	select {
	case <-waited:
	case <-time.After(killWait):
		r.a.Logf("fstests: check is still there %v after it was killed", killWait)
	}
}

// current is the test running now and since when: the last marker's, or,
// without markers, the first test not reported yet since the last one
// ended.
func (r *fstestsRun) current() (string, time.Time) {
	if r.running != "" {
		return r.running, r.started
	}
	if r.pending != nil {
		return "", time.Time{}
	}
	for _, t := range r.f.Tests {
		if !r.reported[t] {
			return t, r.lastEnd
		}
	}
	return "", time.Time{}
}

// startOf is when test name started, as well as the agent knows.
func (r *fstestsRun) startOf(name string) time.Time {
	if r.running == name {
		return r.started
	}
	return r.lastEnd
}

// line takes one line of check's output.
func (r *fstestsRun) line(text string) {
	if checkSummary(text) {
		r.flush()
		return
	}
	st, ok := parseStatusLine(text)
	if !ok || !slices.Contains(r.f.Tests, st.Name) || r.reported[st.Name] {
		if r.pending != nil && strings.HasPrefix(text, "    ") {
			r.diff.WriteString(strings.TrimPrefix(text, "    ") + "\n")
		}
		return
	}
	r.flush()
	res := &proto.TestResult{Name: st.Name, Status: st.Status, Reason: st.Reason,
		Seconds: time.Since(r.startOf(st.Name)).Seconds()}
	if r.running == st.Name {
		r.running = ""
	}
	r.reported[st.Name] = true
	r.lastEnd = time.Now()
	if st.Status == proto.TestFail {
		r.pending = res
		r.diff.Reset()
		return
	}
	if st.Status == proto.TestNotRun && res.Reason == "" {
		res.Reason = strings.TrimSpace(r.readResult(st.Name, ".notrun"))
	}
	r.send(res)
}

// flush sends the failed test held back, now that check moved on.
func (r *fstestsRun) flush() {
	res := r.pending
	if res == nil {
		return
	}
	r.pending = nil
	res.Diff = r.diff.String()
	if res.Diff == "" {
		res.Diff = r.readResult(res.Name, ".out.bad")
	}
	res.Diff = headBytes(res.Diff, r.maxDetail)
	res.LogTail = r.logTail(res.Name)
	r.send(res)
}

// logTail is the tail of a test's .full log, and of its .dmesg.
func (r *fstestsRun) logTail(name string) string {
	s := r.readResult(name, ".full")
	if d := r.readResult(name, ".dmesg"); d != "" {
		s += "\n--- dmesg ---\n" + d
	}
	return tailBytes(s, r.maxDetail)
}

// readResult reads a test's file in the results directory (generic/013
// and .full: results/generic/013.full), at most its last 1 MiB.
func (r *fstestsRun) readResult(name, suffix string) string {
	f, err := os.Open(filepath.Join(r.results, name+suffix))
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > 1<<20 {
		_, _ = f.Seek(-(1 << 20), io.SeekEnd)
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return string(b)
}

// send reports one test.
func (r *fstestsRun) send(res *proto.TestResult) {
	r.reported[res.Name] = true
	res.Step = r.step
	if len(res.Reason) > maxReason {
		res.Reason = res.Reason[:maxReason]
	}
	if r.proof != nil {
		res.Transport = r.proof()
	}
	if r.running == res.Name {
		r.running = ""
	}
	_ = r.a.Send(&proto.Message{Kind: proto.KindTest, Test: res})
}

// readCheckOutput forwards check's standard output to the host and splits
// it into lines (each at most 64 KiB; the rest of a longer one is
// dropped), ending with an eof line; then it closes lines.
func readCheckOutput(r *os.File, fw *forwarder, lines chan<- checkLine) {
	defer r.Close()
	defer close(lines)
	var partial []byte
	buf := make([]byte, proto.MaxChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			fw.send(proto.Stdout, buf[:n])
			for _, c := range buf[:n] {
				if c == '\n' {
					lines <- checkLine{text: string(partial)}
					partial = partial[:0]
				} else if len(partial) < 64<<10 {
					partial = append(partial, c)
				}
			}
		}
		if err != nil {
			if len(partial) > 0 {
				lines <- checkLine{text: string(partial)}
			}
			lines <- checkLine{eof: true}
			return
		}
	}
}

// watchKmsg sends the tests that fstests' /dev/kmsg markers name, from
// the records written after it started, until ctx ends.
func watchKmsg(ctx context.Context, markers chan<- string) {
	fd, err := unix.Open("/dev/kmsg", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	_, _ = unix.Seek(fd, 0, io.SeekEnd)
	buf := make([]byte, 8192)
	for ctx.Err() == nil {
		n, err := unix.Read(fd, buf)
		switch {
		case err == unix.EAGAIN:
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		case err == unix.EPIPE || err == unix.EINTR:
			continue // records were overwritten before we read them
		case err != nil || n <= 0:
			return
		}
		if name, ok := kmsgMarker(string(buf[:n])); ok {
			select {
			case markers <- name:
			case <-ctx.Done():
			}
		}
	}
}

// tailBuffer keeps the last max bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	max int
	mu  sync.Mutex // guards b
	b   []byte
}

func (t *tailBuffer) Write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
