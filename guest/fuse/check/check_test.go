package check

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"klab/guest/fuse/ringfuse"
	"klab/internal/testenv"
)

func requireFUSE(t *testing.T) {
	t.Helper()
	testenv.RequiresFUSE(t)
}

// requireURing skips unless this kernel serves FUSE over io_uring.
func requireURing(t *testing.T) {
	t.Helper()
	if _, err := ringfuse.EnableURing(); err != nil {
		testenv.Missingf(t, "the kernel has no FUSE-over-io_uring: %v", err)
	}
}

func TestInterrupt(t *testing.T) {
	requireFUSE(t)
	for _, p := range []string{"cancel", "eagain:1", "eagain:3", "ignore", "enosys",
		"cancel@uring", "eagain:1@uring", "ignore@uring", "enosys@uring"} {
		t.Run(p, func(t *testing.T) {
			policy, transport, _ := strings.Cut(p, "@")
			if transport == "uring" {
				requireURing(t)
			}
			t.Parallel()
			r, err := Interrupt(context.Background(), InterruptOptions{Policy: policy, Transport: transport, Hold: time.Second, Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			if !r.Pass {
				t.Error(r.Problems)
			}
		})
	}
}

// TestTimeout checks request timeouts set through the INIT reply and
// through both sysctls, concurrently (about 30 s: the kernel checks every
// 15 s and uses at least 15 s).
func TestTimeout(t *testing.T) {
	requireFUSE(t)
	testenv.Short(t, "takes 30 s: the kernel's timeout granularity is 15 s")
	if _, err := os.Stat("/proc/sys/fs/fuse/default_request_timeout"); err != nil {
		testenv.Missing(t, "the kernel has no FUSE request timeouts (Linux 6.14 or later)")
	}
	transports := []string{"dev"}
	if _, err := ringfuse.EnableURing(); err == nil {
		transports = append(transports, "uring")
	} else {
		t.Logf("timeouts over io_uring not checked: %v", err)
	}
	var mu sync.Mutex
	var rs []*Result
	var wg sync.WaitGroup
	for _, tr := range transports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := TimeoutAll(context.Background(), TimeoutOptions{Timeout: 1, Transport: tr, Dir: t.TempDir()})
			if err != nil {
				t.Errorf("%s: %v", tr, err)
			}
			mu.Lock()
			rs = append(rs, r...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(rs) != 3*len(transports) {
		t.Fatalf("%d results, want %d", len(rs), 3*len(transports))
	}
	for _, r := range rs {
		t.Log(r)
		if !r.Pass {
			t.Errorf("%s: %v", r.Name, r.Problems)
		}
	}
}
