package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// OutputRecord is what events.jsonl keeps of one chunk of step output: the
// bytes themselves are in File (stdout.log or stderr.log), at Offset.
type OutputRecord struct {
	// Step is the step ID the guest gave the chunk.
	Step int `json:"step"`
	// Stream is "stdout" or "stderr".
	Stream string `json:"stream"`
	// Bytes is the chunk's length.
	Bytes int `json:"bytes"`
	// File is where the chunk is stored: StdoutFile or StderrFile.
	File string `json:"file"`
	// Offset is where the chunk starts in File.
	Offset int64 `json:"offset"`
	// Stored is how much of the chunk File keeps: Bytes, or less once
	// File reached its cap (then Manifest.Truncated names File).
	Stored int `json:"stored"`
}

// ReadOutput returns up to limit bytes of a run's step output, stdout and
// stderr interleaved in the order they came, as the user saw them: it
// follows the output records of events.jsonl into stdout.log and
// stderr.log. Runs saved before those files existed carried the bytes in
// the events themselves (base64 in "data"); ReadOutput reads those too.
// more reports that there was output past limit. A run without
// events.jsonl has no output.
func ReadOutput(dir string, limit int) (out []byte, more bool, err error) {
	files := map[string]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	open := func(name string) (*os.File, error) {
		if f, ok := files[name]; ok {
			return f, nil
		}
		f, err := os.Open(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			f = nil // a run whose output never came
		} else if err != nil {
			return nil, err
		}
		files[name] = f
		return f, nil
	}
	cut := map[string]bool{}
	errFull := errors.New("full")
	add := func(b []byte) error {
		if room := limit - len(out); len(b) > room {
			out = append(out, b[:max(room, 0)]...)
			more = true
			return errFull
		}
		out = append(out, b...)
		return nil
	}
	err = ReadEvents(filepath.Join(dir, EventsFile), func(ev Event) error {
		var e struct {
			Kind   string `json:"kind"`
			Output *struct {
				OutputRecord
				Data []byte `json:"data"` // the old form
			} `json:"output"`
		}
		if json.Unmarshal(ev.Event, &e) != nil || e.Kind != "output" || e.Output == nil {
			return nil
		}
		o := e.Output
		if o.File == "" {
			return add(o.Data)
		}
		if o.File != StdoutFile && o.File != StderrFile {
			return nil // not a name this package writes
		}
		f, err := open(o.File)
		if err != nil || f == nil || o.Offset < 0 {
			return err
		}
		if o.Stored > 0 {
			buf := make([]byte, min(o.Stored, o.Bytes, limit-len(out)+1))
			got, err := f.ReadAt(buf, o.Offset)
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read output: %w", err)
			}
			if err := add(buf[:got]); err != nil {
				return err
			}
		}
		if o.Stored < o.Bytes && !cut[o.File] {
			cut[o.File] = true
			return add([]byte("\n[klab: " + o.File + " was cut here; the guest printed more]\n"))
		}
		return nil
	})
	if errors.Is(err, errFull) {
		err = nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return out, more, err
}
