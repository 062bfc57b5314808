package lab

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/guest/proto"
	"klab/results"
)

// TestOutputLogs: step output streams to the user whole, while the run
// keeps each stream in its own file up to the cap (the manifest then
// names the file) and events.jsonl gets a record a few dozen bytes long,
// not the data; a stream name from the guest never becomes a file name.
func TestOutputLogs(t *testing.T) {
	run := &results.Run{ID: "x", Dir: t.TempDir()}
	o, err := OpenOutputLogs(run, 100)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	big := bytes.Repeat([]byte("y"), 90)
	var recs []results.OutputRecord
	for _, out := range []proto.Output{
		{Step: 1, Stream: proto.Stdout, Data: []byte("hello\n")},
		{Step: 1, Stream: proto.Stderr, Data: []byte("oops\n")},
		{Step: 2, Stream: "../../x", Data: big},
		{Step: 2, Stream: proto.Stdout, Data: big},
	} {
		recs = append(recs, o.Add(&out, &stdout, &stderr))
	}
	var opts Options
	man := &results.Manifest{}
	ev, err := run.Events()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		line, _ := json.Marshal(Event{Kind: "output", Output: &r})
		if len(line) > 150 {
			t.Errorf("output event of %d bytes: %s", len(line), line)
		}
		if err := ev.Append(Event{Kind: "output", Output: &r}); err != nil {
			t.Fatal(err)
		}
	}
	opts.finish(run, man, []*results.CappedFile{nil, o.files[0], o.files[1]}, ev, nil, time.Now())
	if stdout.Len() != 6+90+90 || stderr.String() != "oops\n" {
		t.Errorf("the user got %d bytes of stdout, stderr %q", stdout.Len(), stderr.String())
	}
	if recs[2].Stream != "stdout" || recs[2].File != results.StdoutFile || recs[2].Offset != 6 || recs[2].Stored != 90 {
		t.Errorf("the bogus stream's record: %+v", recs[2])
	}
	if r := recs[3]; r.Offset != 96 || r.Bytes != 90 || r.Stored != 4 {
		t.Errorf("the record cut by the cap: %+v", r)
	}
	data, _ := os.ReadFile(filepath.Join(run.Dir, results.StdoutFile))
	if !strings.HasPrefix(string(data), "hello\n"+string(big)+"yyyy\n[klab: cut at 100 bytes") {
		t.Errorf("stdout.log: %q", data)
	}
	if len(man.Truncated) != 1 || man.Truncated[0] != results.StdoutFile {
		t.Errorf("manifest truncated %q, want stdout.log", man.Truncated)
	}
	got, more, err := results.ReadOutput(run.Dir, 1<<20)
	if err != nil || more || !strings.HasPrefix(string(got), "hello\noops\n"+string(big)+"yyyy\n[klab: stdout.log was cut") {
		t.Errorf("ReadOutput = %q, %v, %v", got, more, err)
	}
}
