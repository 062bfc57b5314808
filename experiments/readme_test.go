package experiments

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestREADMESketch: the experiment sketch in README.md is a valid spec
// that lists what its kernel needs.
func TestREADMESketch(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "```yaml\n")
	if !ok {
		t.Fatal("README.md has no ```yaml block")
	}
	sketch, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md's yaml block is not closed")
	}
	f, err := Load("README.md", []byte(sketch))
	if err != nil {
		t.Fatalf("README.md's sketch does not validate:\n%v", err)
	}
	// Its uring cells need fuse-io-uring, and it says so.
	if !slices.Contains(f.Spec.Requires.Features, "fuse-io-uring") || len(f.Spec.Requires.Implied) != 0 {
		t.Errorf("sketch requires %+v, want features: [fuse-io-uring] written", f.Spec.Requires)
	}
	p, err := MakePlan(f, PlanOptions{Kernels: []string{"debian:7.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rows) != 2 || p.A != "transport=dev" || p.B != "transport=uring" {
		t.Errorf("sketch plan: rows %+v, A %s, B %s", p.Rows, p.A, p.B)
	}
}

// TestREADMEListsShipped: experiments/README.md has a table row for every
// shipped experiment, and its suite sketch is a valid suite section.
func TestREADMEListsShipped(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range Shipped() {
		if !strings.Contains(string(data), "\n| `"+n+"` |") {
			t.Errorf("README.md has no table row for the shipped experiment %s", n)
		}
	}
	_, rest, ok := strings.Cut(string(data), "```yaml\nsuite:\n")
	if !ok {
		t.Fatal("README.md has no ```yaml block of a suite")
	}
	sketch, _, _ := strings.Cut(rest, "```")
	f, err := Load("README.md", []byte("name: sketch\nsuite:\n"+sketch))
	if err != nil {
		t.Fatalf("the suite sketch does not validate:\n%v", err)
	}
	if f.Spec.Suite.Fstests.Config != "fuse-klab-uring" {
		t.Errorf("sketch suite %+v", f.Spec.Suite.Fstests)
	}
}
