package main

import (
	"errors"
	"testing"
)

// TestCountErrors: one per joined error, whatever lines each has.
func TestCountErrors(t *testing.T) {
	one := errors.New("cell a: kernel debian:7.3: fetch failed:\n  E: no Release file\n  E: no Release file")
	if n := countErrors(errors.Join(one, errors.New("cell b: x"))); n != 2 {
		t.Errorf("two joined errors: %d", n)
	}
	if n := countErrors(one); n != 1 {
		t.Errorf("one error of three lines: %d", n)
	}
}
