// Package results owns what a run leaves behind: the run store
// (runs/<id>/ with manifest.json, events.jsonl, console.log and JSON result
// files), the manifest that makes a run repeatable, and, in subpackages, the
// console splat scanner, statistics and reports. It never starts a VM.
//
// Everything is written so that a crash loses nothing already reported:
// single files are replaced atomically (internal/fileio), and the append-only
// logs go straight to the file without user-space buffering.
package results

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"klab/internal/fileio"
)

// File names inside a run directory.
const (
	ManifestFile = "manifest.json"
	ConsoleFile  = "console.log"
	EventsFile   = "events.jsonl"
	// StdoutFile and StderrFile keep the guest's step output, each
	// stream as it came, all steps one after the other; events.jsonl
	// says which step wrote which bytes (OutputRecord).
	StdoutFile = "stdout.log"
	StderrFile = "stderr.log"
)

// MaxEventLine is the longest line EventLog.Append writes, newline included.
const MaxEventLine = 1 << 20

// ErrEventTooLarge is returned by EventLog.Append for an event whose line
// would exceed MaxEventLine.
var ErrEventTooLarge = errors.New("event line too large")

// ErrBadName is returned for a run id, prefix or file name that is not a
// plain name (see ValidName).
var ErrBadName = errors.New("not a plain file name")

// ValidName reports whether name is safe to use as one path element inside a
// run directory: 1 to 128 characters from [A-Za-z0-9._-], not starting with
// '.', and not containing "..". Names from the guest must pass it before
// they reach the file system.
func ValidName(name string) bool {
	if name == "" || len(name) > 128 || name[0] == '.' || strings.Contains(name, "..") {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Store is a directory of runs, one subdirectory per run, named by run id.
type Store struct {
	// Root is the directory holding the runs (see internal/paths.RunsDir).
	Root string
}

// Run is one run's directory in a Store. Its methods only build paths and
// open files, so a Run may be shared between goroutines.
type Run struct {
	// ID is the run id, the name of Dir inside the store's root.
	ID string
	// Dir is the run's directory.
	Dir string
}

// idTimeFormat is the time part of a run id. UTC, so ids sort by time.
const idTimeFormat = "20060102-150405"

// Create makes a new run directory Root/<id> and returns it. The id is
// "<UTC time>-<prefix>-<6 random hex digits>", e.g.
// "20261130-073512-boot-a1b2c3": sortable by start time, and unique because
// the directory is created exclusively (a collision draws a new suffix).
// prefix must pass ValidName (no path separators); it may be empty.
func (s Store) Create(prefix string) (*Run, error) {
	if prefix != "" && (!ValidName(prefix) || len(prefix) > 64) {
		return nil, fmt.Errorf("create run: prefix %q: %w", prefix, ErrBadName)
	}
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	for range 16 {
		var rnd [3]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return nil, fmt.Errorf("create run: %w", err)
		}
		parts := []string{time.Now().UTC().Format(idTimeFormat)}
		if prefix != "" {
			parts = append(parts, prefix)
		}
		parts = append(parts, hex.EncodeToString(rnd[:]))
		id := strings.Join(parts, "-")
		dir := filepath.Join(s.Root, id)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create run: %w", err)
		}
		if err := fileio.SyncDir(s.Root); err != nil {
			return nil, fmt.Errorf("create run %s: %w", id, err)
		}
		return &Run{ID: id, Dir: dir}, nil
	}
	return nil, fmt.Errorf("create run: no unique id after 16 tries in %s", s.Root)
}

// CreateNamed makes the run directory id (a name the user chose, e.g.
// with klab boot --run-id). It fails when that run exists already: a run
// is never written over.
func (s Store) CreateNamed(id string) (*Run, error) {
	if !ValidName(id) || len(id) > 128 {
		return nil, fmt.Errorf("create run %q: %w (letters, digits, '.', '_', '-'; at most 128)", id, ErrBadName)
	}
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	dir := filepath.Join(s.Root, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("create run: %s exists already; choose another run ID, or remove it (klab runs rm %s)", dir, id)
		}
		return nil, fmt.Errorf("create run: %w", err)
	}
	if err := fileio.SyncDir(s.Root); err != nil {
		return nil, fmt.Errorf("create run %s: %w", id, err)
	}
	return &Run{ID: id, Dir: dir}, nil
}

// Open returns the existing run with the given id.
func (s Store) Open(id string) (*Run, error) {
	if !ValidName(id) {
		return nil, fmt.Errorf("open run %q: %w", id, ErrBadName)
	}
	dir := filepath.Join(s.Root, id)
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open run: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("open run %s: not a directory", dir)
	}
	return &Run{ID: id, Dir: dir}, nil
}

// RunInfo describes one run found by Store.List.
type RunInfo struct {
	// ID is the run id.
	ID string
	// Dir is the run's directory.
	Dir string
	// Manifest is the run's manifest; nil when Err is set.
	Manifest *Manifest
	// Err is set when the manifest exists but cannot be read or is invalid.
	Err error
}

// List returns the runs in the store sorted by id (that is, by start time).
// Directories without a manifest are skipped; a run whose manifest is
// unreadable or invalid is listed with Err set, so that one broken run does
// not hide the others. A missing Root is an empty store.
func (s Store) List() ([]RunInfo, error) {
	ents, err := os.ReadDir(s.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var out []RunInfo
	for _, e := range ents {
		if !e.IsDir() || !ValidName(e.Name()) {
			continue
		}
		dir := filepath.Join(s.Root, e.Name())
		m, err := ReadManifest(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		out = append(out, RunInfo{ID: e.Name(), Dir: dir, Manifest: m, Err: err})
	}
	slices.SortFunc(out, func(a, b RunInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Path returns the path of the file name inside the run directory, or an
// error wrapping ErrBadName when name is not a plain name (see ValidName).
func (r *Run) Path(name string) (string, error) {
	if !ValidName(name) {
		return "", fmt.Errorf("run %s: file %q: %w", r.ID, name, ErrBadName)
	}
	return filepath.Join(r.Dir, name), nil
}

// reserved are the run files that only their own methods write.
var reserved = []string{ManifestFile, ConsoleFile, EventsFile, StdoutFile, StderrFile}

// WriteJSON writes v as indented JSON to the file name in the run directory,
// atomically. name must be a plain name (see ValidName) and not one of the
// files the Run manages itself (manifest.json, console.log, events.jsonl,
// stdout.log, stderr.log): names may come from the untrusted guest.
func (r *Run) WriteJSON(name string, v any) error {
	p, err := r.Path(name)
	if err != nil {
		return err
	}
	if slices.Contains(reserved, name) {
		return fmt.Errorf("run %s: file %q is reserved: %w", r.ID, name, ErrBadName)
	}
	if err := fileio.WriteJSON(p, v); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	return nil
}

// ReadJSON decodes the JSON file name in the run directory into v. The file
// is read whole, and one larger than fileio.MaxJSON (64 MiB) is an error;
// use it for the result files WriteJSON writes.
func (r *Run) ReadJSON(name string, v any) error {
	p, err := r.Path(name)
	if err != nil {
		return err
	}
	if err := fileio.ReadJSON(p, v); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	return nil
}

// WriteManifest writes m to manifest.json atomically, as indented JSON. An
// empty m.RunID, m.Schema or m.Outcome.Class is filled in (in the written
// copy, not in m); a
// RunID naming another run, or a manifest that fails Validate, is an error.
func (r *Run) WriteManifest(m *Manifest) error {
	c := *m
	if c.Schema == 0 {
		c.Schema = SchemaVersion
	}
	if c.RunID == "" {
		c.RunID = r.ID
	}
	if c.Outcome.Class == ClassNone {
		c.Outcome.Class = c.Outcome.Status.Class()
	}
	if c.RunID != r.ID {
		return fmt.Errorf("run %s: manifest names run %q", r.ID, c.RunID)
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	if err := fileio.WriteJSON(filepath.Join(r.Dir, ManifestFile), &c); err != nil {
		return fmt.Errorf("run %s: %w", r.ID, err)
	}
	return nil
}

// ConsoleWriter opens console.log for appending and returns a writer for the
// guest console. Writes go straight to the file (no user-space buffer, so a
// crash of klab loses nothing written); Close fsyncs and closes it. The
// writer is safe for concurrent use.
//
// The file stops growing at MaxConsoleLog bytes: a guest that prints
// without end (a WARNING storm, a hostile agent) cannot fill the disk. A
// marker line says where it was cut, and Truncated reports it.
func (r *Run) ConsoleWriter() (*CappedFile, error) {
	return r.LogWriter(ConsoleFile, MaxConsoleLog)
}

// LogWriter opens the log name in the run directory for appending, like
// ConsoleWriter, capped at max bytes (max > 0): console.log, stdout.log
// and stderr.log. name must be a plain name (see ValidName).
func (r *Run) LogWriter(name string, max int64) (*CappedFile, error) {
	p, err := r.Path(name)
	if err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, fmt.Errorf("run %s: %s: cap %d, want at least 1 byte", r.ID, name, max)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("run %s: open %s: %w", r.ID, name, err)
	}
	return &CappedFile{f: f, name: name, max: max}, nil
}

// Caps on what a run stores of what the guest sends: variables so that
// tests can lower them.
var (
	// MaxConsoleLog bounds console.log, in bytes.
	MaxConsoleLog int64 = 64 << 20
	// MaxEventLog bounds events.jsonl, in bytes.
	MaxEventLog int64 = 256 << 20
	// MaxOutputLog bounds stdout.log and stderr.log each, in bytes, when
	// the run sets no cap of its own.
	MaxOutputLog int64 = 1 << 30
)

// CappedFile is an appending file that stops growing at a size and whose
// Close fsyncs first.
type CappedFile struct {
	name      string     // the file's name in the run directory
	mu        sync.Mutex // guards the fields below
	f         *os.File   // nil once closed
	max, n    int64
	truncated bool
}

// Name is the file's name in the run directory (console.log, ...).
func (s *CappedFile) Name() string { return s.name }

// Write appends p to the file, up to the cap; past it, p is dropped (and
// counted as written, so that a writer goes on) after one marker line.
func (s *CappedFile) Write(p []byte) (int, error) {
	if _, err := s.Append(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Append is Write that also says how many bytes of p were stored: fewer
// than len(p) once the cap is reached, 0 past it.
func (s *CappedFile) Append(p []byte) (stored int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return 0, os.ErrClosed
	}
	if s.truncated {
		return 0, nil
	}
	if s.n+int64(len(p)) > s.max {
		keep := p[:max(0, s.max-s.n)]
		n, err := s.f.Write(keep)
		s.n += int64(n)
		if err != nil {
			return n, err
		}
		s.truncated = true
		if _, err := fmt.Fprintf(s.f, "\n[klab: cut at %d bytes; the guest printed more]\n", s.max); err != nil {
			return n, err
		}
		return n, nil
	}
	n, err := s.f.Write(p)
	s.n += int64(n)
	return n, err
}

// Truncated reports whether the cap cut what was written.
func (s *CappedFile) Truncated() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.truncated
}

// Close fsyncs and closes the file.
func (s *CappedFile) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return os.ErrClosed
	}
	f := s.f
	s.f = nil
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	return nil
}

// Events opens events.jsonl for appending.
func (r *Run) Events() (*EventLog, error) {
	f, err := os.OpenFile(filepath.Join(r.Dir, EventsFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("run %s: open event log: %w", r.ID, err)
	}
	return &EventLog{f: f, now: time.Now, max: MaxEventLog}, nil
}

// EventLog is an append-only JSON-lines file of timestamped events. Each
// Append writes one line with a single write call; it is safe for concurrent
// use.
type EventLog struct {
	mu  sync.Mutex       // guards the fields below
	f   *os.File         // nil once closed
	now func() time.Time // the clock, replaced in tests
	// max caps the file's size; n is what was written; past the cap one
	// {"kind":"truncated"} event is written and later ones are dropped.
	max, n    int64
	truncated bool
}

// Truncated reports whether the cap dropped events.
func (l *EventLog) Truncated() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.truncated
}

// Event is one line of events.jsonl: the time it was appended and the event
// as the caller gave it.
type Event struct {
	// T is when the event was appended, in UTC.
	T time.Time `json:"t"`
	// Event is the appended value, as JSON.
	Event json.RawMessage `json:"event"`
}

// Append writes v as one line {"t":"<RFC3339Nano>","event":<v as JSON>}. A
// line longer than MaxEventLine is refused with an error wrapping
// ErrEventTooLarge, and nothing is written.
func (l *EventLog) Append(v any) error {
	ev, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("append event: %w", os.ErrClosed)
	}
	// json.Marshal compacts RawMessage and escapes newlines inside
	// strings, so the line has no newline of its own.
	line, err := json.Marshal(Event{T: l.now().UTC(), Event: ev})
	if err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	line = append(line, '\n')
	if len(line) > MaxEventLine {
		return fmt.Errorf("append event: %d bytes, limit %d: %w", len(line), MaxEventLine, ErrEventTooLarge)
	}
	if l.truncated {
		return nil
	}
	if l.max > 0 && l.n+int64(len(line)) > l.max {
		l.truncated = true
		mark, _ := json.Marshal(Event{T: l.now().UTC(), Event: json.RawMessage(fmt.Sprintf(`{"kind":"truncated","message":"events.jsonl cut at %d bytes"}`, l.max))})
		if _, err := l.f.Write(append(mark, '\n')); err != nil {
			return fmt.Errorf("append event: %w", err)
		}
		return nil
	}
	n, err := l.f.Write(line)
	l.n += int64(n)
	if err != nil {
		return fmt.Errorf("append event: %w", err)
	}
	return nil
}

// Close fsyncs and closes the log.
func (l *EventLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return os.ErrClosed
	}
	f := l.f
	l.f = nil
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close event log: %w", err)
	}
	return nil
}

// ReadEvents calls fn for each event in the events.jsonl at path, in order.
// A line longer than MaxEventLine or one that is not an Event is an error
// naming its line number; a final line cut short by a crash (no trailing
// newline) is ignored. An error from fn stops the read and is returned.
func ReadEvents(path string, fn func(Event) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	defer f.Close()
	rd := newLineReader(f, MaxEventLine)
	for n := 1; ; n++ {
		line, complete, err := rd.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read events %s:%d: %w", path, n, err)
		}
		if !complete {
			return nil // torn last line
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("read events %s:%d: %w", path, n, err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// lineReader reads newline-terminated lines of bounded length.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its newline. complete is false for a
// last line with no newline. A line over max bytes (newline included) is an
// error wrapping ErrEventTooLarge. The line is valid until the next call.
func (l *lineReader) next() (line []byte, complete bool, err error) {
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		l.buf = append(l.buf, chunk...)
		if len(l.buf) > l.max {
			return nil, false, fmt.Errorf("line over %d bytes: %w", l.max, ErrEventTooLarge)
		}
		switch {
		case err == nil:
			return l.buf[:len(l.buf)-1], true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(l.buf) == 0 {
				return nil, false, io.EOF
			}
			return l.buf, false, nil
		default:
			return nil, false, err
		}
	}
}
