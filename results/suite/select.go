package suite

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"klab/results/suite/statusline"
)

// SelectArgs are the choices check takes for which tests to run.
type SelectArgs struct {
	// Tests are test names or globs (generic/013, generic/4??), check's
	// test arguments.
	Tests []string
	// Groups are groups to run (check -g): a group of every directory
	// (quick), or of one (generic/quick); "all" is every test.
	Groups []string
	// ExcludeGroups are groups to leave out (check -x).
	ExcludeGroups []string
	// Exclude are tests to leave out (check -e): a name leaves out that
	// test and the tests whose names continue it after a non-word
	// character (generic/001 leaves out generic/001-foo), as check does.
	Exclude []string
	// ExactOrder keeps the tests in the order given (check
	// --exact-order) instead of sorting them.
	ExactOrder bool
}

// Select returns the tests to run, as check would choose them. all are
// the tree's tests that apply to the configuration (those of generic/
// and of the file system's own directory); groups maps each group name
// to its tests (ReadGroups). Tests named, and the tests of the groups
// given, are taken (the group "auto" when neither is given; "all"
// without named tests is every test of all); then the tests of
// ExcludeGroups and those matching Exclude are left out. The result is
// sorted and without repeats unless ExactOrder. A test or glob that
// names no test of all, or a group with no test of all, is an error
// (check warns and goes on, or fails, for them).
func Select(all []string, groups map[string][]string, args SelectArgs) ([]string, error) {
	known := map[string]bool{}
	for _, t := range all {
		known[t] = true
	}
	var list []string
	var errs []error
	for _, p := range args.Tests {
		n := 0
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("test %q: bad glob", p))
			continue
		}
		for _, t := range all {
			if ok, _ := path.Match(p, t); ok {
				list = append(list, t)
				n++
			}
		}
		if n == 0 {
			errs = append(errs, fmt.Errorf("test %q: no such test in the fstests tree", p))
		}
	}
	gs := args.Groups
	if len(gs) == 0 && len(args.Tests) == 0 {
		gs = []string{"auto"}
	}
	for _, g := range gs {
		if g == "all" && len(args.Tests) == 0 {
			list = append(list, all...)
			continue
		}
		ts := groupTests(groups, g, known)
		if len(ts) == 0 {
			errs = append(errs, fmt.Errorf("group %q is empty or not defined", g))
		}
		list = append(list, ts...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("selecting tests: %w", err)
	}
	drop := map[string]bool{}
	for _, g := range args.ExcludeGroups {
		for _, t := range groupTests(groups, g, known) {
			drop[t] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, t := range list {
		if drop[t] || seen[t] || excluded(t, args.Exclude) {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	if !args.ExactOrder {
		slices.Sort(out)
	}
	return out, nil
}

// groupTests are the tests of group g that are known: g names a group
// in every directory, or DIR/GROUP one in DIR only.
func groupTests(groups map[string][]string, g string, known map[string]bool) []string {
	dir, name, sub := strings.Cut(g, "/")
	if !sub {
		name = g
	}
	var out []string
	for _, t := range groups[name] {
		if known[t] && (!sub || strings.HasPrefix(t, dir+"/")) {
			out = append(out, t)
		}
	}
	return out
}

// excluded reports whether check -e with ex leaves test out: an entry
// matches the test's name and what follows it is the end or not a word
// character (check's "^name\b").
func excluded(test string, ex []string) bool {
	for _, e := range ex {
		e = strings.TrimSpace(e)
		if e == "" || !strings.HasPrefix(test, e) {
			continue
		}
		if len(test) == len(e) || !isWord(test[len(e)]) {
			return true
		}
	}
	return false
}

// isWord reports whether c is a regexp word character.
func isWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// ReadGroups reads the group.list files of an fstests tree (built: the
// build generates them with tools/mkgroupfile) under treeDir's tests/,
// and returns every test they list, sorted, and each group's tests.
func ReadGroups(treeDir string) (tests []string, groups map[string][]string, err error) {
	return ReadGroupsFS(os.DirFS(treeDir))
}

// maxGroupList bounds one group.list file.
const maxGroupList = 4 << 20

// ReadGroupsFS is ReadGroups on a tree's file system.
func ReadGroupsFS(tree fs.FS) (tests []string, groups map[string][]string, err error) {
	files, err := fs.Glob(tree, "tests/*/group.list")
	if err != nil {
		return nil, nil, fmt.Errorf("reading fstests groups: %w", err)
	}
	if len(files) == 0 {
		return nil, nil, errors.New("reading fstests groups: no tests/*/group.list; is the fstests tree built?")
	}
	groups = map[string][]string{}
	for _, f := range files {
		dir := path.Base(path.Dir(f))
		if err := readGroupList(tree, f, dir, &tests, groups); err != nil {
			return nil, nil, err
		}
	}
	slices.Sort(tests)
	return tests, groups, nil
}

// readGroupList reads one group.list: comments from '#', then lines of
// a test's ID followed by its groups ("001 rw dir udf auto quick").
func readGroupList(tree fs.FS, file, dir string, tests *[]string, groups map[string][]string) error {
	f, err := tree.Open(file)
	if err != nil {
		return fmt.Errorf("reading fstests groups: %w", err)
	}
	defer f.Close()
	data, err := readBounded(f, maxGroupList, file)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(nil, len(data)+1)
	for ln := 1; sc.Scan(); ln++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name := dir + "/" + fields[0]
		if !statusline.ValidName(name) {
			return fmt.Errorf("reading fstests groups: %s:%d: bad test %q", file, ln, oneLine(fields[0]))
		}
		*tests = append(*tests, name)
		for _, g := range fields[1:] {
			groups[g] = append(groups[g], name)
		}
	}
	return sc.Err()
}
