package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"klab/images/kerneldir"
	"klab/images/keyed"
	"klab/internal/paths"
	"klab/internal/testenv"
	"klab/matrix"
)

// TestMatrixFaults runs a matrix of six tiny cells (three one-round
// experiments of 1 s on debian:6.12 and debian:7.3) with --jobs 2 under
// the faults a CI machine deals out, in a cache directory of its own (a
// copy of both kernels) and with a private $TMPDIR for every klab, so that
// what is left behind can be counted:
//
//   - qemu-killed: one cell's QEMU is killed with SIGKILL from outside once
//     its kernel prints: that cell fails at once with the reason, the five
//     others complete, and a resume would run only it;
//   - klab-killed: klab resuming that tree is killed with SIGKILL twice in
//     a row while the cell's guest runs (its QEMU dies with it, its
//     temporary directory stays until the next klab removes it); a final
//     resume runs that one cell and completes the tree;
//   - disk-full: the tree is on a small tmpfs that is filled once a cell has
//     finished: klab starts no more cells, says why, keeps every finished
//     cell, and a resume of the tree copied to a bigger disk completes it;
//   - corrupt-kernel: the cached debian:7.3 image is changed in place (its
//     size kept) between two runs: the next run finds it damaged, cannot
//     fetch it again from a Debian mirror that does not answer, fails the
//     cell with both reasons, and boots nothing. With KLAB_NETWORK_TESTS=1
//     a run with the real mirror fetches it again and boots it.
//
// Each logs what was left on disk (the cells' states), what klab said,
// and checks that no QEMU and no temporary file is left.
func TestMatrixFaults(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	// --jobs 2 boots two guests at once: hold two slots (one when the
	// suite runs its guests one at a time).
	for range min(2, cap(guestSlots)) {
		holdGuestSlot(t)
	}
	start := time.Now()
	e := newFaultEnv(t)
	t.Cleanup(func() { t.Logf("TestMatrixFaults took %s", time.Since(start).Round(time.Second)) })

	tree := filepath.Join(t.TempDir(), "tree")
	var target string          // the cell whose QEMU is killed
	var kept map[string][]byte // the other cells' cell.json after the run
	aOK := t.Run("qemu-killed", func(t *testing.T) {
		p := e.start(t, "matrix", "run", e.file, "--jobs", "2", "--out", tree)
		target = e.firstCell(t, tree, p)
		cellDir := filepath.Join(tree, matrix.CellsDir, target)
		qemu := e.waitGuestUp(t, p, cellDir)
		if err := syscall.Kill(qemu, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		t.Logf("killed qemu %d of cell %s", qemu, target)
		for !exists(filepath.Join(cellDir, matrix.CellFile)) {
			if time.Since(killed) > 2*time.Minute || p.exited() {
				t.Fatalf("cell %s: no result %s after its QEMU was killed", target, time.Since(killed).Round(time.Second))
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("cell %s ended %.1fs after its QEMU was killed", target, time.Since(killed).Seconds())
		r := p.wait(t, 10*time.Minute)
		if r.code != 1 {
			t.Errorf("exit %d, want 1 (a cell failed)", r.code)
		}
		states := e.states(t, tree)
		for id, s := range states {
			switch {
			case id == target && (!strings.HasPrefix(s, "error: ") || !strings.Contains(s, "killed by signal SIGKILL") || !strings.Contains(s, "not by klab")):
				t.Errorf("cell %s: %s, want an error saying its QEMU was killed", id, s)
			case id != target && s != "complete":
				t.Errorf("cell %s: %s, want complete", id, s)
			}
		}
		if report := strings.Join(strings.Fields(r.stdout), " "); !strings.Contains(r.stderr, "killed by signal SIGKILL") || !strings.Contains(report, "killed by signal SIGKILL, not by klab") {
			t.Errorf("neither klab's errors nor its report say that QEMU was killed")
		}
		e.noLeftovers(t, tree, 0)
		kept = cellFiles(t, tree, target)
		if len(kept) != 5 {
			t.Errorf("%d other cells finished, want 5", len(kept))
		}
	})

	t.Run("klab-killed", func(t *testing.T) {
		if !aOK {
			t.Skip("qemu-killed failed: no tree to resume")
		}
		cellDir := filepath.Join(tree, matrix.CellsDir, target)
		var before []string
		for i := 1; i <= 2; i++ {
			p := e.start(t, "matrix", "run", e.file, "--resume", tree)
			e.waitGuestUp(t, p, cellDir)
			left := e.tempLeft()
			for _, l := range before {
				if slicesContains(left, l) {
					t.Errorf("resume %d kept %s, the leftover of the klab killed before it", i, l)
				}
			}
			p.kill(t)
			t.Logf("klab %d killed with SIGKILL while cell %s's guest ran", p.cmd.Process.Pid, target)
			logLines(t, "stderr", p.stderr.String())
			e.noQEMU(t, tree)
			before = e.tempLeft()
			t.Logf("after kill %d: cells %s; $TMPDIR holds %v", i, e.stateLine(t, tree), before)
			if len(before) != 1 || !strings.HasPrefix(before[0], "klab-vm-"+strconv.Itoa(p.cmd.Process.Pid)+"-") {
				t.Errorf("after kill %d, $TMPDIR holds %v, want the killed klab's VM directory", i, before)
			}
			if s := e.states(t, tree)[target]; s != "incomplete" {
				t.Errorf("after kill %d, cell %s is %s, want incomplete", i, target, s)
			}
			if got := cellFiles(t, tree, target); !sameFiles(got, kept) {
				t.Errorf("after kill %d, the finished cells changed", i)
			}
		}
		r := e.run(t, 10*time.Minute, "matrix", "run", e.file, "--resume", tree)
		if r.code != 0 {
			t.Fatalf("final resume: exit %d\n%s", r.code, r.stdout)
		}
		if !strings.Contains(r.stderr, "5 of 6 cell(s) finished already") || !strings.Contains(r.stderr, "1 cell(s) to run") {
			t.Errorf("the final resume did not run exactly the one cell")
		}
		for id, s := range e.states(t, tree) {
			if s != "complete" {
				t.Errorf("cell %s: %s after the final resume", id, s)
			}
		}
		if got := cellFiles(t, tree, target); !sameFiles(got, kept) {
			t.Errorf("the final resume changed the other cells")
		}
		for cell, n := range cellRuns(t, tree) {
			if n != 1 {
				t.Errorf("cell %s has %d runs, want 1", cell, n)
			}
		}
		if m := readMatrixReport(t, tree); m.Cells != 6 || m.Complete != 6 || len(m.Failures) != 0 {
			t.Errorf("report: %d of %d complete, failures %v", m.Complete, m.Cells, m.Failures)
		}
		e.noLeftovers(t, tree, 0)
	})

	t.Run("disk-full", func(t *testing.T) {
		testenv.RequiresRoot(t)
		mnt := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m,mode=0755", "klab-e2e-full", mnt).CombinedOutput(); err != nil {
			testenv.Missingf(t, "mount a tmpfs: %v: %s", err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v: %s", mnt, err, out)
			}
		})
		small := filepath.Join(mnt, "tree")
		p := e.start(t, "matrix", "run", e.file, "--jobs", "2", "--out", small)
		deadline := time.Now().Add(10 * time.Minute)
		var done []string
		for len(done) == 0 {
			if time.Now().After(deadline) || p.exited() {
				t.Fatalf("no cell finished (klab exited: %v)", p.exited())
			}
			time.Sleep(100 * time.Millisecond)
			done, _ = filepath.Glob(filepath.Join(small, matrix.CellsDir, "*", matrix.CellFile))
		}
		filled := fill(t, filepath.Join(mnt, "filler"))
		finished := cellFiles(t, small, "")
		t.Logf("filled the tmpfs with %d MiB once %d cell(s) had finished", filled>>20, len(finished))
		r := p.wait(t, 10*time.Minute)
		states := e.states(t, small)
		if r.code != 1 {
			t.Errorf("exit %d, want 1", r.code)
		}
		if !strings.Contains(r.stderr, "is full") || !strings.Contains(r.stderr, "starting no more cells") || !strings.Contains(r.stderr, "--resume") {
			t.Errorf("klab did not say that it stopped for a full disk and how to go on")
		}
		notStarted := 0
		for id, s := range states {
			if s == "not started" {
				notStarted++
			}
			if _, ok := finished[id]; ok && s != "complete" {
				t.Errorf("cell %s finished before the disk filled, and is now %s", id, s)
			}
		}
		if notStarted == 0 {
			t.Errorf("every cell was started on a full disk")
		}
		if got := cellFiles(t, small, ""); !sameFiles(pick(got, finished), finished) {
			t.Errorf("a cell that had finished changed on the full disk")
		}
		e.noLeftovers(t, small, -1)

		big := filepath.Join(t.TempDir(), "tree")
		if out, err := exec.Command("cp", "-a", small, big).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		r = e.run(t, 10*time.Minute, "matrix", "run", e.file, "--resume", big)
		if r.code != 0 {
			t.Fatalf("resume on a bigger disk: exit %d\n%s", r.code, r.stdout)
		}
		if want := fmt.Sprintf("%d of 6 cell(s) finished already", len(finished)); !strings.Contains(r.stderr, want) {
			t.Errorf("the resume did not keep the %d finished cell(s)", len(finished))
		}
		for id, s := range e.states(t, big) {
			if s != "complete" {
				t.Errorf("cell %s: %s after the resume", id, s)
			}
		}
		if got := cellFiles(t, big, ""); !sameFiles(pick(got, finished), finished) {
			t.Errorf("the resume changed the cells that had finished")
		}
		for cell, n := range cellRuns(t, big) {
			if n != 1 {
				t.Errorf("cell %s has %d runs, want 1", cell, n)
			}
		}
		e.noLeftovers(t, big, 0)
	})

	t.Run("corrupt-kernel", func(t *testing.T) {
		k := e.cachedKernel(t, "debian:7.3")
		want, err := kerneldir.ID(k.Image, k.Config)
		if err != nil || want != k.ID {
			t.Fatalf("the copied kernel: id %s, %v, want %s", want, err, k.ID)
		}
		f, err := os.OpenFile(k.Image, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := f.Stat()
		b := make([]byte, 16)
		f.ReadAt(b, fi.Size()/2)
		for i := range b {
			b[i] ^= 0x5a
		}
		_, err = f.WriteAt(b, fi.Size()/2)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		bad, _ := kerneldir.ID(k.Image, k.Config)
		t.Logf("changed 16 bytes in the middle of %s (%d bytes, size kept): it hashes to %s, not %s", k.Image, fi.Size(), bad, k.ID)

		file := filepath.Join(t.TempDir(), "one.yaml")
		spec, _ := filepath.Abs("testdata/faults.yaml")
		writeFile(t, file, fmt.Sprintf("name: faults-one\nkernels: [debian:7.3]\nexperiments:\n  - {name: %s, set: {bs: 4k}}\n", spec))
		out := filepath.Join(t.TempDir(), "tree")
		r := e.run(t, 5*time.Minute, "--debian-mirror", "file:/nonexistent", "matrix", "run", file, "--out", out)
		states := e.states(t, out)
		if r.code != 1 || len(states) != 1 {
			t.Fatalf("exit %d, cells %v, want 1 and one failed cell", r.code, states)
		}
		for id, s := range states {
			if !strings.Contains(s, "is damaged") || !strings.Contains(s, "fetching it again failed") {
				t.Errorf("cell %s: %s, want the damaged kernel and the failed fetch", id, s)
			}
			var runs []string
			filepath.WalkDir(filepath.Join(out, matrix.CellsDir, id), func(p string, d fs.DirEntry, err error) error {
				if err == nil && (d.Name() == "console.log" || d.Name() == "manifest.json") {
					runs = append(runs, p)
				}
				return nil
			})
			if len(runs) > 0 {
				t.Errorf("the damaged kernel was booted: %v", runs)
			}
		}
		if !strings.Contains(r.stderr, "is damaged") {
			t.Errorf("klab did not say that the cached kernel is damaged")
		}
		e.noLeftovers(t, out, 0)

		t.Run("fetched-again", func(t *testing.T) {
			testenv.OptIn(t, "KLAB_NETWORK_TESTS", "fetching debian:7.3 again from the Debian mirror")
			out := filepath.Join(t.TempDir(), "tree")
			r := e.run(t, 15*time.Minute, "matrix", "run", file, "--out", out)
			if r.code != 0 || !strings.Contains(r.stderr, "fetching it again") {
				t.Fatalf("exit %d; want 0 and the damaged kernel fetched again", r.code)
			}
			if got, _ := kerneldir.ID(k.Image, k.Config); got != k.ID {
				t.Errorf("the fetched image hashes to %s, want %s", got, k.ID)
			}
			e.noLeftovers(t, out, 0)
		})
	})
}

// faultEnv is what TestMatrixFaults' klab runs share: a cache directory
// with copies of the kernels and guest parts, a private $TMPDIR, and the
// matrix file.
type faultEnv struct {
	cache, tmp string
	runs, file string
}

func newFaultEnv(t *testing.T) *faultEnv {
	e := &faultEnv{cache: t.TempDir(), tmp: t.TempDir(), runs: t.TempDir()}
	// The kernels, copied from the shared cache (fetched there first),
	// with the alias index's entries for them.
	shared := map[string]string{}
	for _, ref := range []string{"debian:6.12", "debian:7.3"} {
		if r := run(t, t.TempDir(), "kernels", "fetch", ref); r.code != 0 {
			t.Fatalf("kernels fetch %s: exit %d", ref, r.code)
		}
		r := run(t, t.TempDir(), "kernels", "show", "--json", ref)
		var k cliKernelJSON
		if err := json.Unmarshal([]byte(r.stdout), &k); err != nil || r.code != 0 {
			t.Fatalf("kernels show %s: exit %d, %v", ref, r.code, err)
		}
		kdir := filepath.Dir(k.Image)
		cliCopyDir(t, kdir, filepath.Join(e.cache, "kernels", "debian", filepath.Base(kdir)))
		shared[filepath.Base(kdir)] = ref
		if aliases, err := os.ReadFile(filepath.Join(filepath.Dir(kdir), "aliases.json")); err == nil {
			all := map[string]string{}
			json.Unmarshal(aliases, &all)
			mine := map[string]string{}
			if old, err := os.ReadFile(filepath.Join(e.cache, "kernels", "debian", "aliases.json")); err == nil {
				json.Unmarshal(old, &mine)
			}
			for key, entry := range all {
				if _, ok := shared[entry]; ok {
					mine[key] = entry
				}
			}
			data, _ := json.Marshal(mine)
			writeFile(t, filepath.Join(e.cache, "kernels", "debian", "aliases.json"), string(data))
		}
	}
	cliCopyGuestParts(t, e.cache)
	// The accelerator verdict: no probe boot in the private cache.
	if v, err := os.ReadFile(filepath.Join(paths.CacheDir(), "accel-verdict.json")); err == nil {
		writeFile(t, filepath.Join(e.cache, "accel-verdict.json"), string(v))
	}
	spec, err := filepath.Abs("testdata/faults.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e.file = filepath.Join(t.TempDir(), "faults.yaml")
	var m strings.Builder
	m.WriteString("name: faults\nbaseline: debian:6.12\nkernels: [debian:6.12, debian:7.3]\nexperiments:\n")
	for _, bs := range []string{"4k", "16k", "64k"} {
		fmt.Fprintf(&m, "  - {name: %s, set: {bs: %s}}\n", spec, bs)
	}
	writeFile(t, e.file, m.String())
	return e
}

// cachedKernel reads the private cache's kernel.json of ref's entry.
func (e *faultEnv) cachedKernel(t *testing.T, ref string) struct{ ID, Image, Config string } {
	t.Helper()
	var aliases map[string]string
	data, err := os.ReadFile(filepath.Join(e.cache, "kernels", "debian", "aliases.json"))
	if err == nil {
		err = json.Unmarshal(data, &aliases)
	}
	if err != nil {
		t.Fatal(err)
	}
	series := strings.TrimPrefix(ref, "debian:")
	for key, entry := range aliases {
		if key != series+"/cloud-amd64" {
			continue
		}
		dir := filepath.Join(e.cache, "kernels", "debian", entry)
		var k struct{ ID string }
		data, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
		if err == nil {
			err = json.Unmarshal(data, &k)
		}
		if err != nil {
			t.Fatal(err)
		}
		return struct{ ID, Image, Config string }{k.ID, filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "config")}
	}
	t.Fatalf("%s is not in the private cache's alias index: %v", ref, aliases)
	return struct{ ID, Image, Config string }{}
}

// klabProc is a klab running in the background.
type klabProc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
}

// start starts klab with the test's cache and $TMPDIR.
func (e *faultEnv) start(t *testing.T, args ...string) *klabProc {
	t.Helper()
	args = append([]string{"--runs-dir", e.runs, "--cache-dir", e.cache}, args...)
	t.Logf("klab %s", strings.Join(args, " "))
	p := &klabProc{cmd: exec.Command(klab(t), args...), done: make(chan struct{})}
	p.cmd.Dir = ".."
	p.cmd.Env = append(os.Environ(), "TMPDIR="+e.tmp)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *klabProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for klab to exit and logs its stderr.
func (p *klabProc) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(budget(t, timeout)):
		p.cmd.Process.Kill()
		<-p.done
		logLines(t, "stderr", p.stderr.String())
		t.Fatalf("klab did not end within %s", timeout)
	}
	logLines(t, "stderr", p.stderr.String())
	logLines(t, "stdout", p.stdout.String())
	return result{stdout: p.stdout.String(), stderr: p.stderr.String(), code: p.cmd.ProcessState.ExitCode()}
}

// kill kills klab with SIGKILL and waits for it.
func (p *klabProc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// run runs klab to its end.
func (e *faultEnv) run(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	return e.start(t, args...).wait(t, timeout)
}

// firstCell waits for the tree's manifest and returns its first cell,
// the first one that runs.
func (e *faultEnv) firstCell(t *testing.T, tree string, p *klabProc) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if tr, err := matrix.Open(tree); err == nil && len(tr.Manifest.Cells) == 6 {
			return tr.Manifest.Cells[0].ID
		}
		if p.exited() || time.Now().After(deadline) {
			logLines(t, "stderr", p.stderr.String())
			t.Fatalf("no tree at %s", tree)
		}
	}
}

// waitGuestUp waits until a QEMU of the cell in cellDir runs and its
// kernel has printed, and returns its pid.
func (e *faultEnv) waitGuestUp(t *testing.T, p *klabProc, cellDir string) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if pids := qemusOf(cellDir + "/"); len(pids) == 1 && consolePrinted(cellDir) {
			return pids[0]
		}
		if p.exited() || time.Now().After(deadline) {
			logLines(t, "stderr", p.stderr.String())
			t.Fatalf("no guest of %s came up (klab exited: %v)", cellDir, p.exited())
		}
	}
}

// qemusOf returns the QEMU processes whose command line names path (the
// guest's name is its run directory).
func qemusOf(path string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, de := range ents {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", de.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(b), "\x00")
		if strings.HasPrefix(filepath.Base(argv0), "qemu-system") && strings.Contains(string(b), path) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// consolePrinted says whether a console.log under dir has anything.
func consolePrinted(dir string) bool {
	found := false
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "console.log" {
			if fi, err := d.Info(); err == nil && fi.Size() > 0 {
				found = true
			}
		}
		return nil
	})
	return found
}

// noQEMU checks that no QEMU of the tree outlives its klab by more than
// a few seconds, and kills any that does.
func (e *faultEnv) noQEMU(t *testing.T, tree string) {
	t.Helper()
	for gone := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pids := qemusOf(tree + "/")
		if len(pids) == 0 {
			return
		}
		if time.Now().After(gone) {
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			t.Errorf("QEMU %v of %s outlived its klab", pids, tree)
			return
		}
	}
}

// tempLeft lists the private $TMPDIR.
func (e *faultEnv) tempLeft() []string {
	ents, _ := os.ReadDir(e.tmp)
	var out []string
	for _, de := range ents {
		out = append(out, de.Name())
	}
	return out
}

// noLeftovers checks that no QEMU of the tree runs, that the private
// $TMPDIR is empty and that the tree holds no temporary file (want
// temporary files in it: 0; -1 leaves that unchecked, for a tree whose
// writes failed).
func (e *faultEnv) noLeftovers(t *testing.T, tree string, want int) {
	t.Helper()
	e.noQEMU(t, tree)
	if left := e.tempLeft(); len(left) != 0 {
		t.Errorf("$TMPDIR holds %v", left)
	}
	var temps []string
	filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err == nil && keyed.IsTemp(d.Name()) {
			temps = append(temps, p)
		}
		return nil
	})
	t.Logf("left: cells %s; $TMPDIR empty; %d temporary file(s) in the tree %v", e.stateLine(t, tree), len(temps), temps)
	if want >= 0 && len(temps) != want {
		t.Errorf("the tree holds temporary files %v", temps)
	}
}

// states reads each cell's state from the tree on disk: "complete",
// "error: MESSAGE", "incomplete" (a directory without cell.json, or one
// that says so) or "not started" (no directory).
func (e *faultEnv) states(t *testing.T, tree string) map[string]string {
	t.Helper()
	tr, err := matrix.Open(tree)
	if err != nil {
		t.Fatalf("open %s: %v", tree, err)
	}
	out := map[string]string{}
	for _, c := range tr.Manifest.Cells {
		switch r := tr.Results[c.ID]; {
		case r == nil:
			out[c.ID] = "not started"
		case r.Status == matrix.StatusError:
			out[c.ID] = "error: " + r.Message
		default:
			out[c.ID] = r.Status
		}
	}
	return out
}

// stateLine is states on one line, for the log.
func (e *faultEnv) stateLine(t *testing.T, tree string) string {
	s := e.states(t, tree)
	ids := make([]string, 0, len(s))
	for id := range s {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var parts []string
	for _, id := range ids {
		msg, _, _ := strings.Cut(s[id], "\n")
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		parts = append(parts, id+"="+msg)
	}
	return strings.Join(parts, ", ")
}

// cellFiles reads the cell.json of every finished cell but skip.
func cellFiles(t *testing.T, tree, skip string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	files, _ := filepath.Glob(filepath.Join(tree, matrix.CellsDir, "*", matrix.CellFile))
	for _, f := range files {
		id := filepath.Base(filepath.Dir(f))
		if id == skip {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = b
	}
	return out
}

// pick is the part of got whose cells are in of.
func pick(got, of map[string][]byte) map[string][]byte {
	out := map[string][]byte{}
	for id := range of {
		if b, ok := got[id]; ok {
			out[id] = b
		}
	}
	return out
}

func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for id, x := range a {
		if !bytes.Equal(x, b[id]) {
			return false
		}
	}
	return true
}

// fill writes path until its file system is full, and returns how much
// it wrote.
func fill(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := bytes.Repeat([]byte{0xa5}, 1<<20)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			if !matrix.IsDiskFull(err) {
				t.Fatal(err)
			}
			return n
		}
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func slicesContains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// logLines logs each line of s with a prefix.
func logLines(t *testing.T, prefix, s string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		t.Logf("%s| %s", prefix, l)
	}
}
