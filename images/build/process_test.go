package build

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"klab/internal/testenv"
)

// helperEnv, when set, makes the test binary run one build with the
// Options JSON it holds and print the Result (or the error) as JSON: each
// build of TestBuildSequenceAcrossProcesses runs in a process of its own,
// as each `klab kernels build` does.
const helperEnv = "KLAB_BUILD_TEST_OPTIONS"

type helperOut struct {
	Result *Result `json:"result,omitempty"`
	Err    string  `json:"err,omitempty"`
}

func TestMain(m *testing.M) {
	if js := os.Getenv(helperEnv); js != "" {
		var o Options
		if err := json.Unmarshal([]byte(js), &o); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(3)
		}
		res, err := Build(context.Background(), o)
		out := helperOut{Result: res}
		if err != nil {
			out.Err = err.Error()
		}
		json.NewEncoder(os.Stdout).Encode(out)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// buildInProcess runs one build in a new process.
func buildInProcess(t *testing.T, o Options) (*Result, error) {
	t.Helper()
	js, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+string(js))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		t.Fatalf("build %s in a new process: %v\n%s", o.Name, err, stderr.String())
	}
	var out helperOut
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("build %s: %v: %q\n%s", o.Name, err, data, stderr.String())
	}
	if out.Err != "" {
		return out.Result, &helperError{out.Err}
	}
	return out.Result, nil
}

type helperError struct{ msg string }

func (e *helperError) Error() string { return e.msg }

// TestBuildSequenceAcrossProcesses is the A/B preparation users run most,
// each build in its own process: the base tree unpatched, then the same
// tree and config with a patch (this once panicked on the state the first
// process wrote), the unpatched one again (a cache hit), then another
// patch. Then a build interrupted half-way through patching is recovered
// by reverting, keeping the objects already compiled.
func TestBuildSequenceAcrossProcesses(t *testing.T) {
	for _, c := range []string{"make", "git", "patch", "tar", "gcc", "ld", "flex", "bison", "bc", "perl"} {
		testenv.RequiresCommand(t, c)
	}
	for _, kind := range []string{"tarball", "git"} {
		t.Run(kind, func(t *testing.T) { testBuildSequenceAcrossProcesses(t, kind) })
	}
}

func testBuildSequenceAcrossProcesses(t *testing.T, kind string) {
	dir, _, source := fakeSource(t, kind)
	frag := writeTemp(t, dir, "my.config", "CONFIG_A=y\n")
	fix := fakePatch(t, dir, "fix.patch", "a: fix", "a", "/* a */", "/* a fixed */")
	other := fakePatch(t, dir, "other.patch", "b: other", "b", "/* b */", "/* b other */")
	cache := filepath.Join(dir, "cache")
	build := func(name string, patches ...string) (*Result, error) {
		return buildInProcess(t, Options{Source: source, Patches: patches, Config: []string{frag}, Name: name, CacheDir: cache, Jobs: 1})
	}
	image := func(res *Result) string {
		data, err := os.ReadFile(res.Kernel.Image)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}

	base, err := build("base")
	if err != nil || base.Hit {
		t.Fatalf("unpatched build: %+v, %v", base, err)
	}
	fixed, err := build("fix", fix)
	if err != nil || fixed.Hit || fixed.Kernel.ID == base.Kernel.ID {
		t.Fatalf("patched build after an unpatched one, in a new process: %+v, %v", fixed, err)
	}
	if !strings.Contains(image(fixed), "/* a fixed */") {
		t.Error("the patched image lacks the patch")
	}
	again, err := build("base-again")
	if err != nil || !again.Hit || again.Kernel.ID != base.Kernel.ID {
		t.Fatalf("the unpatched build again: %+v, %v; want a cache hit of %s", again, err, base.Kernel.ID)
	}
	o, err := build("other", other)
	if err != nil || o.Hit {
		t.Fatalf("a different patch: %+v, %v", o, err)
	}
	if img := image(o); !strings.Contains(img, "/* b other */") || strings.Contains(img, "/* a fixed */") {
		t.Error("the other patch's image is wrong: it lacks its patch or keeps the previous one")
	}

	// A build that died half-way through patching: the state says busy
	// and a.c carries a change. The next build reverts the tree instead
	// of unpacking it again, and make keeps its objects.
	states, _ := filepath.Glob(filepath.Join(cache, "kernels", "build", "work", "*", "state.json"))
	if len(states) != 1 {
		t.Fatalf("%d work trees, want 1", len(states))
	}
	st, err := readState(states[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.Orig == nil || st.Files == nil {
		t.Fatalf("loaded state has nil maps: %+v", st)
	}
	st.Busy = true
	if err := st.save(states[0]); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(filepath.Dir(states[0]), "src")
	writeTemp(t, src, "fs/a.c", "int a;\n/* half-patched */\nint a2;\n")
	before := compiled(t, cache)
	fixed2, err := build("fix-again", fix, other)
	if err != nil {
		t.Fatalf("build after an interrupted one: %v", err)
	}
	if img := image(fixed2); !strings.Contains(img, "/* a fixed */") || !strings.Contains(img, "/* b other */") || strings.Contains(img, "half-patched") {
		t.Error("the build after an interrupted one has the wrong content")
	}
	if got := compiled(t, cache); !strings.HasPrefix(got, before) {
		t.Errorf("the interrupted tree was unpacked again (compiled log %q, was %q), want it reverted", got, before)
	}
	st, err = readState(states[0])
	if err != nil || st.Busy {
		t.Fatalf("state after recovery: %+v, %v", st, err)
	}
}

// TestStateFilesHoldingNull: a state file that decodes to empty maps
// (null, {}, or a key left out) is usable by the next process.
func TestStateFilesHoldingNull(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{"null", "{}", `{"base":"x","files":null,"orig":null}`} {
		p := writeTemp(t, dir, "state.json", content)
		st, err := readState(p)
		if err != nil {
			t.Fatalf("%s: %v", content, err)
		}
		st.Files["f"], st.Orig["f"] = fileStamp{}, fileStamp{} // would panic on a nil map
	}
	estimates := writeTemp(t, dir, "estimates.json", "null")
	saveEstimate(estimates, "k", 7)
	if got := estimate(estimates, "k"); got != 7 {
		t.Errorf("estimate after a null file: %d, want 7", got)
	}
	memo := writeTemp(t, dir, "hashes.json", "null")
	fi, err := os.Stat(memo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newHashMemo(memo).sum(memo, fi); err != nil {
		t.Fatal(err)
	}
}
