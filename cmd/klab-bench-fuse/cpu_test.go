package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"klab/guest/fuse"
	"klab/internal/testenv"
)

func TestConnFilter(t *testing.T) {
	if got := connFilter(47); got != "connection == 47" {
		t.Errorf("connFilter = %q", got)
	}
}

// TestReqCounter counts the requests of a klab server's connection.
func TestReqCounter(t *testing.T) {
	testenv.RequiresFUSE(t)
	dir := t.TempDir()
	cfg := fuse.DefaultConfig()
	cfg.Mountpoint, cfg.Backing = filepath.Join(dir, "m"), filepath.Join(dir, "b")
	s, err := fuse.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := startCost(0, s.ConnID())
	if m.err != nil {
		t.Skipf("this kernel cannot count FUSE requests: %v", m.err)
	}
	// Each name is new: one LOOKUP each, which fails (ENOENT) and still
	// counts as a request.
	const n = 20
	for i := 0; i < n; i++ {
		_, _ = os.Stat(filepath.Join(cfg.Mountpoint, "nosuch"+strconv.Itoa(i)))
	}
	cpu, reqs, err := m.stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d lookups: %d requests counted, server CPU %v", n, reqs, cpu)
	if reqs < n || reqs > 2*n {
		t.Errorf("counted %d requests for %d lookups", reqs, n)
	}
	if cpu <= 0 {
		t.Errorf("server CPU %v", cpu)
	}
	// Another connection's requests are not counted.
	m2 := startCost(0, s.ConnID()+1000)
	_, _ = os.Stat(filepath.Join(cfg.Mountpoint, "other"))
	if _, reqs, err := m2.stop(); err != nil || reqs != 0 {
		t.Errorf("another connection: %d requests, %v", reqs, err)
	}
}
