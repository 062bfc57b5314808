package images

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"klab/internal/flock"
)

// TestAptLock: every apt call waits for the one lock on the apt
// directory, which another klab process (here, the test) may hold, and
// ensureLists' own apt call does not wait for itself.
func TestAptLock(t *testing.T) {
	a, err := newAptEnv(filepath.Join(t.TempDir(), "apt"), "http://mirror.example/debian", "")
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := flock.Lock(context.Background(), a.path(".lock"), func() {})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.run(context.Background(), time.Minute, "", "true")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("apt ran while another process held the lock: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("apt did not run once the lock was free")
	}
	// Held by this aptEnv: a nested call goes on at once.
	release, err := a.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.run(context.Background(), time.Minute, "", "true"); err != nil {
		t.Fatal(err)
	}
	release()
}
