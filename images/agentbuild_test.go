package images

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestBuildAgentConcurrent: two first builds of the agent at once both
// succeed and leave one whole binary, no temporary files.
func TestBuildAgentConcurrent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "klab-agent-x")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = buildAgent(context.Background(), "..", path, "test")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o100 == 0 || fi.Size() < 1<<20 {
		t.Fatalf("agent: %v, %v", fi, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
