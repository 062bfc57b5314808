package fuse

import (
	"path/filepath"
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

// triggerPollHack makes the kernel send one POLL, which the servers answer
// with ENOSYS. It uses only system calls that leave the Go scheduler
// running, and gives up after d (a stuck server may hold the LOOKUP).
func triggerPollHack(mountpoint string, d time.Duration) error {
	done := make(chan error, 1)
	go func() {
		fd, err := unix.Open(filepath.Join(mountpoint, pollHackName), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(fd)
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(ep)
		// Not unix.EpollCtl: that is a raw system call, which keeps the P
		// and would itself block a garbage collection while it waits.
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		_, _, e := unix.Syscall6(unix.SYS_EPOLL_CTL, uintptr(ep), unix.EPOLL_CTL_ADD, uintptr(fd), uintptr(unsafe.Pointer(&ev)), 0, 0)
		if e != 0 {
			done <- e
			return
		}
		done <- nil
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return syscall.ETIMEDOUT
	}
}
