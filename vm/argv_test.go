package vm

import (
	"slices"
	"strings"
	"testing"
)

func argValue(t *testing.T, argv []string, flag string) []string {
	t.Helper()
	var vals []string
	for i, a := range argv {
		if a == flag && i+1 < len(argv) {
			vals = append(vals, argv[i+1])
		}
	}
	return vals
}

func TestArgvBatch(t *testing.T) {
	s := NewSockets("/run/x")
	argv, err := Argv(Config{Kernel: "/k/bzImage", Initrd: "/i.cpio", Accel: TCG, Cmdline: "quiet"}, s)
	if err != nil {
		t.Fatal(err)
	}
	if argv[0] != "qemu-system-x86_64" {
		t.Errorf("binary = %q", argv[0])
	}
	for flag, want := range map[string]string{
		"-machine": "q35", "-accel": "tcg,thread=single", "-cpu": "max,-erms,-fsrm", "-m": "1024", "-smp": "2",
		"-kernel": "/k/bzImage", "-initrd": "/i.cpio", "-nic": "none", "-monitor": "none",
		"-append": "console=ttyS0,115200 panic=-1 klab.mode=run quiet",
	} {
		if got := argValue(t, argv, flag); len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want [%q]", flag, got, want)
		}
	}
	for _, f := range []string{"-nographic", "-no-reboot", "-nodefaults"} {
		if !slices.Contains(argv, f) {
			t.Errorf("argv lacks %s", f)
		}
	}
	devs := strings.Join(argValue(t, argv, "-device"), " ")
	for _, d := range []string{"pvpanic", "virtio-serial-pci", "virtserialport,bus=vser0.0,chardev=agent0,name=klab.agent"} {
		if !strings.Contains(devs, d) {
			t.Errorf("devices %q lack %q", devs, d)
		}
	}
	// ttyS0 is the console, ttyS1 the fallback agent channel, in that order.
	if got := argValue(t, argv, "-serial"); !slices.Equal(got, []string{"chardev:con0", "chardev:agent1"}) {
		t.Errorf("-serial = %q", got)
	}
	chardevs := strings.Join(argValue(t, argv, "-chardev"), " ")
	for _, p := range []string{s.Console, s.Agent, s.Serial} {
		if !strings.Contains(chardevs, "path="+p) {
			t.Errorf("chardevs %q lack socket %s", chardevs, p)
		}
	}
	if got := argValue(t, argv, "-qmp"); len(got) != 1 || !strings.Contains(got[0], s.QMP) {
		t.Errorf("-qmp = %q", got)
	}
}

func TestArgvKVMAndSizes(t *testing.T) {
	argv, err := Argv(Config{QEMU: "/opt/qemu", Kernel: "k", Accel: KVM, MemMB: 4096, CPUs: 4, Machine: "q35"}, NewSockets("/d"))
	if err != nil {
		t.Fatal(err)
	}
	if argv[0] != "/opt/qemu" {
		t.Errorf("binary = %q", argv[0])
	}
	if got := argValue(t, argv, "-machine"); got[0] != "q35" {
		t.Errorf("-machine = %q", got)
	}
	if got := argValue(t, argv, "-accel"); got[0] != "kvm" {
		t.Errorf("-accel = %q", got)
	}
	mt, _ := Argv(Config{Kernel: "k", Accel: TCG, MultiThreadTCG: true}, NewSockets("/d"))
	if got := argValue(t, mt, "-accel"); got[0] != "tcg" {
		t.Errorf("multi-threaded TCG: -accel = %q", got)
	}
	if got := argValue(t, argv, "-cpu"); got[0] != "host" {
		t.Errorf("-cpu = %q", got)
	}
	if got := argValue(t, argv, "-m"); got[0] != "4096" {
		t.Errorf("-m = %q", got)
	}
	if got := argValue(t, argv, "-smp"); got[0] != "4" {
		t.Errorf("-smp = %q", got)
	}
	if slices.Contains(argv, "-initrd") {
		t.Error("no initrd given but -initrd in argv")
	}
}

func TestArgvInteractive(t *testing.T) {
	argv, err := Argv(Config{Kernel: "k", Accel: TCG, Mode: Interactive, AgentMode: "shell", ConsoleLog: "/r/console.log"}, NewSockets("/d"))
	if err != nil {
		t.Fatal(err)
	}
	chardevs := argValue(t, argv, "-chardev")
	if !strings.HasPrefix(chardevs[0], "stdio,id=con0,mux=on,signal=off,logfile=/r/console.log") {
		t.Errorf("console chardev = %q", chardevs[0])
	}
	if !strings.Contains(argValue(t, argv, "-append")[0], "klab.mode=shell") {
		t.Error("shell mode not on the kernel command line")
	}
	if slices.Contains(argv, "-monitor") {
		t.Error("interactive mode must keep the muxed monitor for Ctrl-A")
	}
}

func TestArgvErrors(t *testing.T) {
	if _, err := Argv(Config{Accel: TCG}, NewSockets("/d")); err == nil {
		t.Error("no kernel: want error")
	}
	if _, err := Argv(Config{Kernel: "k"}, NewSockets("/d")); err == nil || !strings.Contains(err.Error(), "kvm or tcg") {
		t.Errorf("undecided accel: err = %v", err)
	}
}

// TestFactor pins the timeout factors. KVM's is 1: klab's default
// timeouts (30 s to boot, 10 min a step, 5 s of silence before a hang is
// suspected) are written for KVM. TCG's is 4, the factor README documents
// and every run records in its manifest (timeout_factor): with it the
// default boot timeout is 2 min, which covers the slowest boot-to-agent
// seen under TCG on the 2-core CI machine during a loaded make test (47 s)
// with room to spare. Any accelerator that is not KVM (an undecided one
// included) gets TCG's factor, never KVM's tighter timeouts.
func TestFactor(t *testing.T) {
	for a, want := range map[Accel]float64{KVM: 1, TCG: 4, "": 4, "hvf": 4} {
		if got := a.Factor(); got != want {
			t.Errorf("Accel(%q).Factor() = %v, want %v", a, got, want)
		}
	}
}
