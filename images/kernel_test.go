package images

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"klab/results"
)

// TestManifestKernelIsKernel: a run manifest's kernel and the cache's
// kernel.json are one type. A manifest written before they were (a real
// one, of a kernel built with a patch) loads unchanged, and its kernel
// encodes back to the same JSON.
func TestManifestKernelIsKernel(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "manifest-20261201-build.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, results.ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := results.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var k *results.Kernel = &m.Kernel
	if k.Name != "build:hand-fix" || k.Build == nil || len(k.Build.Patches) != 1 || k.Build.Patches[0].Path != "fix.patch" || k.Build.ConfigSHA256 == "" {
		t.Fatalf("kernel = %+v", k)
	}
	var raw struct {
		Kernel json.RawMessage `json:"kernel"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, raw.Kernel); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want.Bytes()) {
		t.Errorf("the kernel encodes differently:\n got %s\nwant %s", again, want.Bytes())
	}
}
