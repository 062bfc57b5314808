package fstests

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"

	"klab/internal/fileio"
	"klab/internal/flock"
	"klab/results/suite/statusline"
)

// TimesSchema names the JSON schema of a times file.
const TimesSchema = "klab.fstests-times/v1"

// TimesFileName is the name of the times file of configuration config in
// a runs directory: each configuration's per-test times, from the runs
// before, balance the next run's shards (--jobs).
func TimesFileName(config string) string { return ".fstests-times-" + config + ".json" }

// timesFile is a times file's content.
type timesFile struct {
	Schema string `json:"schema"`
	// Config is the configuration the times were measured on.
	Config string `json:"config"`
	// Seconds are each test's seconds in the latest run that passed or
	// failed it.
	Seconds map[string]float64 `json:"seconds"`
}

// maxTimes bounds the tests a times file keeps: more than fstests has.
const maxTimes = 20000

// LoadTimes reads the per-test times in path. A file that does not exist
// gives no times and no error; entries that are not a test name with a
// finite, non-negative time are dropped.
func LoadTimes(path string) (map[string]float64, error) {
	var f timesFile
	err := fileio.ReadJSON(path, &f)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if f.Schema != TimesSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, f.Schema, TimesSchema)
	}
	out := make(map[string]float64, len(f.Seconds))
	for t, s := range f.Seconds {
		if validTime(t, s) && len(out) < maxTimes {
			out[t] = s
		}
	}
	return out, nil
}

// validTime reports whether test t's time s can balance shards: a test
// name and a finite number of seconds, not negative.
func validTime(t string, s float64) bool {
	return statusline.ValidName(t) && s >= 0 && !math.IsInf(s, 0) && !math.IsNaN(s)
}

// SaveTimes merges times into the times file path of configuration config
// (a test's new time replaces its old one), under a lock so that two klab
// processes lose neither's times.
func SaveTimes(ctx context.Context, path, config string, times map[string]float64) error {
	if len(times) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	unlock, err := flock.Lock(ctx, path+".lock", nil)
	if err != nil {
		return err
	}
	defer unlock()
	old, err := LoadTimes(path)
	if err != nil {
		// A damaged file is replaced, not kept: times only balance shards.
		old = nil
	}
	merged := make(map[string]float64, len(old)+len(times))
	maps.Copy(merged, old)
	for t, s := range times {
		if validTime(t, s) {
			merged[t] = s
		}
	}
	return fileio.WriteJSON(path, timesFile{Schema: TimesSchema, Config: config, Seconds: merged})
}
