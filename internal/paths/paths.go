// Package paths says where klab keeps its cache and its results.
//
// The cache (kernels, initramfs images, the accelerator verdict) lives under
// $KLAB_CACHE_DIR, else $XDG_CACHE_HOME/klab, else ~/.cache/klab. Runs live
// under $KLAB_RUNS_DIR, else $XDG_DATA_HOME/klab/runs, else
// ~/.local/share/klab/runs. Nothing is ever written inside the repository.
package paths

import (
	"os"
	"path/filepath"
)

// CacheDir returns klab's cache directory (not created).
func CacheDir() string {
	if d := os.Getenv("KLAB_CACHE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "klab")
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "klab")
	}
	return filepath.Join(os.TempDir(), "klab-cache")
}

// RunsDir returns the default directory for run results (not created).
func RunsDir() string {
	if d := os.Getenv("KLAB_RUNS_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "klab", "runs")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "klab", "runs")
	}
	return filepath.Join(os.TempDir(), "klab-runs")
}
