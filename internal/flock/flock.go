// Package flock is klab's one advisory file lock, which keeps two klab
// processes from filling the same cache entry at once.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// poll is how often Lock tries again while another process holds the lock.
const poll = 200 * time.Millisecond

// Lock takes an exclusive lock on path, creating the file when missing. It
// waits while another process holds the lock, calling say once (when not
// nil) so that the user knows why, and gives up when ctx ends. The returned
// function releases the lock.
func Lock(ctx context.Context, path string, say func()) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !said && say != nil {
			say()
			said = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// TryLock takes the lock on path if it is free; ok is false while another
// process holds it. A missing file means nobody uses it: ok, with nothing
// to release.
func TryLock(path string) (unlock func(), ok bool) {
	f, err := os.OpenFile(path, os.O_RDWR, 0o644)
	if err != nil {
		return func() {}, true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}
