package experiments

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"klab/guest/proto"
)

// TestCheckOutputTail: the tail keeps the last lines and bytes, drops
// control characters and broken UTF-8, and keeps nothing outside
// start..stop.
func TestCheckOutputTail(t *testing.T) {
	var lines []string
	for i := 1; i <= 30; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	if got, want := checkOutput([]byte(strings.Join(lines, "\n")+"\n\n")), strings.Join(lines[10:], "\n"); got != want {
		t.Errorf("30 lines: %q, want the last 20: %q", got, want)
	}
	if got := checkOutput([]byte("a\x1b[31mb\r\n\x00c\td\xff\u202e\n")); got != "a[31mb\nc\td?" {
		t.Errorf("control characters: %q", got)
	}
	long := strings.Repeat("é", 3000) // 6000 bytes on one line
	if got := checkOutput([]byte(long)); len(got) > maxCheckOutputBytes || !utf8.ValidString(got) || !strings.HasSuffix(long, got) || len(got) < maxCheckOutputBytes-1 {
		t.Errorf("one long line: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	mixed := strings.Repeat("x", 1500) + "\n" + strings.Repeat("y", 1500) + "\n" + "end"
	if got := checkOutput([]byte(mixed)); !strings.HasPrefix(got, "yyy") || !strings.HasSuffix(got, "\nend") {
		t.Errorf("the cut starts mid-line: %.20q...", got)
	}

	var o outputTail
	msg := func(s string) *proto.Message {
		return &proto.Message{Kind: proto.KindOutput, Output: &proto.Output{Stream: proto.Stderr, Data: []byte(s)}}
	}
	o.message(msg("before\n"))
	o.start()
	o.message(&proto.Message{Kind: proto.KindLog, Log: &proto.Log{Msg: "agent"}})
	for range 10000 {
		o.message(msg("spam\n"))
	}
	o.message(msg("last\n"))
	if len(o.buf) > 4*maxCheckOutputBytes {
		t.Errorf("the tail holds %d bytes", len(o.buf))
	}
	if got := o.stop(); !strings.HasSuffix(got, "spam\nlast") || strings.Count(got, "\n") != maxCheckOutputLines-1 {
		t.Errorf("stop = %q", got)
	}
	o.message(msg("after\n"))
	o.start()
	if got := o.stop(); got != "" {
		t.Errorf("output outside start..stop kept: %q", got)
	}
}

// TestRunCheckOutput: a failed check keeps the tail of what it printed
// in samples.json and the report, and only its own output; a passed
// check keeps none.
func TestRunCheckOutput(t *testing.T) {
	f := loadRunSpec(t, runSpec)
	isCheck := func(st proto.Step) bool {
		return st.Kind == proto.StepExec && len(st.Argv) == 3 && st.Argv[2] == "true"
	}
	fake := &fakeOpener{t: t, agentIDs: true}
	fake.output = func(g *fakeGuest, st proto.Step) string {
		if !isCheck(st) {
			return "not the check's\n"
		}
		var b strings.Builder
		for i := 1; i <= 25; i++ {
			fmt.Fprintf(&b, "guest %d line %d \x1b[2J\n", g.index, i)
		}
		return b.String()
	}
	fake.step = func(g *fakeGuest, st proto.Step, d *proto.Done) error {
		if isCheck(st) && g.index == 1 {
			d.ExitCode = 2
		}
		return nil
	}
	res, err := Run(context.Background(), f, runOptions(t, fake))
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, c := range readSamples(t, res.Dir).Checks {
		if c.Passed {
			if c.Output != "" {
				t.Errorf("a passed check kept output %q", c.Output)
			}
			continue
		}
		failed++
		lines := strings.Split(c.Output, "\n")
		if c.Message != "exit 2, want 0" || len(lines) != maxCheckOutputLines || lines[0] != "guest 1 line 6 [2J" || lines[19] != "guest 1 line 25 [2J" {
			t.Errorf("failed check: message %q, output %q", c.Message, c.Output)
		}
	}
	if failed != 2 {
		t.Fatalf("%d failed checks, want 2 (both sides of round 2)", failed)
	}
	saved, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	r := saved.Report()
	var b strings.Builder
	for _, c := range r.Checks {
		if !c.Passed {
			b.WriteString(c.Output)
		}
	}
	if !strings.Contains(b.String(), "guest 1 line 25") || strings.Contains(b.String(), "not the check's") {
		t.Errorf("the report's failed checks' output: %q", b.String())
	}
}
