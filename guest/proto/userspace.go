package proto

import (
	"fmt"
	"strings"
)

// UserspaceStep mounts the userspace image on the disk whose virtio-blk
// serial is Serial, read-only, on Root, and prepares Root for commands
// chrooted into it: a tmpfs on each of Writable, /proc, /sys and /dev
// bound from the agent's own, and the loopback interface up.
type UserspaceStep struct {
	// Serial is the disk's virtio-blk serial number, as QEMU's
	// -device virtio-blk-pci,serial= sets it.
	Serial string `json:"serial"`
	// FSType is the image's file system, e.g. ext4.
	FSType string `json:"fstype"`
	// Root is the absolute guest path to mount the image on, outside
	// /proc, /sys and /dev.
	Root string `json:"root"`
	// Writable are absolute paths inside the root (directories the image
	// has) that each get a tmpfs, filled with a copy of what the image
	// holds there: /tmp, /var/tmp, /run, ...
	Writable []string `json:"writable,omitempty"`
}

// UserspaceParam is the kernel command line parameter that gives an agent
// in shell mode, which has no channel to receive steps on, the userspace
// to mount and to run its shell in (klab shell --userspace).
const UserspaceParam = "klab.userspace"

// Param returns u as UserspaceParam's value:
// SERIAL:FSTYPE:ROOT[:WRITABLE,WRITABLE...]. It fails when a field holds
// a character the encoding or the kernel command line cannot carry.
func (u UserspaceStep) Param() (string, error) {
	fields := []string{u.Serial, u.FSType, u.Root}
	for _, f := range append(fields, u.Writable...) {
		if f == "" || strings.ContainsAny(f, ":, \t\n\"") {
			return "", fmt.Errorf("userspace field %q: want a non-empty word without ':', ',', quotes or spaces", f)
		}
	}
	if len(u.Writable) > 0 {
		fields = append(fields, strings.Join(u.Writable, ","))
	}
	return strings.Join(fields, ":"), nil
}

// ParseUserspaceParam reads UserspaceParam's value back (see
// UserspaceStep.Param).
func ParseUserspaceParam(v string) (*UserspaceStep, error) {
	f := strings.Split(v, ":")
	if len(f) < 3 || len(f) > 4 || f[0] == "" || f[1] == "" || f[2] == "" {
		return nil, fmt.Errorf("%s=%q: want SERIAL:FSTYPE:ROOT[:WRITABLE,...]", UserspaceParam, v)
	}
	u := &UserspaceStep{Serial: f[0], FSType: f[1], Root: f[2]}
	if len(f) == 4 && f[3] != "" {
		u.Writable = strings.Split(f[3], ",")
	}
	return u, nil
}
