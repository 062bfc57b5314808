package results

import (
	"os"
	"path/filepath"
	"slices"
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

// TestOutputLogCap: an output log keeps what came before its cap whole,
// cuts the write that crosses it with a marker, stores nothing after, and
// Append says how much of each write it kept.
func TestOutputLogCap(t *testing.T) {
	r := &Run{ID: "x", Dir: t.TempDir()}
	if _, err := r.LogWriter("../stdout.log", 10); err == nil {
		t.Error("LogWriter took a path")
	}
	if _, err := r.LogWriter(StdoutFile, 0); err == nil {
		t.Error("LogWriter took a cap of 0")
	}
	f, err := r.LogWriter(StdoutFile, 10)
	if err != nil {
		t.Fatal(err)
	}
	var stored []int
	for _, p := range []string{"abcd", "efgh", "ijkl", "mnop"} {
		n, err := f.Append([]byte(p))
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, n)
	}
	if n, err := f.Write([]byte("more")); n != 4 || err != nil {
		t.Errorf("Write past the cap = %d, %v; want 4, nil (the writer goes on)", n, err)
	}
	if !f.Truncated() || f.Name() != StdoutFile {
		t.Errorf("truncated %v, name %q", f.Truncated(), f.Name())
	}
	f.Close()
	data, _ := os.ReadFile(filepath.Join(r.Dir, StdoutFile))
	if want := "abcdefghij\n[klab: cut at 10 bytes; the guest printed more]\n"; string(data) != want {
		t.Errorf("stdout.log = %q, want %q", data, want)
	}
	if want := []int{4, 4, 2, 0}; !slices.Equal(stored, want) {
		t.Errorf("stored %v, want %v", stored, want)
	}
	if err := r.WriteJSON(StdoutFile, 1); err == nil {
		t.Error("WriteJSON wrote over stdout.log")
	}
}

// TestReadOutput: the output records of events.jsonl read back from
// stdout.log and stderr.log in the order they came, with one marker where
// a file's cap cut it and within the limit; the old form (base64 data in
// the events) reads too, and so does a run without output.
func TestReadOutput(t *testing.T) {
	r := &Run{ID: "x", Dir: t.TempDir()}
	ev, err := r.Events()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*CappedFile{}
	off := map[string]int64{}
	for _, name := range []string{StdoutFile, StderrFile} {
		if files[name], err = r.LogWriter(name, 12); err != nil {
			t.Fatal(err)
		}
	}
	type rec struct {
		Kind   string        `json:"kind"`
		Output *OutputRecord `json:"output"`
	}
	for _, c := range []struct{ file, data string }{
		{StdoutFile, "out1\n"}, {StderrFile, "err1\n"}, {StdoutFile, "out2\n"}, {StdoutFile, "out3\n"}, {StdoutFile, "out4\n"},
	} {
		o := &OutputRecord{Step: 3, Stream: strings.TrimSuffix(c.file, ".log"), Bytes: len(c.data), File: c.file, Offset: off[c.file]}
		if o.Stored, err = files[c.file].Append([]byte(c.data)); err != nil {
			t.Fatal(err)
		}
		off[c.file] += int64(len(c.data))
		if err := ev.Append(rec{"output", o}); err != nil {
			t.Fatal(err)
		}
	}
	// Old runs: the data in the event; and a record naming another file
	// is not followed.
	if err := ev.Append(map[string]any{"kind": "output", "output": map[string]any{"step": 4, "stream": "stdout", "data": []byte("old\n")}}); err != nil {
		t.Fatal(err)
	}
	if err := ev.Append(map[string]any{"kind": "output", "output": map[string]any{"step": 4, "file": "../manifest.json", "bytes": 10, "stored": 10}}); err != nil {
		t.Fatal(err)
	}
	ev.Close()
	for _, f := range files {
		f.Close()
	}
	want := "out1\nerr1\nout2\nou\n[klab: stdout.log was cut here; the guest printed more]\nold\n"
	got, more, err := ReadOutput(r.Dir, 1000)
	if err != nil || string(got) != want || more {
		t.Errorf("ReadOutput = %q, %v, %v; want %q", got, more, err, want)
	}
	got, more, err = ReadOutput(r.Dir, 7)
	if err != nil || string(got) != want[:7] || !more {
		t.Errorf("ReadOutput(7) = %q, %v, %v; want %q and more", got, more, err, want[:7])
	}
	if got, more, err := ReadOutput(t.TempDir(), 10); err != nil || got != nil || more {
		t.Errorf("a run without events: %q, %v, %v", got, more, err)
	}
}
