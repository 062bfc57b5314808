package suite

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"klab/guest/proto"
	"klab/internal/specfile"
	"klab/results"
)

func TestExpunges(t *testing.T) {
	fsys := fstest.MapFS{
		"all.txt": {Data: []byte("# every configuration\ngeneric/650  -- CPU hotplug: the guest has no CPUs to unplug\n")},
		"fuse.txt": {Data: []byte(`
generic/426  config=fuse-klab-*   -- file handles: klab's server does not export them
generic/4??  kernel<6.14          -- old kernels # a comment
generic/080  kernel>=6.14 kernel<=6.15.2  -- mmap mtime
ext4/*       kernel>7             -- not for fuse
`)},
	}
	names := func(ex []Expunge) []string {
		var out []string
		for _, e := range ex {
			out = append(out, e.Pattern)
		}
		return out
	}
	for _, c := range []struct {
		config, kernel string
		want           []string
	}{
		{"fuse-klab-uring", "6.12.43+deb13-amd64", []string{"generic/650", "generic/426", "generic/4??"}},
		{"fuse-hp-dev", "6.14.0-rc1", []string{"generic/650", "generic/080"}},
		{"fuse-hp-dev", "6.15.2", []string{"generic/650", "generic/080"}},
		{"fuse-hp-dev", "6.15.3", []string{"generic/650"}},
		{"fuse-hp-dev", "7.0", []string{"generic/650"}},
		{"fuse-hp-dev", "7.0.1", []string{"generic/650", "ext4/*"}},
		{"fuse-hp-dev", "", []string{"generic/650", "generic/4??", "generic/080", "ext4/*"}},
		{"ext4", "6.1", []string{"generic/650"}},
	} {
		ex, err := LoadExpunges(fsys, c.config, c.kernel)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(ex); !reflect.DeepEqual(got, c.want) {
			t.Errorf("LoadExpunges(%s, %q) = %v, want %v", c.config, c.kernel, got, c.want)
		}
	}
	ex, _ := LoadExpunges(fsys, "fuse-klab-uring", "6.12")
	run, out := ApplyExpunges([]string{"generic/001", "generic/426", "generic/477", "generic/650"}, ex)
	if !reflect.DeepEqual(run, []string{"generic/001"}) || len(out) != 3 || out[0].Status != proto.TestNotRun ||
		out[0].Reason != "expunged: file handles: klab's server does not export them (fuse.txt:2)" {
		t.Errorf("ApplyExpunges = %v, %+v", run, out)
	}
}

func TestExpungeBadLines(t *testing.T) {
	text := strings.Join([]string{
		"generic/001",                        // 1: no reason
		"generic/002  --   ",                 // 2: empty reason
		"  -- reason",                        // 3: no test
		"001 -- reason",                      // 4: no directory
		"generic/[ -- reason",                // 5: bad glob
		"generic/003 kernel~6.1 -- reason",   // 6: bad guard
		"generic/004 kernel<6.x -- reason",   // 7: bad version
		"generic/005 config= -- reason",      // 8: empty config glob
		"generic/006 kernel>=6.1 -- fine",    // 9
		"generic/007  os=linux  -- reason",   // 10
		"# generic/008 with no reason",       // 11: comment
		"generic/009 kernel<6.1.2.3 -- nope", // 12
	}, "\n")
	_, err := ParseExpunges("fuse.txt", text)
	var se *specfile.Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a *specfile.Error", err)
	}
	var got []string
	for _, p := range se.Problems {
		got = append(got, p.Error())
	}
	want := []string{
		`fuse.txt:1:12: no reason: want "TEST-OR-GLOB [GUARD...] -- REASON"`,
		`fuse.txt:2:14: empty reason after "--": want "TEST-OR-GLOB [GUARD...] -- REASON"`,
		`fuse.txt:3:1: no test before "--": want "TEST-OR-GLOB [GUARD...] -- REASON"`,
		`fuse.txt:4:1: bad test "001": want a test name or a glob such as generic/013 or generic/4??`,
		`fuse.txt:5:1: bad test "generic/[": want a test name or a glob such as generic/013 or generic/4??`,
		`fuse.txt:6:13: bad guard "kernel~6.1": want kernel<V, kernel<=V, kernel>V, kernel>=V (V such as 6.14) or config=GLOB`,
		`fuse.txt:7:13: bad guard "kernel<6.x": bad version "6.x"; want kernel<V, kernel<=V, kernel>V, kernel>=V (V such as 6.14) or config=GLOB`,
		`fuse.txt:8:13: bad guard "config=": bad glob; want kernel<V, kernel<=V, kernel>V, kernel>=V (V such as 6.14) or config=GLOB`,
		`fuse.txt:10:14: bad guard "os=linux": want kernel<V, kernel<=V, kernel>V, kernel>=V (V such as 6.14) or config=GLOB`,
		`fuse.txt:12:13: bad guard "kernel<6.1.2.3": bad version "6.1.2.3"; want kernel<V, kernel<=V, kernel>V, kernel>=V (V such as 6.14) or config=GLOB`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := CheckExpunges(fstest.MapFS{"x.txt": {Data: []byte(text)}}); err == nil {
		t.Error("CheckExpunges: no error")
	}
	if _, err := LoadExpunges(fstest.MapFS{"fuse.txt": {Data: []byte(text)}}, "fuse-x", "6.1"); err == nil {
		t.Error("LoadExpunges: no error")
	}
}

func TestSelect(t *testing.T) {
	all, groups, err := ReadGroups("testdata/tree")
	if err != nil {
		t.Fatal(err)
	}
	wantAll := []string{"ext4/001", "ext4/002", "generic/001", "generic/002", "generic/003", "generic/004",
		"generic/013", "generic/426", "generic/467", "generic/650"}
	if !reflect.DeepEqual(all, wantAll) || !reflect.DeepEqual(groups["exportfs"], []string{"generic/426", "generic/467"}) {
		t.Fatalf("ReadGroups = %v, %v", all, groups)
	}
	generic := all[2:]
	for _, c := range []struct {
		name string
		all  []string
		args SelectArgs
		want []string
	}{
		{"default auto", generic, SelectArgs{}, generic},
		{"quick minus exportfs", generic, SelectArgs{Groups: []string{"quick"}, ExcludeGroups: []string{"exportfs"}},
			[]string{"generic/001", "generic/002", "generic/003", "generic/004", "generic/013"}},
		{"dir group", all, SelectArgs{Groups: []string{"ext4/quick"}}, []string{"ext4/001", "ext4/002"}},
		{"glob and test", generic, SelectArgs{Tests: []string{"generic/4??", "generic/001"}}, []string{"generic/001", "generic/426", "generic/467"}},
		{"exact order", generic, SelectArgs{Tests: []string{"generic/013", "generic/001", "generic/013"}, ExactOrder: true}, []string{"generic/013", "generic/001"}},
		{"exclude", generic, SelectArgs{Groups: []string{"all"}, Exclude: []string{"generic/00", "generic/001", "generic/65"}},
			[]string{"generic/002", "generic/003", "generic/004", "generic/013", "generic/426", "generic/467", "generic/650"}},
		{"ext4 not in generic config", generic, SelectArgs{Groups: []string{"prealloc", "quick"}}, nil},
	} {
		got, err := Select(c.all, groups, c.args)
		if c.want == nil {
			if err == nil || !strings.Contains(err.Error(), `group "prealloc" is empty or not defined`) {
				t.Errorf("%s: err = %v", c.name, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Select = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	if _, err := Select(generic, groups, SelectArgs{Tests: []string{"generic/999"}}); err == nil || !strings.Contains(err.Error(), "no such test") {
		t.Errorf("unknown test: err = %v", err)
	}
	if _, _, err := ReadGroups(t.TempDir()); err == nil || !strings.Contains(err.Error(), "built") {
		t.Errorf("unbuilt tree: err = %v", err)
	}
}

func TestBalance(t *testing.T) {
	tests := []string{"a/001", "a/002", "a/003", "a/004", "a/005", "a/006"}
	times := map[string]float64{"a/001": 10, "a/002": 50, "a/003": 20, "a/004": 30}
	// Unknown a/005 and a/006 count as the median, 25. Longest first,
	// 50, 30, 25, 25, 20 and 10 go to shards 0, 1, 1, 0, 1 and 0 (a tie
	// at 75 goes to the lower shard): 85 and 75 seconds.
	got := Balance(tests, times, 2)
	want := [][]string{{"a/001", "a/002", "a/006"}, {"a/003", "a/004", "a/005"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Balance = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(Balance(tests, times, 2), got) {
		t.Error("Balance is not deterministic")
	}
	if got := Balance(tests[:2], nil, 5); len(got) != 2 {
		t.Errorf("more shards than tests: %v", got)
	}
	if got := Balance(tests, nil, 0); !reflect.DeepEqual(got, [][]string{tests}) {
		t.Errorf("n=0: %v", got)
	}
	if Balance(nil, nil, 3) != nil {
		t.Error("no tests: shards")
	}
}

func TestAttribute(t *testing.T) {
	console, err := os.ReadFile("testdata/console.log")
	if err != nil {
		t.Fatal(err)
	}
	by := Attribute(console)
	if len(by) != 2 || len(by[""]) != 1 || len(by["generic/013"]) != 1 {
		t.Fatalf("Attribute = %v", by)
	}
	if !strings.Contains(by["generic/013"][0].Title, "fuse_dev_do_read") || !strings.Contains(by[""][0].Title, "kernel_init") {
		t.Errorf("titles: %q, %q", by["generic/013"][0].Title, by[""][0].Title)
	}
	r := &Run{Tests: []Test{{Name: "generic/001", Status: proto.TestPass}, {Name: "generic/013", Status: proto.TestFail}}}
	r.AttachSplats(by)
	if len(r.Splats) != 1 || len(r.Test("generic/013").Splats) != 1 || r.Test("generic/013").Splats[0].Type != "warning" {
		t.Errorf("AttachSplats: %+v", r)
	}
	if _, ok := Marker([]byte("[ 1.0] run fstests generic/013 at 2025-01-02 03:04:05")); !ok {
		t.Error("Marker: not found")
	}
	for _, l := range []string{"run fstests ../x at y", "run fstests generic/013", "hello"} {
		if _, ok := Marker([]byte(l)); ok {
			t.Errorf("Marker(%q): found", l)
		}
	}
}

// ab is an A/B pair of runs where generic/013 newly fails on B.
func ab() (*Run, *Run) {
	k := func(name, v string) results.Kernel { return results.Kernel{Name: name, Version: v, ID: "k-" + v} }
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	a := &Run{Label: "A", Kernel: k("debian:7.3", "6.12.43"), Config: "fuse-klab-uring", Started: start, Elapsed: 300, Tests: []Test{
		{Name: "generic/001", Status: proto.TestPass, Seconds: 6},
		{Name: "generic/003", Status: proto.TestFail, Seconds: 4, Reason: "output mismatch (see 003.out.bad)"},
		{Name: "generic/013", Status: proto.TestPass, Seconds: 249},
		{Name: "generic/075", Status: proto.TestFail, Seconds: 20, Reason: "output mismatch"},
		{Name: "generic/091", Status: proto.TestPass, Seconds: 20},
		{Name: "generic/426", Status: proto.TestNotRun, Reason: "expunged: file handles"},
		{Name: "generic/430", Status: proto.TestPass, Seconds: 3},
	}}
	b := &Run{Label: "B", Kernel: k("build:fix", "6.13.0"), Config: "fuse-klab-uring", Started: start, Elapsed: 320, Tests: []Test{
		{Name: "generic/001", Status: proto.TestPass, Seconds: 7, Transport: "uring=120"},
		{Name: "generic/003", Status: proto.TestFail, Seconds: 4, Reason: "output mismatch (see 003.out.bad)"},
		{Name: "generic/013", Status: proto.TestFail, Seconds: 250, Reason: "output mismatch (see 013.out.bad)",
			Diff:    "--- 013.out\n+++ 013.out.bad\n@@ -1 +1,2 @@\n QA output created by 013\n+fsstress: <EIO> & worse\n",
			LogTail: "seed = 1\n", Splats: []SplatRef{{"warning", "WARNING in fuse_dev_do_read"}}},
		{Name: "generic/075", Status: proto.TestPass, Seconds: 20},
		{Name: "generic/091", Status: proto.TestHang, Seconds: 600, Reason: "no progress for 600s"},
		{Name: "generic/426", Status: proto.TestNotRun, Reason: "expunged: file handles"},
		{Name: "generic/430", Status: proto.TestNotRun, Reason: "copy_file_range not supported"},
	}}
	return a, b
}

func TestVerdictAndFlakeRule(t *testing.T) {
	a, b := ab()
	v := Compare(a, b)
	if got := NeedsRerun(v); !reflect.DeepEqual(got, []string{"generic/013", "generic/091"}) {
		t.Fatalf("NeedsRerun = %v", got)
	}
	if !v.Regressed() || len(v.Regressions()) != 2 {
		t.Errorf("before reruns: %+v", v.NewFailures)
	}
	// Rerun twice on each side: 013 fails on B every time, 091 hangs
	// once more on B and passes once, and also fails once on A.
	for _, s := range []struct {
		r      *Run
		name   string
		status string
	}{
		{a, "generic/013", proto.TestPass}, {a, "generic/013", proto.TestPass},
		{b, "generic/013", proto.TestFail}, {b, "generic/013", proto.TestFail},
		{a, "generic/091", proto.TestFail}, {a, "generic/091", proto.TestPass},
		{b, "generic/091", proto.TestHang}, {b, "generic/091", proto.TestPass},
	} {
		s.r.AddRerun(Test{Name: s.name, Status: s.status})
	}
	v = Compare(a, b)
	var got []string
	for _, c := range v.NewFailures {
		got = append(got, c.Test+" "+c.Class+" "+changeStatus(c))
	}
	want := []string{"generic/013 regression A pass 0/3, B fail 3/3", "generic/091 flaky A pass 1/3, B hang 2/3"}
	if !reflect.DeepEqual(got, want) || len(NeedsRerun(v)) != 0 || !v.Regressed() {
		t.Errorf("after reruns: %v", got)
	}
	if len(v.Fixed) != 1 || v.Fixed[0].Test != "generic/075" || len(v.StillFailing) != 1 || v.StillFailing[0].Test != "generic/003" ||
		len(v.NotRun) != 1 || v.NotRun[0].Test != "generic/430" || v.NotRun[0].Reason != "B: copy_file_range not supported" ||
		len(v.NewSplats) != 1 || v.NewSplats[0].Test != "generic/013" {
		t.Errorf("verdict: %+v", v)
	}
	// Without the regression, B is not regressed.
	b.Test("generic/013").Fails = 1
	if v := Compare(a, b); v.Regressed() {
		t.Errorf("013 failing 1/3 is a regression: %+v", v.NewFailures)
	}
}

func TestClassify(t *testing.T) {
	tally := func(f, n int) Test { return Test{Status: proto.TestPass, Fails: f, Runs: n} }
	for _, c := range []struct {
		a, b Test
		want string
	}{
		{tally(0, 1), Test{Status: proto.TestFail}, ClassRegression},
		{tally(0, 3), tally(2, 3), ClassRegression},
		{tally(0, 3), tally(1, 3), ClassFlaky},
		{tally(1, 3), tally(3, 3), ClassFlaky},
		{tally(0, 4), tally(2, 4), ClassFlaky},
		{tally(0, 2), tally(2, 2), ClassRegression},
		{tally(0, 2), tally(1, 2), ClassFlaky},
	} {
		if got := Classify(c.a, c.b); got != c.want {
			t.Errorf("Classify(%+v, %+v) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
}

// TestSaveLoad saves a run and loads it in another process (this test
// binary run again), which prints it back as JSON.
func TestSaveLoad(t *testing.T) {
	if p := os.Getenv("KLAB_SUITE_LOAD"); p != "" {
		r, err := Load(p)
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(2)
		}
		WriteRun(os.Stdout, r, "json")
		os.Exit(0)
	}
	_, b := ab()
	p := filepath.Join(t.TempDir(), "fstests.json")
	if err := b.Save(p); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSaveLoad$")
	cmd.Env = append(os.Environ(), "KLAB_SUITE_LOAD="+p)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("loading in another process: %v", err)
	}
	var want strings.Builder
	WriteRun(&want, b, "json")
	if string(out) != want.String() {
		t.Errorf("loaded run:\n%s\nwant:\n%s", out, want.String())
	}
	b.Tests = append(b.Tests, Test{Name: "generic/001", Status: proto.TestPass})
	if err := b.Save(p); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("Load of a duplicate test: %v", err)
	}
	b.Tests = []Test{{Name: "generic/001", Status: "odd"}}
	b.Save(p)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "unknown status") {
		t.Errorf("Load of a bad status: %v", err)
	}
}
