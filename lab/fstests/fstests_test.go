package fstests

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"klab/guest/proto"
	imgfstests "klab/images/fstests"
	"klab/images/userspace"
	"klab/lab"
	"klab/results"
)

func TestConsoleMarker(t *testing.T) {
	for line, want := range map[string]string{
		"[   12.345678] run fstests generic/013 at 2024-01-02 03:04:05": "generic/013",
		"run fstests ext4/001 at 2024-01-02 03:04:05":                   "ext4/001",
		"[    1.0] run fstests generic/013":                             "",
		"[    1.0] run fstests ../x/y at now":                           "",
		"[    1.0] EXT4-fs (ram0): mounted":                             "",
	} {
		got, ok := ConsoleMarker(line)
		if got != want || ok != (want != "") {
			t.Errorf("ConsoleMarker(%q) = %q, %v; want %q", line, got, ok, want)
		}
	}
}

// TestRunningTest checks which test a dead guest's run is charged to: the
// last marked test without a result, written across console chunks.
func TestRunningTest(t *testing.T) {
	tests := []string{"generic/001", "generic/002", "generic/003"}
	w := &markerWatch{}
	for _, chunk := range []string{"[ 1.0] run fstests generic/001 at x\n[ 2.0] run fst", "ests generic/002 at y\n", "[ 3.0] BUG: oops\n"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.running(tests, map[string]bool{"generic/001": true}); got != "generic/002" {
		t.Errorf("running = %q, want generic/002", got)
	}
	if got := w.running(tests, map[string]bool{"generic/001": true, "generic/002": true}); got != "" {
		t.Errorf("running after all marked ended = %q, want none", got)
	}
	quiet := &markerWatch{}
	if got := quiet.running(tests, map[string]bool{}); got != "" {
		t.Errorf("running before any test = %q, want none", got)
	}
	if got := quiet.running(tests, map[string]bool{"generic/001": true}); got != "generic/002" {
		t.Errorf("running without markers = %q, want the first test without a result", got)
	}
	if Cmdline(2, 512) != "brd.rd_nr=2 brd.rd_size=524288" {
		t.Errorf("Cmdline = %q", Cmdline(2, 512))
	}
}

// recordingOpener records the BootRequest it is asked to open, and boots
// nothing.
type recordingOpener struct{ req *lab.BootRequest }

func (o *recordingOpener) ResolveKernel(context.Context, string) (*results.Kernel, error) {
	return nil, errors.New("not resolved here")
}

func (o *recordingOpener) Open(_ context.Context, req lab.BootRequest) (lab.Guest, error) {
	o.req = &req
	return nil, errors.New("no guests here")
}

// TestRunGuestPreparesSteps: the guest is opened with the userspace and
// fstests steps as Prepare, so that its initramfs carries what they need
// (libfuse's passthrough_hp for the fuse-hp configurations).
func TestRunGuestPreparesSteps(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fstests.ext4"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := &recordingOpener{}
	cfg := proto.FstestsConfig{Name: "fuse-hp-uring", FSType: proto.FstestsFUSE,
		FUSE: &proto.FstestsFUSEConfig{Server: proto.FstestsServerPassthroughHP, Transport: proto.FUSETransportURing}}
	_, err := RunGuest(context.Background(), o, GuestRequest{
		Kernel: &results.Kernel{Name: "k"}, Userspace: &userspace.Image{Path: "rootfs.ext4"},
		Fstests: &imgfstests.Built{Dir: filepath.Join(dir, "tree")}, Config: cfg, Tests: []string{"generic/184"},
	})
	if err == nil || o.req == nil {
		t.Fatalf("RunGuest: %v, opened %v", err, o.req)
	}
	var kinds []proto.StepKind
	for _, s := range o.req.Prepare {
		kinds = append(kinds, s.Kind)
		if s.Kind == proto.StepFstests && (s.Fstests == nil || s.Fstests.Config.FUSE == nil || s.Fstests.Config.FUSE.Server != proto.FstestsServerPassthroughHP) {
			t.Errorf("prepared fstests step %+v", s.Fstests)
		}
	}
	if !slices.Equal(kinds, []proto.StepKind{proto.StepUserspace, proto.StepFstests}) {
		t.Errorf("Prepare has steps %q, want the userspace and fstests steps", kinds)
	}
}
