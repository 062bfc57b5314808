//go:build linux

package ringfuse

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/devfuse"
	"klab/guest/fuse/dispatch"
	"klab/internal/testenv"
)

func TestParseCPUList(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-1": 2, "0-3,6,8-9": 7, "0-255": 256} {
		if got, err := parseCPUList(in); err != nil || got != want {
			t.Errorf("parseCPUList(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "0-", "1,,2"} {
		if n, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) = %d, want an error", bad, n)
		}
	}
}

func TestPossibleCPUs(t *testing.T) {
	n, err := PossibleCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Fatalf("%d possible CPUs", n)
	}
}

// TestLayout pins the offsets of the uAPI structs the transport writes
// (include/uapi/linux/fuse.h: fuse_uring_req_header, fuse_uring_ent_in_out,
// fuse_uring_cmd_req).
func TestLayout(t *testing.T) {
	if reqHeaderSize != 128+128+32 || entOff != 256 || entCommitID != 264 || entPayloadSz != 272 {
		t.Errorf("fuse_uring_req_header layout: size %d, ent %d, commit_id %d, payload_sz %d", reqHeaderSize, entOff, entCommitID, entPayloadSz)
	}
	if cmdCommitIDOff != 8 || cmdQIDOff != 16 {
		t.Errorf("fuse_uring_cmd_req: commit_id@%d qid@%d", cmdCommitIDOff, cmdQIDOff)
	}
	if headroom < abi.InHeaderSize+opInMax {
		t.Errorf("headroom %d cannot hold the in header and the largest op header", headroom)
	}
	if unsafe.Sizeof(abi.OutHeader{}) != 16 || unsafe.Sizeof(abi.InHeader{}) != 40 {
		t.Error("FUSE header sizes changed")
	}
}

// TestNegotiateUnsupported: a kernel that does not offer
// FUSE_OVER_IO_URING fails the mount with a clear error, instead of
// mounting a connection whose requests would wait for a ring forever.
func TestNegotiateUnsupported(t *testing.T) {
	tr := &Transport{}
	in := &dispatch.Init{Offered: abi.InitExt | abi.InitMaxPages}
	in.Kernel.Major, in.Kernel.Minor = 7, 41
	err := tr.NegotiateInit(in)
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("NegotiateInit = %v, want ErrUnsupported", err)
	}
	t.Log(err)
	in.Offered |= abi.InitOverIOUring
	if err := tr.NegotiateInit(in); err != nil || in.Want&abi.InitOverIOUring == 0 {
		t.Fatalf("with the flag offered: %v, want %s", err, in.Want)
	}
}

// TestReplyLayout writes replies into an entry the way handlers do and
// checks what the kernel would read: the out header, the payload size,
// and the out part in front of data that may already sit in the payload.
func TestReplyLayout(t *testing.T) {
	tr := &Transport{}
	e := &entry{r: &ring{t: tr}, hdr: make([]byte, reqHeaderSize), buf: make([]byte, headroom+8192)}
	e.payload = e.buf[headroom:]
	copy(e.payload, "DATA")
	if err := e.WriteReply(abi.OutHeader{Unique: 42}, []byte("OUT"), e.payload[:4]); err != nil {
		t.Fatal(err)
	}
	oh := (*abi.OutHeader)(unsafe.Pointer(&e.hdr[0]))
	psz := *(*uint32)(unsafe.Pointer(&e.hdr[entPayloadSz]))
	if oh.Unique != 42 || oh.Error != 0 || psz != 7 || string(e.payload[:7]) != "OUTDATA" {
		t.Errorf("reply: unique %d error %d payload_sz %d payload %q", oh.Unique, oh.Error, psz, e.payload[:7])
	}
	if err := e.WriteReply(abi.OutHeader{Unique: 44, Error: -2}, nil, []byte("ignored")); err != nil {
		t.Fatal(err)
	}
	if psz := *(*uint32)(unsafe.Pointer(&e.hdr[entPayloadSz])); oh.Error != -2 || psz != 0 {
		t.Errorf("error reply: error %d payload_sz %d, want -2 and 0", oh.Error, psz)
	}
	if err := e.WriteReply(abi.OutHeader{Unique: 46}, nil, make([]byte, 9000)); err == nil || oh.Error != -5 {
		t.Errorf("oversized reply: %v, error %d; want an error and EIO", err, oh.Error)
	}
}

// TestRegisterBeforeInitRetries registers the entries before the INIT
// reply is out, which the kernel refuses with EAGAIN: the transport must
// retry until the connection is initialized, then serve over the ring.
func TestRegisterBeforeInitRetries(t *testing.T) {
	testenv.RequiresFUSE(t)
	if _, err := EnableURing(); err != nil {
		testenv.Missingf(t, "the kernel has no FUSE-over-io_uring: %v", err)
	}
	mnt := t.TempDir()
	dev, err := devfuse.Open()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(dev, Options{Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr.registerEarly = make(chan struct{})
	// A root directory and nothing else.
	conn := dispatch.New(dispatch.Config{Handler: dispatch.HandlerFunc(func(r *dispatch.Request) {
		if r.Header.Opcode != abi.OpGetattr {
			_ = r.Reply(syscall.ENOSYS, nil)
			return
		}
		out := abi.AttrOut{AttrValid: 1}
		out.Attr.Ino, out.Attr.Mode, out.Attr.Nlink = 1, syscall.S_IFDIR|0o755, 2
		_ = dispatch.ReplyStruct(r, &out)
	})})
	if err := devfuse.Mount(dev, mnt, devfuse.MountOptions{}); err != nil {
		dev.Close()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- conn.Serve(tr) }()
	defer func() {
		if err := devfuse.Unmount(mnt, true); err != nil {
			t.Error(err)
		}
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Error("the transport did not stop after the unmount")
		}
		dev.Close()
	}()
	select {
	case <-tr.Ready():
		if err := tr.ReadyErr(); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the rings did not register")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(mnt, &st); err != nil {
		t.Fatal(err)
	}
	s := tr.Stats()
	t.Logf("%+v", s)
	if s.RegisterRetries == 0 {
		t.Error("no REGISTER was retried; the kernel accepted it before INIT")
	}
	if s.Requests == 0 {
		t.Error("the stat did not travel over the ring")
	}
}
func TestPageAlignedAt(t *testing.T) {
	page := uintptr(os.Getpagesize())
	for _, c := range []struct{ off, n int }{{headroom, headroom + 128<<10}, {256, 256 + 8192}, {0, 100}, {4095, 5000}} {
		b := pageAlignedAt(c.off, c.n)
		if len(b) != c.n || cap(b) != c.n {
			t.Errorf("pageAlignedAt(%d, %d): len %d cap %d", c.off, c.n, len(b), cap(b))
		}
		if p := uintptr(unsafe.Pointer(&b[c.off])); p%page != 0 {
			t.Errorf("pageAlignedAt(%d, %d): byte %d at %#x, not on a page boundary", c.off, c.n, c.off, p)
		}
	}
}
