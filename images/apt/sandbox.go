package apt

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// apt's download sandbox. As root, apt runs its download methods (http,
// gpgv, ...) as the user APT::Sandbox::User, _apt, so that the code that
// parses what a mirror sends holds no privileges. Before it downloads,
// apt checks that this user may write the directory of every file it
// fetches, and runs the methods as root, with a notice, when it may not.
// klab therefore gives _apt the directories it writes: lists/partial, a
// download directory for `apt-get download` and `apt-get source`, and a
// TMPDIR, all owned by _apt with mode 0700, under a directory _apt can
// reach.

// sandboxUser is the user apt's methods run as.
const sandboxUser = "_apt"

// systemStageRoot holds the staging directories of Envs whose cache _apt
// cannot reach.
const systemStageRoot = "/var/cache/klab"

// identity is who klab runs as and who _apt is.
type identity struct {
	euid int
	// aptUID is _apt's uid, when aptOK.
	aptUID, aptGID int
	aptOK          bool
}

func currentIdentity() identity {
	id := identity{euid: os.Geteuid()}
	u, err := user.Lookup(sandboxUser)
	if err != nil {
		return id
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 == nil && err2 == nil {
		id.aptUID, id.aptGID, id.aptOK = uid, gid, true
	}
	return id
}

// sandbox is how an Env's downloads run.
type sandbox struct {
	// user is the user apt's methods run as, "" when they do not drop
	// privileges.
	user string
	// root is set when klab runs as root and the sandbox is off; why says
	// why, in one line.
	root bool
	why  string
	// stage holds lists/ and, sandboxed, download/ and tmp/: the Env's
	// own directory, or one under systemStageRoot.
	stage string
}

func (s sandbox) dir(name string) string { return filepath.Join(s.stage, name) }

// prepareSandbox decides where apt downloads for the Env in dir and makes
// the directories _apt writes.
func prepareSandbox(dir, stageRoot string, id identity) sandbox {
	if id.euid != 0 {
		return sandbox{stage: dir} // apt drops privileges only as root
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	off := func(format string, args ...any) sandbox {
		return sandbox{root: true, stage: dir, why: "apt downloads run as root, without apt's sandbox: " + fmt.Sprintf(format, args...)}
	}
	if !id.aptOK {
		return off("this system has no %s user", sandboxUser)
	}
	stage := dir
	if blocked := untraversable(dir, id.aptUID, id.aptGID); blocked != "" {
		stage = stageDir(stageRoot, dir)
		for _, d := range []string{stageRoot, stage} {
			if err := rootDir(d); err != nil {
				return off("%s cannot reach %s (%s), and %v", sandboxUser, dir, blocked, err)
			}
		}
		if b := untraversable(stage, id.aptUID, id.aptGID); b != "" {
			return off("%s cannot reach %s (%s) nor %s (%s)", sandboxUser, dir, blocked, stage, b)
		}
		// Whose it is, for people and for pruneStages.
		if _, err := writeIfChanged(filepath.Join(stage, "owner"), dir+"\n"); err != nil {
			return off("%v", err)
		}
		now := time.Now()
		_ = os.Chtimes(stage, now, now)
		pruneStages(stageRoot, stage)
	}
	if err := rootDir(filepath.Join(stage, "lists")); err != nil {
		return off("%v", err)
	}
	for _, d := range []string{"lists/partial", "download", "tmp"} {
		if err := aptDir(filepath.Join(stage, d), id); err != nil {
			return off("%v", err)
		}
	}
	return sandbox{user: sandboxUser, stage: stage}
}

// stageDir is the staging directory under root for the Env in dir.
func stageDir(root, dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(root, "apt-"+hex.EncodeToString(sum[:])[:16])
}

// StagingDir returns the directory outside dir that New, run as root,
// keeps the lists and downloads of the Env in dir in, or "" when there is
// none.
func StagingDir(dir string) string {
	p := stageDir(systemStageRoot, dir)
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
		return ""
	}
	return p
}

// pruneStages removes the staging directories under root other than keep
// whose cache is gone (their owner file names a missing directory), once
// unused for an hour.
func pruneStages(root, keep string) {
	des, _ := os.ReadDir(root)
	for _, de := range des {
		p := filepath.Join(root, de.Name())
		if !strings.HasPrefix(de.Name(), "apt-") || !de.IsDir() || p == keep {
			continue
		}
		if fi, err := de.Info(); err != nil || time.Since(fi.ModTime()) < time.Hour {
			continue
		}
		owner, err := os.ReadFile(filepath.Join(p, "owner"))
		if err != nil || !filepath.IsAbs(strings.TrimSpace(string(owner))) {
			continue
		}
		if _, err := os.Lstat(strings.TrimSpace(string(owner))); errors.Is(err, fs.ErrNotExist) {
			os.RemoveAll(p)
		}
	}
}

// untraversable returns "" when the user uid (group gid) may search every
// directory on the way to dir, else the outermost one that stops it and
// its mode ("/root is mode 0700").
func untraversable(dir string, uid, gid int) string {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err.Error()
	}
	real, _ = filepath.Abs(real)
	blocked := ""
	for p := real; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err.Error()
		}
		m := fi.Mode().Perm()
		ok := m&0o001 != 0
		if st, isUnix := fi.Sys().(*syscall.Stat_t); isUnix {
			ok = ok || (int(st.Uid) == uid && m&0o100 != 0) || (int(st.Gid) == gid && m&0o010 != 0)
		}
		if !ok {
			blocked = fmt.Sprintf("%s is mode %04o", p, m)
		}
		if p == filepath.Dir(p) {
			return blocked
		}
	}
}

// rootDir makes dir, or checks the one there: a real directory (not a
// link), root's, writable by nobody else, and searchable by all (0755).
func rootDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case !ok || st.Uid != 0:
		return fmt.Errorf("%s is not root's", dir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is writable by others (mode %04o)", dir, fi.Mode().Perm())
	case fi.Mode().Perm() != 0o755:
		return os.Chmod(dir, 0o755)
	}
	return nil
}

// aptDir makes dir a directory of _apt's with mode 0700, replacing
// anything else there. Its parent is root's, so nobody else can swap it.
func aptDir(dir string, id identity) error {
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
		if err := os.Remove(dir); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := os.Lchown(dir, id.aptUID, -1); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}
