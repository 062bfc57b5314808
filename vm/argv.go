// Package vm starts, watches and stops QEMU guests: the argv builder, the
// accelerator probe and its fallback, QMP, the console and agent channels,
// and timeouts scaled by the accelerator. It knows nothing of experiments.
package vm

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Accel is a QEMU accelerator.
type Accel string

// Accelerators klab can use.
const (
	KVM Accel = "kvm"
	TCG Accel = "tcg"
)

// Factor is the multiplier applied to every boot, step and watchdog timeout
// under this accelerator.
func (a Accel) Factor() float64 {
	if a == KVM {
		return 1
	}
	return 4
}

// Mode says how the console is wired.
type Mode int

const (
	// Batch sends the console to a socket that klab reads, logs and scans.
	Batch Mode = iota
	// Interactive puts the console on QEMU's own stdio, for `klab shell`,
	// logging it to ConsoleLog. Ctrl-A x leaves QEMU.
	Interactive
)

// AgentPortName is the name of the virtio-serial port the agent opens.
const AgentPortName = "klab.agent"

// DefaultMachine is the QEMU machine type klab boots: q35, not pc. On pc
// the kernel finds a PCI device's legacy interrupt by running the _PRT
// method of QEMU's ACPI tables, a loop over every slot, once per device
// enabled; under TCG that took 150-300 ms for the agent's virtio-serial
// device alone. q35's _PRT is a table.
const DefaultMachine = "q35"

// TCGCPU is the CPU model klab emulates under TCG: every feature QEMU
// can emulate but the fast string moves (ERMS, FSRM). With them the
// kernel copies and clears memory with "rep movsb"/"rep stosb", which TCG
// runs one byte per iteration; without them it moves 8 bytes at a time.
// Unpacking the initramfs, clearing pages and copying FUSE data to and
// from user space all take that path: the kernel reached init 7% sooner
// in 8 pairs of boots.
const TCGCPU = "max,-erms,-fsrm"

// Config describes one guest.
type Config struct {
	// QEMU is the qemu-system-x86_64 binary; empty means look it up in PATH.
	QEMU string
	// Kernel is the bzImage path.
	Kernel string
	// Initrd is the initramfs path.
	Initrd string
	// Cmdline is appended to klab's own kernel command line.
	Cmdline string
	// Accel is the accelerator to use; it must already be decided.
	Accel Accel
	// Machine is the QEMU machine type; empty means DefaultMachine.
	Machine string
	// MemMB is the guest memory in MiB; 0 means 1024.
	MemMB int
	// CPUs is the number of vCPUs; 0 means 2.
	CPUs int
	// Mode wires the console.
	Mode Mode
	// ConsoleLog is the file the console is logged to in Interactive mode.
	ConsoleLog string
	// AgentMode is passed to the agent as klab.mode= ("run" or "shell").
	AgentMode string
	// MultiThreadTCG runs each vCPU in its own host thread under TCG:
	// faster for parallel guest work, but see Argv for why it is off by
	// default.
	MultiThreadTCG bool
	// ExtraArgs are appended to QEMU's argv as they are.
	ExtraArgs []string
	// Name names the guest (QEMU's -name guest=): klab gives the run's
	// directory, so that ps shows which run a QEMU belongs to. Empty
	// leaves it out.
	Name string
}

// Sockets are the Unix socket paths of one VM, all in a private directory.
type Sockets struct {
	Dir     string
	QMP     string
	Console string
	Agent   string // virtio-serial port
	Serial  string // second ISA serial port (ttyS1), the fallback
}

// NewSockets names the sockets in dir.
func NewSockets(dir string) Sockets {
	return Sockets{
		Dir:     dir,
		QMP:     filepath.Join(dir, "qmp.sock"),
		Console: filepath.Join(dir, "console.sock"),
		Agent:   filepath.Join(dir, "agent.sock"),
		Serial:  filepath.Join(dir, "serial1.sock"),
	}
}

// KernelCmdline returns the full kernel command line for c.
func KernelCmdline(c Config) string {
	parts := []string{"console=ttyS0,115200", "panic=-1"}
	mode := c.AgentMode
	if mode == "" {
		mode = "run"
	}
	parts = append(parts, "klab.mode="+mode)
	if c.Cmdline != "" {
		parts = append(parts, c.Cmdline)
	}
	return strings.Join(parts, " ")
}

// Argv builds the QEMU command line for c with its sockets in s. It is the
// only place that knows QEMU's flags.
func Argv(c Config, s Sockets) ([]string, error) {
	if c.Kernel == "" {
		return nil, fmt.Errorf("vm: no kernel image")
	}
	qemu := c.QEMU
	if qemu == "" {
		qemu = "qemu-system-x86_64"
	}
	machine := c.Machine
	if machine == "" {
		machine = DefaultMachine
	}
	mem := c.MemMB
	if mem == 0 {
		mem = 1024
	}
	cpus := c.CPUs
	if cpus == 0 {
		cpus = 2
	}
	var cpu string
	switch c.Accel {
	case KVM:
		cpu = "host"
	case TCG:
		cpu = TCGCPU
	default:
		return nil, fmt.Errorf("vm: accelerator %q is not decided, want kvm or tcg", c.Accel)
	}
	accel := string(c.Accel)
	if c.Accel == TCG && !c.MultiThreadTCG {
		// One host thread for all vCPUs: QEMU 7.2's multi-threaded TCG
		// lets a vCPU run a stale int3 while another patches kernel text
		// (static keys), which the guest reports as "Oops: int3" — a
		// false kernel failure, seen about once in 75 boots here.
		accel = "tcg,thread=single"
	}
	argv := []string{qemu,
		"-machine", machine,
		"-accel", accel,
		"-cpu", cpu,
		"-m", strconv.Itoa(mem),
		"-smp", strconv.Itoa(cpus),
		"-kernel", c.Kernel,
	}
	if c.Name != "" {
		argv = append(argv, "-name", "guest="+optValue(c.Name))
	}
	if c.Initrd != "" {
		argv = append(argv, "-initrd", c.Initrd)
	}
	argv = append(argv,
		"-append", KernelCmdline(c),
		"-nographic",
		"-no-reboot",
		"-nodefaults",
		"-nic", "none",
		"-device", "pvpanic",
		"-qmp", "unix:"+optValue(s.QMP)+",server=on,wait=off",
	)
	switch c.Mode {
	case Interactive:
		con := "stdio,id=con0,mux=on,signal=off"
		if c.ConsoleLog != "" {
			con += ",logfile=" + optValue(c.ConsoleLog)
		}
		argv = append(argv, "-chardev", con, "-serial", "chardev:con0", "-mon", "chardev=con0,mode=readline")
	default:
		argv = append(argv,
			"-chardev", "socket,id=con0,path="+optValue(s.Console),
			"-serial", "chardev:con0",
			"-monitor", "none")
	}
	argv = append(argv,
		// The fallback agent channel, ttyS1.
		"-chardev", "socket,id=agent1,path="+optValue(s.Serial),
		"-serial", "chardev:agent1",
		// The agent's own channel, a virtio-serial port.
		"-device", "virtio-serial-pci,id=vser0",
		"-chardev", "socket,id=agent0,path="+optValue(s.Agent),
		"-device", "virtserialport,bus=vser0.0,chardev=agent0,name="+AgentPortName,
	)
	argv = append(argv, c.ExtraArgs...)
	return argv, nil
}

// optValue escapes a value inside a QEMU option string: QEMU reads ",,"
// as a comma, and a single comma would end the value (a comma in $TMPDIR
// or the runs directory would otherwise break the option or add others).
func optValue(v string) string { return strings.ReplaceAll(v, ",", ",,") }
