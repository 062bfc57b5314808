package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"klab/internal/procfs"
	"klab/internal/testenv"
)

// matrixReport is the part of a matrix's report.json the tests read.
type matrixReport struct {
	Schema   string `json:"schema"`
	Cells    int    `json:"cells"`
	Complete int    `json:"complete"`
	Kernels  []struct {
		Ref     string `json:"ref"`
		Version string `json:"version"`
	} `json:"kernels"`
	Rows []struct {
		Experiment string `json:"experiment"`
		Name       string `json:"name"`
		Cells      []struct {
			Kernel  string `json:"kernel"`
			Summary struct {
				N int `json:"n"`
			} `json:"summary"`
			Run string `json:"run"`
		} `json:"cells"`
	} `json:"rows"`
	Failures []struct {
		Message string `json:"message"`
	} `json:"failures"`
}

func readMatrixReport(t *testing.T, dir string) matrixReport {
	t.Helper()
	var m matrixReport
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		t.Fatalf("matrix report: %v", err)
	}
	return m
}

// shape is what must be equal between two runs of one matrix: the
// kernels, the cells, the rows and which kernels have a value in each.
func (m matrixReport) shape() []string {
	out := []string{fmt.Sprintf("%s cells %d complete %d", m.Schema, m.Cells, m.Complete)}
	for _, k := range m.Kernels {
		out = append(out, "kernel "+k.Ref+" "+k.Version)
	}
	for _, r := range m.Rows {
		l := r.Experiment + " | " + r.Name
		for _, c := range r.Cells {
			if c.Summary.N > 0 {
				l += " | " + c.Kernel
			}
		}
		out = append(out, l)
	}
	return out
}

// cellRuns counts each cell's experiment runs in a results tree.
func cellRuns(t *testing.T, dir string) map[string]int {
	t.Helper()
	cells, err := os.ReadDir(filepath.Join(dir, "cells"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range cells {
		runs, _ := filepath.Glob(filepath.Join(dir, "cells", c.Name(), "*-exp-*"))
		out[c.Name()] = len(runs)
		if _, err := os.Stat(filepath.Join(dir, "cells", c.Name(), "cell.json")); err != nil {
			t.Errorf("cell %s: %v", c.Name(), err)
		}
	}
	return out
}

// TestMatrixShardsResume runs the smoke matrix (two cells: one experiment
// on debian:6.12 and debian:7.3) as two shards merged into one tree, then
// again in one process that is killed with SIGKILL in the middle and
// resumed. The resumed tree has every cell exactly once, no QEMU outlives
// the killed klab, and its report has the shape of the merged one.
func TestMatrixShardsResume(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	const file = "matrices/smoke.yaml"
	var shards []string
	for _, s := range []string{"1/2", "2/2"} {
		out := filepath.Join(runs, "shard"+s[:1])
		if r := runTimeout(t, runs, 20*time.Minute, "matrix", "run", file, "--shard", s, "--out", out, "--format", "json"); r.code != 0 {
			t.Fatalf("shard %s: exit %d", s, r.code)
		}
		shards = append(shards, out)
	}
	merged := filepath.Join(runs, "merged")
	if r := runTimeout(t, runs, 5*time.Minute, append([]string{"results", "merge", "--out", merged}, shards...)...); r.code != 0 {
		t.Fatalf("merge: exit %d", r.code)
	}
	want := readMatrixReport(t, merged)
	if want.Cells != 2 || want.Complete != 2 || len(want.Rows) == 0 || len(want.Failures) != 0 {
		t.Fatalf("merged report: %+v", want)
	}
	for _, r := range want.Rows {
		for _, c := range r.Cells {
			if c.Summary.N == 0 || c.Run == "" {
				t.Errorf("merged %s on %s: no value", r.Name, c.Kernel)
			}
		}
	}

	// One process, killed once the first cell has finished.
	out := filepath.Join(runs, "killed")
	cmd := exec.Command(klab(t), "--runs-dir", runs, "matrix", "run", file, "--jobs", "1", "--out", out)
	cmd.Dir = ".."
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	start := time.Now()
	deadline := start.Add(budget(t, 15*time.Minute))
	var qemu int
	for {
		done, _ := filepath.Glob(filepath.Join(out, "cells", "*", "cell.json"))
		if len(done) == 1 {
			// The second cell's guest is booting or running.
			if qemu = procfs.ChildNamed(cmd.Process.Pid, "qemu-system-x86"); qemu != 0 {
				break
			}
		}
		if len(done) > 1 || time.Now().After(deadline) {
			t.Fatalf("no moment with one cell finished and a guest running (%d finished)", len(done))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for gone := time.Now().Add(5 * time.Second); procfs.Alive(qemu); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(gone) {
			syscall.Kill(qemu, syscall.SIGKILL)
			t.Fatalf("qemu %d survived kill -9 of klab", qemu)
		}
	}
	resumeStart := time.Now()
	if r := runTimeout(t, runs, 20*time.Minute, "matrix", "run", file, "--resume", out); r.code != 0 {
		logs, _ := filepath.Glob(filepath.Join(out, "cells", "*", "progress.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, cliTail(string(b), 30))
		}
		t.Fatalf("resume: exit %d; its report:\n%s", r.code, r.stdout)
	} else if !strings.Contains(r.stderr, "1 of 2 cell(s) finished already") {
		t.Errorf("resume did not keep the finished cell")
	}
	t.Logf("kill and resume took %s (the resume %s)", time.Since(start).Round(time.Second), time.Since(resumeStart).Round(time.Second))
	for cell, n := range cellRuns(t, out) {
		if n != 1 {
			t.Errorf("cell %s has %d runs, want exactly 1", cell, n)
		}
	}
	if got := readMatrixReport(t, out).shape(); !slices.Equal(got, want.shape()) {
		t.Errorf("resumed report:\n%s\nwant the merged one's shape:\n%s", strings.Join(got, "\n"), strings.Join(want.shape(), "\n"))
	}
}

// TestMatrixBadInput: a broken matrix file is exit 2 with file:line, and
// nothing is written.
func TestMatrixBadInput(t *testing.T) {
	testenv.E2E(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nkernels: [debian:7.3, nope]\nexperiments: [fuse-transport]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	r := runTimeout(t, dir, time.Minute, "matrix", "run", bad, "--out", out)
	if r.code != 2 || !strings.Contains(r.stderr, bad+":2:23: kernels[1]: \"nope\" is not a kernel") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a bad matrix file left %s", out)
	}
	r = runTimeout(t, dir, time.Minute, "matrix", "run", "matrices/smoke.yaml", "--shard", "3/2")
	if r.code != 2 || !strings.Contains(r.stderr, "want i/n with 1 <= i <= n") {
		t.Errorf("--shard 3/2: exit %d, stderr %q", r.code, r.stderr)
	}
}
