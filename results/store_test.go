package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"splats.json", true},
		{"result.json", true},
		{"metrics-step_3.json", true},
		{"20261130-073512-boot-a1b2c3", true},
		{"", false},
		{".", false},
		{"..", false},
		{"../x", false},
		{"a/b", false},
		{"/etc/passwd", false},
		{`a\b`, false},
		{".hidden", false},
		{"x..y", false},
		{"a b", false},
		{"a\x00b", false},
		{"é.json", false},
		{strings.Repeat("a", 128), true},
		{strings.Repeat("a", 129), false},
	} {
		if got := ValidName(tc.name); got != tc.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

var idRE = regexp.MustCompile(`^\d{8}-\d{6}-boot-[0-9a-f]{6}$`)

func TestCreate(t *testing.T) {
	s := Store{Root: filepath.Join(t.TempDir(), "runs")} // Create makes Root
	seen := map[string]bool{}
	for range 50 {
		r, err := s.Create("boot")
		if err != nil {
			t.Fatal(err)
		}
		if !idRE.MatchString(r.ID) {
			t.Errorf("id %q does not match %v", r.ID, idRE)
		}
		if seen[r.ID] {
			t.Errorf("id %q returned twice", r.ID)
		}
		seen[r.ID] = true
		if r.Dir != filepath.Join(s.Root, r.ID) {
			t.Errorf("Dir %q, want %q", r.Dir, filepath.Join(s.Root, r.ID))
		}
		if st, err := os.Stat(r.Dir); err != nil || !st.IsDir() {
			t.Errorf("run dir %s: %v", r.Dir, err)
		}
	}
	r, err := s.Create("")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\d{8}-\d{6}-[0-9a-f]{6}$`).MatchString(r.ID) {
		t.Errorf("id without prefix %q", r.ID)
	}
	for _, bad := range []string{"a/b", "../x", "..", ".x", `a\b`, "a b", strings.Repeat("p", 65)} {
		if _, err := s.Create(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("Create(%q) = %v, want ErrBadName", bad, err)
		}
	}
}

func TestOpen(t *testing.T) {
	s := Store{Root: t.TempDir()}
	r, err := s.Create("x")
	if err != nil {
		t.Fatal(err)
	}
	o, err := s.Open(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if *o != *r {
		t.Errorf("Open = %+v, want %+v", o, r)
	}
	if _, err := s.Open("../" + r.ID); !errors.Is(err, ErrBadName) {
		t.Errorf("Open(../id) = %v, want ErrBadName", err)
	}
	if _, err := s.Open("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(nope) = %v, want fs.ErrNotExist", err)
	}
}

func TestWriteJSON(t *testing.T) {
	r, err := Store{Root: t.TempDir()}.Create("j")
	if err != nil {
		t.Fatal(err)
	}
	type splat struct {
		Title string `json:"title"`
	}
	want := []splat{{"WARNING in fuse_dev_do_write"}}
	if err := r.WriteJSON("splats.json", want); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(r.Dir, "splats.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("\n  ")) || !bytes.HasSuffix(raw, []byte("\n")) {
		t.Errorf("not indented JSON with a final newline:\n%s", raw)
	}
	var got []splat
	if err := r.ReadJSON("splats.json", &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("read back %v, want %v", got, want)
	}

	for _, bad := range []string{"", "../escape.json", "a/b.json", "/tmp/x.json", ".hidden.json", "..", "x..json",
		ManifestFile, ConsoleFile, EventsFile} {
		if err := r.WriteJSON(bad, want); !errors.Is(err, ErrBadName) {
			t.Errorf("WriteJSON(%q) = %v, want ErrBadName", bad, err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(r.Dir), "escape.json")); err == nil {
		t.Error("WriteJSON wrote outside the run directory")
	}
	if err := r.WriteJSON("bad.json", func() {}); err == nil {
		t.Error("WriteJSON of a func: no error")
	}
}

func TestConsoleWriter(t *testing.T) {
	r, err := Store{Root: t.TempDir()}.Create("c")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"[    0.000000] Linux version 7.3.0\n", "[    1.000000] Run /init as init process\n"} {
		w, err := r.ConsoleWriter()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("late")); !errors.Is(err, os.ErrClosed) {
			t.Errorf("write after close: %v, want os.ErrClosed", err)
		}
		if err := w.Close(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("second close: %v, want os.ErrClosed", err)
		}
	}
	got, err := os.ReadFile(filepath.Join(r.Dir, ConsoleFile))
	if err != nil {
		t.Fatal(err)
	}
	want := "[    0.000000] Linux version 7.3.0\n[    1.000000] Run /init as init process\n"
	if string(got) != want {
		t.Errorf("console.log = %q, want %q (appended)", got, want)
	}
}

func TestEvents(t *testing.T) {
	r, err := Store{Root: t.TempDir()}.Create("e")
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.Events()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 7, 35, 12, 123456789, time.FixedZone("CET", 3600))
	l.now = func() time.Time { return t0 }

	type step struct {
		Kind   string `json:"kind"`
		Step   int    `json:"step"`
		Output string `json:"output,omitempty"`
	}
	in := []step{
		{Kind: "start", Step: 1},
		{Kind: "output", Step: 1, Output: "line one\nline two\r\n{\"x\":1}"},
		{Kind: "done", Step: 1},
	}
	var wg sync.WaitGroup
	for _, ev := range in[:1] {
		if err := l.Append(ev); err != nil {
			t.Fatal(err)
		}
	}
	// Concurrent appends must not interleave inside a line.
	for range 8 {
		wg.Go(func() {
			if err := l.Append(in[1]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if err := l.Append(in[2]); err != nil {
		t.Fatal(err)
	}

	big := step{Kind: "output", Output: strings.Repeat("x", MaxEventLine)}
	if err := l.Append(big); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("Append(huge) = %v, want ErrEventTooLarge", err)
	}
	if err := l.Append(func() {}); err == nil {
		t.Error("Append(func) succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(in[0]); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Append after Close = %v, want os.ErrClosed", err)
	}

	path := filepath.Join(r.Dir, EventsFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != 10 {
		t.Fatalf("%d lines, want 10:\n%s", len(lines), raw)
	}
	wantFirst := `{"t":"2026-11-30T06:35:12.123456789Z","event":{"kind":"start","step":1}}`
	if lines[0] != wantFirst {
		t.Errorf("first line\n got %s\nwant %s", lines[0], wantFirst)
	}

	var got []step
	err = ReadEvents(path, func(ev Event) error {
		if !ev.T.Equal(t0) {
			t.Errorf("event time %v, want %v", ev.T, t0)
		}
		var s step
		if err := json.Unmarshal(ev.Event, &s); err != nil {
			return err
		}
		got = append(got, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != in[0] || got[9] != in[2] {
		t.Errorf("events out of order: first %+v last %+v", got[0], got[9])
	}
	for _, s := range got[1:9] {
		if s != in[1] {
			t.Errorf("event %+v, want %+v", s, in[1])
		}
	}

	// A torn last line (crash mid-write) is ignored; a bad full line is not.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"t":"2026-11-30T06:35:13Z","ev`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n := 0
	if err := ReadEvents(path, func(Event) error { n++; return nil }); err != nil || n != 10 {
		t.Errorf("torn line: %d events, err %v; want 10, nil", n, err)
	}
	if err := os.WriteFile(path, []byte("{\"t\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReadEvents(path, func(Event) error { return nil }); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("bad line: err %v, want one naming line 1", err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("x", MaxEventLine+1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReadEvents(path, func(Event) error { return nil }); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("over-long line: err %v, want ErrEventTooLarge", err)
	}
}

func TestList(t *testing.T) {
	s := Store{Root: t.TempDir()}
	var ids []string
	for _, p := range []string{"b", "a", "c"} {
		r, err := s.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		m := testManifest()
		m.RunID = ""
		if err := r.WriteManifest(m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	// A run without a manifest (crashed before writing it) is skipped.
	if _, err := s.Create("nomanifest"); err != nil {
		t.Fatal(err)
	}
	// A broken manifest is listed with its error.
	broken, err := s.Create("broken")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken.Dir, ManifestFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	ids = append(ids, broken.ID)
	// Stray files and temp files are ignored.
	if err := os.WriteFile(filepath.Join(s.Root, "README"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.Root, ".tmp"), 0o755); err != nil {
		t.Fatal(err)
	}

	got, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	var gotIDs []string
	for _, ri := range got {
		gotIDs = append(gotIDs, ri.ID)
		switch {
		case ri.ID == broken.ID:
			if ri.Err == nil || ri.Manifest != nil {
				t.Errorf("broken run: Err %v, Manifest %v", ri.Err, ri.Manifest)
			}
		case ri.Err != nil:
			t.Errorf("run %s: %v", ri.ID, ri.Err)
		case ri.Manifest.RunID != ri.ID:
			t.Errorf("run %s: manifest run_id %q", ri.ID, ri.Manifest.RunID)
		}
	}
	if !slices.Equal(gotIDs, ids) {
		t.Errorf("List ids %v, want %v", gotIDs, ids)
	}

	empty, err := Store{Root: filepath.Join(s.Root, "missing")}.List()
	if err != nil || len(empty) != 0 {
		t.Errorf("missing root: %v, %v; want empty, nil", empty, err)
	}
}
