package proto

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
