package vm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"klab/internal/procfs"
)

// TempDirPrefix starts the name of a VM's private directory in $TMPDIR
// (its QMP, console and agent sockets): klab-vm-<klab's pid>-<random>.
const TempDirPrefix = "klab-vm-"

// removeStaleDirs runs RemoveStaleTempDirs once per process, before its
// first VM.
var removeStaleDirs sync.Once

// MkdirTemp makes a private directory in $TMPDIR named prefix, this
// process's pid, '-' and a random part. Whoever made it removes it; the
// pid lets a later klab remove it when its maker died without doing so
// (SIGKILL), see RemoveStaleTempDirs.
func MkdirTemp(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", prefix, os.Getpid()))
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// RemoveStaleTempDirs removes the directories of dir that MkdirTemp made
// with prefix for a process that no longer exists, and returns how many
// it removed. A directory of a live process (or of a pid that was reused
// since) stays; so does anything whose name carries no pid, or that is
// not a directory owned by this user.
func RemoveStaleTempDirs(dir, prefix string) int {
	des, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, de := range des {
		pid, ok := tempDirPid(de.Name(), prefix)
		if !ok || !de.IsDir() || pid == os.Getpid() || procfs.Alive(pid) {
			continue
		}
		p := filepath.Join(dir, de.Name())
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() || !ownedByMe(fi) {
			continue
		}
		if os.RemoveAll(p) == nil {
			n++
		}
	}
	return n
}

// tempDirPid reads the pid out of a name MkdirTemp made with prefix.
func tempDirPid(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(num)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}
