package matrix

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestNeedsRun: a resume runs every cell that did not complete.
func TestNeedsRun(t *testing.T) {
	for _, tc := range []struct {
		r    *CellResult
		want bool
	}{
		{nil, true},
		{&CellResult{Status: StatusIncomplete}, true},
		{&CellResult{Status: StatusError, Message: "qemu (pid 1) was killed by signal SIGKILL (killed), not by klab"}, true},
		{&CellResult{Status: StatusComplete}, false},
	} {
		if got := NeedsRun(tc.r); got != tc.want {
			t.Errorf("NeedsRun(%+v) = %v", tc.r, got)
		}
	}
}

// TestIsDiskFull: ENOSPC and EDQUOT, wrapped; not a guest's message.
func TestIsDiskFull(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("cell x: %w", &fs.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}), true},
		{errors.New("setup: guest said: write /tmp/x: no space left on device"), false},
		{errors.New("kernel panic"), false},
		{syscall.EIO, false},
	} {
		if got := IsDiskFull(tc.err); got != tc.want {
			t.Errorf("IsDiskFull(%v) = %v", tc.err, got)
		}
	}
}

// TestRunStopsOnFullDisk: a cell that runs out of space stops the matrix
// from starting more cells; the error says so and how to go on; a resume
// with space runs the failed cell and the ones not started, and keeps the
// finished one.
func TestRunStopsOnFullDisk(t *testing.T) {
	f := testFile(t, matrixYAML)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "x")
	o, opened := options(out, 1, Shard{1, 1})
	o.MinFree = -1
	fo := o.Opener.(fakeOpener)
	// The first cell (kx, 4 rounds) finishes; the second's first boot
	// finds the disk full.
	fo.openErr = func(n int) error {
		if n == 5 {
			return &fs.PathError{Op: "write", Path: "/r/console.log", Err: syscall.ENOSPC}
		}
		return nil
	}
	o.Opener = fo
	tr, err := Run(ctx, f, o)
	var full *DiskFullError
	if !errors.As(err, &full) || full.NotStarted != 4 || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("Run: %v (%+v)", err, full)
	}
	if *opened != 5 {
		t.Errorf("%d boots, want 5: none after the full disk", *opened)
	}
	cells := tr.Manifest.Cells
	if r := tr.Results[cells[0].ID]; r == nil || r.Status != StatusComplete {
		t.Errorf("first cell: %+v", r)
	}
	if r := tr.Results[cells[1].ID]; r == nil || r.Status != StatusError {
		t.Errorf("second cell: %+v", r)
	}
	reopened, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(reopened.Missing()); got != 5 {
		t.Errorf("%d cells missing, want 5", got)
	}
	o, opened = options(out, 2, Shard{1, 1})
	o.Resume, o.MinFree = true, -1
	resumed, err := Run(ctx, f, o)
	if err != nil || len(resumed.Missing()) != 0 {
		t.Fatalf("resume: %v, missing %v", err, resumed.Missing())
	}
	if *opened != 18-4 {
		t.Errorf("resume booted %d guests, want %d: the first cell is kept", *opened, 18-4)
	}
}

// TestRunStopsOnLowSpace: with less free space than a cell needs, no cell
// starts and the error says how much was free.
func TestRunStopsOnLowSpace(t *testing.T) {
	f := testFile(t, matrixYAML)
	o, opened := options(filepath.Join(t.TempDir(), "x"), 2, Shard{1, 1})
	o.MinFree = 1 << 62
	_, err := Run(context.Background(), f, o)
	var full *DiskFullError
	if !errors.As(err, &full) || full.NotStarted != 6 || full.Free <= 0 || !strings.Contains(err.Error(), "KiB free") {
		t.Fatalf("Run: %v", err)
	}
	if *opened != 0 {
		t.Errorf("%d boots on a full disk", *opened)
	}
}
