// Package paths says where klab keeps its cache and its results.
//
// The cache (kernels, initramfs images, the accelerator verdict) lives under
// $KLAB_CACHE_DIR, else $XDG_CACHE_HOME/klab, else ~/.cache/klab. Runs live
// under $KLAB_RUNS_DIR, else $XDG_DATA_HOME/klab/runs, else
// ~/.local/share/klab/runs. The home directory is $HOME, else the user's
// passwd entry (services and `env -i` have no $HOME). klab never falls back
// to a shared directory such as /tmp: another user could plant files or
// symbolic links there that klab, often run as root, would follow. Nothing
// is ever written inside the repository.
package paths

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"syscall"
)

// home returns the user's home directory: $HOME, else the passwd entry's.
func home() string {
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	if u, err := user.Current(); err == nil && u.HomeDir != "" && u.HomeDir != "/" && filepath.IsAbs(u.HomeDir) {
		return u.HomeDir
	}
	return ""
}

// CacheDir returns klab's cache directory (not created), or "" when there
// is none: no KLAB_CACHE_DIR or XDG_CACHE_HOME, and no home directory.
func CacheDir() string {
	if d := os.Getenv("KLAB_CACHE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "klab")
	}
	if h := home(); h != "" {
		return filepath.Join(h, ".cache", "klab")
	}
	return ""
}

// RunsDir returns the default directory for run results (not created), or
// "" when there is none: no KLAB_RUNS_DIR or XDG_DATA_HOME, and no home
// directory.
func RunsDir() string {
	if d := os.Getenv("KLAB_RUNS_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "klab", "runs")
	}
	if h := home(); h != "" {
		return filepath.Join(h, ".local", "share", "klab", "runs")
	}
	return ""
}

// ErrNoDir is Check's error for an empty directory name.
var ErrNoDir = errors.New("no home directory to put it in ($HOME is unset and the user's passwd entry has none)")

// Check refuses a directory klab would write into that another user
// could have made: one that is not owned by the user klab runs as, or
// that others may write into (world-writable). A directory that does not
// exist yet passes: klab makes it, as its own. what names it in errors
// ("cache directory"); the flag and variable that set it are named too.
func Check(what, dir, flag, env string) error {
	if dir == "" {
		return fmt.Errorf("no %s: %w; set %s or give %s", what, ErrNoDir, env, flag)
	}
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s %s is not a directory", what, dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("%s %s belongs to user %d, not to the user klab runs as (%d): another user could have planted it; use a directory of your own (%s or %s)",
			what, dir, st.Uid, uid, env, flag)
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("%s %s is writable by every user (mode %04o): another user could plant files in it; chmod o-w it, or use another (%s or %s)",
			what, dir, fi.Mode().Perm(), env, flag)
	}
	return nil
}
