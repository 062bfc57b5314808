package fileio

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	if err := WriteAtomic(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(p, []byte("two"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "two" {
		t.Errorf("content %q, want %q", got, "two")
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("perm %v, want 0640", st.Mode().Perm())
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("dir holds %v, want only f.json (temp file left behind?)", names)
	}

	err = WriteAtomic(filepath.Join(dir, "missing", "f"), nil, 0o644)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write into a missing dir: %v, want fs.ErrNotExist", err)
	}
}

func TestReadJSON(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "v.json")
	if err := WriteAtomic(p, []byte(`{"a": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var v struct{ A int }
	if err := ReadJSON(p, &v); err != nil || v.A != 1 {
		t.Errorf("ReadJSON = %+v, %v; want A 1", v, err)
	}
	if err := ReadJSON(filepath.Join(dir, "missing.json"), &v); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := WriteAtomic(bad, []byte(`{"a": `), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ReadJSON(bad, &v); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("truncated file: %v, want an error naming it", err)
	}
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxJSON + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := ReadJSON(big, &v); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("file over MaxJSON: %v, want a size error", err)
	}
}

func TestWriteJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.json")
	if err := WriteJSON(path, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "{\n  \"a\": 1\n}\n" {
		t.Errorf("WriteJSON wrote %q", got)
	}
	if err := WriteJSON(path, func() {}); err == nil || !strings.Contains(err.Error(), "v.json") {
		t.Errorf("a value JSON cannot encode: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != string(got) {
		t.Errorf("a failed WriteJSON changed the file: %q", b)
	}
}
