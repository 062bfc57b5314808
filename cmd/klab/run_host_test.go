package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"klab/lab"
	"klab/lab/hostguest"
)

func TestExperimentOpener(t *testing.T) {
	g := &globalOptions{cacheDir: t.TempDir(), runsDir: t.TempDir()}
	o, err := experimentOpener(g, []string{"debian:7.3", "build:x"})
	if _, ok := o.(*lab.Options); err != nil || !ok {
		t.Errorf("guest kernels: %T, %v", o, err)
	}
	o, err = experimentOpener(g, []string{hostguest.Ref})
	if _, ok := o.(*hostguest.Opener); err != nil || !ok {
		t.Fatalf("--kernel host: %T, %v", o, err)
	}
	if k, err := o.ResolveKernel(context.Background(), hostguest.Ref); err != nil || k.Source != hostguest.Source || k.Name != hostguest.Ref || k.Version == "" {
		t.Errorf("host kernel: %+v, %v", k, err)
	}
	if _, err := experimentOpener(g, []string{hostguest.Ref, "debian:7.3"}); err == nil || !strings.Contains(err.Error(), "give it alone") {
		t.Errorf("host against a guest kernel: %v", err)
	}
}

func TestRunHostRefusesGuestShape(t *testing.T) {
	g := &globalOptions{cacheDir: t.TempDir(), runsDir: t.TempDir()}
	for _, o := range []*runOptions{{cpus: 4}, {memMB: 512}, {accel: "kvm"}} {
		o.kernels, o.format = []string{hostguest.Ref}, "text"
		err := runRun(context.Background(), g, o, "fuse-bench-host", io.Discard, io.Discard)
		if code, ok := err.(*exitError); !ok || code.code != exitBadInput || !strings.Contains(err.Error(), "without a VM") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}
