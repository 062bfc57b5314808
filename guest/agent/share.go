package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
)

// ShareOptions are the 9p mount options of a klab share: the 9P2000.L
// dialect over virtio, 500 KiB messages (the most virtio takes; fewer round trips for large
// files than the default 8 KiB), and no caching, so that what the host
// changes is seen at once.
const ShareOptions = "trans=virtio,version=9p2000.L,msize=512000,cache=none"

// runShare mounts a virtio-9p export (klab boot --share): the tag is one
// klab's host named, the target an absolute guest path outside /proc,
// /sys and /dev.
func runShare(_ context.Context, _ *Agent, s *proto.Step) proto.Done {
	sh := s.Share
	if sh == nil {
		return proto.Done{ExitCode: -1, Error: "share step without its share field"}
	}
	if err := checkShareTarget(sh.Target); err != nil {
		return proto.Done{ExitCode: -1, Error: err.Error()}
	}
	if err := os.MkdirAll(sh.Target, 0o755); err != nil {
		return proto.Done{ExitCode: -1, Error: fmt.Sprintf("share %s: %v", sh.Target, err)}
	}
	flags := uintptr(unix.MS_NODEV)
	if !sh.Writable {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount(sh.Tag, sh.Target, "9p", flags, ShareOptions); err != nil {
		hint := ""
		if _, serr := os.Stat("/sys/module/9p"); serr != nil && err == unix.ENODEV {
			hint = " (the kernel has no 9p file system)"
		}
		return proto.Done{ExitCode: -1, Error: fmt.Sprintf("mount 9p %s on %s: %v%s", sh.Tag, sh.Target, err, hint)}
	}
	return proto.Done{}
}

// checkShareTarget refuses guest paths a share must not cover.
func checkShareTarget(target string) error {
	if !filepath.IsAbs(target) || filepath.Clean(target) != target {
		return fmt.Errorf("share target %q: want a clean absolute path", target)
	}
	if target == "/" {
		return fmt.Errorf("share target /: the guest's root cannot be replaced")
	}
	for _, d := range []string{"/proc", "/sys", "/dev"} {
		if target == d || strings.HasPrefix(target, d+"/") {
			return fmt.Errorf("share target %s: not under %s", target, d)
		}
	}
	return nil
}
