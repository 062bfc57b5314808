package procfs

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

func TestChildNamedAndAlive(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := ChildNamed(os.Getpid(), "sleep")
	if pid != cmd.Process.Pid {
		t.Errorf("ChildNamed = %d, want %d", pid, cmd.Process.Pid)
	}
	if !Alive(pid) {
		t.Error("a running child is not alive")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if Alive(pid) {
		t.Error("a reaped child is alive")
	}
	if ChildNamed(os.Getpid(), "no-such-command") != 0 {
		t.Error("found a child that does not exist")
	}
}

func TestCPUTime(t *testing.T) {
	// The figures are CPU time, so on a loaded host a busy loop may get
	// little of it in any one stretch of wall time: each check spins (or
	// waits) until the time is there, bounded, and says how long it took.
	a, err := CPUTime(0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b := a
	for b-a < 20*time.Millisecond && time.Since(start) < 10*time.Second {
		for end := time.Now().Add(10 * time.Millisecond); time.Now().Before(end); {
		}
		if b, err = CPUTime(0); err != nil {
			t.Fatal(err)
		}
	}
	if b-a < 20*time.Millisecond {
		t.Errorf("own CPU went from %v to %v over a %v busy loop", a, b, time.Since(start).Round(time.Millisecond))
	}
	// Another process: a busy shell.
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	start = time.Now()
	var c time.Duration
	for c < 50*time.Millisecond && time.Since(start) < 10*time.Second {
		time.Sleep(50 * time.Millisecond)
		if c, err = CPUTime(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	// A process cannot use more CPU than the host has cores for the time
	// it ran.
	wall := time.Since(start) + 100*time.Millisecond
	if c < 50*time.Millisecond || c > time.Duration(runtime.NumCPU())*wall {
		t.Errorf("a busy child's CPU after %v: %v", wall.Round(time.Millisecond), c)
	}
}
