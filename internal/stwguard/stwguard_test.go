package stwguard

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// guardGoroutines counts the goroutines running the guard's loop.
func guardGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "klab/internal/stwguard.run(")
}

func waitGuards(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for guardGoroutines() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d guard goroutines, want %d", guardGoroutines(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestHoldCounts(t *testing.T) {
	if Running() {
		t.Fatal("a hold is in effect before any Hold")
	}
	a := Hold()
	b := Hold()
	if !Running() {
		t.Fatal("no hold in effect after Hold")
	}
	waitGuards(t, 1)
	a()
	a() // a second release of the same hold changes nothing
	if !Running() {
		t.Fatal("the guard stopped while a hold remained")
	}
	b()
	if Running() {
		t.Fatal("a hold is in effect after every release")
	}
	waitGuards(t, 0)
	// A new hold starts the guard again.
	c := Hold()
	waitGuards(t, 1)
	c()
	waitGuards(t, 0)
}
