package lab

import (
	"io"
	"strings"
	"testing"
)

// TestForRequest: a boot request's runs directory, accelerator and
// progress writer win over the Opener's, and the rest stays the Opener's.
func TestForRequest(t *testing.T) {
	var mine strings.Builder
	base := &Options{CacheDir: "/cache", RunsDir: "/runs", Accel: "kvm", Progress: io.Discard}
	got := base.forRequest(&BootRequest{})
	if got.RunsDir != "/runs" || got.Accel != "kvm" || got.Progress != io.Discard || got.Flavour != "cloud-amd64" {
		t.Errorf("empty request: %+v, want the Opener's settings with defaults", got)
	}
	got = base.forRequest(&BootRequest{RunsDir: "/exp/guests", Accel: "tcg", Progress: &mine})
	if got.RunsDir != "/exp/guests" || got.Accel != "tcg" || got.Progress != &mine || got.CacheDir != "/cache" {
		t.Errorf("request's settings: %+v", got)
	}
	if base.RunsDir != "/runs" || base.Accel != "kvm" || base.Progress != io.Discard {
		t.Errorf("the Opener changed: %+v", base)
	}
	if got := (&Options{}).forRequest(&BootRequest{}); got.Accel != "auto" {
		t.Errorf("no accelerator anywhere: %q, want auto", got.Accel)
	}
}
