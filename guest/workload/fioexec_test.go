package workload

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/guest/proto"
	"klab/internal/testenv"
)

// replayExec feeds fio's recorded stdout (testdata/NAME) and stderr to an
// execWatch as RunFio does, with the files in dir, and returns its
// problems. stderr is written in small chunks, as a pipe may deliver it.
func replayExec(t *testing.T, name, stderr string, files ...string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("sh: something went wrong\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var w execWatch
	var last *FioOutput
	err = SplitJSONDocs(bytes.NewReader(raw), MaxFioDoc, func(doc []byte) {
		o, err := ParseFioOutput(doc)
		if err != nil {
			t.Fatal(err)
		}
		last = o
	}, w.Line)
	if err != nil {
		t.Fatal(err)
	}
	for b := []byte(stderr); len(b) > 0; {
		n := min(len(b), 7)
		w.Write(b[:n])
		b = b[n:]
	}
	return w.Problems(dir, last, stderr)
}

func TestExecWatch(t *testing.T) {
	const noShell = "command is not present in busybox: -c\n"
	for _, c := range []struct {
		name, fixture, stderr string
		files                 []string
		want                  []string // a substring of each problem
	}{
		{"ran", "fio-3.33-exec-postrun.out", "", []string{"pj.prerun.txt", "pj.postrun.txt"}, nil},
		{"postrun without a shell", "fio-3.33-exec-postrun.out", noShell, []string{"pj.prerun.txt"},
			[]string{"exec_postrun of job pj did not run: the shell never created its output file pj.postrun.txt (fio's stderr: command is not present in busybox: -c)"}},
		{"no shell at all", "fio-3.33-exec-postrun.out", noShell + noShell, nil,
			[]string{"exec_prerun of job pj did not run", "exec_postrun of job pj did not run"}},
		{"prerun failed", "fio-3.33-exec-prerun-fail.out", "", []string{"pr.prerun.txt"},
			[]string{"exec_prerun of job pr failed: fio ends a job whose exec_prerun exits non-zero, and the job did no I/O (pr.prerun.txt: sh: something went wrong)"}},
		{"fork failed", "fio-3.33-exec-postrun.out", "fio: exec of cmd <true > pj.prerun.txt 2>&1> failed\n", []string{"pj.prerun.txt", "pj.postrun.txt"},
			[]string{"fio could not run exec_prerun <true > pj.prerun.txt 2>&1>"}},
		{"no exec", "fio-3.33-seqwrite-group.json", noShell, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := replayExec(t, c.fixture, c.stderr, c.files...)
			if len(got) != len(c.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(c.want), c.want)
			}
			for i := range got {
				if !strings.Contains(got[i], c.want[i]) {
					t.Errorf("problem %q, want %q", got[i], c.want[i])
				}
			}
		})
	}
}

// TestExecWatchBounded: a flood of announcements and an endless stderr
// line keep execWatch small.
func TestExecWatchBounded(t *testing.T) {
	var w execWatch
	for i := 0; i < 10*maxExecRuns; i++ {
		w.Line([]byte("j" + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + " : Saving output of postrun in f.postrun.txt"))
	}
	w.Write(bytes.Repeat([]byte("y"), 1<<20))
	if len(w.runs) > maxExecRuns || len(w.partial) > maxExecLine {
		t.Errorf("%d runs, %d bytes of a partial line kept", len(w.runs), len(w.partial))
	}
	long := strings.Repeat("z", 10<<10)
	w = execWatch{}
	w.Line([]byte(long + " : Saving output of prerun in " + long + ".prerun.txt"))
	for _, p := range w.Problems(t.TempDir(), nil, long) {
		if len(p) > 6*maxExecDetail {
			t.Errorf("problem of %d bytes", len(p))
		}
	}
}

// TestRunFioExec runs fio with exec commands: a prerun that exits
// non-zero fails the run (fio itself exits 0), commands that work do
// not.
func TestRunFioExec(t *testing.T) {
	testenv.RequiresCommand(t, "fio")
	args := []string{"--name=x", "--rw=write", "--size=16k", "--bs=4k"}
	_, err := RunFio(context.Background(), &proto.FioStep{Args: append(args, "--exec_prerun=exit 3"), Dir: t.TempDir()}, FioOptions{})
	if err == nil || !strings.Contains(err.Error(), "exec_prerun of job x failed") {
		t.Errorf("prerun exit 3: %v, want exec_prerun of job x failed", err)
	}
	m, err := RunFio(context.Background(), &proto.FioStep{Args: append(args, "--exec_prerun=true", "--exec_postrun=true"), Dir: t.TempDir()}, FioOptions{})
	if err != nil || m.Ops != 4 {
		t.Errorf("working commands: %v, ops %v", err, m)
	}
}
