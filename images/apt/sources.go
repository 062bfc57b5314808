// Package apt runs apt-get and apt-cache for klab with a private
// configuration under a directory of klab's cache, so that the host's apt
// state is never touched: it owns finding the Debian mirror in the host's
// apt sources, the private sources list and package lists, the one lock
// that every apt call holds, and apt's download sandbox.
package apt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// MirrorEnv is the environment variable that overrides the Debian mirror
// read from the host's apt sources.
const MirrorEnv = "KLAB_DEBIAN_MIRROR"

// ErrNoMirror is ResolveMirror's error when nothing names a Debian
// mirror.
var ErrNoMirror = errors.New("no Debian mirror configured")

// ResolveMirror returns the Debian archive URI klab should use: uri when
// it is non-empty, else $KLAB_DEBIAN_MIRROR, else the mirror named by the
// apt sources under root ("" means "/", the host's own; see debianMirror).
func ResolveMirror(uri, root string) (string, error) {
	if uri = strings.TrimSpace(uri); uri != "" {
		return checkMirrorURI(uri, "mirror")
	}
	if env := strings.TrimSpace(os.Getenv(MirrorEnv)); env != "" {
		return checkMirrorURI(env, MirrorEnv)
	}
	if root == "" {
		root = "/"
	}
	return debianMirror(root)
}

// mirrorSchemes are the URI schemes a Debian mirror may have.
var mirrorSchemes = []string{"http", "https", "file", "mirror+http", "mirror+https", "mirror+file"}

// checkMirrorURI is CheckMirrorURI with an error that starts with from,
// where uri came from.
func checkMirrorURI(uri, from string) (string, error) {
	u, err := CheckMirrorURI(uri)
	if err != nil {
		return "", fmt.Errorf("%s %w", from, err)
	}
	return u, nil
}

// CheckMirrorURI accepts a mirror URI with a known scheme and nothing that
// could end it or start another field where klab writes it (a sources
// line, apt's configuration): no white space of any kind, no control
// character, no quote, bracket or '#'. It returns uri without a trailing
// slash; its error starts with uri quoted, for the caller to say where it
// came from.
func CheckMirrorURI(uri string) (string, error) {
	bad := func() (string, error) {
		return "", fmt.Errorf("%q is not a usable mirror URI: want scheme://host/path with scheme %s, and no spaces, control characters, quotes, brackets or '#'",
			uri, strings.Join(mirrorSchemes, ", "))
	}
	scheme, rest, ok := strings.Cut(uri, ":")
	switch {
	case !ok || !slices.Contains(mirrorSchemes, scheme):
		return bad()
	case strings.HasSuffix(scheme, "file"):
		// file:/path and file:///path
		if !strings.HasPrefix(rest, "/") || strings.Trim(rest, "/") == "" {
			return bad()
		}
	case !strings.HasPrefix(rest, "//") || len(rest) == 2:
		return bad()
	}
	for _, r := range uri {
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("\"'[]#`\\{};", r) {
			return bad()
		}
	}
	return strings.TrimRight(uri, "/"), nil
}

// debianMirror reads the apt sources under root ("/" on a real host):
// root/etc/apt/sources.list, then root/etc/apt/sources.list.d/*.list
// (one-line format) and *.sources (deb822 format) in name order, as apt
// reads them. It returns the URI of the first enabled "deb" entry whose
// suites include a Debian release suite (bookworm, trixie-backports, sid,
// stable-updates, ...). Security suites are skipped: they live in a
// different archive. The URI is returned as written, without a trailing
// slash (it may be a "mirror+file:" URI, which apt understands).
func debianMirror(root string) (string, error) {
	entries, err := readAptSources(root)
	if err != nil {
		return "", err
	}
	if e := debianEntry(entries); e != nil {
		// The host's sources are checked like an override: klab writes
		// the URI into its own sources list.
		return checkMirrorURI(e.URIs[0], e.File)
	}
	return "", fmt.Errorf("%w: none of /etc/apt/sources.list, /etc/apt/sources.list.d/*.{list,sources} names a Debian archive; set %s to a mirror URI",
		ErrNoMirror, MirrorEnv)
}

// aptSource is one apt source entry: a one-line "deb" line or a deb822
// stanza.
type aptSource struct {
	File       string
	Types      []string
	URIs       []string
	Suites     []string
	Components []string
	// SignedBy is the Signed-By option when it names a keyring file.
	SignedBy string
}

// debianEntry returns the first deb entry for the Debian archive, or nil.
func debianEntry(entries []aptSource) *aptSource {
	for i := range entries {
		e := &entries[i]
		if !slices.Contains(e.Types, "deb") || len(e.URIs) == 0 || strings.HasPrefix(e.URIs[0], "cdrom:") {
			continue
		}
		for _, s := range e.Suites {
			if isDebianSuite(s) {
				return e
			}
		}
	}
	return nil
}

// isDebianCodename reports whether s is a Debian release codename or alias.
func isDebianCodename(s string) bool {
	switch s {
	case "buzz", "rex", "bo", "hamm", "slink", "potato", "woody", "sarge",
		"etch", "lenny", "squeeze", "wheezy", "jessie", "stretch", "buster",
		"bullseye", "bookworm", "trixie", "forky", "duke", "sid",
		"experimental", "oldoldstable", "oldstable", "stable", "testing",
		"unstable":
		return true
	}
	return false
}

// isDebianSuite reports whether suite is a suite of the main Debian archive
// (not debian-security, and not another distribution or vendor).
func isDebianSuite(suite string) bool {
	s := strings.TrimRight(suite, "/")
	if strings.Contains(s, "/") {
		return false // "buster/updates": the old security layout
	}
	for _, suffix := range []string{"-backports-sloppy", "-proposed-updates", "-backports", "-updates", "-proposed", ""} {
		if base, ok := strings.CutSuffix(s, suffix); ok && isDebianCodename(base) {
			return true
		}
	}
	return false
}

// readAptSources reads all source entries apt would read under root.
func readAptSources(root string) ([]aptSource, error) {
	etc := filepath.Join(root, "etc", "apt")
	var files []string
	main := filepath.Join(etc, "sources.list")
	if _, err := os.Stat(main); err == nil {
		files = append(files, main)
	}
	dir := filepath.Join(etc, "sources.list.d")
	des, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading apt sources: %w", err)
	}
	var parts []string
	for _, de := range des {
		n := de.Name()
		if (strings.HasSuffix(n, ".list") || strings.HasSuffix(n, ".sources")) && validPartName(n) && !de.IsDir() {
			parts = append(parts, n)
		}
	}
	sort.Strings(parts)
	for _, n := range parts {
		files = append(files, filepath.Join(dir, n))
	}
	var all []aptSource
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading apt sources: %w", err)
		}
		if strings.HasSuffix(f, ".sources") {
			all = append(all, parseDeb822Sources(f, data)...)
		} else {
			all = append(all, parseOneLineSources(f, data)...)
		}
	}
	return all, nil
}

// validPartName mirrors apt's rule: parts files are named with
// [A-Za-z0-9_.-] only, anything else is ignored.
func validPartName(n string) bool {
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// parseOneLineSources parses the one-line format:
//
//	deb [ option1=value1 option2=value2 ] uri suite [component1] ...
func parseOneLineSources(file string, data []byte) []aptSource {
	var out []aptSource
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		typ, rest, _ := strings.Cut(line, " ")
		if typ != "deb" && typ != "deb-src" {
			continue
		}
		rest = strings.TrimSpace(rest)
		var opts string
		if strings.HasPrefix(rest, "[") {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				continue
			}
			opts, rest = rest[1:end], rest[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		e := aptSource{File: file, Types: []string{typ}, URIs: []string{f[0]}, Suites: []string{f[1]}, Components: f[2:]}
		for _, o := range strings.Fields(opts) {
			if k, v, ok := strings.Cut(o, "="); ok && strings.EqualFold(k, "signed-by") {
				e.SignedBy = keyringPath(v)
			}
		}
		out = append(out, e)
	}
	return out
}

// parseDeb822Sources parses the deb822 format: stanzas of "Field: value"
// lines separated by blank lines; continuation lines start with white
// space; lines starting with '#' are comments. Stanzas with "Enabled: no"
// are skipped.
func parseDeb822Sources(file string, data []byte) []aptSource {
	var out []aptSource
	fields := map[string]string{}
	var last string
	flush := func() {
		defer func() { fields = map[string]string{}; last = "" }()
		if len(fields) == 0 || strings.EqualFold(strings.TrimSpace(fields["enabled"]), "no") {
			return
		}
		e := aptSource{
			File:       file,
			Types:      strings.Fields(fields["types"]),
			URIs:       strings.Fields(fields["uris"]),
			Suites:     strings.Fields(fields["suites"]),
			Components: strings.Fields(fields["components"]),
			SignedBy:   keyringPath(fields["signed-by"]),
		}
		if len(e.Types) > 0 && len(e.URIs) > 0 && len(e.Suites) > 0 {
			out = append(out, e)
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case strings.HasPrefix(line, "#"):
			continue
		case strings.TrimSpace(line) == "":
			flush()
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				fields[last] += "\n" + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}

// keyringPath returns v when it names a single keyring file (Signed-By may
// also hold fingerprints or an inline key block, which klab does not reuse).
func keyringPath(v string) string {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "/") && !strings.ContainsAny(v, " \t\n,") {
		return v
	}
	return ""
}

// Keyring returns the keyring the host's apt sources use for mirror, when
// they name one; otherwise "" (apt's trusted keys are used).
func Keyring(mirror string) string {
	entries, err := readAptSources("/")
	if err != nil {
		return ""
	}
	e := debianEntry(entries)
	if e == nil || e.SignedBy == "" || strings.TrimRight(e.URIs[0], "/") != mirror {
		return ""
	}
	if _, err := os.Stat(e.SignedBy); err != nil {
		return ""
	}
	return e.SignedBy
}
