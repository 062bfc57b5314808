//go:build linux

package ringfuse

import (
	"errors"
	"testing"
	"unsafe"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
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
