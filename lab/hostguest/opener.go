package hostguest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
	"klab/images"
	"klab/images/debian"
	"klab/lab"
	"klab/results"
)

// Opener runs guests on this host: each Open starts klab's executable as
// the agent in a confined child process (see the package comment) and
// returns it as a lab.Guest. It implements lab.Opener for the kernel Ref.
type Opener struct {
	// CacheDir holds the host kernel's description and the libfuse
	// servers' builds.
	CacheDir string
	// RunsDir is where each guest's run is saved.
	RunsDir string
	// Mirror is the Debian mirror libfuse's source comes from ("": the
	// host's apt sources).
	Mirror string
	// Progress receives the few lines a user should see.
	Progress io.Writer
	// Exe is klab's executable, run as the agent; empty means this
	// process's own (os.Executable). Its main must call Main first.
	Exe string
	// Facts, when set, replaces what HostFacts reads (tests).
	Facts *Facts
	// Libfuse, when set, returns the binaries of the libfuse server kinds
	// the steps mount, by kind; nil builds them into CacheDir (tests
	// replace it).
	Libfuse func(ctx context.Context, kinds []string) (map[string]string, error)
	// start, when set, starts the agent instead of a confined child
	// (tests).
	start func(ctx context.Context, root string, libfuse map[string]string, console io.Writer) (*child, error)
}

var _ lab.Opener = (*Opener)(nil)

// ResolveKernel resolves Ref, the only kernel a host runs: see Kernel.
func (o *Opener) ResolveKernel(_ context.Context, ref string) (*results.Kernel, error) {
	if ref != Ref {
		return nil, fmt.Errorf("kernel %s: a host run runs on the host's own kernel (%s)", ref, Ref)
	}
	return Kernel(o.CacheDir)
}

// forRequest is o with the settings req overrides: the runs directory and
// where progress goes. A host has no accelerator: req.Accel is ignored.
func (o *Opener) forRequest(req *lab.BootRequest) *Opener {
	c := *o
	if req.RunsDir != "" {
		c.RunsDir = req.RunsDir
	}
	if req.Progress != nil {
		c.Progress = req.Progress
	}
	return &c
}

// Open starts the agent on this host for req, whose Kernel must be Ref,
// after checking that nothing in req would change the host (see check),
// and saves its run under req.RunsDir (o.RunsDir when empty).
// req.Resolved, when set, is the host's kernel as Kernel described it.
func (o *Opener) Open(ctx context.Context, req lab.BootRequest) (lab.Guest, error) {
	if req.Kernel != Ref {
		return nil, fmt.Errorf("kernel %s: a host run runs on the host's own kernel (%s)", req.Kernel, Ref)
	}
	o = o.forRequest(&req)
	facts := HostFacts()
	if o.Facts != nil {
		facts = *o.Facts
	}
	notes, err := check(&req, facts)
	if err != nil {
		return nil, fmt.Errorf("this cannot run on the host: %w", err)
	}
	for _, n := range notes {
		o.progressf("note: %s", n)
	}
	k := req.Resolved
	if k == nil {
		if k, err = o.ResolveKernel(ctx, req.Kernel); err != nil {
			return nil, err
		}
	}
	libfuse, err := o.libfuse(ctx, &req)
	if err != nil {
		return nil, err
	}
	start := o.start
	if start == nil {
		start = o.startChild
	}
	return open(ctx, o, req, k, facts, libfuse, start)
}

// libfuse returns the libfuse servers req's steps mount, by kind.
func (o *Opener) libfuse(ctx context.Context, req *lab.BootRequest) (map[string]string, error) {
	var kinds []string
	for _, kind := range []string{proto.FUSELibfusePassthroughLL, proto.FUSELibfusePassthroughHP} {
		if mounts(req.Steps, kind) || mounts(req.Prepare, kind) {
			kinds = append(kinds, kind)
		}
	}
	if len(kinds) == 0 {
		return nil, nil
	}
	if o.Libfuse != nil {
		return o.Libfuse(ctx, kinds)
	}
	bins := map[string]string{}
	for _, kind := range kinds {
		var p string
		var err error
		switch kind {
		case proto.FUSELibfusePassthroughLL:
			p, err = images.BuildPassthroughLL(ctx, o.CacheDir, o.Progress)
		default:
			p, _, err = images.BuildPassthroughHP(ctx, images.PassthroughHPOptions{DebianOptions: debian.Options{
				Mirror: o.Mirror, CacheDir: o.CacheDir, Progress: o.Progress}})
		}
		if err != nil {
			return nil, fmt.Errorf("server %s on the host: %w", kind, err)
		}
		bins[kind] = p
	}
	return bins, nil
}

// mounts reports whether a step of steps mounts the server kind.
func mounts(steps []proto.Step, kind string) bool {
	for i := range steps {
		for s := &steps[i]; s != nil; s = fuseThen(s) {
			if s.Kind == proto.StepFUSE && s.FUSE != nil && s.FUSE.Server == kind {
				return true
			}
		}
	}
	return false
}

func (o *Opener) progressf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// child is a started agent: its channel, and how to end it.
type child struct {
	// conn is the host's end of the agent's channel.
	conn net.Conn
	// pid is the agent's process ID (0: none).
	pid int
	// exited is closed when the agent's process ended; err is how.
	exited <-chan struct{}
	err    func() error
	// kill ends the agent and everything it started.
	kill func()
}

// startChild starts klab's executable as the confined agent (Main's
// confineArg) in a new mount namespace, its standard input and output
// one end of a socket pair, its standard error console.
func (o *Opener) startChild(ctx context.Context, root string, libfuse map[string]string, console io.Writer) (*child, error) {
	exe := o.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket pair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "agent"), os.NewFile(uintptr(fds[1]), "agent")
	defer theirs.Close()
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("socket pair: %w", err)
	}
	args := []string{confineArg, root}
	for kind, p := range libfuse {
		args = append(args, kind+"="+p)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = theirs, theirs, console
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWNS, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("start the host agent: %w", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	pid := cmd.Process.Pid
	return &child{conn: conn, pid: pid, exited: exited,
		err: func() error { <-exited; return waitErr },
		kill: func() {
			// The agent's process group: libfuse servers and
			// workload children too.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}}, nil
}

// openTimeout bounds the agent's start, from exec to its Hello.
const openTimeout = 30 * time.Second

// channelFor names a child's channel in messages.
func channelFor(pid int) string { return fmt.Sprintf("host agent (pid %d)", pid) }

// errAgentExited is a child that ended before its Hello.
var errAgentExited = errors.New("the host agent exited before it said hello")

// describe says what the run ran on, for the manifest's accelerator
// reason.
func describe(f Facts) string {
	s := "no VM: the steps ran on this host, in a private mount namespace chrooted into a private tmpfs"
	if f.FUSEURing != "" {
		s += "; fuse enable_uring=" + f.FUSEURing
	}
	return strings.TrimSpace(s)
}

// manifestFor starts a host guest's manifest.
func manifestFor(run *results.Run, req *lab.BootRequest, k *results.Kernel, f Facts) *results.Manifest {
	h, _ := results.HostInfo()
	return &results.Manifest{RunID: run.ID, Command: req.Command, Kernel: lab.ManifestKernel(k),
		Accel: results.AccelHost, AccelReason: describe(f), TimeoutFactor: 1, Host: h}
}
