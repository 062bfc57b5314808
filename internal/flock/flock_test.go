package flock

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestLockWaitsAndTryLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".lock")
	if unlock, ok := TryLock(path); !ok {
		t.Fatal("TryLock on a missing file failed")
	} else {
		unlock()
	}
	unlock, err := Lock(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := TryLock(path); ok {
		t.Fatal("TryLock succeeded while the lock is held")
	}
	said := make(chan struct{}, 1)
	got := make(chan error, 1)
	go func() {
		u, err := Lock(context.Background(), path, func() { said <- struct{}{} })
		if err == nil {
			u()
		}
		got <- err
	}()
	<-said
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lock did not get the lock after it was released")
	}
	ctx, cancel := context.WithCancel(context.Background())
	held, _ := Lock(context.Background(), path, nil)
	defer held()
	cancel()
	if _, err := Lock(ctx, path, func() {}); err == nil {
		t.Fatal("Lock with a cancelled context succeeded while the lock is held")
	}
}
