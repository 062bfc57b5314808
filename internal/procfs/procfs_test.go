package procfs

import (
	"os"
	"os/exec"
	"testing"
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
