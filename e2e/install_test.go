package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/internal/testenv"
	"klab/results"
)

// TestInstalledAnywhere installs klab with `make install` into a
// temporary prefix, from an empty klab cache, and runs the installed
// binary as a new user would: from an empty directory, with empty caches,
// and without Go or the source tree in reach. `make install` must build the
// guest parts (the u-root base and the agent) into a cache directory that
// does not exist yet; the installed klab must fetch the kernel, assemble the
// initramfs from the guest parts built into it, and boot.
func TestInstalledAnywhere(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	testenv.RequiresCommand(t, "make")
	prefix := filepath.Join(t.TempDir(), "usr")
	ctx := testContext(t, 10*time.Minute)
	makeInTree.Lock()
	inst := exec.CommandContext(ctx, "make", "--no-print-directory", "install", "PREFIX="+prefix)
	inst.Dir = ".."
	// An empty klab cache, as on a new machine: `make build` must build
	// the guest parts into a cache directory that does not exist yet.
	inst.Env = append(os.Environ(), "KLAB_CACHE_DIR="+filepath.Join(t.TempDir(), "fresh-cache"))
	out, err := inst.CombinedOutput()
	makeInTree.Unlock()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, want := range []string{"building the u-root base initramfs", "building klab-agent"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make install in an empty cache does not say %q:\n%s", want, out)
		}
	}
	bin := filepath.Join(prefix, "bin", "klab")
	for _, f := range []string{bin, filepath.Join(prefix, "share", "bash-completion", "completions", "klab"), filepath.Join(prefix, "share", "klab", "patches", "ext4-lazytime-revert.patch")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("make install: %v", err)
		}
	}

	home := t.TempDir()
	work := filepath.Join(home, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	// Only the directories of the host tools klab runs: no Go.
	var path []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, "go")); err == nil {
			continue
		}
		path = append(path, d)
	}
	env := []string{
		"PATH=" + strings.Join(path, string(filepath.ListSeparator)),
		"HOME=" + home,
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"CI=" + os.Getenv("CI"),
	}
	klabAt := func(args ...string) result {
		t.Helper()
		t.Logf("(installed) klab %s", strings.Join(args, " "))
		cmd := exec.CommandContext(testContext(t, 8*time.Minute), bin, args...)
		cmd.Dir, cmd.Env = work, env
		var so, se strings.Builder
		cmd.Stdout, cmd.Stderr = &so, &se
		start := time.Now()
		err := cmd.Run()
		r := result{stdout: so.String(), stderr: se.String(), wall: time.Since(start)}
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("installed klab: %v", err)
		}
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			t.Logf("stderr| %s", l)
		}
		return r
	}

	r := klabAt("boot", "--kernel", "debian:7.3", "--", "uname", "-r")
	if r.code != 0 || !strings.HasPrefix(strings.TrimSpace(r.stdout), "7.3") {
		t.Fatalf("installed klab boot: exit %d, stdout %q", r.code, r.stdout)
	}
	t.Logf("installed klab, empty caches: fetch + boot in %.1fs", r.wall.Seconds())

	// The agent in the guest is the one built into the binary.
	var parts struct {
		AgentKey string `json:"agent_key"`
	}
	b, err := os.ReadFile("../images/embedded/parts.json")
	if err != nil {
		t.Fatalf("make install did not leave the embedded parts' description: %v", err)
	}
	if err := json.Unmarshal(b, &parts); err != nil || len(parts.AgentKey) < 12 {
		t.Fatalf("images/embedded/parts.json: %v %s", err, b)
	}
	runs, err := os.ReadDir(filepath.Join(home, "data", "klab", "runs"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs under the installed klab's default runs directory: %v (%d)", err, len(runs))
	}
	m, err := results.ReadManifest(filepath.Join(home, "data", "klab", "runs", runs[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	if want := "src-" + parts.AgentKey[:12]; m.AgentVersion != want {
		t.Errorf("guest agent %q, want the embedded %q", m.AgentVersion, want)
	}
	// Nothing was written where klab was run from.
	if ents, _ := os.ReadDir(work); len(ents) != 0 {
		t.Errorf("installed klab wrote into the working directory: %v", ents)
	}

	d := klabAt("doctor", "--probe=false", "--json")
	if !strings.Contains(d.stdout, "built into klab") || !strings.Contains(d.stdout, "no Go toolchain") {
		t.Errorf("doctor does not say the guest parts are built into klab:\n%s", d.stdout)
	}
}
