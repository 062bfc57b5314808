package lab

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"klab/guest/proto"
	"klab/results"
)

func TestParseShare(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Share
		err  string
	}{
		{in: ".:/src", want: Share{Host: ".", Guest: "/src"}},
		{in: "/data:/mnt/d/:rw", want: Share{Host: "/data", Guest: "/mnt/d", Writable: true}},
		{in: "/data:/mnt/d:ro", want: Share{Host: "/data", Guest: "/mnt/d"}},
		{in: "/data", err: "want HOST:GUEST"},
		{in: ":/x", err: "want HOST:GUEST"},
		{in: "/data:rel", err: "not absolute"},
		{in: "/data:/", err: "root cannot"},
		{in: "/data:/proc/x", err: "under /proc"},
		{in: "/data:/dev", err: "under /dev"},
		{in: "/data:/x:wr", err: "want HOST:GUEST"},
	} {
		got, err := ParseShare(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseShare(%q): %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseShare(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// TestShares: QEMU exports each share read-only unless writable, the 9p
// modules come along when the kernel has them as modules, and a kernel
// without 9p, or a host path that is not a directory, is refused before
// anything boots.
func TestShares(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "a,b") // a comma QEMU must see doubled
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	config := func(body string) string {
		p := filepath.Join(t.TempDir(), "config")
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	builtin := &results.Kernel{Name: "k", Config: config("CONFIG_NET_9P=y\nCONFIG_NET_9P_VIRTIO=y\nCONFIG_9P_FS=y\n")}
	modular := &results.Kernel{Name: "k", Config: config("CONFIG_NET_9P=m\nCONFIG_NET_9P_VIRTIO=m\nCONFIG_9P_FS=m\n")}
	cloud := &results.Kernel{Name: "debian:7.3", Source: "debian", Version: "7.3.4+deb13-cloud-amd64", Config: config("CONFIG_NET_9P=y\n# CONFIG_9P_FS is not set\n")}

	r := &BootRequest{Shares: []Share{{Host: host, Guest: "/src"}, {Host: dir, Guest: "/out", Writable: true}}}
	args, mods, steps, err := r.shares(builtin)
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := []string{
		"-fsdev", "local,id=klab0,path=" + strings.ReplaceAll(host, ",", ",,") + ",security_model=none,readonly=on", "-device", "virtio-9p-pci,fsdev=klab0,mount_tag=klab0",
		"-fsdev", "local,id=klab1,path=" + dir + ",security_model=none", "-device", "virtio-9p-pci,fsdev=klab1,mount_tag=klab1",
	}
	if !slices.Equal(args, wantArgs) {
		t.Errorf("QEMU args\n%q\nwant\n%q", args, wantArgs)
	}
	if mods != nil {
		t.Errorf("modules %q for a kernel with 9p built in", mods)
	}
	want := []proto.ShareStep{{Tag: "klab0", Target: "/src"}, {Tag: "klab1", Target: "/out", Writable: true}}
	if len(steps) != 2 || *steps[0].Share != want[0] || *steps[1].Share != want[1] || steps[0].Kind != proto.StepShare {
		t.Errorf("steps %+v", steps)
	}
	if _, mods, _, err := r.shares(modular); err != nil || !slices.Equal(mods, []string{"9pnet_virtio", "9p"}) {
		t.Errorf("modular kernel: modules %q, %v", mods, err)
	}
	if _, _, _, err := r.shares(&results.Kernel{Name: "bzImage"}); err != nil {
		t.Errorf("a kernel without a known config: %v (the guest tells)", err)
	}
	if _, _, _, err := r.shares(cloud); err == nil || !strings.Contains(err.Error(), "lacks CONFIG_NET_9P_VIRTIO, CONFIG_9P_FS") || !strings.Contains(err.Error(), "flavour amd64") {
		t.Errorf("cloud kernel: %v", err)
	}
	bad := &BootRequest{Shares: []Share{{Host: file, Guest: "/x"}}}
	if _, _, _, err := bad.shares(builtin); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as share: %v", err)
	}
	missing := &BootRequest{Shares: []Share{{Host: filepath.Join(dir, "nope"), Guest: "/x"}}}
	if _, _, _, err := missing.shares(cloud); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing share, checked before the kernel: %v", err)
	}
}
