//go:build linux

package iouring

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/internal/testenv"
)

func newRing(t *testing.T, entries, flags uint32) *Ring {
	t.Helper()
	r, err := New(entries, flags)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		testenv.Missingf(t, "io_uring is unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestParamsLayout(t *testing.T) {
	if s := unsafe.Sizeof(params{}); s != 120 {
		t.Fatalf("io_uring_params is %d bytes, want 120", s)
	}
}

func TestNops(t *testing.T) {
	for _, flags := range []uint32{0, SetupSQE128, SetupSQE128 | SetupCQE32} {
		r := newRing(t, 8, flags)
		for i := range 5 {
			s, err := r.GetSQE()
			if err != nil {
				t.Fatal(err)
			}
			s.SetOpcode(OpNop)
			s.SetUserData(uint64(100 + i))
		}
		if n, err := r.Submit(5); err != nil || n != 5 {
			t.Fatalf("flags %#x: Submit = %d, %v", flags, n, err)
		}
		for i := range 5 {
			c, err := r.WaitCQE()
			if err != nil || c.UserData != uint64(100+i) || c.Res != 0 {
				t.Fatalf("flags %#x: CQE %d = %+v, %v", flags, i, c, err)
			}
		}
		if _, ok := r.PeekCQE(); ok {
			t.Fatal("extra CQE")
		}
	}
}

func TestSQFullAndWrap(t *testing.T) {
	r := newRing(t, 4, 0)
	// Several rounds wrap the ring indexes.
	for round := range 5 {
		for range 4 {
			s, err := r.GetSQE()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			s.SetOpcode(OpNop)
		}
		if _, err := r.GetSQE(); !errors.Is(err, ErrSQFull) {
			t.Fatalf("round %d: 5th SQE: %v", round, err)
		}
		if _, err := r.Submit(4); err != nil {
			t.Fatal(err)
		}
		for range 4 {
			if _, err := r.WaitCQE(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestReadWriteFile(t *testing.T) {
	r := newRing(t, 4, SetupSQE128)
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := bytes.Repeat([]byte("klab"), 1024)
	s, _ := r.GetSQE()
	s.SetOpcode(OpWrite)
	s.SetFd(int32(f.Fd()))
	s.SetAddr(uintptr(unsafe.Pointer(&data[0])))
	s.SetLen(uint32(len(data)))
	s.SetOff(0)
	s.SetUserData(1)
	if _, err := r.Submit(1); err != nil {
		t.Fatal(err)
	}
	c, err := r.WaitCQE()
	if err != nil || c.Err() != nil || int(c.Res) != len(data) {
		t.Fatalf("write CQE %+v, %v", c, err)
	}
	buf := make([]byte, len(data))
	s, _ = r.GetSQE()
	s.SetOpcode(OpRead)
	s.SetFd(int32(f.Fd()))
	s.SetAddr(uintptr(unsafe.Pointer(&buf[0])))
	s.SetLen(uint32(len(buf)))
	s.SetUserData(2)
	r.Submit(1)
	c, _ = r.WaitCQE()
	if c.UserData != 2 || int(c.Res) != len(buf) || !bytes.Equal(buf, data) {
		t.Fatalf("read CQE %+v", c)
	}
}

// TestFixedFile reads through a registered file named by its index.
func TestFixedFile(t *testing.T) {
	r := newRing(t, 4, SetupSQE128)
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("fixed"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := r.RegisterFiles([]int32{int32(f.Fd())}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	s, _ := r.GetSQE()
	s.SetOpcode(OpRead)
	s.SetFlags(SQEFixedFile)
	s.SetFd(0)
	s.SetAddr(uintptr(unsafe.Pointer(&buf[0])))
	s.SetLen(uint32(len(buf)))
	r.Submit(1)
	if c, _ := r.WaitCQE(); c.Res != 5 || string(buf) != "fixed" {
		t.Fatalf("CQE %+v, read %q", c, buf)
	}
}

func TestErrorCQE(t *testing.T) {
	r := newRing(t, 2, 0)
	s, _ := r.GetSQE()
	s.SetOpcode(OpRead)
	s.SetFd(-1)
	buf := make([]byte, 8)
	s.SetAddr(uintptr(unsafe.Pointer(&buf[0])))
	s.SetLen(8)
	r.Submit(1)
	c, _ := r.WaitCQE()
	if !errors.Is(c.Err(), unix.EBADF) {
		t.Fatalf("CQE %+v: err %v, want EBADF", c, c.Err())
	}
}

func TestEventfd(t *testing.T) {
	r := newRing(t, 2, 0)
	efd, err := r.RegisterEventfd()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := r.GetSQE()
	s.SetOpcode(OpNop)
	if _, err := r.Submit(0); err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	fds := []unix.PollFd{{Fd: int32(efd), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, 5000); err != nil || n != 1 {
		t.Fatalf("poll eventfd: %d, %v", n, err)
	}
	if _, err := unix.Read(efd, b[:]); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.PeekCQE(); !ok {
		t.Fatal("eventfd fired without a CQE")
	}
}

func TestCmdArea(t *testing.T) {
	r := newRing(t, 2, SetupSQE128)
	s, _ := r.GetSQE()
	if len(s.Cmd()) != 80 {
		t.Fatalf("cmd area %d bytes", len(s.Cmd()))
	}
	s.SetCmdOp(2)
	if s[8] != 2 {
		t.Fatal("cmd_op not at offset 8")
	}
	r64 := newRing(t, 2, 0)
	s64, _ := r64.GetSQE()
	if s64.Cmd() != nil {
		t.Fatal("64-byte SQE has a cmd area")
	}
}

func TestCloseTwice(t *testing.T) {
	r := newRing(t, 2, 0)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkNop(b *testing.B) {
	r, err := New(64, 0)
	if err != nil {
		b.Skip(err)
	}
	defer r.Close()
	for b.Loop() {
		s, _ := r.GetSQE()
		s.SetOpcode(OpNop)
		r.Submit(1)
		r.WaitCQE()
	}
}
