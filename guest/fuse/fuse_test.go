package fuse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	"klab/guest/fuse/ringfuse"
	"klab/internal/testenv"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(clientEnv); spec != "" {
		os.Exit(clientMain(spec))
	}
	if spec := os.Getenv(permEnv); spec != "" {
		os.Exit(permHelper(spec))
	}
	// A ring that does not register in time is rare and load-dependent:
	// keep where every goroutine was.
	onRingTimeout = func() {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		load, _ := os.ReadFile("/proc/loadavg")
		fmt.Fprintf(os.Stderr, "fuse: the rings did not register in time; GC cycles %d, last GC %v ago, pauses %v in all, heap %d MiB, load %s; goroutines:\n%s\n",
			ms.NumGC, time.Since(time.Unix(0, int64(ms.LastGC))).Round(time.Millisecond), time.Duration(ms.PauseTotalNs), ms.HeapAlloc>>20, bytes.TrimSpace(load), buf)
	}
	code := m.Run()
	// Long stop-the-world pauses have held ring starts up (see
	// stwguard): count them.
	fmt.Fprintln(os.Stderr, "fuse:", gcPauses())
	os.Exit(code)
}

// gcPauses sums up the process's stop-the-world pauses for GC.
func gcPauses() string {
	sample := []metrics.Sample{{Name: "/sched/pauses/total/gc:seconds"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindFloat64Histogram {
		return "GC pauses: not measured"
	}
	h := sample[0].Value.Float64Histogram()
	var all, over10ms, over100ms, over1s uint64
	for i, n := range h.Counts {
		all += n
		low := h.Buckets[i]
		if low >= 0.01 {
			over10ms += n
		}
		if low >= 0.1 {
			over100ms += n
		}
		if low >= 1 {
			over1s += n
		}
	}
	return fmt.Sprintf("GC pauses: %d, %d of 10 ms or more, %d of 100 ms or more, %d of 1 s or more", all, over10ms, over100ms, over1s)
}

// requireFUSE skips unless the test can mount FUSE file systems.
func requireFUSE(t testing.TB) {
	t.Helper()
	testenv.RequiresFUSE(t)
}

// requireURing skips unless this kernel can serve FUSE over io_uring (it
// sets enable_uring when it is off, as Start does).
func requireURing(t testing.TB) {
	t.Helper()
	requireFUSE(t)
	if _, err := ringfuse.EnableURing(); err != nil {
		testenv.Missingf(t, "the kernel has no FUSE-over-io_uring: %v", err)
	}
}

// mount starts cfg over fresh directories under t.TempDir() and tears it
// down in t.Cleanup.
func mount(t testing.TB, cfg Config) *Session {
	t.Helper()
	requireFUSE(t)
	dir := t.TempDir()
	if cfg.Mountpoint == "" {
		cfg.Mountpoint = filepath.Join(dir, "mnt")
	}
	if cfg.Backing == "" {
		cfg.Backing = filepath.Join(dir, "backing")
	}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		if cfg.ZeroCopy && errors.Is(err, ringfuse.ErrUnsupported) {
			// A kernel feature, not a package: Linux 7.3's FUSE 7.46.
			t.Skipf("this kernel has no zero-copy io_uring queues (FUSE 7.46, Linux 7.3+): %v", err)
		}
		t.Fatalf("start %s server: %v", cfg.Server, err)
	}
	t.Cleanup(func() {
		if cfg.Transport == TransportURing {
			// The kernel falls back to /dev/fuse when the ring is not
			// used: make sure it was.
			if st := s.Stats(); st.Ring == nil || st.Ring.Requests == 0 {
				t.Errorf("no request travelled over io_uring: %+v", st.Ring)
			} else if st.Ring.StartMs <= 0 {
				t.Errorf("the rings serve, but no start time was recorded: %+v", st.Ring)
			} else if st.Ring.StartMs > 1000 {
				t.Logf("slow ring start: %.0f ms from the INIT reply to every entry registered", st.Ring.StartMs)
			}
		}
		if err := s.Close(); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	return s
}

func TestPassthroughSmoke(t *testing.T) {
	s := mount(t, DefaultConfig())
	mnt, back := s.Mountpoint(), s.Config().Backing
	data := []byte("hello, klab\n")
	if err := os.WriteFile(filepath.Join(mnt, "a"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(back, "a"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("backing file: %q, %v", got, err)
	}
	got, err = os.ReadFile(filepath.Join(mnt, "a"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read through the mount: %q, %v", got, err)
	}
	if err := os.Mkdir(filepath.Join(mnt, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(mnt)
	if err != nil || len(ents) != 2 {
		t.Fatalf("readdir: %v, %v", ents, err)
	}
	st := s.Stats()
	t.Logf("INIT flags %s", st.InitFlags)
}

func TestServerEndsOnUnmount(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Mountpoint, cfg.Backing = filepath.Join(dir, "m"), filepath.Join(dir, "b")
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("server still running after unmount")
	}
	if err := s.Err(); !errors.Is(err, syscall.ENODEV) {
		t.Errorf("server error %v, want ENODEV", err)
	}
}
