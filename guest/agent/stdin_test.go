package agent

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
)

func stdout(ms []*proto.Message) string {
	var b bytes.Buffer
	for _, m := range ms {
		if m.Kind == proto.KindOutput && m.Output.Stream == proto.Stdout {
			b.Write(m.Output.Data)
		}
	}
	return b.String()
}

// TestExecStdin feeds a command's standard input from Input messages,
// sent right behind the step, in several chunks, then EOF.
func TestExecStdin(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c", "cat; echo end"}, Stdin: true})
	h.send(&proto.Message{Kind: proto.KindInput, Input: &proto.Input{Step: 1, Data: []byte("hi\n")}})
	h.send(&proto.Message{Kind: proto.KindInput, Input: &proto.Input{Step: 1, Data: []byte("there\n")}})
	h.send(&proto.Message{Kind: proto.KindInput, Input: &proto.Input{Step: 1, EOF: true}})
	before, d := h.until(1, 10*time.Second)
	checkDone(t, d, 1, 0, "")
	if got := stdout(before); got != "hi\nthere\nend\n" {
		t.Errorf("stdout %q, want the input then end", got)
	}
	// Input for a step that is over, or was never opened, is dropped.
	h.send(&proto.Message{Kind: proto.KindInput, Input: &proto.Input{Step: 1, Data: []byte("late\n")}})
	h.send(&proto.Message{Kind: proto.KindInput, Input: &proto.Input{Step: 9, Data: []byte("stray\n")}})
	// Without Stdin the command reads /dev/null.
	h.step(proto.Step{ID: 2, Kind: proto.StepExec, Argv: []string{"sh", "-c", "cat; echo end"}})
	before, d = h.until(2, 10*time.Second)
	checkDone(t, d, 2, 0, "")
	if got := stdout(before); got != "end\n" {
		t.Errorf("without Stdin: stdout %q, want end only", got)
	}
}

// TestExecStdinNotRead: a command that never reads its input ends
// normally while the host keeps sending more than a pipe holds, and the
// agent still answers.
func TestExecStdinNotRead(t *testing.T) {
	h := startAgent(t, &Agent{})
	h.step(proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c", "sleep 0.2; echo done"}, Stdin: true})
	chunk := bytes.Repeat([]byte("x"), proto.MaxChunk)
	for range 32 { // 1 MiB: many times a pipe's buffer
		h.send(&proto.Message{Kind: proto.KindInput, Input: &proto.Input{Step: 1, Data: chunk}})
	}
	before, d := h.until(1, 10*time.Second)
	checkDone(t, d, 1, 0, "")
	if got := stdout(before); got != "done\n" {
		t.Errorf("stdout %q", got)
	}
	h.step(proto.Step{ID: 2, Kind: proto.StepExec, Argv: []string{"echo", "next"}})
	before, d = h.until(2, 10*time.Second)
	checkDone(t, d, 2, 0, "")
	if got := stdout(before); got != "next\n" {
		t.Errorf("next step: stdout %q", got)
	}
}

// TestStdinQueueCap: input past MaxStdinQueue is dropped and ends the
// input, and the pump says so.
func TestStdinQueueCap(t *testing.T) {
	q := newStdinQueue()
	big := make([]byte, MaxStdinQueue/2+1)
	q.put(&proto.Input{Data: big})
	q.put(&proto.Input{Data: big}) // over the cap: dropped, input ends
	q.put(&proto.Input{Data: []byte("after")})
	r, w, err := pipe()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { got.ReadFrom(r); close(done) }()
	if !q.pump(w) {
		t.Error("pump did not report the dropped input")
	}
	<-done
	if got.Len() != len(big) || strings.Contains(got.String(), "after") {
		t.Errorf("the command got %d bytes, want the first chunk only (%d)", got.Len(), len(big))
	}
}

func pipe() (*os.File, *os.File, error) { return os.Pipe() }
