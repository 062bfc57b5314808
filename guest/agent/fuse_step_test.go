package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/guest/fuse"
	"klab/guest/fuse/devfuse"
	"klab/guest/proto"
	"klab/internal/testenv"
)

func requireFUSE(t *testing.T) {
	t.Helper()
	testenv.RequiresFUSE(t)
}

// fuseDirs returns a mount point and a backing directory, and checks in
// t.Cleanup that nothing is left mounted.
func fuseDirs(t *testing.T) (mnt, backing string) {
	dir := t.TempDir()
	mnt, backing = filepath.Join(dir, "mnt"), filepath.Join(dir, "backing")
	t.Cleanup(func() {
		if _, err := devfuse.FindMount(mnt); err == nil {
			t.Errorf("%s is still mounted after the fuse step", mnt)
			_ = devfuse.Unmount(mnt, true)
		}
	})
	return mnt, backing
}

// TestFUSEStep mounts a passthrough server, runs a command against it,
// and checks the output, the Done and the teardown.
func TestFUSEStep(t *testing.T) {
	requireFUSE(t)
	mnt, backing := fuseDirs(t)
	// g is in the backing directory before the mount, so that reading it
	// through the mount reaches the server (f, just written, may be read
	// back from the page cache).
	if err := os.MkdirAll(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(backing, "g"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := startAgent(t, &Agent{Handlers: DefaultHandlers()})
	h.step(proto.Step{ID: 4, Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
		Mountpoint: mnt, Backing: backing, Threads: 2, MountOptions: []string{"default_permissions"},
		Then: &proto.Step{Kind: proto.StepExec, Argv: []string{"sh", "-c", "echo data > " + mnt + "/f && cat " + mnt + "/f " + mnt + "/g"}},
	}})
	before, d := h.until(4, 30*time.Second)
	checkDone(t, d, 4, 0, "")
	if got := strings.ReplaceAll(describe(before), "|output stdout ", ""); !strings.Contains(got, "data\nhello\n") || !strings.Contains(got, "passthrough server over dev mounted on") {
		t.Errorf("messages = %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(backing, "f")); err != nil || string(b) != "data\n" {
		t.Errorf("backing file: %q, %v", b, err)
	}
	// The server's counters come back typed: it wrote the 5 bytes to its
	// backing file and served g's 6.
	if f := d.FUSE; f == nil || f.Server != "passthrough" || f.Transport != "dev" || f.ServerWrittenBytes != 5 || f.ServerReadBytes < 6 {
		t.Errorf("Done.FUSE = %+v, want passthrough over dev with 5 bytes written and at least 6 read", d.FUSE)
	}
}

// TestFUSEStepFailure checks that a failing step is reported and the mount
// is still torn down.
func TestFUSEStepFailure(t *testing.T) {
	requireFUSE(t)
	mnt, backing := fuseDirs(t)
	h := startAgent(t, &Agent{Handlers: DefaultHandlers()})
	h.step(proto.Step{ID: 5, Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
		Mountpoint: mnt, Backing: backing,
		Then: &proto.Step{ID: 6, Kind: proto.StepExec, Argv: []string{"sh", "-c", "cd " + mnt + " && exit 3"}},
	}})
	_, d := h.until(5, 30*time.Second)
	checkDone(t, d, 5, 3, "")
}

// TestFUSEStepStuckServer runs a command that blocks on a request the
// stuck server never answers: the step must still end (the connection is
// aborted after the command's timeout and a grace period), and the mount
// must be gone.
func TestFUSEStepStuckServer(t *testing.T) {
	requireFUSE(t)
	mnt, backing := fuseDirs(t)
	h := startAgent(t, &Agent{Handlers: DefaultHandlers()})
	h.step(proto.Step{ID: 7, Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
		Server: proto.FUSEStuck, Mountpoint: mnt, Backing: backing, Stuck: []string{"lookup:stuck=never"},
		Then: &proto.Step{Kind: proto.StepExec, Argv: []string{"cat", mnt + "/stuck"}, TimeoutMs: 300},
	}})
	before, d := h.until(7, 5*time.Minute)
	// The step ended because the agent aborted the connection once the
	// command's timeout and the grace had passed, not in some other way.
	want := fmt.Sprintf("still running after %v: aborted FUSE connection", 300*time.Millisecond+fuseGrace)
	if d.ExitCode == 0 || !strings.Contains(d.Error, want) {
		t.Errorf("Done = %+v, want a failure with %q", *d, want)
	}
	t.Logf("Done: %+v; %s", *d, describe(before))
}

// TestFUSEStepBadConfig reports every problem of a bad step at once.
func TestFUSEStepBadConfig(t *testing.T) {
	h := startAgent(t, &Agent{Handlers: DefaultHandlers()})
	h.step(proto.Step{ID: 8, Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
		Server: "nfs", Transport: "carrier-pigeon", Threads: -1, Stuck: []string{"bogus"},
	}})
	_, d := h.until(8, 10*time.Second)
	for _, want := range []string{"server \"nfs\"", "transport \"carrier-pigeon\"", "mountpoint: missing", "backing: missing", "threads: -1", "stuck rule \"bogus\""} {
		if !strings.Contains(d.Error, want) {
			t.Errorf("error %q lacks %q", d.Error, want)
		}
	}
	if d.ExitCode != -1 {
		t.Errorf("exit %d, want -1", d.ExitCode)
	}
}

// TestFUSEStatsServed: a step's served bytes are the difference of the
// server's counts; a count that is unknown or went backwards gives -1.
func TestFUSEStatsServed(t *testing.T) {
	for _, c := range []struct {
		before, after ioCount
		read, written int64
	}{
		{ioCount{100, 5, 7}, ioCount{4196, 1029, 10}, 4096, 1024},
		{ioCount{-1, 5, 7}, ioCount{4196, 5, 10}, -1, 0},
		{ioCount{100, 5, 7}, ioCount{50, -1, 10}, -1, -1},
	} {
		got := fuseStats(fuse.Stats{}, c.before, c.after)
		if got.ServerReadBytes != c.read || got.ServerWrittenBytes != c.written {
			t.Errorf("%+v -> %+v: read %d written %d, want %d and %d", c.before, c.after, got.ServerReadBytes, got.ServerWrittenBytes, c.read, c.written)
		}
		if got.ServerCPUNs != 3 {
			t.Errorf("%+v -> %+v: CPU %d ns, want 3", c.before, c.after, got.ServerCPUNs)
		}
	}
	for _, c := range []struct{ before, after int64 }{{-1, 10}, {7, -1}, {10, 7}} {
		if got := fuseStats(fuse.Stats{}, ioCount{cpuNs: c.before}, ioCount{cpuNs: c.after}); got.ServerCPUNs != -1 {
			t.Errorf("CPU %d -> %d: %d, want -1 (unknown)", c.before, c.after, got.ServerCPUNs)
		}
	}
}

// TestServerCPU: this process's CPU time and another's are known, a
// process that does not exist gives -1.
func TestServerCPU(t *testing.T) {
	if n := serverCPU(0); n <= 0 {
		t.Errorf("serverCPU(0): %d", n)
	}
	if n := serverCPU(os.Getpid()); n <= 0 {
		t.Errorf("serverCPU of this process by pid: %d", n)
	}
	// A child that was reaped no longer exists.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if n := serverCPU(cmd.Process.Pid); n != -1 {
		t.Errorf("serverCPU of a reaped process: %d, want -1", n)
	}
}

// TestServerIOCountsItsOwn: klab's server counts the file bytes it served
// itself, spliced ones included, so that a workload process the agent
// reaps (whose rchar the kernel adds to the agent's) does not count as
// served; a libfuse server's count is its process's rchar.
func TestServerIOCountsItsOwn(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	backing, mnt := filepath.Join(dir, "b"), filepath.Join(dir, "m")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, 1<<20)
	if err := os.WriteFile(filepath.Join(backing, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fuse.DefaultConfig()
	cfg.Backing, cfg.Mountpoint = backing, mnt
	sess, err := fuse.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Teardown(context.Background(), true)
	before := serverIO(sess)
	// A child process reads the file through the mount, as a workload
	// does, and is reaped.
	if out, err := exec.Command("cat", filepath.Join(mnt, "f")).Output(); err != nil || len(out) != len(data) {
		t.Fatalf("cat through the mount: %d bytes, %v", len(out), err)
	}
	after := serverIO(sess)
	served := after.read - before.read
	if served < int64(len(data)) || served > int64(len(data))+int64(len(data))/2 {
		t.Errorf("served %d bytes for a %d-byte file read once (the reaped reader's rchar must not count)", served, len(data))
	}
	if st := sess.Stats(); st.ServedBytes < 0 || st.WrittenBytes < 0 {
		t.Errorf("klab's server has no counts: %+v", st)
	}
}
