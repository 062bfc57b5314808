package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/internal/paths"
	"klab/internal/testenv"
	"klab/results"
)

// TestBootUserFilesAndStdin is the daily loop's guest side on a Debian
// kernel: standard input reaches the guest command, a host program the
// initramfs lacks comes in with --file and brings its shared libraries, a
// tree comes in with --dir, the command runs where its files are, its exit
// status passes through, and --json with --run-id describes the run.
func TestBootUserFilesAndStdin(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	r := cliRun(t, cliOpts{stdin: strings.NewReader("hi from the host\n")}, "--runs-dir", t.TempDir(), "boot", "--kernel", "debian:7.3", "--", "cat")
	if r.code != 0 || r.stdout != "hi from the host\n" {
		t.Fatalf("echo | klab boot -- cat: exit %d, stdout %q", r.code, r.stdout)
	}

	expr, err := exec.LookPath("expr") // coreutils: dynamically linked, not in u-root
	if err != nil {
		testenv.Missing(t, "expr (coreutils)")
	}
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "lib", "answer"), []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(tree, "check.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nset -e\npwd\n./expr 6 '*' 7\ncat /srv/data/lib/answer\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	r = run(t, runs, "boot", "--kernel", "debian:7.3", "--json", "--run-id", "loop-files",
		"--file", expr, "--file", script, "--dir", tree+":/srv/data", "--", "./check.sh")
	if r.code != 3 {
		t.Fatalf("exit %d, want the script's 3", r.code)
	}
	var sum struct {
		Outcome  string `json:"outcome"`
		ExitCode int    `json:"exit_code"`
		RunID    string `json:"run_id"`
		RunDir   string `json:"run_dir"`
		Kernel   string `json:"kernel"`
		Splats   []any  `json:"splats"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("--json: stdout is not the summary: %v\n%s", err, r.stdout)
	}
	if sum.ExitCode != 3 || sum.RunID != "loop-files" || sum.RunDir != filepath.Join(runs, "loop-files") || sum.Kernel != "debian:7.3" || sum.Splats == nil {
		t.Errorf("--json summary %+v", sum)
	}
	// With --json the guest's output goes to stderr.
	for _, want := range []string{"/work\n", "42\n"} {
		if strings.Count(r.stderr, want) < 1 {
			t.Errorf("the guest's output lacks %q", want)
		}
	}
	if strings.Count(r.stderr, "42\n") < 2 {
		t.Errorf("want 42 twice (expr, then the --dir file):\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(runs, "loop-files", "manifest.json")); err != nil {
		t.Errorf("--run-id: %v", err)
	}
	again := run(t, runs, "boot", "--kernel", "debian:7.3", "--run-id", "loop-files", "--", "true")
	if again.code != 125 || !strings.Contains(again.stderr, "exists already") {
		t.Errorf("a second run with the same --run-id: exit %d, stderr %q", again.code, again.stderr)
	}
	// Only explicit guest paths: nothing goes to /work, and the command
	// runs in / (it used to be sent to a /work that did not exist). Its
	// status 2 is its own, not klab's bad input.
	abs := run(t, runs, "boot", "--kernel", "debian:7.3", "--file", script+":/opt/check.sh", "--", "sh", "-c", "pwd; exit 2")
	if abs.code != 2 || !strings.Contains(abs.stdout, "/\n") || !strings.Contains(abs.stderr, "exit 2,") {
		t.Errorf("--file HOST:GUEST then a command: exit %d (want 2), stdout %q, stderr %q", abs.code, abs.stdout, abs.stderr)
	}
	bad := run(t, runs, "boot", "--kernel", "debian:7.3", "--file", script+":/bin/klab-agent", "--", "true")
	if bad.code != 2 || !strings.Contains(bad.stderr, "klab's own") {
		t.Errorf("--file over the agent: exit %d, stderr %q", bad.code, bad.stderr)
	}
}

// bootTreeKernel boots a kernel tree built in place: a make O=
// directory (as a developer's own build is) holding the e2e build's image
// and .config, with tree:DIR, and checks that a tree that was not built
// gets the make target to run. The build is TestKernelBuilds/patched's (a
// cache hit once that has run).
func bootTreeKernel(t *testing.T) {
	args := []string{"kernels", "build", "--source", "debian:7.3", "--config", "lab", "--patches", helloPatch, "--name", "e2e-fuse-hello"}
	if r := runBuild(t, coldBuild, args...); r.code != 0 {
		t.Fatalf("kernels build: exit %d", r.code)
	}
	holdGuestSlot(t)
	k := showBuilt(t, "build:e2e-fuse-hello")
	// A make O= directory of this very build: its image and .config where
	// make puts them. (klab's own work trees are shared by every build of
	// the same source, so a later build may have replaced their output.)
	out := t.TempDir()
	for src, dst := range map[string]string{k.Image: filepath.Join(out, "arch/x86/boot/bzImage"), k.Config: filepath.Join(out, ".config")} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, t.TempDir(), "boot", "--kernel", "tree:"+out, "--console", "--", "cat", "/proc/version")
	if r.code != 0 || !strings.Contains(r.stdout, k.Version) {
		t.Fatalf("boot tree:%s: exit %d, stdout %q, want version %s", out, r.code, r.stdout, k.Version)
	}
	if !strings.Contains(r.stderr, helloLine) {
		t.Errorf("the tree's kernel is not the patched build: the console lacks %q", helloLine)
	}
	// The source of that build, never configured in place (klab builds
	// with make O=).
	srcs, _ := filepath.Glob(filepath.Join(paths.CacheDir(), "kernels", "build", "work", "*", "src"))
	if len(srcs) == 0 {
		t.Fatal("no source tree in klab's build cache after a build")
	}
	src := srcs[0]
	r = run(t, t.TempDir(), "boot", "--kernel", src, "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "is not configured or built") || !strings.Contains(r.stderr, "--build") {
		t.Errorf("boot of an unbuilt tree: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestTreeBuildLoop is virtme-ng's loop on a git kernel tree: klab boot
// --kernel DIR --build builds the working tree as it is (an uncommitted
// edit included) in klab's cache, boots it and runs the command; a second
// edit rebuilds incrementally, and so does the next commit (klab's work
// tree moved to it); the tree itself is never written to. It
// makes a git tree of Debian's 7.3 source (about 1.5 GB, minutes) and
// builds it cold (about 6 minutes on 2 cores), so it is opt-in:
// KLAB_E2E_TREE=1.
func TestTreeBuildLoop(t *testing.T) {
	testenv.E2E(t)
	testenv.OptIn(t, "KLAB_E2E_TREE", "a git kernel tree and a cold build")
	requiresBuildTools(t)
	// The Debian source that the e2e build unpacked, made a git tree.
	args := []string{"kernels", "build", "--source", "debian:7.3", "--config", "lab", "--patches", helloPatch, "--name", "e2e-fuse-hello"}
	if r := runLong(t, coldBuild, args...); r.code != 0 {
		t.Fatalf("kernels build: exit %d", r.code)
	}
	srcs, _ := filepath.Glob(filepath.Join(paths.CacheDir(), "kernels", "build", "work", "*", "src", "fs", "fuse", "inode.c"))
	if len(srcs) == 0 {
		t.Fatal("no unpacked kernel source in the build cache")
	}
	src := filepath.Dir(filepath.Dir(filepath.Dir(srcs[0])))
	tree := filepath.Join(t.TempDir(), "linux")
	ctx := testContext(t, 20*time.Minute)
	sh := func(dir, script string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "sh", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=k", "GIT_AUTHOR_EMAIL=k@example.org", "GIT_COMMITTER_NAME=k", "GIT_COMMITTER_EMAIL=k@example.org")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
		return string(out)
	}
	start := time.Now()
	// Debian's linux-source ignores everything at its top level (its
	// .gitignore ends with a packaging block): drop that block, as a git
	// checkout of the kernel has none.
	sh(src, "git -c core.hooksPath=/dev/null init -q "+tree+" && cp -a . "+tree+"/ && cd "+tree+
		" && sed -i '/^# Debian packaging/,$d' .gitignore && git checkout -q -b base && git add -A && git commit -qm base")
	t.Logf("git tree of %s in %.0fs", src, time.Since(start).Seconds())

	edit := func(line string) {
		t.Helper()
		sh(tree, `sed -i 's|^static int __init fuse_init(void)$|&\n/* edited */|' fs/fuse/inode.c && `+
			`sed -i '0,/^\tpr_info("init (API version/s||\tpr_info("`+line+`\\n");\n&|' fs/fuse/inode.c && grep -q '`+line+`' fs/fuse/inode.c`)
	}
	status := func() string {
		return sh(tree, "git status --porcelain=v1 --untracked-files=all && git rev-parse HEAD")
	}

	edit("klab-e2e: first edit")
	before := status()
	r := runLong(t, coldBuild, "boot", "--kernel", tree, "--build", "--console", "--", "cat", "/proc/version")
	if r.code != 0 || !strings.Contains(r.stderr, "klab-e2e: first edit") {
		t.Fatalf("boot --build: exit %d; the console lacks the uncommitted edit", r.code)
	}
	t.Logf("first boot --build (cold build): %.0fs", r.wall.Seconds())
	if after := status(); after != before {
		t.Errorf("the tree changed: git status\n%s\nthen\n%s", before, after)
	}

	sh(tree, "git checkout -q fs/fuse/inode.c")
	edit("klab-e2e: second edit")
	r = runLong(t, 10*time.Minute, "boot", "--kernel", tree, "--build", "--console", "--", "true")
	if r.code != 0 || !strings.Contains(r.stderr, "klab-e2e: second edit") || strings.Contains(r.stderr, "klab-e2e: first edit") {
		t.Fatalf("second boot --build: exit %d; want the second edit only on the console", r.code)
	}
	t.Logf("second boot --build (incremental): %.0fs", r.wall.Seconds())

	r = runLong(t, 5*time.Minute, "kernels", "build", "--tree", tree, "--dirty", "--config", "lab")
	if r.code != 0 || !strings.Contains(r.stdout, "cached") {
		t.Errorf("kernels build --dirty of the same working tree: exit %d, want a cache hit: %q", r.code, r.stdout)
	}
	t.Logf("kernels build --dirty, cache hit: %.1fs", r.wall.Seconds())

	// The edits committed, one commit after the other: building the last
	// one moves klab's work tree (git checkout in its own clone) by the
	// one file that differs and recompiles only what depends on it.
	sh(tree, "git commit -qam 'fuse: second edit'")
	edit("klab-e2e: third edit")
	sh(tree, "git commit -qam 'fuse: third edit'")
	before = status()
	r = runLong(t, 10*time.Minute, "kernels", "build", "--tree", tree, "--config", "lab", "--json")
	var res struct {
		Hit      bool `json:"hit"`
		Cold     bool `json:"cold"`
		Compiled int  `json:"compiled"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("kernels build of the next commit: exit %d, stdout %q", r.code, r.stdout)
	}
	// A cold build compiles thousands of files; one edit a handful, and
	// the objects the link regenerates.
	if res.Hit || res.Cold || res.Compiled == 0 || res.Compiled > 100 ||
		!strings.Contains(r.stderr, "moving the work tree from ") || !strings.Contains(r.stderr, "(1 file(s) differ)") {
		t.Errorf("kernels build of the next commit: %+v; want an incremental build after moving the work tree by one file", res)
	}
	t.Logf("kernels build of the next commit (incremental, %d file(s) compiled): %.0fs", res.Compiled, r.wall.Seconds())
	if after := status(); after != before {
		t.Errorf("the tree changed: git status\n%s\nthen\n%s", before, after)
	}
}

// TestBootShare: --share mounts host directories over virtio-9p, read-only
// unless :rw, on a kernel with 9p (Debian's generic flavour); a kernel
// without it (the cloud flavour) is refused before anything boots, with
// the options it lacks.
func TestBootShare(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	src, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "in.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := t.TempDir()
	r := run(t, runs, "boot", "--kernel", "debian:7.3", "--flavour", "amd64", "--share", src+":/src", "--share", out+":/out:rw", "--",
		"sh", "-c", "cat /src/in.txt; if echo x > /src/new; then echo src-writable; fi; uname -r > /out/uname")
	if r.code != 0 {
		t.Fatalf("boot with shares: exit %d", r.code)
	}
	if r.stdout != "from the host\n" {
		t.Errorf("guest stdout %q, want the host file's line alone (a read-only share)", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(src, "new")); err == nil {
		t.Error("the guest wrote into a read-only share")
	}
	if b, err := os.ReadFile(filepath.Join(out, "uname")); err != nil || !strings.HasSuffix(strings.TrimSpace(string(b)), "-amd64") {
		t.Errorf("the guest's write through the :rw share: %q, %v", b, err)
	}

	// A share the guest cannot mount (its target under a file) is a
	// failed step: exit 1, and the command does not run.
	r = run(t, t.TempDir(), "boot", "--kernel", "debian:7.3", "--flavour", "amd64", "--share", src+":/init/sub", "--", "echo", "ran")
	if r.code != 1 || !strings.Contains(r.stderr, "share step 1 failed") || strings.Contains(r.stdout, "ran") {
		t.Errorf("a share on /init/sub: exit %d, stdout %q, stderr %q; want exit 1 for the failed step", r.code, r.stdout, cliTail(r.stderr, 3))
	}

	cloudRuns := t.TempDir()
	r = run(t, cloudRuns, "boot", "--kernel", "debian:7.3", "--share", src+":/src", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "lacks CONFIG_NET_9P") || !strings.Contains(r.stderr, "flavour amd64") {
		t.Errorf("a cloud kernel with --share: exit %d, stderr %q; want 125 naming the options and the flavour", r.code, cliTail(r.stderr, 3))
	}
	if ents, _ := os.ReadDir(cloudRuns); len(ents) != 0 {
		t.Errorf("a refused --share left %d run(s) behind", len(ents))
	}
}

// TestBootIcount: --icount boots under single-threaded TCG with QEMU's
// instruction counting, whatever auto would pick, and records it in the
// manifest; options QEMU would read as more arguments, and KVM, are
// refused before anything boots.
func TestBootIcount(t *testing.T) {
	testenv.E2E(t)
	parallelGuest(t)
	runs := t.TempDir()
	for _, bad := range [][]string{
		{"--icount", "shift=0 -d int"},
		{"--icount", "shift=0", "--accel", "kvm"},
		{"--icount", "shift=0", "--tcg-multithread"},
	} {
		args := append(append([]string{"boot", "--kernel", "debian:7.3"}, bad...), "--", "true")
		r := run(t, runs, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--icount") {
			t.Errorf("klab %s: exit %d, stderr %q; want 2 naming --icount", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if ents, _ := os.ReadDir(runs); len(ents) != 0 {
		t.Errorf("refused boots left %d run(s) behind", len(ents))
	}
	r := run(t, runs, "boot", "--kernel", "debian:7.3", "--icount", "shift=0,sleep=off", "--run-id", "icount", "--", "cat", "/proc/version")
	if r.code != 0 || !strings.Contains(r.stdout, "Linux version") {
		t.Fatalf("klab boot --icount: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	m, err := results.ReadManifest(filepath.Join(runs, "icount"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Accel != results.AccelTCG || !strings.Contains(m.AccelReason, "icount") {
		t.Errorf("accel %q (%s), want tcg because of icount", m.Accel, m.AccelReason)
	}
	argv := strings.Join(m.QEMU.Argv, " ")
	if !strings.Contains(argv, "-icount shift=0,sleep=off") || strings.Contains(argv, "thread=multi") {
		t.Errorf("QEMU argv %q, want -icount shift=0,sleep=off under single-threaded TCG", argv)
	}
}
