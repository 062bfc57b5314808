package proto

// FstestsHelperDir is where, inside a userspace root, the agent puts the
// mount helpers of fstests' FUSE servers (FstestsMountHelper) when an
// fstests step runs. A read-only userspace image links
// /usr/sbin/mount.fuse.NAME to the helper there, so that mount(8), which
// only looks in /sbin, finds it.
const FstestsHelperDir = "/run/klab"

// FstestsFUSEServers are the servers of fstests' FUSE configurations.
func FstestsFUSEServers() []string {
	return []string{FstestsServerKlab, FstestsServerPassthroughHP}
}

// FstestsMountHelper is the mount(8) helper of an fstests FUSE server:
// `mount -t fuse.NAME` runs /sbin/mount.fuse.NAME.
func FstestsMountHelper(server string) string { return "mount.fuse." + server }
