package vm

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"klab/guest/proto"
)

func TestConnectAgent(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	go func() {
		enc := proto.NewEncoder(guest)
		_ = enc.Encode(&proto.Message{Kind: proto.KindHello, Hello: &proto.Hello{AgentVersion: "v1", Channel: "host"}})
		dec := proto.NewDecoder(guest)
		if m, err := dec.Decode(); err == nil && m.Kind == proto.KindStep {
			_ = enc.Encode(&proto.Message{Kind: proto.KindDone, Done: &proto.Done{Step: m.Step.ID}})
		}
		guest.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := ConnectAgent(ctx, host, "a pipe")
	if err != nil {
		t.Fatal(err)
	}
	if a.Hello.AgentVersion != "v1" || a.Channel() != "a pipe" {
		t.Errorf("hello %+v on %q", a.Hello, a.Channel())
	}
	if d, err := a.Run(ctx, proto.Step{ID: 4, Kind: proto.StepExec, Argv: []string{"true"}}, nil); err != nil || d.Step != 4 {
		t.Errorf("Run: %+v, %v", d, err)
	}
}

func TestConnectAgentBadGuest(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	defer guest.Close()
	// The channel stays open: a line torn by a guest's end is not the
	// guest's doing.
	go func() { _, _ = guest.Write([]byte(`{"v":1,"kind":"no such kind"}` + "\n")) }()
	_, err := ConnectAgent(context.Background(), host, "a pipe")
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Channel != "a pipe" {
		t.Errorf("a guest that sends garbage: %v, want a *ProtocolError", err)
	}
	host2, guest2 := net.Pipe()
	defer host2.Close()
	guest2.Close()
	if _, err := ConnectAgent(context.Background(), host2, "a pipe"); err == nil {
		t.Error("an agent that ended before its hello connected")
	}
}
