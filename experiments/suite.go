package experiments

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"klab/experiments/fstests"
	"klab/internal/specfile"
	"klab/results/suite"
)

// suiteFields are the top-level fields a spec with a suite takes: the
// suite runs in klab's own guests, so that a guest shape, a matrix,
// rounds, setup, a server, workloads and checks do not apply.
var suiteFields = []string{"name", "description", "reference", "requires", "suite"}

// checkSuiteShape reports, for a spec with a suite, every top-level
// field that a suite experiment does not take.
func checkSuiteShape(ps *specfile.Problems, root *yaml.Node) {
	if specfile.Node(root, "suite") == root {
		return
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		if slices.Contains(suiteFields, k.Value) {
			continue
		}
		ps.At(k, "%s: a spec with suite runs the suite (fstests) in klab's own guests and takes no %s; with suite, give only %s (workloads and checks go in another experiment)",
			k.Value, k.Value, strings.Join(suiteFields, ", "))
	}
}

// testRe matches a test name or glob as a spec gives it: a test
// directory, a slash, and a name or a shell pattern.
var testRe = regexp.MustCompile(`^[a-z0-9_-]{1,64}/[A-Za-z0-9_*?\[\]!-]{1,64}$`)

// groupRe matches an fstests group name, alone or of one directory.
var groupRe = regexp.MustCompile(`^([a-z0-9_-]{1,64}/)?[A-Za-z0-9_-]{1,64}$`)

// maxSuiteTimeout bounds suite.fstests.test_timeout.
const maxSuiteTimeout = 24 * time.Hour

// validateSuite checks a spec's suite section.
func validateSuite(ps *specfile.Problems, root *yaml.Node, st *Suite) {
	at := func(path ...any) *yaml.Node {
		return specfile.Node(root, append([]any{"suite", "fstests"}, path...)...)
	}
	fs := st.Fstests
	if fs == nil {
		ps.At(specfile.Node(root, "suite"), "suite: want fstests: {config: %s, tests: [generic/013]}, the suite klab runs", fstests.Configs()[0])
		return
	}
	pre := "suite.fstests"
	known := slices.Contains(fstests.Configs(), fs.Config)
	cfg, _ := fstests.Config(fs.Config, "", "")
	if !known {
		ps.At(at("config"), "%s.config: %q is not an fstests configuration, want one of %s", pre, fs.Config, strings.Join(fstests.Configs(), ", "))
	} else {
		if _, err := fstests.Config(fs.Config, fs.MountOptions, ""); err != nil {
			ps.At(at("mount_options"), "%s.mount_options: %v", pre, err)
		}
		if _, err := fstests.Config(fs.Config, "", fs.MkfsOptions); err != nil {
			ps.At(at("mkfs_options"), "%s.mkfs_options: %v", pre, err)
		}
	}
	if len(fs.Tests) == 0 && len(fs.Groups) == 0 {
		ps.At(at(), "%s: no tests: give tests (generic/013) or groups (quick)", pre)
	}
	dirs := fstests.TestDirs(cfg)
	for _, l := range []struct {
		key   string
		names []string
	}{{"tests", fs.Tests}, {"exclude", fs.Exclude}} {
		for i, t := range l.names {
			d, _, _ := strings.Cut(t, "/")
			switch {
			case !testRe.MatchString(t):
				ps.At(at(l.key, i), "%s.%s: %q is not a test, want a directory and a name or a pattern (generic/013, generic/0??)", pre, l.key, t)
			case known && l.key == "tests" && !slices.Contains(dirs, d):
				ps.At(at(l.key, i), "%s.%s: %s is not a test of configuration %s, which runs those of %s", pre, l.key, t, fs.Config, strings.Join(dirs, " and "))
			}
		}
	}
	for _, l := range []struct {
		key   string
		names []string
	}{{"groups", fs.Groups}, {"exclude_groups", fs.ExcludeGroups}} {
		for i, g := range l.names {
			if !groupRe.MatchString(g) {
				ps.At(at(l.key, i), "%s.%s: %q is not a group name, want e.g. quick or generic/quick", pre, l.key, g)
			}
		}
	}
	if fs.TestTimeout < 0 || fs.TestTimeout > maxSuiteTimeout {
		ps.At(at("test_timeout"), "%s.test_timeout: %s is out of range, want a duration up to 24h (10m); leave it out for %s", pre, fs.TestTimeout, fstests.DefaultTestTimeout)
	}
	if fs.Reruns != nil && (*fs.Reruns < 0 || *fs.Reruns > 100) {
		ps.At(at("reruns"), "%s.reruns: %d is out of range, want 0..100 (0: none)", pre, *fs.Reruns)
	}
	if fs.Jobs < 0 || fs.Jobs > 64 {
		ps.At(at("jobs"), "%s.jobs: %d is out of range, want 1..64", pre, fs.Jobs)
	}
}

// fstestsRequest is the fstests request of the suite section fs, without
// kernels and run directory.
func fstestsRequest(fs *FstestsSuite) (fstests.Request, error) {
	cfg, err := fstests.Config(fs.Config, fs.MountOptions, fs.MkfsOptions)
	if err != nil {
		return fstests.Request{}, err
	}
	reruns := 0 // the suite's default
	if fs.Reruns != nil {
		reruns = *fs.Reruns
		if reruns == 0 {
			reruns = -1 // none
		}
	}
	return fstests.Request{
		Config: cfg, Jobs: fs.Jobs, TestTimeout: fs.TestTimeout, Reruns: reruns, NoExpunge: fs.NoExpunge,
		Select: suite.SelectArgs{Tests: fs.Tests, Groups: fs.Groups, ExcludeGroups: fs.ExcludeGroups, Exclude: fs.Exclude},
	}, nil
}

// describeSuite is a suite in a line, for progress.
func describeSuite(fs *FstestsSuite) string {
	what := append(slices.Clone(fs.Tests), fs.Groups...)
	return fmt.Sprintf("fstests, configuration %s: %s", fs.Config, strings.Join(what, " "))
}
