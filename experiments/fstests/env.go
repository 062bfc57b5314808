package fstests

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"klab/guest/proto"
	"klab/images/debian"
	imgfstests "klab/images/fstests"
	"klab/images/userspace"
	"klab/lab"
	labfstests "klab/lab/fstests"
	"klab/results"
)

// SrcEnv is the environment variable that names the fstests source when
// no --fstests-src is given.
const SrcEnv = "KLAB_FSTESTS_SRC"

// HostOptions say where NewEnv builds and boots.
type HostOptions struct {
	// Lab is klab's lab: caches, runs, mirror, accelerator.
	Lab *lab.Options
	// Src is the fstests source (a checkout or a tarball); empty means
	// $KLAB_FSTESTS_SRC.
	Src string
	// Progress receives the builds' progress lines.
	Progress io.Writer
	// Command is klab's own argv, for the guests' manifests.
	Command []string
}

// SourceError is an fstests source that is missing or not one: bad
// input, named by the caller's flag.
type SourceError struct{ Err error }

func (e *SourceError) Error() string { return e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// NewEnv builds (or finds in the cache) fstests and the default
// userspace, and returns the Env whose guests run them on klab's lab.
func NewEnv(ctx context.Context, o HostOptions) (Env, error) {
	src := o.Src
	if src == "" {
		src = os.Getenv(SrcEnv)
	}
	if src == "" {
		return Env{}, &SourceError{fmt.Errorf("no fstests source: klab builds fstests from your checkout or a tarball of one; name it with --fstests-src DIR|TARBALL (or $%s)", SrcEnv)}
	}
	s, err := imgfstests.OpenSource(ctx, src)
	if err != nil {
		return Env{}, &SourceError{err}
	}
	built, err := imgfstests.BuildSource(ctx, s, imgfstests.Options{CacheDir: o.Lab.CacheDir, Progress: o.Progress})
	if err != nil {
		return Env{}, err
	}
	img, err := userspace.Build(ctx, userspace.Spec{}, userspace.Options{
		Debian: debian.Options{Mirror: o.Lab.Mirror, CacheDir: o.Lab.CacheDir}, Progress: o.Progress,
	})
	if err != nil {
		return Env{}, err
	}
	if missing := img.Descriptor.MissingLibs(built.Descriptor.Libs); len(missing) > 0 {
		return Env{}, fmt.Errorf("fstests %s needs %s, which userspace %s lacks: its programs would not start in the guest (add the packages that provide them to userspace.LibraryPackages)",
			built.Descriptor.Key, strings.Join(missing, ", "), img.Descriptor.ID)
	}
	return Env{
		Tree:      built.Dir,
		Resolve:   o.Lab.ResolveKernel,
		Userspace: &img.Descriptor,
		Fstests:   &built.Descriptor,
		Guest: func(k *results.Kernel, cfg proto.FstestsConfig, timeout time.Duration, dir string) labfstests.Guest {
			return func(ctx context.Context, tests []string, iterations int) (*labfstests.Outcome, error) {
				if iterations > 1 {
					return nil, fmt.Errorf("fstests: %d iterations in one guest: a guest runs its tests once", iterations)
				}
				res, err := labfstests.RunGuest(ctx, o.Lab, labfstests.GuestRequest{
					Kernel: k, Userspace: img, Fstests: built, Config: cfg, Tests: tests,
					TestTimeout: timeout, RunsDir: dir, Command: o.Command,
				})
				if res == nil {
					return nil, err
				}
				return &labfstests.Outcome{
					Results: res.Tests, XUnit: res.XUnit, RunDir: res.RunDir,
					Stopped: res.Running, StoppedStatus: res.RunningStatus, StoppedReason: res.Stopped,
				}, err
			}
		},
	}, nil
}
