package vm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRemoveStaleTempDirs: a directory of a dead process goes; this
// process's, a live process's and names without a pid stay.
func TestRemoveStaleTempDirs(t *testing.T) {
	dir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := mk(fmt.Sprintf("klab-vm-%d-123", dead.Process.Pid))
	keep := []string{
		mk(fmt.Sprintf("klab-vm-%d-123", os.Getpid())),
		mk("klab-vm-1-123"), // init lives
		mk("klab-vm-abc-123"),
		mk("klab-vm-"),
		mk(fmt.Sprintf("klab-host-%d-1", dead.Process.Pid)),
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("klab-vm-%d-f", dead.Process.Pid)), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := RemoveStaleTempDirs(dir, TempDirPrefix); n != 1 {
		t.Errorf("removed %d, want 1", n)
	}
	if _, err := os.Stat(gone); err == nil {
		t.Errorf("%s of a dead process stayed", gone)
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s went: %v", p, err)
		}
	}
}

// TestMkdirTempNamesPid: the directory carries this process's pid and is
// private.
func TestMkdirTempNamesPid(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	d, err := MkdirTemp(TempDirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	pid, ok := tempDirPid(filepath.Base(d), TempDirPrefix)
	fi, err := os.Stat(d)
	if !ok || pid != os.Getpid() || err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: pid %d %v, %v %v", d, pid, ok, fi.Mode(), err)
	}
}

// TestKilledFromOutside: a QEMU that someone else kills is told apart from
// a normal exit and from klab's own Kill.
func TestKilledFromOutside(t *testing.T) {
	start := func() *Machine {
		m := &Machine{cmd: exec.Command("sleep", "30"), exited: make(chan struct{})}
		if err := m.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { m.exitErr = m.cmd.Wait(); close(m.exited) }()
		return m
	}
	m := start()
	if got := m.KilledFromOutside(); got != "" {
		t.Errorf("running: %q", got)
	}
	syscall.Kill(m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.exited
	if got := m.KilledFromOutside(); !strings.Contains(got, "killed by signal SIGKILL") || !strings.Contains(got, "not by klab") {
		t.Errorf("killed from outside: %q", got)
	}
	m = start()
	m.Kill()
	<-m.exited
	if got := m.KilledFromOutside(); got != "" {
		t.Errorf("klab's own Kill: %q", got)
	}
	m = &Machine{cmd: exec.Command("true"), exited: make(chan struct{})}
	m.exitErr = m.cmd.Run()
	close(m.exited)
	if got := m.KilledFromOutside(); got != "" {
		t.Errorf("normal exit: %q", got)
	}
}
