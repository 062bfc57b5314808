package userspace

import (
	"fmt"
	"strings"

	"klab/guest/proto"
	"klab/images"
	"klab/images/internal/ext4img"
	"klab/results"
)

// GuestRoot is where the agent mounts a userspace in the guest.
const GuestRoot = "/klab/userspace"

// Serial is the virtio-blk serial number of the userspace disk, by which
// the agent finds it.
const Serial = "klab-userspace"

// Writable are the directories of a userspace that get a tmpfs of their
// own in the guest: what test suites write outside their own
// directories (fstests: /tmp, /var/tmp, /run, mount points under /mnt).
func Writable() []string {
	return []string{"/tmp", "/var/tmp", "/run", "/mnt", "/root", "/var/log", "/var/lib"}
}

// kernelNeeds are the options a guest kernel needs to mount a userspace
// and, for each, the module that provides it when it is not built in.
var kernelNeeds = []struct{ option, module string }{
	{"CONFIG_VIRTIO_PCI", "virtio_pci"},
	{"CONFIG_VIRTIO_BLK", "virtio_blk"},
	{"CONFIG_EXT4_FS", "ext4"},
}

// Attachment is what booting a guest with a userspace takes: QEMU
// arguments for the disk, modules for the initramfs to load, and the step
// that mounts it, to run before any command in it.
type Attachment struct {
	QEMUArgs []string
	Modules  []string
	Step     proto.Step
}

// Attach says how to give kernel k the userspace img. A kernel whose
// config lacks what the disk needs is bad input, named with the options
// it lacks; a kernel without a config is trusted.
func Attach(img *Image, k *results.Kernel) (*Attachment, error) {
	a := &Attachment{
		QEMUArgs: QEMUArgs(img.Path),
		Step: proto.Step{Kind: proto.StepUserspace, Userspace: &proto.UserspaceStep{
			Serial: Serial, FSType: img.Descriptor.Format, Root: GuestRoot, Writable: Writable(),
		}},
	}
	if k == nil || k.Config == "" {
		return a, nil
	}
	cfg, err := images.ReadConfig(k.Config)
	if err != nil {
		return nil, fmt.Errorf("userspace: kernel %s: %w", k.Name, err)
	}
	mods, missing := neededModules(cfg)
	if len(missing) > 0 {
		return nil, fmt.Errorf("userspace: kernel %s (%s) lacks %s, which a userspace disk needs: build it with them (klab's lab config has them)",
			k.Name, k.Version, strings.Join(missing, ", "))
	}
	a.Modules = mods
	return a, nil
}

// neededModules returns the modules cfg has for kernelNeeds, and the
// options it lacks altogether.
func neededModules(cfg map[string]string) (modules, missing []string) {
	for _, n := range kernelNeeds {
		switch cfg[n.option] {
		case "y":
		case "m":
			modules = append(modules, n.module)
		default:
			missing = append(missing, n.option)
		}
	}
	return modules, missing
}

// QEMUArgs attach the image at path as a read-only virtio-blk disk with
// the userspace serial. QEMU takes a shared lock on a read-only image, so
// several guests can attach one image at once.
func QEMUArgs(path string) []string { return ext4img.QEMUArgs(path, "klabus", Serial) }

// Exec is an exec step that runs argv chrooted into the userspace, in dir
// (inside it; empty means /), stopped after timeoutMs (0: no limit).
func Exec(argv []string, dir string, timeoutMs int64) proto.Step {
	return proto.Step{Kind: proto.StepExec, Argv: argv, Root: GuestRoot, Dir: dir, TimeoutMs: timeoutMs}
}
