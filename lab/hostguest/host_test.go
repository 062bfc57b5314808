package hostguest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"klab/guest/proto"
	"klab/internal/testenv"
	"klab/lab"
	"klab/results"
)

// TestMain lets the test binary be the host agent, as klab's main does.
func TestMain(m *testing.M) {
	if code, ok := Main(os.Args); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestHostCellAsRoot runs one real cell on this host: klab's passthrough
// server over /dev/fuse, mounted by the confined agent, with a second
// of sequential reads through it. It checks the numbers that came back
// and that nothing of the cell reached the host's own directories.
func TestHostCellAsRoot(t *testing.T) {
	testenv.RequiresFUSE(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("klab-hostguest-test-%d", os.Getpid())
	backing, mnt := filepath.Join("/tmp", name, "b"), filepath.Join("/mnt", name)
	cell := proto.Step{ID: 3, Kind: proto.StepFUSE, FUSE: &proto.FUSEStep{Server: proto.FUSEPassthrough, Transport: proto.FUSETransportDev,
		Mountpoint: mnt, Backing: backing, Threads: 2,
		Then: &proto.Step{Kind: proto.StepWorkload, Workload: &proto.WorkloadStep{Name: "rd", Pattern: proto.PatternSeqRead, Dir: mnt,
			Jobs: 1, BlockSize: 128 << 10, FileSize: 8 << 30, RuntimeMs: 1000}}}}
	o := &Opener{CacheDir: t.TempDir(), RunsDir: t.TempDir(), Exe: exe}
	g, err := o.Open(context.Background(), lab.BootRequest{Kernel: Ref, Prepare: []proto.Step{cell}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	setup := proto.Step{ID: 1, Kind: proto.StepExec, Argv: []string{"sh", "-c", fmt.Sprintf("set -e; mkdir -p %s %s; truncate -s 8G %s/rd.0.0", backing, mnt, backing)}}
	// What a guest may do that a host run must not: write the host's
	// /usr, a sysctl, make a device node.
	confined := proto.Step{ID: 2, Kind: proto.StepExec, Argv: []string{"sh", "-c",
		"touch /usr/klab-hostguest-test 2>/dev/null && exit 3; cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname 2>/dev/null && exit 4; " +
			"mknod /tmp/klab-null c 1 3 2>/dev/null && exit 5; test -e /dev/fuse || exit 6; echo 1 > /proc/sys/vm/drop_caches || exit 7"}}
	out, err := g.Run(context.Background(), []proto.Step{setup, confined, cell})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out[:2] {
		if r.Done.ExitCode != 0 {
			t.Errorf("step %d exited %d: %s", r.Step.ID, r.Done.ExitCode, r.Done.Error)
		}
	}
	d := out[2].Done
	m, f := d.Metrics, d.FUSE
	if m == nil || f == nil {
		t.Fatalf("the cell reported no numbers: %+v", d)
	}
	t.Logf("%.0f MB/s, %d bytes read, server read %d bytes and used %.1f ms of CPU", m.BytesPerSec/1e6, m.Bytes, f.ServerReadBytes, float64(f.ServerCPUNs)/1e6)
	if m.Bytes <= 0 || m.BytesPerSec <= 0 || m.Ops <= 0 {
		t.Errorf("no bytes read: %+v", m)
	}
	if float64(f.ServerReadBytes) < 0.9*float64(m.Bytes) {
		t.Errorf("the server read %d of the %d bytes the job counted", f.ServerReadBytes, m.Bytes)
	}
	if f.ServerCPUNs <= 0 {
		t.Errorf("no server CPU time: %d", f.ServerCPUNs)
	}
	res, err := g.Close()
	if err != nil {
		t.Fatal(err)
	}
	man, err := results.ReadManifest(res.RunDir)
	if err != nil || man.Outcome.Status != results.StatusOK || man.Accel != results.AccelHost {
		t.Errorf("manifest: %+v, %v", man, err)
	}
	for _, p := range []string{filepath.Join("/tmp", name), mnt, "/usr/klab-hostguest-test"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s reached the host: %v", p, err)
		}
	}
}
