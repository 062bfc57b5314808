package e2e

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"klab/internal/procfs"
	"klab/internal/testenv"
)

// report is the part of klab.report/v1 the tests read.
type report struct {
	Schema string `json:"schema"`
	Axis   string `json:"axis"`
	A      struct {
		Label string `json:"label"`
	} `json:"a"`
	B struct {
		Label string `json:"label"`
	} `json:"b"`
	Accel string `json:"accel"`
	Rows  []struct {
		Name string `json:"name"`
		A    struct {
			N      int       `json:"n"`
			Values []float64 `json:"values"`
		} `json:"a"`
		B struct {
			N      int       `json:"n"`
			Values []float64 `json:"values"`
		} `json:"b"`
		Change struct {
			P       float64 `json:"p"`
			Verdict string  `json:"verdict"`
		} `json:"change"`
	} `json:"rows"`
	Checks []struct {
		Name   string `json:"name"`
		Passed bool   `json:"passed"`
	} `json:"checks"`
	RunDir   string `json:"run_dir"`
	Profiles []struct {
		Row       string `json:"row"`
		SamplesA  int64  `json:"samples_a"`
		SamplesB  int64  `json:"samples_b"`
		Functions []struct {
			Func string  `json:"func"`
			A    float64 `json:"a"`
			B    float64 `json:"b"`
		} `json:"functions"`
		Changed []struct {
			Func string `json:"func"`
		} `json:"changed"`
		Files []string `json:"files"`
	} `json:"profiles"`
	Skipped []struct {
		Reason string `json:"reason"`
	} `json:"skipped"`
	Splats struct {
		New []struct {
			Title string `json:"title"`
			A     int    `json:"a"`
			B     int    `json:"b"`
		} `json:"new"`
	} `json:"splats"`
	Failures []string `json:"failures"`
}

// TestExperimentTwoKernels is the main job end to end: one cell compared
// on debian:6.12 against debian:7.3 over 3 rounds (6 guests), every
// report format, then klab rerun of the run.
func TestExperimentTwoKernels(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	start := time.Now()
	r := runTimeout(t, runs, 20*time.Minute, "run", "e2e/testdata/ab.yaml", "--kernel", "debian:6.12", "--kernel", "debian:7.3", "--format", "json")
	t.Logf("klab run of 6 guests took %s", time.Since(start).Round(time.Second))
	if r.code != 0 {
		t.Fatalf("klab run: exit %d\n%s", r.code, r.stdout)
	}
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("klab run --format json: %v\n%s", err, r.stdout)
	}
	if rep.Schema != "klab.report/v1" || rep.Axis != "kernel" || rep.A.Label != "debian:6.12" || rep.B.Label != "debian:7.3" || rep.Accel == "" {
		t.Errorf("report header: %+v", rep)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].A.N != 3 || rep.Rows[0].B.N != 3 || rep.Rows[0].Change.Verdict == "" {
		t.Fatalf("rows: %+v", rep.Rows)
	}
	for _, v := range append(rep.Rows[0].A.Values, rep.Rows[0].B.Values...) {
		if v <= 0 {
			t.Errorf("a sample of %v is not a throughput", v)
		}
	}
	if len(rep.Checks) != 6 {
		t.Errorf("%d checks, want 6 (one per guest)", len(rep.Checks))
	}
	for _, c := range rep.Checks {
		if !c.Passed {
			t.Errorf("check %s failed", c.Name)
		}
	}
	dir := onlyRun(t, runs)
	for _, f := range []string{"spec.yaml", "plan.json", "experiment.json", "samples.json", "report.json", "report.txt", "report.md", "report.xml", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the run directory lacks %s", f)
		}
	}
	guests, _ := filepath.Glob(filepath.Join(dir, "guests", "*", "console.log"))
	if len(guests) != 6 {
		t.Errorf("%d guest consoles, want 6", len(guests))
	}

	// Every format through klab report.
	id := filepath.Base(dir)
	for format, want := range map[string]string{
		"text": "A: debian:6.12", "md": "| seqwrite-4k", "junit": "<testsuite", "html": "<svg", "json": `"schema": "klab.report/v1"`,
	} {
		r := run(t, runs, "report", id, "--format", format)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("klab report --format %s: exit %d, no %q in:\n%s", format, r.code, want, tail(r.stdout, 20))
		}
		if format == "junit" {
			var suites struct {
				Suites []struct {
					Tests    int `xml:"tests,attr"`
					Failures int `xml:"failures,attr"`
				} `xml:"testsuite"`
			}
			if err := xml.Unmarshal([]byte(r.stdout), &suites); err != nil || len(suites.Suites) != 1 || suites.Suites[0].Tests < 7 || suites.Suites[0].Failures != 0 {
				t.Errorf("junit: %v %+v", err, suites)
			}
		}
	}
	if r := run(t, runs, "runs", "list", "--json"); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("runs list --json lacks %s: %s", id, r.stdout)
	}
	if r := run(t, runs, "runs", "show", id); r.code != 0 || !strings.Contains(r.stdout, "6 guest(s)") {
		t.Errorf("runs show: exit %d\n%s", r.code, r.stdout)
	}

	// klab rerun: the same kernels exactly, then what differed and the
	// comparison of the two runs.
	r = runTimeout(t, runs, 20*time.Minute, "rerun", id)
	if r.code != 0 {
		t.Fatalf("klab rerun: exit %d\n%s", r.code, r.stdout)
	}
	if !strings.Contains(r.stdout, "same kernels, QEMU, accelerator, host") && !strings.Contains(r.stdout, "what differed") {
		t.Errorf("rerun does not say what differed:\n%s", r.stdout)
	}
	if strings.Contains(r.stdout, "kernel 1:") || strings.Contains(r.stdout, "kernel 2:") {
		t.Errorf("rerun used other kernels than the run:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "seqwrite-4k [debian:6.12]") || !strings.Contains(r.stdout, "seqwrite-4k [debian:7.3]") {
		t.Errorf("rerun lacks the comparison of the two runs:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "debian:6.12.") || !strings.Contains(r.stderr, "=") {
		t.Errorf("rerun did not pin the kernels to exact package versions:\n%s", tail(r.stderr, 5))
	}

	// klab compare of the run and its rerun, by name and by "last".
	c := run(t, runs, "compare", id, "last", "--format", "json")
	if c.code != 0 || !json.Valid([]byte(c.stdout)) || !strings.Contains(c.stdout, "seqwrite-4k") {
		t.Errorf("klab compare %s last: exit %d\n%s", id, c.code, c.stdout)
	}
	if c := run(t, runs, "compare", id, "nope"); c.code != 2 || !strings.Contains(c.stderr, "nope") {
		t.Errorf("klab compare with a run that does not exist: exit %d, stderr %q", c.code, c.stderr)
	}
}

// TestExperimentRequires: a kernel that lacks what the spec requires gives
// skipped cells, not failures; when no kernel meets it, nothing runs.
func TestExperimentRequires(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	r := run(t, runs, "run", "e2e/testdata/needs-uring.yaml", "--compare", "kernel", "--set", "mode=a",
		"--kernel", "debian:6.12", "--kernel", "debian:7.3", "--format", "json")
	if r.code != 0 {
		t.Fatalf("klab run: exit %d\n%s", r.code, r.stdout)
	}
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0].Reason, "needs fuse-io-uring") {
		t.Errorf("skipped: %+v, want one needing fuse-io-uring", rep.Skipped)
	}
	if len(rep.Checks) != 1 || !rep.Checks[0].Passed {
		t.Errorf("checks: %+v, want one passing on debian:7.3", rep.Checks)
	}
	guests, _ := filepath.Glob(filepath.Join(onlyRun(t, runs), "guests", "*"))
	if len(guests) != 1 {
		t.Errorf("%d guests booted, want 1 (debian:6.12 skipped)", len(guests))
	}

	// No kernel meets it: exit 2, no run directory.
	empty := t.TempDir()
	r = run(t, empty, "run", "e2e/testdata/needs-uring.yaml", "--kernel", "debian:6.12")
	if r.code != 2 || !strings.Contains(r.stderr, "no kernel meets its requires") || !strings.Contains(r.stderr, "needs fuse-io-uring") {
		t.Errorf("requires unmet: exit %d, stderr %q", r.code, r.stderr)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("a refused run left %d entries in the runs directory", len(ents))
	}
}

// TestExperimentBadInput: a broken spec or an unknown kernel is refused
// with file:line and exit 2 before any guest boots, leaving nothing.
func TestExperimentBadInput(t *testing.T) {
	testenv.E2E(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: x\nrounds: two\nworkloads:\n  - name: w\n    pattern: nosuch\n    dir: /tmp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", bad, "--kernel", "debian:7.3"}, []string{bad + ":2:9: rounds: want an integer, got \"two\""}},
		{[]string{"experiments", "validate", bad}, []string{bad + ":2:9"}},
		{[]string{"run", "e2e/testdata/ab.yaml", "--kernel", "debian:nosuch", "--kernel", "debian:7.3"}, []string{"--kernel debian:nosuch"}},
		{[]string{"run", "e2e/testdata/ab.yaml", "--kernel", "debian:7.3"}, []string{"--kernel given once: comparing kernels needs exactly two (A and B)"}},
		{[]string{"run", "no-such-experiment", "--kernel", "debian:7.3"}, []string{"no experiment \"no-such-experiment\"", "fuse-transport"}},
	} {
		r := run(t, runs, c.args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2", c.args, r.code)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, r.stderr)
			}
		}
	}
	if ents, _ := os.ReadDir(runs); len(ents) != 0 {
		t.Errorf("refused runs left %d entries in the runs directory", len(ents))
	}
}

// TestRunInterruptKeepsFinished: Ctrl-C (SIGINT) of klab run once a guest
// has finished exits 130, says where the run is, and keeps every sample
// that finished, a manifest that says "interrupted" and a report; no
// QEMU outlives klab.
func TestRunInterruptKeepsFinished(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	ctx := testContext(t, 15*time.Minute)
	cmd := exec.CommandContext(ctx, klab(t), "--runs-dir", runs, "run", "e2e/testdata/ab.yaml", "--kernel", "debian:6.12", "--kernel", "debian:7.3")
	cmd.Dir = ".."
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Wait for the first finished guest's samples, then interrupt while
	// the next guest runs.
	var dir string
	var before experimentSamples
	for len(before.Samples) == 0 {
		select {
		case err := <-exited:
			t.Fatalf("klab run ended before it could be interrupted: %v\n%s", err, cliTail(stderr.String(), 20))
		case <-ctx.Done():
			t.Fatalf("no sample within the test's time\n%s", cliTail(stderr.String(), 20))
		case <-time.After(200 * time.Millisecond):
		}
		if dirs, _ := filepath.Glob(filepath.Join(runs, "*", "samples.json")); len(dirs) == 1 {
			dir = filepath.Dir(dirs[0])
			if b, err := os.ReadFile(dirs[0]); err == nil {
				_ = json.Unmarshal(b, &before)
			}
		}
	}
	qemu := procfs.ChildNamed(cmd.Process.Pid, "qemu-system-x86")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("klab run did not end within 2 minutes of SIGINT\n%s", cliTail(stderr.String(), 20))
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		t.Logf("stderr| %s", l)
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d after SIGINT, want 130", code)
	}
	if !strings.Contains(stderr.String(), "interrupted; what finished is in "+dir) {
		t.Errorf("stderr does not say where what finished is (%s)", dir)
	}
	if qemu != 0 && procfs.Alive(qemu) {
		t.Errorf("QEMU %d outlived klab run", qemu)
	}

	var after experimentSamples
	if b, err := os.ReadFile(filepath.Join(dir, "samples.json")); err != nil || json.Unmarshal(b, &after) != nil {
		t.Fatalf("samples.json after the interrupt: %v", err)
	}
	kept := map[string]bool{}
	for _, s := range after.Samples {
		kept[s.key()] = true
	}
	for _, s := range before.Samples {
		if !kept[s.key()] {
			t.Errorf("sample %s finished before the interrupt and is gone", s.key())
		}
	}
	var m struct {
		Status  string `json:"status"`
		Message string `json:"message"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "experiment.json")); err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("experiment.json: %v", err)
	}
	if m.Status != "interrupted" {
		t.Errorf("experiment.json status %q (%s), want interrupted", m.Status, m.Message)
	}
	rep, err := os.ReadFile(filepath.Join(dir, "report.txt"))
	if err != nil || !strings.Contains(string(rep), "did not complete") {
		t.Errorf("report.txt does not say the run did not complete (%v)", err)
	}
	t.Logf("%d sample(s) before SIGINT, %d kept", len(before.Samples), len(after.Samples))
}

// experimentSamples is the part of samples.json the tests read.
type experimentSamples struct {
	Samples []experimentSample `json:"samples"`
}

type experimentSample struct {
	Row      int     `json:"row"`
	Side     string  `json:"side"`
	Round    int     `json:"round"`
	Workload string  `json:"workload"`
	Value    float64 `json:"value"`
}

func (s experimentSample) key() string {
	return fmt.Sprintf("%s/%d/%s/%d=%g", s.Workload, s.Row, s.Side, s.Round, s.Value)
}

// TestExperimentMountCheck: a check with mount: true runs while the
// spec's server is mounted (a file it writes under the mountpoint is in
// the backing directory at once), and a check without it runs after the
// unmount, which klab warns of when it names the mountpoint. A check with
// userspace: true runs in Debian's bash and sees the mount. One boot runs
// both sides.
func TestExperimentMountCheck(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	r := runTimeout(t, runs, 10*time.Minute, "run", "e2e/testdata/mount-check.yaml", "--kernel", "debian:7.3", "--format", "json")
	if r.code != 0 {
		t.Fatalf("klab run: exit %d\n%s", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "checks[1].run names /mnt/mc") || !strings.Contains(r.stderr, "add mount: true") {
		t.Errorf("stderr lacks the warning about the check after the unmount")
	}
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("klab run --format json: %v\n%s", err, r.stdout)
	}
	passed := map[string]int{}
	for _, c := range rep.Checks {
		if c.Passed {
			passed[c.Name]++
		} else {
			t.Errorf("check %s failed", c.Name)
		}
	}
	if len(rep.Checks) != 6 || passed["on-mount"] != 2 || passed["after"] != 2 || passed["in-userspace"] != 2 {
		t.Errorf("checks %+v, want on-mount, after and in-userspace passed on both sides", rep.Checks)
	}
}
