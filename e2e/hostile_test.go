package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"klab/internal/procfs"
	"klab/internal/testenv"
	"klab/results"
)

// TestHostileGuest boots guests whose init is not klab's agent but a
// hostile program (testdata/hostile, run with rdinit=) that abuses the
// agent channel: garbage and an over-long line before the Hello; path-like
// names in every string, invalid UTF-8 and a step ID near 2^63 after it;
// a step ID of 400 digits; 64 MiB of output as fast as the guest can
// write it; garbage after the last step. Each time klab must:
//
//   - end the run as a failure of the guest (exit 126, outcome
//     kernel-error) whose message says the guest broke the agent protocol
//     and how, well within the boot timeout, without a Go panic;
//   - keep its own memory bounded (its VmHWM, sampled while it runs: the
//     rusage of its wait status counts QEMU's too);
//   - write nothing outside the run directory, and there only its own
//     files;
//   - leave no QEMU behind;
//   - for the flood, stream every byte to the user but store each stream
//     only up to --max-output, say so in the manifest's truncated list,
//     and keep events.jsonl small.
func TestHostileGuest(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "hostile")
	build := exec.Command("go", "build", "-o", bin, "./testdata/hostile")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the hostile init: %v\n%s", err, out)
	}
	const floodMiB = 64
	cases := []struct {
		mode string
		args []string
		want string // in klab's message
	}{
		{"prehello", nil, "proto: line too long; the agent never started"},
		{"names", nil, `unknown kind "../../`},
		{"hugeid", nil, "cannot unmarshal number 999"},
		{"afterlast", nil, "line too long, after the last step"},
		{"flood", []string{"--max-output", "8M"}, "invalid character"},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			parallelGuest(t)
			var rnd [6]byte
			_, _ = rand.Read(rnd[:])
			tag := "hostile-escape-" + hex.EncodeToString(rnd[:])
			root := t.TempDir()
			runs := filepath.Join(root, "runs")
			args := []string{"--runs-dir", runs, "boot", "--kernel", "debian:7.3", "--no-stdin",
				"--boot-timeout", "15", "--timeout", "20", "--file", bin + ":/hostile",
				"--append", "rdinit=/hostile hostile.mode=" + c.mode + " hostile.tag=" + tag + " hostile.mb=" + strconv.Itoa(floodMiB)}
			args = append(append(args, c.args...), "--", "true")
			r := runHostile(t, args)
			dir := onlyRun(t, runs)

			if r.code != 126 || !strings.Contains(r.stderr, "broke the agent protocol") || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d, want 126 and a message with %q", r.code, c.want)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "internal error") {
				t.Error("klab panicked")
			}
			m, err := results.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if m.Outcome.Status != results.StatusKernelError || !strings.Contains(m.Outcome.Message, c.want) {
				t.Errorf("outcome %+v, want kernel-error with %q", m.Outcome, c.want)
			}
			// The boot timeout is 15 s times the accelerator's factor;
			// a broken protocol ends the run at once.
			if limit := time.Duration(float64(15*time.Second)*m.TimeoutFactor) + 30*time.Second; r.wall > limit {
				t.Errorf("the run took %v, past the boot timeout and a margin (%v)", r.wall, limit)
			}
			t.Logf("wall %v; klab's own peak RSS (VmHWM) %d KiB; rusage maxrss %d KiB (klab or QEMU, the larger)", r.wall.Round(time.Millisecond), r.hwmKiB, r.maxrssKiB)
			if r.hwmKiB == 0 || r.hwmKiB > 128<<10 {
				t.Errorf("klab's peak RSS %d KiB, want at most 128 MiB", r.hwmKiB)
			}
			for _, pid := range r.qemu {
				for deadline := time.Now().Add(5 * time.Second); procfs.Alive(pid); time.Sleep(50 * time.Millisecond) {
					if time.Now().After(deadline) {
						syscall.Kill(pid, syscall.SIGKILL)
						t.Fatalf("qemu %d outlived klab", pid)
					}
				}
			}
			if len(r.qemu) == 0 {
				t.Error("never saw klab's QEMU")
			}

			// Nothing but the run's own files, and nothing named after
			// the guest's paths anywhere near.
			own := []string{results.ManifestFile, results.ConsoleFile, results.EventsFile, results.StdoutFile, results.StderrFile, "splats.json", "diagnostics.log"}
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if !slices.Contains(own, e.Name()) {
					t.Errorf("the run directory holds %s", e.Name())
				}
			}
			for _, tree := range []string{root, ".."} {
				_ = filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
					if err == nil && d.IsDir() && d.Name() == ".git" {
						return filepath.SkipDir
					}
					if strings.Contains(filepath.Base(p), tag) {
						t.Errorf("the guest's name reached the file system: %s", p)
					}
					return nil
				})
			}
			for _, pat := range []string{"/*", "/tmp/*", filepath.Join(os.TempDir(), "*")} {
				hits, _ := filepath.Glob(pat + tag + "*")
				for _, h := range hits {
					t.Errorf("the guest's name reached the file system: %s", h)
				}
			}

			switch c.mode {
			case "names":
				if !strings.Contains(r.stdout, "../../"+tag) {
					t.Errorf("the guest's output did not come through as data: %q", r.stdout)
				}
			case "flood":
				checkFlood(t, dir, m, r, floodMiB)
			}
		})
	}
}

// TestBootOutputFiles: the run keeps the command's stdout and stderr in
// stdout.log and stderr.log, byte for byte as klab boot streamed them,
// while events.jsonl records the chunks without their bytes; a given
// --max-output caps console.log too, and the manifest names it.
func TestBootOutputFiles(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	r := runHostile(t, []string{"--runs-dir", runs, "boot", "--kernel", "debian:7.3", "--no-stdin", "--max-output", "1M", "--",
		"sh", "-c", "dd if=/dev/urandom bs=100000 count=9; echo to-stderr >&2; dd if=/dev/zero bs=100000 count=12 of=/dev/console"})
	if r.code != 0 {
		t.Fatalf("exit %d", r.code)
	}
	dir := onlyRun(t, runs)
	out, err := os.ReadFile(filepath.Join(dir, results.StdoutFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 900000 || r.stdoutBytes != 900000 || !bytes.Equal(out[:len(r.stdout)], []byte(r.stdout)) {
		t.Errorf("stdout.log has %d bytes, the user got %d; want 900000 each, the same", len(out), r.stdoutBytes)
	}
	errOut, err := os.ReadFile(filepath.Join(dir, results.StderrFile))
	if err != nil || !strings.Contains(string(errOut), "\nto-stderr\n") || !strings.Contains(r.stderr, string(errOut)) {
		t.Errorf("stderr.log %q (%v) is not what the user got", errOut, err)
	}
	m, err := results.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Truncated, []string{results.ConsoleFile}) {
		t.Errorf("manifest truncated %q, want console.log alone", m.Truncated)
	}
	con, err := os.ReadFile(filepath.Join(dir, results.ConsoleFile))
	if err != nil || len(con) > 1<<20+100 {
		t.Errorf("console.log: %d bytes (%v), want 1 MiB and a marker", len(con), err)
	}
	st, err := os.Stat(filepath.Join(dir, results.EventsFile))
	if err != nil || st.Size() > 64<<10 {
		t.Errorf("events.jsonl: %v, want well under 64 KiB for 900 kB of output", err)
	}
	got, more, err := results.ReadOutput(dir, 1<<20)
	if err != nil || more || len(got) != len(out)+len(errOut) {
		t.Errorf("ReadOutput: %d bytes, more %v, %v; want %d", len(got), more, err, len(out)+len(errOut))
	}
}

// checkFlood: the user got every byte of stdout, the run kept 8 MiB of
// each stream with a marker, the manifest says both were cut, and
// events.jsonl holds records, not the data.
func checkFlood(t *testing.T, dir string, m *results.Manifest, r hostileResult, floodMiB int) {
	t.Helper()
	var sent [2]int64
	err := results.ReadEvents(filepath.Join(dir, results.EventsFile), func(ev results.Event) error {
		var e struct {
			Kind   string
			Output *results.OutputRecord
		}
		if json.Unmarshal(ev.Event, &e) == nil && e.Kind == "output" && e.Output != nil {
			sent[map[string]int{"stdout": 0, "stderr": 1}[e.Output.Stream]] += int64(e.Output.Bytes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sent[0]+sent[1] < int64(floodMiB)<<20 || r.stdoutBytes != sent[0] {
		t.Errorf("events record %d+%d bytes of output, the user got %d on stdout; the guest sent %d MiB", sent[0], sent[1], r.stdoutBytes, floodMiB)
	}
	for _, name := range []string{results.StdoutFile, results.StderrFile} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 8<<20+100 || !bytes.HasSuffix(data, []byte("[klab: cut at 8388608 bytes; the guest printed more]\n")) {
			t.Errorf("%s: %d bytes, ends %q", name, len(data), data[max(0, len(data)-80):])
		}
	}
	if !slices.Equal(m.Truncated, []string{results.StdoutFile, results.StderrFile}) {
		t.Errorf("manifest truncated %q, want stdout.log and stderr.log", m.Truncated)
	}
	st, err := os.Stat(filepath.Join(dir, results.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("events.jsonl: %d bytes for %d MiB of output", st.Size(), floodMiB)
	if st.Size() > 1<<20 {
		t.Errorf("events.jsonl is %d bytes for %d MiB of output", st.Size(), floodMiB)
	}
}

// hostileResult is one klab run of TestHostileGuest.
type hostileResult struct {
	result
	stdoutBytes int64 // all of stdout; result.stdout keeps its start
	hwmKiB      int64 // klab's own VmHWM, last sampled
	maxrssKiB   int64 // the wait status's rusage
	qemu        []int // klab's QEMU children seen
}

// runHostile runs klab with exactly args from the repository's root,
// counting its stdout rather than keeping it, and watching its memory and
// its QEMU while it runs.
func runHostile(t *testing.T, args []string) hostileResult {
	t.Helper()
	t.Logf("klab %s", strings.Join(args, " "))
	ctx, cancel := context.WithTimeout(context.Background(), budget(t, 5*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, klab(t), args...)
	cmd.Dir = ".."
	var stdout countingBuffer
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var r hostileResult
	var mu sync.Mutex
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		pid := cmd.Process.Pid
		for {
			hwm := procfs.PeakRSS(pid)
			q := procfs.ChildNamed(pid, "qemu-system-x86")
			mu.Lock()
			r.hwmKiB = max(r.hwmKiB, hwm)
			if q != 0 && !slices.Contains(r.qemu, q) {
				r.qemu = append(r.qemu, q)
			}
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	<-watched
	r.wall = time.Since(start)
	r.stdout, r.stdoutBytes, r.stderr = stdout.head.String(), stdout.n, stderr.String()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("klab: %v", err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxrssKiB = ru.Maxrss
	}
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if len(l) > 300 {
			l = l[:300] + "..."
		}
		t.Logf("stderr| %s", l)
	}
	if ctx.Err() != nil {
		t.Fatalf("klab %s: killed at its timeout", strings.Join(args, " "))
	}
	return r
}

// countingBuffer counts what is written and keeps its first 64 KiB. (It
// must not embed bytes.Buffer: io.Copy would use the buffer's ReadFrom.)
type countingBuffer struct {
	head bytes.Buffer
	n    int64
}

func (c *countingBuffer) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if room := 64<<10 - c.head.Len(); room > 0 {
		c.head.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
