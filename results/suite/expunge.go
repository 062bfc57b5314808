package suite

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"klab/guest/proto"
	"klab/internal/specfile"
)

// AllExpunges is the expunge file that applies to every configuration;
// a configuration's family has its own, named after the family.
const AllExpunges = "all.txt"

// maxExpungeFile bounds an expunge file's size.
const maxExpungeFile = 1 << 20

// Expunge is one line of an expunge file: tests klab does not run on a
// configuration, and why. The format (see the expunge directory's
// README.md):
//
//	# a comment, and blank lines, are skipped
//	generic/426                 -- file handles: the server does not export them
//	generic/4??  kernel<6.14    -- a reason is mandatory
//	generic/650  config=fuse-*  -- guards narrow where the line applies
//
// that is a test name or a glob (path.Match), guards, "--" and the
// reason. A guard is kernel<V, kernel<=V, kernel>V or kernel>=V with V
// a version of one to three numbers (6.14, 6.12.3), or config=GLOB on
// the configuration's name; a line applies when all its guards hold.
type Expunge struct {
	// Pattern is the test name or glob.
	Pattern string `json:"pattern"`
	// Reason says why the tests are not run.
	Reason string `json:"reason"`
	// Guards are the line's guards, as written.
	Guards []string `json:"guards,omitempty"`
	// File and Line are where the line is.
	File string `json:"file"`
	Line int    `json:"line"`
}

// Match reports whether the test named test is one e expunges.
func (e Expunge) Match(test string) bool {
	ok, _ := path.Match(e.Pattern, test)
	return ok
}

// Family is the configuration family of a configuration's name: the
// part before the first '-' (fuse-klab-uring is in the fuse family);
// its expunge file is Family(config) + ".txt".
func Family(config string) string {
	f, _, _ := strings.Cut(config, "-")
	return f
}

// LoadExpunges reads the expunge files that apply to config from fsys,
// AllExpunges and its family's (either may be missing), and returns the
// lines whose guards hold for config and kernelVersion (uname -r, such
// as 6.12.43+deb13-amd64). A guard on the kernel version holds when the
// version is unknown (empty, or not starting with a number): a test is
// then left out rather than failing for a reason already known. A bad
// line anywhere in the files read is an error (*specfile.Error) naming
// every bad line as file:line:col and what is allowed there.
func LoadExpunges(fsys fs.FS, config, kernelVersion string) ([]Expunge, error) {
	files := []string{AllExpunges}
	if fam := Family(config) + ".txt"; fam != AllExpunges && fam != ".txt" {
		files = append(files, fam)
	}
	kv, kvOK := parseVersion(kernelVersion)
	var out []Expunge
	var errs []error
	for _, name := range files {
		ents, err := readExpunges(fsys, name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			errs = append(errs, err)
			continue
		}
		for _, e := range ents {
			if guardsHold(e.Guards, config, kv, kvOK) {
				out = append(out, e)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// CheckExpunges reads every *.txt file of fsys and returns the problems
// of all of them, nil when every line is good.
func CheckExpunges(fsys fs.FS) error {
	names, err := fs.Glob(fsys, "*.txt")
	if err != nil {
		return fmt.Errorf("listing expunge files: %w", err)
	}
	var errs []error
	for _, n := range names {
		if _, err := readExpunges(fsys, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ApplyExpunges splits tests into those to run and those ex expunges,
// the latter as not-run Tests whose reason is "expunged: " and the
// first matching line's reason.
func ApplyExpunges(tests []string, ex []Expunge) (run []string, expunged []Test) {
	for _, t := range tests {
		i := -1
		for j, e := range ex {
			if e.Match(t) {
				i = j
				break
			}
		}
		if i < 0 {
			run = append(run, t)
			continue
		}
		expunged = append(expunged, Test{Name: t, Status: proto.TestNotRun,
			Reason: fmt.Sprintf("expunged: %s (%s:%d)", ex[i].Reason, ex[i].File, ex[i].Line)})
	}
	return run, expunged
}

// readExpunges reads and parses the expunge file name of fsys.
func readExpunges(fsys fs.FS, name string) ([]Expunge, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("expunge file: %w", err)
	}
	defer f.Close()
	data, err := readBounded(f, maxExpungeFile, "expunge file "+name)
	if err != nil {
		return nil, err
	}
	return ParseExpunges(name, string(data))
}

// expungeSyntax is what an expunge line looks like, for errors.
const expungeSyntax = `want "TEST-OR-GLOB [GUARD...] -- REASON"`

// ParseExpunges parses the text of an expunge file named file (the name
// its entries and problems carry). It returns every line's entry, guards
// unevaluated, or every problem at once as a *specfile.Error.
func ParseExpunges(file, text string) ([]Expunge, error) {
	ps := specfile.NewProblems(file)
	var out []Expunge
	for i, line := range strings.Split(text, "\n") {
		ln := i + 1
		if j := strings.IndexByte(line, '#'); j >= 0 {
			line = line[:j]
		}
		line = strings.TrimRight(line, " \t\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		head, reason, ok := strings.Cut(line, "--")
		if !ok {
			ps.Add(ln, len(line)+1, "no reason: %s", expungeSyntax)
			continue
		}
		reason = strings.TrimSpace(reason)
		if reason == "" {
			ps.Add(ln, len(head)+1, "empty reason after \"--\": %s", expungeSyntax)
			continue
		}
		fields := fieldsWithCols(head)
		if len(fields) == 0 {
			ps.Add(ln, 1, "no test before \"--\": %s", expungeSyntax)
			continue
		}
		e := Expunge{Pattern: fields[0].s, Reason: reason, File: file, Line: ln}
		if msg := checkPattern(e.Pattern); msg != "" {
			ps.Add(ln, fields[0].col, "%s", msg)
			continue
		}
		bad := false
		for _, g := range fields[1:] {
			if msg := checkGuard(g.s); msg != "" {
				ps.Add(ln, g.col, "%s", msg)
				bad = true
			}
			e.Guards = append(e.Guards, g.s)
		}
		if !bad {
			out = append(out, e)
		}
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// field is a word of a line and its 1-based column.
type field struct {
	s   string
	col int
}

// fieldsWithCols splits s at spaces and tabs, keeping each word's
// column.
func fieldsWithCols(s string) []field {
	var out []field
	start := -1
	for i := 0; i <= len(s); i++ {
		blank := i == len(s) || s[i] == ' ' || s[i] == '\t'
		switch {
		case !blank && start < 0:
			start = i
		case blank && start >= 0:
			out = append(out, field{s[start:i], start + 1})
			start = -1
		}
	}
	return out
}

// checkPattern says what is wrong with a test pattern, "" when nothing.
func checkPattern(p string) string {
	dir, id, ok := strings.Cut(p, "/")
	if _, err := path.Match(p, ""); err != nil || !ok || dir == "" || id == "" || strings.Contains(id, "/") {
		return fmt.Sprintf("bad test %q: want a test name or a glob such as generic/013 or generic/4??", p)
	}
	return ""
}

// versionOps are the comparisons a kernel guard takes, longest first.
var versionOps = []string{"<=", ">=", "<", ">"}

// checkGuard says what is wrong with a guard, "" when nothing.
func checkGuard(g string) string {
	const allowed = "want kernel<V, kernel<=V, kernel>V, kernel>=V (V such as 6.14) or config=GLOB"
	if glob, ok := strings.CutPrefix(g, "config="); ok {
		if _, err := path.Match(glob, ""); err != nil || glob == "" {
			return fmt.Sprintf("bad guard %q: bad glob; %s", g, allowed)
		}
		return ""
	}
	if rest, ok := strings.CutPrefix(g, "kernel"); ok {
		for _, op := range versionOps {
			if v, ok := strings.CutPrefix(rest, op); ok {
				if _, ok := parseGuardVersion(v); !ok {
					return fmt.Sprintf("bad guard %q: bad version %q; %s", g, v, allowed)
				}
				return ""
			}
		}
	}
	return fmt.Sprintf("bad guard %q: %s", g, allowed)
}

// guardsHold reports whether every guard holds for config and the
// kernel version kv (known when kvOK).
func guardsHold(guards []string, config string, kv [3]int, kvOK bool) bool {
	for _, g := range guards {
		if glob, ok := strings.CutPrefix(g, "config="); ok {
			if m, _ := path.Match(glob, config); !m {
				return false
			}
			continue
		}
		if !kvOK {
			continue
		}
		rest := strings.TrimPrefix(g, "kernel")
		for _, op := range versionOps {
			if v, ok := strings.CutPrefix(rest, op); ok {
				want, _ := parseGuardVersion(v)
				if !compareHolds(compareVersions(kv, want), op) {
					return false
				}
				break
			}
		}
	}
	return true
}

// compareHolds reports whether a comparison's result c (-1, 0, 1)
// satisfies op.
func compareHolds(c int, op string) bool {
	switch op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}

// compareVersions compares a and b: -1, 0 or 1.
func compareVersions(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// parseGuardVersion parses a guard's version: one to three numbers
// separated by dots, nothing else.
func parseGuardVersion(s string) ([3]int, bool) {
	v, n, rest := leadingVersion(s)
	return v, n > 0 && rest == ""
}

// parseVersion parses the numbers a kernel release starts with
// (6.12.43+deb13-amd64 is 6.12.43; 7.3.0-rc1 is 7.3.0).
func parseVersion(s string) ([3]int, bool) {
	v, n, _ := leadingVersion(s)
	return v, n > 0
}

// leadingVersion reads up to three dot-separated numbers at s's start;
// n is how many it read, rest what follows them.
func leadingVersion(s string) (v [3]int, n int, rest string) {
	rest = s
	for n < 3 {
		i := 0
		for i < len(rest) && i < 6 && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			break
		}
		v[n], _ = strconv.Atoi(rest[:i])
		n++
		rest = rest[i:]
		if n < 3 && len(rest) > 1 && rest[0] == '.' && rest[1] >= '0' && rest[1] <= '9' {
			rest = rest[1:]
			continue
		}
		break
	}
	return v, n, rest
}
