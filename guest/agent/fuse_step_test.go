package agent

import (
	"fmt"
	"os"
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
	h := startAgent(t, &Agent{Handlers: DefaultHandlers()})
	h.step(proto.Step{ID: 4, Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{
		Mountpoint: mnt, Backing: backing, Threads: 2, MountOptions: []string{"default_permissions"},
		Then: &proto.Step{Kind: proto.StepExec, Argv: []string{"sh", "-c", "echo data > " + mnt + "/f && cat " + mnt + "/f"}},
	}})
	before, d := h.until(4, 30*time.Second)
	checkDone(t, d, 4, 0, "")
	if got := describe(before); !strings.Contains(got, "output stdout data\n") || !strings.Contains(got, "passthrough server over dev mounted on") {
		t.Errorf("messages = %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(backing, "f")); err != nil || string(b) != "data\n" {
		t.Errorf("backing file: %q, %v", b, err)
	}
	// The server's counters come back typed: it wrote the 5 bytes to its
	// backing file and read them back.
	if f := d.FUSE; f == nil || f.Server != "passthrough" || f.Transport != "dev" || f.ServerWrittenBytes < 5 || f.ServerReadBytes < 5 {
		t.Errorf("Done.FUSE = %+v, want passthrough over dev with >= 5 bytes written and read", d.FUSE)
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

// TestFUSEStatsSpliced: READ data spliced to /dev/fuse count as served
// next to the server's rchar; unknown rchar stays unknown.
func TestFUSEStatsSpliced(t *testing.T) {
	for _, c := range []struct {
		rBefore, rAfter, spliced, want int64
	}{
		{100, 4196, 0, 4096},
		{100, 196, 1 << 20, 96 + 1<<20},
		{100, 196, -5, 96}, // a counter that went backwards adds nothing
		{-1, 4196, 1 << 20, -1},
		{100, -1, 1 << 20, -1},
	} {
		got := fuseStats(fuse.Stats{}, c.rBefore, c.rAfter, 0, 0, c.spliced).ServerReadBytes
		if got != c.want {
			t.Errorf("rchar %d→%d, %d spliced: ServerReadBytes %d, want %d", c.rBefore, c.rAfter, c.spliced, got, c.want)
		}
	}
}
