package debian

import (
	"context"
	"errors"
)

// PinnedUnavailableError is Fetch's error for a reference pinned to one
// package version (debian:<kernel release>=<package version>, as klab
// rerun pins the kernels of a run) that klab's cache lacks and the
// archive cannot supply: the archive no longer lists that version (Debian
// drops a backports version within weeks of the next one), the mirror
// cannot be reached, or the download fails. A run bundle carries the
// kernel instead; the error says how to make and use one.
type PinnedUnavailableError struct {
	// Package is the image package, linux-image-<kernel release>.
	Package string
	// Version is the pinned package version.
	Version string
	// Err is why the fetch failed.
	Err error
}

// Error names the package and version and the way out, then the cause
// (which may run over several lines of apt's output).
func (e *PinnedUnavailableError) Error() string {
	return "Debian kernel " + e.Package + " version " + e.Version + " is not in klab's cache and cannot be fetched; " +
		bundleHint + ": " + e.Err.Error()
}

// bundleHint says how a run bundle brings a run's kernels to a machine
// that cannot fetch them.
const bundleHint = "a run bundle carries the kernel (`klab runs pack RUN` on the machine that made the run, " +
	"then `klab rerun FILE` or `klab runs unpack FILE` here)"

// Unwrap returns the cause.
func (e *PinnedUnavailableError) Unwrap() error { return e.Err }

// unavailable is err of a failed fetch of r from the archive, as Fetch
// returns it: a PinnedUnavailableError when r pins a package version,
// else err unchanged. An interrupted fetch keeps its own error.
func (r debianRef) unavailable(ctx context.Context, err error) error {
	var pe *PinnedUnavailableError
	if err == nil || r.PkgVersion == "" || ctx.Err() != nil || errors.As(err, &pe) {
		return err
	}
	return &PinnedUnavailableError{Package: "linux-image-" + r.Release, Version: r.PkgVersion, Err: err}
}
