package fuse

import (
	"os"
	"testing"
)

// TestPollHackInChild: the poll hack's LOOKUP comes from a child process,
// never from the server's own, so that a server killed while it is in
// flight can still exit.
func TestPollHackInChild(t *testing.T) {
	pollHackPID.Store(0)
	mount(t, DefaultConfig())
	pid := pollHackPID.Load()
	if pid == 0 || pid == int64(os.Getpid()) {
		t.Errorf("poll hack looked up by pid %d, want a child of %d", pid, os.Getpid())
	}
}
