package agent

import (
	"os/exec"
	"testing"
)

// TestShellStatus: klab shell's status is the shell's own, or 128 plus
// the signal that killed it; a shell that did not start is an error.
func TestShellStatus(t *testing.T) {
	for script, want := range map[string]int{"exit 0": 0, "exit 3": 3, "exit 255": 255, "kill -9 $$": 137} {
		got, err := ShellStatus(exec.Command("/bin/sh", "-c", script).Run())
		if err != nil || got != want {
			t.Errorf("sh -c %q: %d, %v; want %d", script, got, err, want)
		}
	}
	if _, err := ShellStatus(exec.Command("/nonexistent/sh").Run()); err == nil {
		t.Error("a shell that did not start: no error")
	}
}
