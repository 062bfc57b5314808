// Package check holds client-side checks of the kernel's FUSE behaviour
// against klab's own servers: request timeouts (Timeout), interrupt
// handling (Interrupt), and a server killed with requests in flight
// (Kill). Each check mounts what it needs under a scratch directory,
// drives the kernel from client threads, and returns a Result that says
// what it saw and whether that is what the kernel documents; the caller
// decides what to do with a failure.
//
// The checks need root and /dev/fuse. They run on any Linux host and, via
// `klab-agent fuse check`, inside a klab guest.
package check

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Result is what a check saw.
type Result struct {
	// Name names the check and its variant, e.g. "timeout/init".
	Name string `json:"name"`
	// Pass is true when everything matched the expectation.
	Pass bool `json:"pass"`
	// Problems lists each mismatch.
	Problems []string `json:"problems,omitempty"`
	// Notes are observations worth reporting either way.
	Notes []string `json:"notes,omitempty"`
	// Elapsed is the check's own wall time.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Details are the check's measurements.
	Details any `json:"details,omitempty"`
}

func (r *Result) problemf(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *Result) notef(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// finish sets Pass from Problems.
func (r *Result) finish(start time.Time) *Result {
	r.Pass = len(r.Problems) == 0
	r.Elapsed = time.Since(start)
	return r
}

// String is a one-line summary followed by problems and notes.
func (r *Result) String() string {
	var b strings.Builder
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "%s %s (%.1fs)", verdict, r.Name, r.Elapsed.Seconds())
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "\n  problem: %s", p)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n  note: %s", n)
	}
	return b.String()
}

// Errno names err's errno ("ECONNABORTED"), "ok" for nil, or the error
// text when it carries no errno.
func Errno(err error) string {
	if err == nil {
		return "ok"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
		return fmt.Sprintf("errno %d", int(e))
	}
	return err.Error()
}
