package experiments

import (
	"strings"
	"testing"
)

func TestHostProblems(t *testing.T) {
	f, err := LoadFile("fuse-bench-host.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := hostProblems(f); err != nil {
		t.Errorf("fuse-bench-host cannot run on the host: %v", err)
	}
	// Specs meant for a guest: a ramdisk with ext4, sysctls, icount.
	for name, want := range map[string][]string{
		"ext4-lazytime.yaml": {"setup.brd", "setup.mkfs"},
		"fuse-bench-hp.yaml": {"vm.icount"},
		"fuse-timeout.yaml":  {"sysctls"},
	} {
		f, err := LoadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		err = hostProblems(f)
		if err == nil {
			t.Errorf("%s: runs on the host", name)
			continue
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w+":") {
				t.Errorf("%s: %v lacks %s", name, err, w)
			}
		}
	}
}
