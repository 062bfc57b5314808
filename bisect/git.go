package bisect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"klab/internal/proc"
	"klab/internal/specfile"
)

// gitTimeout bounds one git command.
const gitTimeout = 10 * time.Minute

// gitEnv is the environment of every git command of a bisection: no
// user or system configuration (hooks, aliases, pagers), messages in
// English (they are parsed), no optional locks in the user's tree, and
// no repository above dir.
func gitEnv(dir string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GIT_") || strings.HasPrefix(kv, "LC_ALL=") || strings.HasPrefix(kv, "LANG=") || strings.HasPrefix(kv, "LANGUAGE=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"LC_ALL=C", "LANGUAGE=",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir),
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
	)
}

// git runs git in dir and returns its stdout and stderr together.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	var out bytes.Buffer
	_, err := proc.Run(ctx, proc.Opts{Dir: dir, Env: gitEnv(dir), Timeout: gitTimeout, Stdout: &out, Stderr: &out},
		append([]string{"git"}, args...)...)
	return out.String(), err
}

// gitOut runs git in dir and returns its stdout alone, trimmed.
func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := proc.Run(ctx, proc.Opts{Dir: dir, Env: gitEnv(dir), Timeout: gitTimeout}, append([]string{"git"}, args...)...)
	return strings.TrimSpace(string(out)), err
}

// Endpoints are a bisection's good and bad commits in the user's tree.
type Endpoints struct {
	// Tree is the top of the user's git tree.
	Tree string
	// Good and Bad are the full commit hashes.
	Good, Bad string
	// Commits counts the commits in good..bad.
	Commits int
}

// CheckTree checks, reading the user's tree only, that tree is a git
// tree in which good and bad name commits, that good is an ancestor of
// bad and not bad itself, and returns them resolved. Every problem is a
// *specfile.BadInputError naming the flag.
func CheckTree(ctx context.Context, tree, good, bad string) (*Endpoints, error) {
	bi := func(format string, args ...any) error {
		return &specfile.BadInputError{Err: fmt.Errorf(format, args...)}
	}
	if tree == "" {
		return nil, bi("--tree: give the git kernel tree to bisect")
	}
	abs, err := filepath.Abs(tree)
	if err != nil {
		return nil, bi("--tree %s: %w", tree, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, bi("--tree %s: not a directory", tree)
	}
	top, err := gitOut(ctx, abs, "rev-parse", "--show-toplevel")
	if err != nil || top == "" {
		return nil, bi("--tree %s: not a git tree (klab bisects the commits of a git tree)", tree)
	}
	e := &Endpoints{Tree: top}
	var errs []error
	for _, r := range []struct {
		flag, rev string
		out       *string
	}{{"--good", good, &e.Good}, {"--bad", bad, &e.Bad}} {
		if r.rev == "" {
			errs = append(errs, fmt.Errorf("%s: give a commit of %s", r.flag, top))
			continue
		}
		if strings.HasPrefix(r.rev, "-") {
			errs = append(errs, fmt.Errorf("%s %q: not a revision", r.flag, r.rev))
			continue
		}
		sha, err := gitOut(ctx, top, "rev-parse", "--verify", "--quiet", "--end-of-options", r.rev+"^{commit}")
		if err != nil || sha == "" {
			errs = append(errs, fmt.Errorf("%s %s: no such commit in %s", r.flag, r.rev, top))
			continue
		}
		*r.out = sha
	}
	if err := errors.Join(errs...); err != nil {
		return nil, &specfile.BadInputError{Err: err}
	}
	if e.Good == e.Bad {
		return nil, bi("--good %s and --bad %s are the same commit %.12s: nothing to bisect", good, bad, e.Good)
	}
	if _, err := gitOut(ctx, top, "merge-base", "--is-ancestor", e.Good, e.Bad); err != nil {
		return nil, bi("--good %s (%.12s) is not an ancestor of --bad %s (%.12s): klab bisects good..bad, a range where the bad commit descends from the good one", good, e.Good, bad, e.Bad)
	}
	n, err := gitOut(ctx, top, "rev-list", "--count", e.Good+".."+e.Bad)
	if err != nil {
		return nil, fmt.Errorf("count the commits of %.12s..%.12s: %w", e.Good, e.Bad, err)
	}
	e.Commits, _ = strconv.Atoi(n)
	return e, nil
}

// repo is the bisection's own clone of the user's tree: it borrows the
// user's objects (--shared) and has no checkout, and git bisect runs in
// it with --no-checkout, so that nothing of the user's tree, refs or
// bisection state is ever written.
type repo struct {
	dir string
}

// cloneRepo makes a fresh clone of tree at dir, replacing what is there.
func cloneRepo(ctx context.Context, tree, dir string) (*repo, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("scratch clone: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("scratch clone: %w", err)
	}
	if out, err := git(ctx, filepath.Dir(dir), "clone", "--quiet", "--shared", "--no-checkout", tree, dir); err != nil {
		return nil, fmt.Errorf("clone %s: %w: %s", tree, err, strings.TrimSpace(out))
	}
	return &repo{dir: dir}, nil
}

// state is where git's bisection stands after a command.
type state struct {
	// Next is the commit to test next; empty when the bisection ended.
	Next string
	// Left is how many revisions are left after Next; Steps roughly how
	// many steps that takes.
	Left, Steps int
	// FirstBad is the first bad commit, when git found it.
	FirstBad string
	// Candidates are the commits one of which is the first bad one, when
	// only skipped commits are left to test.
	Candidates []string
}

// done reports whether the bisection ended.
func (s state) done() bool { return s.FirstBad != "" || len(s.Candidates) > 0 }

var (
	firstBadRe  = regexp.MustCompile(`(?m)^([0-9a-f]{40,64}) is the first bad commit`)
	bisectingRe = regexp.MustCompile(`(?m)^Bisecting: (\d+) revisions? left to test after this \(roughly (\d+) steps?\)`)
	shaLineRe   = regexp.MustCompile(`^[0-9a-f]{40,64}$`)
)

// onlySkipped is what git bisect prints when only skipped commits are
// left to test.
const onlySkipped = "There are only 'skip'ped commits left to test."

// parseState reads git bisect's output; next reads BISECT_HEAD.
func parseState(out string) state {
	var s state
	if m := firstBadRe.FindStringSubmatch(out); m != nil {
		s.FirstBad = m[1]
		return s
	}
	if i := strings.Index(out, onlySkipped); i >= 0 {
		for _, l := range strings.Split(out[i:], "\n") {
			if l = strings.TrimSpace(l); shaLineRe.MatchString(l) {
				s.Candidates = append(s.Candidates, l)
			}
		}
		return s
	}
	if m := bisectingRe.FindStringSubmatch(out); m != nil {
		s.Left, _ = strconv.Atoi(m[1])
		s.Steps, _ = strconv.Atoi(m[2])
	}
	return s
}

// bisect runs a git bisect command and returns where the bisection
// stands. git exits non-zero when only skipped commits are left: that
// is an end, not an error.
func (r *repo) bisect(ctx context.Context, args ...string) (state, error) {
	out, err := git(ctx, r.dir, append([]string{"bisect"}, args...)...)
	s := parseState(out)
	if err != nil && !s.done() {
		return s, fmt.Errorf("git bisect %s: %w", args[0], err)
	}
	if s.done() {
		return s, nil
	}
	next, err := gitOut(ctx, r.dir, "rev-parse", "--verify", "BISECT_HEAD")
	if err != nil || !shaLineRe.MatchString(next) {
		return s, fmt.Errorf("git bisect %s: no next commit (BISECT_HEAD): %v: %s", args[0], err, strings.TrimSpace(out))
	}
	s.Next = next
	return s, nil
}

// start starts git's bisection of good..bad without a checkout.
func (r *repo) start(ctx context.Context, bad, good string) (state, error) {
	return r.bisect(ctx, "start", "--no-checkout", bad, good)
}

// mark tells git the verdict (good, bad or skip) of commit.
func (r *repo) mark(ctx context.Context, v Verdict, commit string) (state, error) {
	switch v {
	case Good, Bad, Skip:
	default:
		return state{}, fmt.Errorf("mark %.12s: verdict %q is not good, bad or skip", commit, v)
	}
	return r.bisect(ctx, string(v), commit)
}

// log is git bisect log.
func (r *repo) log(ctx context.Context) (string, error) {
	out, err := gitOut(ctx, r.dir, "bisect", "log")
	if err != nil {
		return "", fmt.Errorf("git bisect log: %w", err)
	}
	return out + "\n", nil
}

// commit describes sha.
func (r *repo) commit(ctx context.Context, sha string) (Commit, error) {
	out, err := gitOut(ctx, r.dir, "log", "-1", "--no-color", "--format=%s%x00%an <%ae>%x00%aI", sha, "--")
	if err != nil {
		return Commit{SHA: sha}, fmt.Errorf("describe %.12s: %w", sha, err)
	}
	parts := strings.SplitN(out, "\x00", 3)
	c := Commit{SHA: sha, Subject: parts[0]}
	if len(parts) == 3 {
		c.Author, c.Date = parts[1], parts[2]
	}
	return c, nil
}
