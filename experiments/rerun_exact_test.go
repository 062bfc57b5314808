package experiments

import (
	"testing"

	"klab/results"
)

// TestExactRef: a rerun names a Debian kernel by its pinned package
// version and a built kernel by its id, whatever the run called them.
func TestExactRef(t *testing.T) {
	for _, c := range []struct {
		k    ManifestKernel
		want string
	}{
		{ManifestKernel{Ref: "debian:7.3", Kernel: results.Kernel{Source: "debian", Version: "7.3.4+deb13-cloud-amd64", PackageVersion: "7.3.4-1~bpo13+1"}},
			"debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1"},
		{ManifestKernel{Ref: "build:fix", Kernel: results.Kernel{Source: "build", ID: "k-0123456789abcdef", Image: "/nonexistent/vmlinuz"}}, "build:k-0123456789abcdef"},
		{ManifestKernel{Ref: "/nonexistent/bzImage", Kernel: results.Kernel{Source: "local", Image: "/nonexistent/bzImage"}}, "/nonexistent/bzImage"},
	} {
		if got := ExactRef(c.k); got != c.want {
			t.Errorf("ExactRef(%s) = %q, want %q", c.k.Ref, got, c.want)
		}
	}
}
