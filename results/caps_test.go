package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogCaps: console.log and events.jsonl stop growing at their caps,
// with a marker, and say so; what came before the cap is kept whole.
func TestLogCaps(t *testing.T) {
	defer func(c, e int64) { MaxConsoleLog, MaxEventLog = c, e }(MaxConsoleLog, MaxEventLog)
	MaxConsoleLog, MaxEventLog = 100, 300
	r := &Run{ID: "x", Dir: t.TempDir()}
	con, err := r.ConsoleWriter()
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if n, err := con.Write([]byte("warning line\n")); err != nil || n != 13 {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	if !con.Truncated() {
		t.Error("console not marked truncated")
	}
	con.Close()
	data, _ := os.ReadFile(filepath.Join(r.Dir, ConsoleFile))
	if len(data) > 200 || !strings.HasPrefix(string(data), strings.Repeat("warning line\n", 7)) || !strings.Contains(string(data), "[klab: cut at 100 bytes") {
		t.Errorf("console.log (%d bytes):\n%s", len(data), data)
	}
	ev, err := r.Events()
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if err := ev.Append(map[string]string{"kind": "output", "data": "xxxxxxxxxxxxxxxxxxxx"}); err != nil {
			t.Fatal(err)
		}
	}
	if !ev.Truncated() {
		t.Error("events not marked truncated")
	}
	ev.Close()
	data, _ = os.ReadFile(filepath.Join(r.Dir, EventsFile))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(data) > 300+200 || !strings.Contains(lines[len(lines)-1], `"kind":"truncated"`) {
		t.Errorf("events.jsonl (%d bytes): last line %s", len(data), lines[len(lines)-1])
	}
	n := 0
	if err := ReadEvents(filepath.Join(r.Dir, EventsFile), func(Event) error { n++; return nil }); err != nil || n != len(lines) {
		t.Errorf("the cut log does not read back: %v, %d of %d", err, n, len(lines))
	}
}
