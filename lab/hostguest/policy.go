package hostguest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"klab/guest/proto"
	"klab/lab"
)

// Facts are what the host policy needs to know of this host; tests fake
// them.
type Facts struct {
	// Root says klab runs as root (effective user ID 0).
	Root bool
	// FUSEURing is fuse's enable_uring parameter: "Y", "N", or "" when the
	// running kernel has none.
	FUSEURing string
}

// enableURing is fuse's module parameter that lets servers use
// FUSE-over-io_uring.
const enableURing = "/sys/module/fuse/parameters/enable_uring"

// HostFacts reads Facts of this host.
func HostFacts() Facts {
	f := Facts{Root: os.Geteuid() == 0}
	if b, err := os.ReadFile(enableURing); err == nil {
		f.FUSEURing = strings.TrimSpace(string(b))
	}
	return f
}

// ErrNotRoot is the refusal of a host run by a user other than root.
var ErrNotRoot = errors.New("a host run needs root: it mounts FUSE file systems on /dev/fuse, drops caches and runs in a private mount namespace (run klab as root, e.g. with sudo)")

// check returns every reason why req cannot run on a host with facts f,
// joined, and the notes a user should see before it runs (what it does to
// the host that a guest would keep to itself).
func check(req *lab.BootRequest, f Facts) (notes []string, err error) {
	var errs []error
	if !f.Root {
		errs = append(errs, ErrNotRoot)
	}
	for _, s := range req.Sysctls {
		errs = append(errs, fmt.Errorf("sysctl %s: a host run does not change this host's sysctls", s.Key))
	}
	if len(req.Modules) > 0 {
		errs = append(errs, fmt.Errorf("modules %s: a host run loads no kernel modules", strings.Join(req.Modules, ", ")))
	}
	if len(req.Shares) > 0 {
		errs = append(errs, errors.New("shares: a host run has no guest to share host directories with"))
	}
	if len(req.Files) > 0 {
		errs = append(errs, errors.New("files: a host run puts no files into its private root"))
	}
	for _, v := range []struct{ what, val string }{
		{"an icount setting", req.Icount}, {"a kernel command line", req.Cmdline}, {"QEMU arguments", strings.Join(req.QEMUArgs, " ")},
	} {
		if v.val != "" {
			errs = append(errs, fmt.Errorf("%s (%s): a host run has no VM", v.what, v.val))
		}
	}
	if req.MultiThreadTCG {
		errs = append(errs, errors.New("multi-threaded TCG: a host run has no VM"))
	}
	for _, steps := range [][]proto.Step{req.Steps, req.Prepare} {
		for i := range steps {
			errs = append(errs, stepProblems(&steps[i], f)...)
			for _, n := range stepNotes(&steps[i]) {
				if !slices.Contains(notes, n) {
					notes = append(notes, n)
				}
			}
		}
	}
	return notes, errors.Join(dedup(errs)...)
}

// stepProblems are the reasons why s, or a step it wraps, cannot run on a
// host with facts f.
func stepProblems(s *proto.Step, f Facts) []error {
	var errs []error
	for ; s != nil; s = fuseThen(s) {
		switch s.Kind {
		case proto.StepSysctl:
			errs = append(errs, fmt.Errorf("sysctl %s: a host run does not change this host's sysctls", s.Key))
		case proto.StepShare:
			errs = append(errs, errors.New("share step: a host run has no guest to share host directories with"))
		case proto.StepFUSE:
			if s.FUSE == nil || s.FUSE.Transport != proto.FUSETransportURing {
				continue
			}
			switch f.FUSEURing {
			case "Y":
			case "":
				errs = append(errs, errors.New("transport uring: this host's kernel has no FUSE-over-io_uring (fuse has no enable_uring parameter)"))
			default:
				errs = append(errs, fmt.Errorf("transport uring: fuse's enable_uring is off on this host, and a host run changes no module parameters; turn it on first, as root: echo Y > %s", enableURing))
			}
		}
	}
	return errs
}

// fuseThen is the step a FUSE step wraps, nil for any other.
func fuseThen(s *proto.Step) *proto.Step {
	if s.Kind != proto.StepFUSE || s.FUSE == nil {
		return nil
	}
	return s.FUSE.Then
}

// NoteDropCaches says what a step that drops caches does on a host.
const NoteDropCaches = "a step writes /proc/sys/vm/drop_caches: on a host run that drops the page cache of the whole host (allowed, as root)"

// stepNotes are what s does to the host that a user should know of.
func stepNotes(s *proto.Step) []string {
	var notes []string
	for ; s != nil; s = fuseThen(s) {
		if s.Kind == proto.StepExec && strings.Contains(strings.Join(s.Argv, " "), "drop_caches") {
			notes = append(notes, NoteDropCaches)
		}
	}
	return notes
}

// dedup drops errors whose text an earlier one has: the same refusal for
// every cell says nothing more.
func dedup(errs []error) []error {
	var out []error
	seen := map[string]bool{}
	for _, e := range errs {
		if e == nil || seen[e.Error()] {
			continue
		}
		seen[e.Error()] = true
		out = append(out, e)
	}
	return out
}
