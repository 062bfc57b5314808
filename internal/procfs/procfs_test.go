package procfs

import (
	"os"
	"os/exec"
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
	a, err := CPUTime(0)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	if b, err := CPUTime(0); err != nil || b-a < 20*time.Millisecond {
		t.Errorf("own CPU went from %v to %v (%v) over a 50 ms busy loop", a, b, err)
	}
	// Another process: a busy shell.
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(300 * time.Millisecond)
	c, err := CPUTime(cmd.Process.Pid)
	if err != nil || c < 50*time.Millisecond || c > 2*time.Second {
		t.Errorf("a busy child's CPU after 300 ms: %v, %v", c, err)
	}
}
