package fuse

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
)

// The poll hack keeps Go programs in the server's own process from
// deadlocking with it. When Go opens a file it registers it with epoll,
// and epoll_ctl asks the file system through a synchronous FUSE_POLL
// request — from inside the runtime, without leaving its P. If a garbage
// collection then stops the world, it waits for that thread, while the
// server's worker that would answer the POLL waits for the world to
// restart. The kernel stops sending POLL once a server answers one with
// ENOSYS, so right after INIT the session opens a hidden file the poll hack
// serves and registers it with epoll through plain system calls, whose POLL
// gets ENOSYS. (go-fuse does the same.)
const (
	// pollHackName is the hidden file; it exists only for LOOKUP in the
	// root and is never listed.
	pollHackName = ".klab-poll-hack"
	// pollHackNode is its node ID, far above any the servers hand out.
	pollHackNode = 1<<63 - 2
)

// pollHackPID is the process that last looked up pollHackName: never the
// server's own (see triggerPollHack).
var pollHackPID atomic.Int64

// pollHack serves pollHackName and passes every other request to inner.
type pollHack struct {
	inner dispatch.Handler
}

// Init passes INIT negotiation to the inner handler.
func (p pollHack) Init(in *dispatch.Init) error {
	if x, ok := p.inner.(dispatch.Initer); ok {
		return x.Init(in)
	}
	return nil
}

func pollHackAttr(a *abi.Attr) {
	*a = abi.Attr{Ino: pollHackNode, Mode: syscall.S_IFREG | 0o444, Nlink: 1, Blksize: 4096}
}

// Handle implements dispatch.Handler.
func (p pollHack) Handle(r *dispatch.Request) {
	h := &r.Header
	if h.NodeID == abi.RootID && h.Opcode == abi.OpLookup {
		if name, _ := abi.CString(r.Arg); string(name) == pollHackName {
			pollHackPID.Store(int64(h.PID))
			out := abi.EntryOut{NodeID: pollHackNode}
			pollHackAttr(&out.Attr)
			_ = dispatch.ReplyStruct(r, &out)
			return
		}
	}
	if h.NodeID != pollHackNode {
		p.inner.Handle(r)
		return
	}
	switch h.Opcode {
	case abi.OpGetattr:
		var out abi.AttrOut
		pollHackAttr(&out.Attr)
		_ = dispatch.ReplyStruct(r, &out)
	case abi.OpOpen:
		out := abi.OpenOut{OpenFlags: abi.FopenDirectIO}
		_ = dispatch.ReplyStruct(r, &out)
	case abi.OpFlush, abi.OpRelease:
		_ = r.Reply(0, nil)
	case abi.OpForget:
		r.Drop()
	default:
		_ = r.Reply(syscall.ENOSYS, nil)
	}
}

// pollHackEnv, set in the environment of this program's own executable,
// makes it trigger the poll hack on the mount point it names and exit
// (see init below).
const pollHackEnv = "KLAB_FUSE_POLL_HACK"

// init runs the poll hack's child: any program that links this package
// (klab, the agent, test binaries) re-executed with pollHackEnv set.
func init() {
	mnt := os.Getenv(pollHackEnv)
	if mnt == "" {
		return
	}
	if err := pollHackHere(mnt); err != nil {
		fmt.Fprintf(os.Stderr, "poll hack on %s: %v\n", mnt, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// triggerPollHack makes the kernel send one POLL, which the servers answer
// with ENOSYS. The kernel turns POLL off for the whole connection, so the
// open and the epoll registration run in a child process: a thread of the
// server's own process must never wait on its own mount, or a server
// killed while that LOOKUP is in flight could never exit (the thread would
// wait, uninterruptibly, for an answer only the dead server could give,
// holding the connection open). It gives up after d and kills the child,
// which the connection's end then frees.
func triggerPollHack(mountpoint string, d time.Duration) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), pollHackEnv+"="+mountpoint)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return syscall.ETIMEDOUT
		}
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// pollHackHere opens the hidden file and registers it with epoll, with
// plain system calls.
func pollHackHere(mountpoint string) error {
	fd, err := unix.Open(filepath.Join(mountpoint, pollHackName), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(ep)
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	_, _, e := unix.Syscall6(unix.SYS_EPOLL_CTL, uintptr(ep), unix.EPOLL_CTL_ADD, uintptr(fd), uintptr(unsafe.Pointer(&ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
