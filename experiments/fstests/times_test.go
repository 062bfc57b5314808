package fstests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"klab/results/suite"
)

func TestTimesLoadMissingAndDamaged(t *testing.T) {
	dir := t.TempDir()
	got, err := LoadTimes(filepath.Join(dir, "none.json"))
	if err != nil || got != nil {
		t.Fatalf("missing file: %v, %v", got, err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"schema":"other/v9","seconds":{}}`), 0o644)
	if _, err := LoadTimes(bad); err == nil {
		t.Error("a file of another schema loaded")
	}
	// Saving over a damaged file replaces it.
	os.WriteFile(bad, []byte("{not json"), 0o644)
	if err := SaveTimes(context.Background(), bad, "ext4", map[string]float64{"generic/001": 3}); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadTimes(bad); err != nil || got["generic/001"] != 3 {
		t.Errorf("after saving over a damaged file: %v, %v", got, err)
	}
}

func TestTimesDropBadEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), TimesFileName("ext4"))
	os.WriteFile(path, []byte(`{"schema":"`+TimesSchema+`","config":"ext4","seconds":{"generic/001":4,"../../etc":1,"generic/002":-1,"generic/003":-0.5}}`), 0o644)
	got, err := LoadTimes(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["generic/001"] != 4 {
		t.Errorf("got %v, want only generic/001", got)
	}
}

// TestTimesAcrossProcesses saves times in two child processes, one after
// the other, and loads the merged file in this one.
func TestTimesAcrossProcesses(t *testing.T) {
	if path := os.Getenv("KLAB_TEST_TIMES_FILE"); path != "" {
		name := os.Getenv("KLAB_TEST_TIMES_TEST")
		if err := SaveTimes(context.Background(), path, "ext4", map[string]float64{name: 7, "generic/001": float64(len(name))}); err != nil {
			t.Fatal(err)
		}
		return
	}
	path := filepath.Join(t.TempDir(), "runs", TimesFileName("ext4"))
	for _, name := range []string{"generic/013", "ext4/001"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTimesAcrossProcesses$")
		cmd.Env = append(os.Environ(), "KLAB_TEST_TIMES_FILE="+path, "KLAB_TEST_TIMES_TEST="+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("child %s: %v\n%s", name, err, out)
		}
	}
	got, err := LoadTimes(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"generic/013": 7, "ext4/001": 7, "generic/001": 8}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v (the later process's time)", k, got[k], v)
		}
	}
}

// TestRunBalancesShardsByEarlierRuns runs the same tests twice with the
// same times file: the first run knows no times and splits by count, the
// second puts the long test alone on one guest.
func TestRunBalancesShardsByEarlierRuns(t *testing.T) {
	cfg, _ := Config("ext4", "", "")
	tree := fakeTree(t)
	timesFile := filepath.Join(t.TempDir(), TimesFileName(cfg.Name))
	tests := []string{"generic/001", "generic/013", "generic/184", "ext4/001"}
	var boots [][][]string
	for range 2 {
		f := newFake()
		f.secs = map[string]float64{"generic/013": 100, "generic/001": 10, "generic/184": 10, "ext4/001": 10}
		if _, err := Run(context.Background(), f.env(tree), Request{
			Kernels: []string{"A"}, Config: cfg, Dir: t.TempDir(), Jobs: 2, TimesFile: timesFile,
			Select: suite.SelectArgs{Tests: tests},
		}); err != nil {
			t.Fatal(err)
		}
		boots = append(boots, f.boots["A"])
	}
	alone := func(lists [][]string) bool {
		return slices.ContainsFunc(lists, func(l []string) bool { return slices.Equal(l, []string{"generic/013"}) })
	}
	if alone(boots[0]) {
		t.Errorf("first run, no times known: %v, want shards by count", boots[0])
	}
	if !alone(boots[1]) {
		t.Errorf("second run: %v, want generic/013 alone on a guest", boots[1])
	}
	got, err := LoadTimes(timesFile)
	if err != nil || got["generic/013"] != 100 {
		t.Errorf("times file: %v, %v", got, err)
	}
}
