package fuse

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/guest/fuse/ringfuse"
)

// TestURingIdleRingParks drives one client pinned to CPU 0, so that only
// queue 0's ring is busy: the other ring must be asked to park (wait in
// Go's poller, without a P) within a few ParkAfter periods, and a request
// from CPU 1 must then still be served by the parked ring.
func TestURingIdleRingParks(t *testing.T) {
	requireURing(t)
	var online unix.CPUSet
	if err := unix.SchedGetaffinity(0, &online); err != nil {
		t.Fatal(err)
	}
	if !online.IsSet(0) || !online.IsSet(1) {
		t.Skipf("needs CPUs 0 and 1 online for this process (has %d CPUs): one client per queue", online.Count())
	}
	cfg := DefaultConfig()
	cfg.Transport = TransportURing
	cfg.Threads = 0 // a ring thread per queue
	s := mount(t, cfg)
	if st := s.Stats(); st.Ring == nil || st.Ring.Threads < 2 {
		t.Skipf("one ring thread (%+v): nothing to park", st.Ring)
	}
	p := filepath.Join(s.Mountpoint(), "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	// onCPU runs f on a thread bound to cpu: a request is queued on the
	// ring of the CPU its client runs on.
	onCPU := func(cpu int, f func() error) error {
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // the thread ends with the goroutine
			var set unix.CPUSet
			set.Set(cpu)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				errc <- err
				return
			}
			errc <- f()
		}()
		return <-errc
	}
	openClose := func() error {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	}

	// Busy on CPU 0 until the other ring parked (in about ParkAfter;
	// 2 s leaves room for a loaded host).
	const busyFor = 2 * time.Second
	deadline := time.Now().Add(busyFor)
	err := onCPU(0, func() error {
		for time.Now().Before(deadline) {
			if err := openClose(); err != nil {
				return err
			}
			if s.Stats().Ring.Parks > 0 {
				return nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats().Ring
	if st.Parks == 0 {
		t.Fatalf("the idle ring never parked in %v of requests from CPU 0 alone (ParkAfter %v): %+v", busyFor, ringfuse.ParkAfter, st)
	}

	// A request from CPU 1 wakes the parked ring.
	before := st.Requests
	done := make(chan error, 1)
	go func() { done <- onCPU(1, openClose) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("open from CPU 1 after its ring parked: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("open from CPU 1 was not served within 10 s of its ring parking")
	}
	if after := s.Stats().Ring; after.Requests <= before {
		t.Errorf("requests over the rings: %d before the open from CPU 1, %d after", before, after.Requests)
	}
	t.Logf("parks %d, requests %d", s.Stats().Ring.Parks, s.Stats().Ring.Requests)
}

// TestODirectFileMmap: an O_DIRECT open is a direct_io file (as in
// passthrough_hp), which the kernel maps shared only with
// DIRECT_IO_ALLOW_MMAP; klab's server asks for it, so mapping such a file
// keeps working, over both transports.
func TestODirectFileMmap(t *testing.T) {
	for _, tr := range []string{TransportDev, TransportURing} {
		t.Run(tr, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Transport = tr
			if tr == TransportURing {
				requireURing(t)
			}
			var u unix.Utsname
			if err := unix.Uname(&u); err != nil {
				t.Fatal(err)
			}
			var major, minor int
			if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil || major < 6 || major == 6 && minor < 6 {
				t.Skipf("kernel %s: DIRECT_IO_ALLOW_MMAP came in 6.6; before it, shared maps of direct_io files are refused", unix.ByteSliceToString(u.Release[:]))
			}
			s := mount(t, cfg)
			if !strings.Contains(s.Stats().InitFlags, "DIRECT_IO_ALLOW_MMAP") {
				t.Errorf("INIT did not grant DIRECT_IO_ALLOW_MMAP on a kernel that offers it: %s", s.Stats().InitFlags)
			}
			want := bytes.Repeat([]byte("klab"), 2048)
			if err := os.WriteFile(filepath.Join(s.Config().Backing, "m"), want, 0o644); err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Open(filepath.Join(s.Mountpoint(), "m"), unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			m, err := unix.Mmap(fd, 0, len(want), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
			if err != nil {
				t.Fatalf("mmap MAP_SHARED of an O_DIRECT file: %v", err)
			}
			defer unix.Munmap(m)
			if !bytes.Equal(m, want) {
				t.Fatalf("mapped bytes differ from the file's")
			}
		})
	}
}

// TestURingZeroCopyReads reads files written behind the server's back
// (so that nothing is cached) through zero-copy queues: buffered reads at
// odd offsets and sizes, a read across the end of the file, O_DIRECT
// reads, and a file opened for writing, which is served through the
// pool buffers instead. Every byte must match the backing file.
func TestURingZeroCopyReads(t *testing.T) {
	requireURing(t)
	cfg := DefaultConfig()
	cfg.Transport, cfg.ZeroCopy, cfg.AttrTimeout, cfg.EntryTimeout = TransportURing, true, 0, 0
	s := mount(t, cfg)
	want := make([]byte, 3<<20+1234)
	for i := range want {
		want[i] = byte(i*7 + i>>12)
	}
	for _, name := range []string{"ro", "dio", "rw"} {
		if err := os.WriteFile(filepath.Join(s.Config().Backing, name), want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, got []byte, off int) {
		t.Helper()
		end := min(off+len(got), len(want))
		if !bytes.Equal(got, want[off:end]) {
			t.Errorf("%s at %d: %d bytes differ from the backing file's", what, off, len(got))
		}
	}
	f, err := os.Open(filepath.Join(s.Mountpoint(), "ro"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct{ off, n int }{{0, 4096}, {5000, 70000}, {1 << 20, 1 << 20}, {len(want) - 100, 4096}, {3 << 20, 1234}} {
		buf := make([]byte, c.n)
		n, err := f.ReadAt(buf, int64(c.off))
		if err != nil && n != len(want)-c.off {
			t.Fatalf("pread %d at %d: %d, %v", c.n, c.off, n, err)
		}
		check("pread", buf[:n], c.off)
	}
	got, err := os.ReadFile(filepath.Join(s.Mountpoint(), "ro"))
	if err != nil || len(got) != len(want) {
		t.Fatalf("read the whole file: %d bytes, %v", len(got), err)
	}
	check("read", got, 0)
	fd, err := unix.Open(filepath.Join(s.Mountpoint(), "dio"), unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	dbuf := pageAligned(1 << 20)
	for off := 0; off < len(want); off += len(dbuf) {
		n, err := unix.Pread(fd, dbuf, int64(off))
		if err != nil {
			t.Fatalf("O_DIRECT pread at %d: %v", off, err)
		}
		check("O_DIRECT pread", dbuf[:n], off)
	}
	zc := s.Stats().Ring.ZeroCopyReads
	rw, err := os.OpenFile(filepath.Join(s.Mountpoint(), "rw"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.WriteAt([]byte("klab"), 10); err != nil {
		t.Fatal(err)
	}
	copy(want[10:], "klab")
	buf := make([]byte, 256<<10)
	if n, err := rw.ReadAt(buf, 0); err != nil {
		t.Fatalf("read a file opened for writing: %d, %v", n, err)
	}
	check("read of a file opened for writing", buf, 0)
	st := s.Stats().Ring
	if zc == 0 {
		t.Errorf("no READ was served zero-copy: %+v", st)
	}
	if st.ZeroCopyReads != zc {
		t.Errorf("a file opened for writing was read zero-copy (%d zero-copy READs, %d before)", st.ZeroCopyReads, zc)
	}
	t.Logf("%d READs served zero-copy", zc)
}

// pageAligned returns n bytes starting on a page, for O_DIRECT.
func pageAligned(n int) []byte {
	page := os.Getpagesize()
	raw := make([]byte, n+page)
	skip := (page - int(uintptr(unsafe.Pointer(&raw[0]))%uintptr(page))) % page
	return raw[skip : skip+n : skip+n]
}
