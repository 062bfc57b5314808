package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"klab/guest/proto"
	"klab/images"
	"klab/results"
)

// Share is a host directory the guest mounts over virtio-9p (klab boot
// --share): large trees without copying them into the initramfs, and the
// guest's output back on the host when Writable.
type Share struct {
	// Host is the directory QEMU exports; Guest is where the agent mounts
	// it, before the sysctls and the command.
	Host, Guest string
	// Writable lets the guest write to Host; read-only otherwise.
	Writable bool
}

func (s Share) String() string {
	if s.Writable {
		return s.Host + ":" + s.Guest + ":rw"
	}
	return s.Host + ":" + s.Guest
}

// shareOptions are the kernel options a share needs: the 9P protocol, its
// virtio transport and the file system.
var shareOptions = []string{"CONFIG_NET_9P", "CONFIG_NET_9P_VIRTIO", "CONFIG_9P_FS"}

// shareModules provide shareOptions when they are modules (their
// dependencies, netfs and 9pnet, come with them).
var shareModules = []string{"9pnet_virtio", "9p"}

// ShareTag is the 9p mount tag of the i-th share.
func ShareTag(i int) string { return fmt.Sprintf("klab%d", i) }

// shares checks req.Shares against kernel k and returns the QEMU
// arguments that export them, the modules the guest must load for them
// and the steps that mount them. A kernel whose config lacks 9p is bad
// input, named with the options it lacks.
func (r *BootRequest) shares(k *results.Kernel) (qemuArgs, modules []string, steps []proto.Step, err error) {
	if len(r.Shares) == 0 {
		return nil, nil, nil, nil
	}
	for _, s := range r.Shares {
		fi, err := os.Stat(s.Host)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("share %s: %w", s, err)
		}
		if !fi.IsDir() {
			return nil, nil, nil, fmt.Errorf("share %s: %s is not a directory (a file is copied in, not shared)", s, s.Host)
		}
	}
	if k.Config != "" {
		cfg, err := images.ReadConfig(k.Config)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("share: kernel %s: %w", k.Name, err)
		}
		var missing []string
		modular := false
		for _, o := range shareOptions {
			switch cfg[o] {
			case "y":
			case "m":
				modular = true
			default:
				missing = append(missing, o)
			}
		}
		if len(missing) > 0 {
			hint := "build the kernel with them"
			if k.Source == "debian" {
				hint = "use the flavour amd64 (Debian's generic kernels have 9p, its cloud kernels do not)"
			}
			return nil, nil, nil, fmt.Errorf("share: kernel %s (%s) lacks %s, which a share over virtio-9p needs: %s, or copy the directory into the guest",
				k.Name, k.Version, strings.Join(missing, ", "), hint)
		}
		if modular {
			modules = shareModules
		}
	}
	for i, s := range r.Shares {
		abs, err := filepath.Abs(s.Host)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("share %s: %w", s, err)
		}
		tag := ShareTag(i)
		fsdev := "local,id=" + tag + ",path=" + strings.ReplaceAll(abs, ",", ",,") + ",security_model=none"
		if !s.Writable {
			fsdev += ",readonly=on"
		}
		qemuArgs = append(qemuArgs, "-fsdev", fsdev, "-device", "virtio-9p-pci,fsdev="+tag+",mount_tag="+tag)
		steps = append(steps, proto.Step{Kind: proto.StepShare, Share: &proto.ShareStep{Tag: tag, Target: s.Guest, Writable: s.Writable}})
	}
	return qemuArgs, modules, steps, nil
}

// ParseShare parses a share, HOST:GUEST[:rw] (klab boot --share): a host
// directory and an absolute guest path outside /, /proc, /sys and /dev.
// Its error starts with the value quoted, for the caller to name where it
// came from.
func ParseShare(v string) (Share, error) {
	var s Share
	parts := strings.Split(v, ":")
	if n := len(parts); n == 3 && (parts[2] == "rw" || parts[2] == "ro") {
		s.Writable = parts[2] == "rw"
		parts = parts[:2]
	}
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return s, fmt.Errorf("%q: want HOST:GUEST or HOST:GUEST:rw (a host directory, the absolute guest path to mount it on; read-only unless :rw), e.g. .:/src", v)
	}
	s.Host, s.Guest = parts[0], parts[1]
	if !filepath.IsAbs(s.Guest) {
		return s, fmt.Errorf("%q: the guest path %q is not absolute", v, s.Guest)
	}
	s.Guest = filepath.Clean(s.Guest)
	if s.Guest == "/" {
		return s, fmt.Errorf("%q: the guest's root cannot be a share", v)
	}
	for _, d := range []string{"/proc", "/sys", "/dev"} {
		if s.Guest == d || strings.HasPrefix(s.Guest, d+"/") {
			return s, fmt.Errorf("%q: the guest path cannot be under %s", v, d)
		}
	}
	return s, nil
}
