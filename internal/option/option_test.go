package option

import (
	"errors"
	"io/fs"
	"testing"
)

func TestError(t *testing.T) {
	err := Errorf("rounds", "%d is out of range, want 1..1000", 1001)
	if got, want := err.Error(), "rounds 1001 is out of range, want 1..1000"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := Errorf("kernel", "x: %w", fs.ErrNotExist)
	var oe *Error
	if !errors.As(wrapped, &oe) || oe.Name != "kernel" || !errors.Is(wrapped, fs.ErrNotExist) {
		t.Errorf("%v: want an *Error of kernel that wraps fs.ErrNotExist", wrapped)
	}
}
