package vm

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
)

// readChannel feeds what a guest writes to an Agent's reader and returns
// the agent, the messages the reader queued after the Hello, and the error
// given to bad (before the Hello) or left in Agent.Err.
func readChannel(t *testing.T, guest string, closeAfter bool) (a *Agent, msgs []*proto.Message, preHello error) {
	t.Helper()
	host, g := net.Pipe()
	a = newAgent(host, true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.read(func(*Agent) bool { return true }, func(err error) { preHello = err })
	}()
	go func() {
		_, _ = g.Write([]byte(guest))
		if closeAfter {
			g.Close()
		}
	}()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case q, ok := <-a.msgs:
			if !ok {
				<-done
				g.Close()
				return a, msgs, preHello
			}
			msgs = append(msgs, a.take(q))
		case <-timeout:
			t.Fatal("the reader did not end")
		}
	}
}

const hello = `{"v":1,"kind":"hello","hello":{"agent_version":"../../x","uname":{"release":"../../x"},"channel":"/etc/passwd"}}` + "\n"

// TestHostileChannel: whatever a guest writes into the agent channel, the
// reader ends with a *ProtocolError that says what was wrong, in bounded
// words, after queueing only the good messages before it; before the Hello
// the error also goes to bad. Noise lines that do not start with '{' (a
// serial line's) are skipped, and a line torn by the guest's end is the
// channel's end, not a protocol error.
func TestHostileChannel(t *testing.T) {
	out := `{"v":1,"kind":"output","output":{"step":1,"stream":"stdout","data":"aGk="}}` + "\n"
	long := "{" + strings.Repeat("x", proto.MaxLine+10) + "\n"
	cases := []struct {
		name, guest string
		want        string // in the error; "" for no protocol error
		good        int    // messages queued after the Hello
	}{
		{"over-long line", hello + out + long + out, "line too long", 1},
		{"bogus kind", hello + `{"v":1,"kind":"../../x"}` + "\n" + out, `unknown kind "../../x"`, 0},
		{"host kind", hello + `{"v":1,"kind":"shutdown"}` + "\n", `does not send "shutdown"`, 0},
		{"bad stream", hello + `{"v":1,"kind":"output","output":{"step":1,"stream":"../../x","data":""}}` + "\n", `stream "../../x"`, 0},
		{"huge step id", hello + `{"v":1,"kind":"done","done":{"step":1` + strings.Repeat("0", 100000) + `}}` + "\n", "cannot unmarshal number", 0},
		{"invalid UTF-8 outside strings", hello + "{\"v\":1,\xff\xfe}\n", "invalid character", 0},
		{"no payload", hello + `{"v":1,"kind":"done"}` + "\n", "without its payload", 0},
		{"wrong version", hello + `{"v":2,"kind":"log","log":{"msg":"x"}}` + "\n", "version 2", 0},
		{"garbage before hello", "noise\n{{{{\n" + hello, "invalid character", 0},
		{"long line before hello", long + hello, "line too long", 0},
		// Go's JSON replaces invalid UTF-8 inside strings: a message, not
		// an attack. Names come through as data, never as paths.
		{"invalid UTF-8 in strings", hello + "{\"v\":1,\"kind\":\"log\",\"log\":{\"msg\":\"\xff\xfe../../x\"}}\n" + out, "", 2},
		{"huge but valid step id", hello + `{"v":1,"kind":"done","done":{"step":9223372036854775807}}` + "\n", "", 1},
		{"torn last line", hello + out + `{"v":1,"kind":"outp`, "", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, msgs, pre := readChannel(t, c.guest, true)
			err := a.Err()
			if pre != nil && err != pre {
				t.Errorf("bad got %v, Err %v", pre, err)
			}
			if len(msgs) != c.good {
				t.Errorf("%d messages queued, want %d", len(msgs), c.good)
			}
			var pe *ProtocolError
			if c.want == "" {
				if errors.As(err, &pe) {
					t.Fatalf("protocol error %v, want none", err)
				}
				return
			}
			if !errors.As(err, &pe) {
				t.Fatalf("Err() = %v, want a *ProtocolError", err)
			}
			if (a.Hello == nil) != (pre != nil) {
				t.Errorf("hello %v, but bad got %v", a.Hello != nil, pre)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, "broke the agent protocol") || len(msg) > 400 {
				t.Errorf("error %q (%d bytes), want %q in at most 400", msg, len(msg), c.want)
			}
		})
	}
}

// TestHostileRunEnds: a step waiting for its Done ends with the guest's
// protocol error, typed, when the guest breaks the protocol; Shutdown
// after the last step returns it too.
func TestHostileRunEnds(t *testing.T) {
	host, g := net.Pipe()
	a := newAgent(host, true)
	ready := make(chan *Agent, 1)
	go a.read(func(a *Agent) bool { ready <- a; return true }, func(error) {})
	go func() {
		buf := make([]byte, 4096)
		_, _ = g.Write([]byte(hello))
		_, _ = g.Read(buf) // the step
		_, _ = g.Write([]byte(`{"v":1,"kind":"output","output":{"step":1,"stream":"stderr","data":"aGk="}}` + "\n" + `{"v":1,"kind":"bogus"}` + "\n"))
		for {
			if _, err := g.Read(buf); err != nil {
				return
			}
		}
	}()
	<-ready
	var got []proto.Stream
	_, err := a.Run(t.Context(), proto.Step{Kind: proto.StepExec, Argv: []string{"true"}}, func(m *proto.Message) {
		got = append(got, m.Output.Stream)
	})
	var pe *ProtocolError
	if !errors.Is(err, ErrAgentGone) || !errors.As(err, &pe) || len(got) != 1 {
		t.Errorf("Run = %v (output %v), want ErrAgentGone with a *ProtocolError after one output", err, got)
	}
	if err := a.Shutdown(time.Second); !errors.As(err, &pe) {
		t.Errorf("Shutdown = %v, want the *ProtocolError", err)
	}
	g.Close()
}

// TestHostileFloodBounded: a guest that sends without end while klab does
// not take its messages is held at the queue's byte budget.
func TestHostileFloodBounded(t *testing.T) {
	host, g := net.Pipe()
	a := newAgent(host, true)
	go a.read(func(*Agent) bool { return true }, func(error) {})
	line := `{"v":1,"kind":"log","log":{"msg":"` + strings.Repeat("x", 512<<10) + `"}}` + "\n"
	sent := make(chan int, 1)
	go func() {
		n := 0
		defer func() { sent <- n }()
		if _, err := g.Write([]byte(hello)); err != nil {
			return
		}
		for {
			_ = g.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
			if _, err := g.Write([]byte(line)); err != nil {
				return
			}
			n++
		}
	}()
	n := <-sent // the writer blocks once the budget is full
	if held := n * len(line); held > maxQueuedBytes+2*len(line)+64<<10 {
		t.Errorf("the reader took %d bytes (%d messages) without anyone handling them; budget %d", held, n, maxQueuedBytes)
	}
	if a.budget.used > maxQueuedBytes {
		t.Errorf("%d bytes queued, budget %d", a.budget.used, maxQueuedBytes)
	}
	t.Logf("the guest got %d messages of %d bytes through before it blocked", n, len(line))
	a.budget.close()
	g.Close()
}
