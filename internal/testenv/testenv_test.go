package testenv

import (
	"os/exec"
	"testing"
)

func TestRequiresCommandPresent(t *testing.T) {
	RequiresCommand(t, "sh") // sh is always there; must not skip
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal("sh not found but RequiresCommand did not skip")
	}
}

func TestSkipOrFailOutsideCI(t *testing.T) {
	t.Setenv("CI", "")
	var skipped bool
	t.Run("missing", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		RequiresCommand(t, "klab-no-such-command-xyz")
	})
	if !skipped {
		t.Fatal("a missing command outside CI must skip")
	}
}

func TestInCI(t *testing.T) {
	t.Setenv("CI", "true")
	if !InCI() {
		t.Fatal("CI=true not seen")
	}
	t.Setenv("CI", "")
	if InCI() {
		t.Fatal("CI unset seen as CI")
	}
}
