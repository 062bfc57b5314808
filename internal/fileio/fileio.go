// Package fileio owns klab's careful file operations: replacing a file
// atomically (a reader, or the file system after a crash, sees the old
// content or the new, never a mix) and reading a JSON file back with a
// bound on its size, since what a run directory holds may come from a
// guest or from another machine. CopyFile is the one file copy the
// others share.
package fileio

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// MaxJSON bounds a JSON file ReadJSON reads: 64 MiB. The largest JSON
// files klab writes (an experiment's samples.json, a matrix cell's
// cell.json, a run's result files) are kilobytes to a few MiB; the
// bound only stops a damaged or hostile file from filling memory.
const MaxJSON = 64 << 20

// WriteAtomic replaces path with data so that a reader, or the file
// system after a crash, sees either the old content or the new, never a
// mix. It writes a temporary file in the same directory, fsyncs it,
// renames it over path and fsyncs the directory. perm is applied exactly
// (the umask does not narrow it).
func WriteAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = SyncDir(dir); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteJSON replaces path atomically (as WriteAtomic, mode 0644) with v
// encoded as indented JSON and a final newline: the form of every JSON
// file klab keeps.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	return WriteAtomic(path, append(data, '\n'), 0o644)
}

// SyncDir fsyncs a directory so that a rename or create in it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// ReadJSON decodes the JSON file path into v. A file larger than MaxJSON
// is an error; errors from opening the file are returned as they are, so
// that errors.Is(err, fs.ErrNotExist) tells a missing file.
func ReadJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxJSON+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxJSON {
		return fmt.Errorf("read %s: larger than %d bytes", path, MaxJSON)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}
