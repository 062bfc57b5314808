package agent

import (
	"os"
	"testing"
)

// TestMain lets the test binary act as the agent's workload child, so that
// workload steps run in a child process in the tests as in the guest.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == WorkloadChildArg {
		os.Exit(WorkloadChildMain(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}
