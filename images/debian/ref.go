package debian

import (
	"fmt"
	"regexp"
	"strings"
)

// debianRef is a parsed "debian:..." reference.
type debianRef struct {
	// Series is "7.3" for debian:7.3, empty for an exact release.
	Series string
	// Release is the exact kernel release, e.g. "7.3.4+deb13-cloud-amd64".
	Release string
	// PkgVersion pins the package version, when given with "=".
	PkgVersion string
	// Flavour is the kernel flavour.
	Flavour string
}

// kverPattern matches the version part of a kernel release: 6.1.0-50,
// 7.3.4+deb13, 6.1.0-0.deb11.17.
const kverPattern = `[0-9]+\.[0-9]+(?:\.[0-9]+)*(?:-[0-9][0-9a-z.]*)?(?:\+[0-9a-z.~]+)?`

// Compiled once, never modified.
var (
	seriesRe  = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
	releaseRe = regexp.MustCompile(`^(` + kverPattern + `)(?:-([a-z][a-z0-9-]*))?$`)
	// kverOnlyRe matches the version part of a release, e.g. 6.1.0-50 or
	// 7.3.4+deb13, never a release with a flavour (6.1.0-50-cloud).
	kverOnlyRe = regexp.MustCompile(`^` + kverPattern + `$`)
)

func validFlavour(f string) bool {
	switch f {
	case "cloud-amd64", "amd64", "rt-amd64":
		return true
	}
	return false
}

// CheckRef returns the error Fetch gives for a reference it cannot parse
// (with flavour, the --flavour of the command; empty means
// DefaultFlavour), without a download: nil does not promise that the
// archive has the kernel.
func CheckRef(ref, flavour string) error {
	_, err := parseDebianRef(ref, flavour)
	return err
}

// parseDebianRef parses ref with or without its "debian:" prefix.
func parseDebianRef(ref, flavour string) (debianRef, error) {
	if flavour == "" {
		flavour = DefaultFlavour
	}
	if !validFlavour(flavour) {
		return debianRef{}, fmt.Errorf("unknown Debian kernel flavour %q: want cloud-amd64, amd64 or rt-amd64", flavour)
	}
	s := strings.TrimPrefix(ref, "debian:")
	s = strings.TrimPrefix(s, "linux-image-")
	s, pin, pinned := strings.Cut(s, "=")
	if pinned && pin == "" {
		return debianRef{}, fmt.Errorf("kernel %q: empty package version after '='", ref)
	}
	if seriesRe.MatchString(s) {
		if pinned {
			return debianRef{}, fmt.Errorf("kernel %q: a package version can only pin an exact release such as debian:7.3.4+deb13-cloud-amd64=7.3.4-1", ref)
		}
		return debianRef{Series: s, Flavour: flavour}, nil
	}
	m := releaseRe.FindStringSubmatch(s)
	if m == nil {
		return debianRef{}, fmt.Errorf("bad Debian kernel %q: want debian:<series> such as debian:7.3, or debian:<kernel release> such as debian:7.3.4+deb13-cloud-amd64", ref)
	}
	if m[2] != "" {
		if !validFlavour(m[2]) {
			return debianRef{}, fmt.Errorf("kernel %q: unknown flavour %q: want cloud-amd64, amd64 or rt-amd64", ref, m[2])
		}
		flavour = m[2]
	}
	return debianRef{Release: m[1] + "-" + flavour, PkgVersion: pin, Flavour: flavour}, nil
}

// ShortRef shortens a reference to an exact Debian kernel, such as klab
// rerun pins ("debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1"), for the
// labels of reports: to its series, "debian:7.3", and to its release
// without the package version, "debian:7.3.4+deb13-cloud-amd64". ok is
// false for any other reference (a series, a built kernel, a path).
func ShortRef(ref string) (series, release string, ok bool) {
	if !strings.HasPrefix(ref, "debian:") {
		return "", "", false
	}
	r, err := parseDebianRef(ref, "")
	if err != nil || r.Release == "" {
		return "", "", false
	}
	return "debian:" + seriesOf(r.Release), "debian:" + r.Release, true
}

// key is the reference's name in the alias index.
func (r debianRef) key() string {
	if r.Series != "" {
		return r.Series + "/" + r.Flavour
	}
	if r.PkgVersion != "" {
		return r.Release + "=" + r.PkgVersion
	}
	return r.Release
}

// String is the canonical reference.
func (r debianRef) String() string {
	if r.Series != "" {
		if r.Flavour != DefaultFlavour {
			return "debian:" + r.Series + " (" + r.Flavour + ")"
		}
		return "debian:" + r.Series
	}
	return "debian:" + r.key()
}

// imageCandidate is a linux-image package name that may match a reference.
type imageCandidate struct {
	name     string
	kver     string // e.g. 7.3.4+deb13 or 6.1.0-50
	release  string // kver-flavour
	unsigned bool
}

// matchImageName parses a linux-image package name for flavour; ok is false
// for other flavours, -dbg packages and meta packages.
func matchImageName(name, flavour string) (imageCandidate, bool) {
	rest, ok := strings.CutPrefix(name, "linux-image-")
	if !ok || strings.HasSuffix(rest, "-dbg") {
		return imageCandidate{}, false
	}
	c := imageCandidate{name: name}
	rest, c.unsigned = strings.CutSuffix(rest, "-unsigned")
	kver, ok := strings.CutSuffix(rest, "-"+flavour)
	if !ok || !kverOnlyRe.MatchString(kver) {
		return imageCandidate{}, false
	}
	c.kver, c.release = kver, rest
	return c, true
}

// inSeries reports whether kernel version kver belongs to series ("6.1"
// holds 6.1.0-50 but not 6.12.117+deb13).
func inSeries(kver, series string) bool {
	rest, ok := strings.CutPrefix(kver, series)
	return ok && (rest == "" || strings.ContainsRune(".-+", rune(rest[0])))
}

// seriesOf returns the major.minor of a kernel version.
func seriesOf(kver string) string {
	parts := strings.SplitN(kver, ".", 3)
	if len(parts) < 2 {
		return kver
	}
	minor := parts[1]
	if i := strings.IndexAny(minor, "-+"); i >= 0 {
		minor = minor[:i]
	}
	return parts[0] + "." + minor
}
