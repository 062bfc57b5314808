package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"klab/internal/testenv"
)

// TestGitLabPipeline runs the GitLab pipeline that klab matrix emit
// writes for the smoke matrix in 2 shards, with gitlab-ci-local (make
// test-deps installs it), twice, in a scratch clone of this repository:
// both shard jobs (parallel: 2, CI_NODE_INDEX 1 and 2) build klab and run
// their cell, their results trees reach the merge job as artifacts, and
// the merge job writes the merged report (JUnit included) and the
// merged.klab.tar.zst bundle, which klab report reads. The pipeline
// passes, as the smoke matrix does. The second pipeline restores each
// shard's kernel cache: no kernel is resolved or downloaded again, and no
// guest part is built again.
//
// gitlab-ci-local runs the jobs in its shell executor with shell
// isolation (each job in its own copy of the project's tracked files)
// and its own cache and artifact store, one job at a time, so the test
// holds one guest slot. Go's build cache is the host's (GOCACHE, with
// -trimpath so that the jobs' copies in different directories share it);
// klab's cache is the pipeline's, under the project as the emitted file
// says, so the first pipeline fetches debian:6.12 and debian:7.3 from the
// host's Debian mirror.
func TestGitLabPipeline(t *testing.T) {
	testenv.E2E(t)
	for _, c := range []string{"gitlab-ci-local", "rsync", "git", "go"} {
		testenv.RequiresCommand(t, c)
	}
	parallelGuest(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	project := filepath.Join(tmp, "klab")
	gitCmd(t, "", nil, "clone", "-q", "--depth", "1", "file://"+root, project)
	// The tree as it is, not only as committed: the pipeline's klab is
	// the one this test built.
	if diff := gitCmd(t, root, nil, "diff", "HEAD", "--binary"); diff != "" {
		gitCmd(t, project, []byte(diff), "apply", "--binary", "-")
	}
	emit := runTimeout(t, tmp, time.Minute, "matrix", "emit", "matrices/smoke.yaml", "--engine", "gitlab", "--shards", "2")
	if emit.code != 0 {
		t.Fatalf("matrix emit: exit %d", emit.code)
	}
	// gitlab-ci-local's shell executor cannot honour image: (it has no
	// container), and for a job with an image it sets CI_PROJECT_DIR to
	// the container's path (/builds/...), where the job would then put
	// klab's cache (XDG_CACHE_HOME), outside the project and the GitLab
	// cache. So the test drops the image: lines and nothing else; the
	// jobs run on this host, which has what golang:1.26-bookworm plus
	// make deps gives. Under GitLab's Docker executor the emitted file
	// holds as it is: CI_PROJECT_DIR is the project in the container, and
	// make deps installs QEMU and the rest as root in the image.
	ci, dropped := withoutImages(emit.stdout)
	if dropped != 2 {
		t.Fatalf("the emitted pipeline has %d image: lines, want one per job (2):\n%s", dropped, emit.stdout)
	}
	if err := os.WriteFile(filepath.Join(project, ".gitlab-ci.yml"), []byte(ci), 0o644); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, project, nil, "add", "-A")
	gitCmd(t, project, nil, "-c", "user.name=klab", "-c", "user.email=klab@localhost", "commit", "-q", "-m", "the smoke matrix in GitLab CI")
	env := pipelineEnv(t, tmp)

	first := runPipeline(t, project, env, 30*time.Minute)
	artifacts := filepath.Join(project, ".gitlab-ci-local", "artifacts")
	checkPipeline(t, "first", first, artifacts)
	if !strings.Contains(first.log, "resolving debian:6.12") || !strings.Contains(first.log, "resolving debian:7.3") {
		t.Errorf("the first pipeline did not resolve the kernels from the Debian mirror (its cache is empty)")
	}
	merged := filepath.Join(artifacts, "klab-report")
	bundle := filepath.Join(merged, "merged.klab.tar.zst")
	rep := runTimeout(t, tmp, 2*time.Minute, "report", bundle)
	if rep.code != 0 || !strings.Contains(rep.stdout, "debian:6.12") || !strings.Contains(rep.stdout, "debian:7.3") {
		t.Errorf("klab report %s: exit %d:\n%s", bundle, rep.code, rep.stdout)
	}

	second := runPipeline(t, project, env, 20*time.Minute)
	checkPipeline(t, "second", second, artifacts)
	for i := 1; i <= 2; i++ {
		if !regexp.MustCompile(fmt.Sprintf(`klab-cells: \[%d/2\] imported cache '[^']*klab-kernels-%d-`, i, i)).MatchString(second.log) {
			t.Errorf("second pipeline: shard %d did not restore its cache", i)
		}
	}
	for _, w := range []string{"resolving debian:", "built u-root base", "built klab-agent"} {
		if strings.Contains(second.log, w) {
			t.Errorf("second pipeline: %q: the cache was not used", w)
		}
	}
	for _, k := range []string{"debian:6.12", "debian:7.3"} {
		if !strings.Contains(second.log, k+": cached at ") {
			t.Errorf("second pipeline: no %q line", k+": cached at")
		}
	}
	t.Logf("pipeline wall time: %s the first (empty caches), %s the second", first.wall.Round(time.Second), second.wall.Round(time.Second))
}

// pipeline is one gitlab-ci-local run.
type pipeline struct {
	log  string
	code int
	wall time.Duration
}

// runPipeline runs the project's pipeline with gitlab-ci-local in its
// shell executor, one job at a time, and logs what shows the jobs, the
// caches and the artifacts.
func runPipeline(t *testing.T, project string, env []string, timeout time.Duration) pipeline {
	t.Helper()
	args := []string{"--shell-isolation", "--no-artifacts-to-source", "--concurrency", "1", "--no-color", "--timestamps",
		"--home", filepath.Join(project, ".gitlab-ci-local-home")}
	t.Logf("gitlab-ci-local %s (in %s)", strings.Join(args, " "), project)
	ctx, cancel := context.WithTimeout(context.Background(), budget(t, timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, "gitlab-ci-local", args...)
	cmd.Dir, cmd.Env = project, env
	// The jobs' shells, make, klab and QEMU die with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	p := pipeline{log: out.String(), wall: time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		p.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("gitlab-ci-local: %v", err)
	}
	keep := regexp.MustCompile(`starting shell|finished in|imported cache|cache created|artifacts|PASS|FAIL|resolving |cached at |fetched|built |results merge|results pack|matrix run|cell\(s\)|klab: matrix results|\.klab\.tar\.zst`)
	for _, l := range strings.Split(p.log, "\n") {
		if keep.MatchString(l) {
			t.Logf("ci| %s", l)
		}
	}
	if ctx.Err() != nil || p.code != 0 {
		t.Logf("the whole log:\n%s", p.log)
		t.Fatalf("gitlab-ci-local: exit %d after %s (timeout %v)", p.code, p.wall.Round(time.Second), ctx.Err() != nil)
	}
	return p
}

// checkPipeline checks what a passed pipeline left: both shard jobs and
// the merge job passed, each shard's tree with its cell reached the
// artifact store, and the merge job's artifacts hold the merged tree with
// its JUnit report, and its bundle.
func checkPipeline(t *testing.T, which string, p pipeline, artifacts string) {
	t.Helper()
	for _, job := range []string{`klab-cells: \[1/2\]`, `klab-cells: \[2/2\]`, `klab-report`} {
		// " PASS  [1.55 min] klab-cells: [1/2]", the summary at the end.
		if !regexp.MustCompile(`(?m)^\s*PASS\s+(\[[^\]]*\]\s+)?` + job).MatchString(p.log) {
			t.Errorf("%s pipeline: job %s did not pass", which, job)
		}
	}
	if !strings.Contains(p.log, "klab-report") || !strings.Contains(p.log, "imported artifacts") {
		t.Errorf("%s pipeline: the merge job imported no artifacts", which)
	}
	var cells []string
	for i := 1; i <= 2; i++ {
		trees, _ := filepath.Glob(filepath.Join(artifacts, "klab-cells*", fmt.Sprintf("results-%d", i)))
		if len(trees) != 1 {
			t.Errorf("%s pipeline: %d results-%d trees in the artifacts, want 1", which, len(trees), i)
			continue
		}
		var m struct {
			Shard string `json:"shard"`
			Cells []struct {
				ID string `json:"id"`
			} `json:"cells"`
		}
		data, err := os.ReadFile(filepath.Join(trees[0], "matrix.json"))
		if err == nil {
			err = json.Unmarshal(data, &m)
		}
		if err != nil || m.Shard != fmt.Sprintf("%d/2", i) || len(m.Cells) != 1 {
			t.Errorf("%s pipeline: results-%d is shard %q with %d cells (%v), want shard %d/2 with 1", which, i, m.Shard, len(m.Cells), err, i)
			continue
		}
		cells = append(cells, m.Cells[0].ID)
		if n := cellRuns(t, trees[0])[m.Cells[0].ID]; n != 1 {
			t.Errorf("%s pipeline: shard %d's cell has %d runs", which, i, n)
		}
	}
	slices.Sort(cells)
	if len(cells) == 2 && cells[0] == cells[1] {
		t.Errorf("%s pipeline: both shards ran %s", which, cells[0])
	}
	merged := filepath.Join(artifacts, "klab-report", "merged")
	x := readMatrixReport(t, merged)
	if x.Cells != 2 || x.Complete != 2 || len(x.Failures) != 0 {
		t.Errorf("%s pipeline: merged report %+v", which, x)
	}
	var junit struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name string `xml:"name,attr"`
		} `xml:"testsuite"`
	}
	data, err := os.ReadFile(filepath.Join(merged, "report.xml"))
	if err == nil {
		err = xml.Unmarshal(data, &junit)
	}
	if err != nil || junit.Tests == 0 || junit.Failures != 0 || len(junit.Suites) < 2 {
		t.Errorf("%s pipeline: merged/report.xml (the pipeline's JUnit report): %+v, %v", which, junit, err)
	}
	if fi, err := os.Stat(filepath.Join(artifacts, "klab-report", "merged.klab.tar.zst")); err != nil || fi.Size() == 0 {
		t.Errorf("%s pipeline: no bundle among the merge job's artifacts: %v", which, err)
	}
}

// withoutImages drops the image: lines of a GitLab CI file, and says how
// many.
func withoutImages(ci string) (string, int) {
	var keep []string
	n := 0
	for _, l := range strings.SplitAfter(ci, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "image:") {
			n++
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, ""), n
}

// pipelineEnv is the environment of gitlab-ci-local and its jobs: the
// test's, without what would point klab elsewhere than the pipeline says
// (KLAB_CACHE_DIR, KLAB_RUNS_DIR, XDG_*), with the host's Go build and
// module caches (GOCACHE, GOMODCACHE) and -trimpath, since every job
// builds in its own copy of the project, and klab's default runs
// directory under dir.
func pipelineEnv(t *testing.T, dir string) []string {
	t.Helper()
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	add := []string{"GOCACHE=" + goEnv("GOCACHE"), "GOMODCACHE=" + goEnv("GOMODCACHE"),
		"GOFLAGS=" + strings.TrimSpace(goEnv("GOFLAGS")+" -trimpath"), "XDG_DATA_HOME=" + filepath.Join(dir, "data")}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "KLAB_CACHE_DIR" || k == "KLAB_RUNS_DIR" || k == "GOCACHE" || k == "GOMODCACHE" || k == "GOFLAGS" || strings.HasPrefix(k, "XDG_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, add...)
}

// gitCmd runs git in dir (the current directory when ""), with stdin,
// and returns its output; a failure fails t.
func gitCmd(t *testing.T, dir string, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
