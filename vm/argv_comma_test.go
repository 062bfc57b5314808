package vm

import (
	"slices"
	"strings"
	"testing"
)

// TestArgvCommas: paths with commas are escaped in every option string,
// so that they can neither break an option nor add one.
func TestArgvCommas(t *testing.T) {
	s := NewSockets("/tmp/a,server=off,b")
	for _, mode := range []Mode{Batch, Interactive} {
		argv, err := Argv(Config{Kernel: "/k,x/bzImage", Accel: TCG, Mode: mode, ConsoleLog: "/runs/x,logappend=on/console.log"}, s)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range argv {
			if i == 0 || !strings.HasPrefix(argv[i-1], "-") || argv[i-1] == "-kernel" || argv[i-1] == "-append" {
				continue // file names and the command line are not option strings
			}
			// Every comma inside a path is doubled.
			for _, p := range []string{s.QMP, s.Console, s.Serial, s.Agent, "/runs/x,logappend=on/console.log"} {
				if strings.Contains(a, p) && !strings.Contains(a, strings.ReplaceAll(p, ",", ",,")) {
					t.Errorf("%s %s: %s not escaped", argv[i-1], a, p)
				}
			}
		}
		if got := strings.Join(argv, " "); strings.Count(got, "server=off") != strings.Count(got, ",,server=off") {
			t.Errorf("a path's comma reached QEMU as a separator: %s", got)
		}
	}
}

// TestArgvName: the guest's name (the run's directory) is on QEMU's
// command line, commas escaped; without one there is no -name.
func TestArgvName(t *testing.T) {
	c := Config{Kernel: "/k", Accel: TCG, Name: "/runs/a,b/cells/x@y/run"}
	argv, err := Argv(c, NewSockets("/s"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(argv, " "), " -name guest=/runs/a,,b/cells/x@y/run ") {
		t.Errorf("argv %q lacks the escaped name", argv)
	}
	c.Name = ""
	argv, _ = Argv(c, NewSockets("/s"))
	if slices.Contains(argv, "-name") {
		t.Errorf("argv %q has -name without a name", argv)
	}
}
