package fstests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"klab/guest/proto"
	labfstests "klab/lab/fstests"
	"klab/results"
	"klab/results/suite"
)

// fakeTree writes an fstests tree's group lists into a directory.
func fakeTree(t *testing.T) string {
	t.Helper()
	tree := t.TempDir()
	lists := map[string]string{
		"generic": "001 auto quick rw\n013 auto rw stress\n184 metadata auto quick\n426 auto quick exportfs\n",
		"ext4":    "001 auto prealloc quick\n",
	}
	for dir, text := range lists {
		d := filepath.Join(tree, "tests", dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "group.list"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tree
}

// fakeEnv's guests pass every test, but fail those in fail on kernel B.
type fakeEnv struct {
	mu    sync.Mutex
	fail  map[string]bool
	secs  map[string]float64    // a test's seconds; 2 when not listed
	boots map[string][][]string // kernel: the lists its guests ran
	iters map[string][]int
}

func (f *fakeEnv) env(tree string) Env {
	return Env{
		Tree: tree,
		Resolve: func(_ context.Context, ref string) (*results.Kernel, error) {
			return &results.Kernel{Name: ref, Version: "7.3.4"}, nil
		},
		Guest: func(k *results.Kernel, cfg proto.FstestsConfig, _ time.Duration, dir string) labfstests.Guest {
			return func(_ context.Context, tests []string, iterations int) (*labfstests.Outcome, error) {
				f.mu.Lock()
				f.boots[k.Name] = append(f.boots[k.Name], tests)
				f.iters[k.Name] = append(f.iters[k.Name], iterations)
				f.mu.Unlock()
				out := &labfstests.Outcome{}
				for range max(iterations, 1) {
					for _, name := range tests {
						r := proto.TestResult{Name: name, Status: proto.TestPass, Seconds: 2, Transport: "dev=0 uring=10"}
						if s, ok := f.secs[name]; ok {
							r.Seconds = s
						}
						if k.Name == "B" && f.fail[name] {
							r.Status, r.Reason, r.Diff = proto.TestFail, "output mismatch", "-ok\n+mknod: Operation not permitted"
						}
						out.Results = append(out.Results, r)
					}
				}
				return out, nil
			}
		},
	}
}

func newFake(fail ...string) *fakeEnv {
	f := &fakeEnv{fail: map[string]bool{}, boots: map[string][][]string{}, iters: map[string][]int{}}
	for _, n := range fail {
		f.fail[n] = true
	}
	return f
}

func TestRunABReportsARegressionAfterReruns(t *testing.T) {
	f := newFake("generic/184")
	cfg, err := Config("fuse-klab-uring", "", "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	res, err := Run(context.Background(), f.env(fakeTree(t)), Request{
		Kernels: []string{"A", "B"}, Config: cfg, Dir: dir,
		Select: suite.SelectArgs{Tests: []string{"generic/184", "generic/426"}, Groups: []string{"quick"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Regressed() {
		t.Fatalf("no regression: %+v", res.Verdict)
	}
	regs := res.Verdict.Regressions()
	if len(regs) != 1 || regs[0].Test != "generic/184" || regs[0].BFails != 3 || regs[0].ARuns != 3 || regs[0].AFails != 0 {
		t.Errorf("regressions %+v", regs)
	}
	// generic/426 is expunged for FUSE: it never reaches a guest.
	for k, lists := range f.boots {
		for _, l := range lists {
			for _, n := range l {
				if n == "generic/426" {
					t.Errorf("kernel %s ran the expunged generic/426", k)
				}
			}
		}
	}
	if got := f.boots["B"]; len(got) != 1+suite.DefaultReruns || len(got[1]) != 1 || got[1][0] != "generic/184" {
		t.Errorf("B's guests ran %v, want a first run and %d fresh guests for generic/184", got, suite.DefaultReruns)
	}
	for _, name := range []string{"a.json", "b.json", "verdict.json", "report.txt", "report.md", "report.html", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("missing %s: %v", name, err)
		}
	}
	junit, _ := os.ReadFile(filepath.Join(dir, "junit.xml"))
	if !strings.Contains(string(junit), "<failure") || !strings.Contains(string(junit), "generic/184") {
		t.Errorf("junit.xml has no failure for generic/184:\n%s", junit)
	}
	b, err := suite.Load(filepath.Join(dir, "b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if tt := b.Test("generic/184"); tt == nil || tt.Status != proto.TestFail || tt.Runs != 3 {
		t.Errorf("b.json generic/184: %+v", tt)
	}
}

func TestRunOneKernelNoVerdict(t *testing.T) {
	f := newFake()
	cfg, _ := Config("ext4", "lazytime", "")
	dir := t.TempDir()
	res, err := Run(context.Background(), f.env(fakeTree(t)), Request{
		Kernels: []string{"A"}, Config: cfg, Dir: dir, Jobs: 2,
		Select: suite.SelectArgs{Groups: []string{"quick"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != nil || res.Regressed() {
		t.Errorf("a single kernel has a verdict: %+v", res.Verdict)
	}
	if len(f.boots["A"]) != 2 {
		t.Errorf("2 jobs booted %d guests", len(f.boots["A"]))
	}
	c := res.Runs[0].Counts()
	if c.Pass != 4 {
		t.Errorf("counts %+v, want the 4 quick tests (ext4 expunges none) passed", c)
	}
	if _, err := os.Stat(filepath.Join(dir, "run.json")); err != nil {
		t.Error(err)
	}
}

func TestRunRefusesTestsOfAnotherFileSystem(t *testing.T) {
	cfg, _ := Config("fuse-klab-dev", "", "")
	_, err := Run(context.Background(), newFake().env(fakeTree(t)), Request{
		Kernels: []string{"A"}, Config: cfg, Dir: t.TempDir(), Select: suite.SelectArgs{Tests: []string{"ext4/001"}},
	})
	if err == nil || !strings.Contains(err.Error(), "does not apply to configuration fuse-klab-dev") {
		t.Fatalf("err %v", err)
	}
}

func TestCheckTransport(t *testing.T) {
	cfg, _ := Config("fuse-klab-uring", "", "")
	runs := []*suite.Run{{Label: "A", Tests: []suite.Test{{Name: "generic/001", Transport: "dev=5 uring=0"}}}}
	if err := CheckTransport(cfg, runs); err == nil || !strings.Contains(err.Error(), "generic/001") {
		t.Errorf("dev-served test on a uring configuration: %v", err)
	}
	runs[0].Tests[0].Transport = "dev=0 uring=7"
	if err := CheckTransport(cfg, runs); err != nil {
		t.Error(err)
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := Config("fuse", "", ""); err == nil || !strings.Contains(err.Error(), "fuse-klab-uring") {
		t.Errorf("unknown config: %v", err)
	}
	if _, err := Config("fuse-hp-dev", "", "-b 1024"); err == nil {
		t.Error("mkfs options on a FUSE configuration were accepted")
	}
	if _, err := Config("ext4", "lazytime;reboot", ""); err == nil || !strings.Contains(err.Error(), `";"`) {
		t.Errorf("mount options with a shell character: %v", err)
	}
	if c, err := Config("ext4", "lazytime,noatime", "-b 4096 -O ^has_journal"); err != nil || c.MkfsOptions != "-b 4096 -O ^has_journal" {
		t.Errorf("ext4 options: %+v, %v", c, err)
	}
	if _, err := Config("ext4", "", "$(reboot)"); err == nil {
		t.Error("mkfs options with $( were accepted")
	}
}

// TestCheckTests: named tests outside the configuration's test directories
// are refused, all of them in one error; globs are left to Select.
func TestCheckTests(t *testing.T) {
	fuse, _ := Config("fuse-klab-dev", "", "")
	ext4, _ := Config("ext4", "", "")
	for _, c := range []struct {
		cfg   proto.FstestsConfig
		tests []string
		want  string // in the error; "" for none
	}{
		{fuse, []string{"generic/013", "generic/0??"}, ""},
		{ext4, []string{"ext4/001", "generic/013"}, ""},
		{fuse, []string{"ext4/*"}, ""}, // a glob selects nothing there: Select says so
		{fuse, []string{"generic/013", "ext4/001"}, "ext4/001 does not apply to configuration fuse-klab-dev: its tests are those of generic"},
		{fuse, []string{"ext4/001", "xfs/002"}, "ext4/001, xfs/002 do not apply to configuration fuse-klab-dev"},
		{ext4, []string{"btrfs/001"}, "its tests are those of generic and ext4"},
	} {
		err := CheckTests(c.cfg, c.tests)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckTests(%s, %q) = %v, want %q", c.cfg.Name, c.tests, err, c.want)
		}
	}
}
