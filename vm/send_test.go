package vm

import (
	"net"
	"testing"
	"time"

	"klab/guest/proto"
)

// TestSendDeadline: a guest that stops reading cannot block a write to
// its agent past WriteTimeout, and a sysrq request queued behind that
// write is not stuck either.
func TestSendDeadline(t *testing.T) {
	defer func(d time.Duration) { WriteTimeout = d }(WriteTimeout)
	WriteTimeout = 200 * time.Millisecond
	host, guest := net.Pipe() // nobody reads the guest's end
	defer guest.Close()
	a := &Agent{conn: host, enc: proto.NewEncoder(host)}
	start := time.Now()
	errs := make(chan error, 2)
	go func() {
		errs <- a.send(&proto.Message{Kind: proto.KindStep, Step: &proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"true"}}})
	}()
	go func() { errs <- a.Sysrq("w") }()
	for range 2 {
		select {
		case err := <-errs:
			if err == nil {
				t.Error("a write nobody read succeeded")
			}
		case <-time.After(10 * time.Second):
			// 50 times WriteTimeout: only a write without a deadline
			// (the default is 30 s) gets here.
			t.Fatal("a write to a guest that does not read blocked")
		}
	}
	t.Logf("both writes gave up after %v", time.Since(start))
}
