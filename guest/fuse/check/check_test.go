package check

import (
	"context"
	"os"
	"testing"
	"time"

	"klab/internal/testenv"
)

func requireFUSE(t *testing.T) {
	t.Helper()
	testenv.RequiresRoot(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("needs /dev/fuse (the fuse module)")
	}
}

func TestInterrupt(t *testing.T) {
	requireFUSE(t)
	for _, p := range []string{"cancel", "eagain:1", "eagain:3", "ignore", "enosys"} {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			r, err := Interrupt(context.Background(), InterruptOptions{Policy: p, Hold: time.Second, Dir: t.TempDir()})
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
	if testing.Short() {
		t.Skip("takes 30 s: the kernel's timeout granularity is 15 s")
	}
	if _, err := os.Stat("/proc/sys/fs/fuse/default_request_timeout"); err != nil {
		t.Skip("the kernel has no FUSE request timeouts (Linux 6.14 or later)")
	}
	rs, err := TimeoutAll(context.Background(), TimeoutOptions{Timeout: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		t.Log(r)
		if !r.Pass {
			t.Errorf("%s: %v", r.Name, r.Problems)
		}
	}
}
