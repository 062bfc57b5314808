package vm

import (
	"testing"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
)

// TestShutdownEvent: the first SHUTDOWN event QMP sends says who ended
// the machine; a panic still reaches Panicked; a machine killed without
// one says so once QMP's stream ended.
func TestShutdownEvent(t *testing.T) {
	for _, c := range []struct {
		name   string
		events []qmp.Event
		want   Shutdown
		ok     bool
	}{
		{"reset", []qmp.Event{{Event: "SHUTDOWN", Data: map[string]any{"guest": true, "reason": "guest-reset"}}}, Shutdown{Guest: true, Reason: "guest-reset"}, true},
		{"ctrl-a x", []qmp.Event{{Event: "STOP"}, {Event: "SHUTDOWN", Data: map[string]any{"guest": false, "reason": "host-qmp-quit"}},
			{Event: "SHUTDOWN", Data: map[string]any{"guest": true, "reason": "guest-reset"}}}, Shutdown{Reason: "host-qmp-quit"}, true},
		{"panic", []qmp.Event{{Event: "GUEST_PANICKED", Data: map[string]any{"action": "pause"}},
			{Event: "SHUTDOWN", Data: map[string]any{"guest": true, "reason": "guest-panic"}}}, Shutdown{Guest: true, Reason: "guest-panic"}, true},
		{"killed", nil, Shutdown{}, false},
	} {
		m := &Machine{exited: make(chan struct{}), panicked: make(chan string, 1), qmpDone: make(chan struct{})}
		events := make(chan qmp.Event)
		go m.watchQMP(events)
		for _, ev := range c.events {
			events <- ev
		}
		close(m.exited)
		go func() {
			time.Sleep(10 * time.Millisecond)
			close(events) // QEMU's exit ends the stream a little later
		}()
		got, ok := m.ShutdownEvent(5 * time.Second)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: ShutdownEvent = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
		select {
		case p := <-m.panicked:
			if c.name != "panic" || p != `{"action":"pause"}` {
				t.Errorf("%s: panicked %q", c.name, p)
			}
		default:
			if c.name == "panic" {
				t.Errorf("panic: not reported")
			}
		}
	}
}
