package build

import (
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
)

// PatchError says that a patch of the series does not apply to the tree.
type PatchError struct {
	// Patch is the patch that failed.
	Patch Patch
	// N is its position in the series (from 1), Total the series length.
	N, Total int
	// Tool is the command whose verdict is reported: "git am",
	// "git apply" or "patch -p1".
	Tool string
	// Failures are the files and hunks that failed, as far as the tool's
	// output says.
	Failures []HunkFailure
	// Output is the tool's output.
	Output string
	// Fuzz, when set, holds patch(1)'s report that the patch would apply
	// with fuzz ("Hunk #1 succeeded at 2143 with fuzz 2."): its context
	// no longer matches, and klab does not apply patches with fuzz.
	Fuzz []string
}

// HunkFailure is one file or hunk of a patch that did not apply.
type HunkFailure struct {
	// File is the tree-relative path, empty when the tool did not name
	// one.
	File string
	// Hunk is the hunk's number within the file (from 1), 0 when unknown.
	Hunk int
	// Line is the line of the original file where the hunk was expected,
	// 0 when unknown.
	Line int
	// Header is the hunk's "@@ ... @@" line, when known.
	Header string
	// Reason says what went wrong, e.g. "does not apply".
	Reason string
}

// String renders the failure as "file: hunk #n at line l (@@ ... @@) reason".
func (f HunkFailure) String() string {
	var b strings.Builder
	if f.File != "" {
		b.WriteString(f.File)
		b.WriteString(": ")
	}
	if f.Hunk > 0 {
		fmt.Fprintf(&b, "hunk #%d", f.Hunk)
		if f.Line > 0 {
			fmt.Fprintf(&b, " at line %d", f.Line)
		}
		if f.Header != "" {
			fmt.Fprintf(&b, " (%s)", f.Header)
		}
		b.WriteString(" ")
	} else if f.Line > 0 {
		fmt.Fprintf(&b, "the hunk at line %d ", f.Line)
	}
	b.WriteString(f.Reason)
	return b.String()
}

// Error names the patch, its subject, and the files and hunks that failed.
func (e *PatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "patch %d/%d does not apply: %s (%q)", e.N, e.Total, e.Patch.Path, e.Patch.Subject)
	for _, f := range e.Failures {
		b.WriteString("\n  ")
		b.WriteString(f.String())
	}
	if len(e.Failures) == 0 {
		if out := strings.TrimSpace(e.Output); out != "" {
			lines := strings.Split(out, "\n")
			if len(lines) > 8 {
				lines = lines[:8]
			}
			fmt.Fprintf(&b, "\n  %s said:\n    %s", e.Tool, strings.Join(lines, "\n    "))
		}
	}
	if len(e.Fuzz) > 0 {
		fmt.Fprintf(&b, "\n  patch -p1 would force it in with fuzz (%s), but its context does not match the tree", strings.Join(e.Fuzz, " "))
	}
	b.WriteString("\n  nothing was built or cached; fix the patch or rebase it onto the tree")
	return b.String()
}

// gitEnv is the environment for git in klab's own trees: no user or
// system configuration (hooks, signing, am options), a fixed identity,
// and no discovery of a repository above dir.
func gitEnv(dir string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GIT_") || strings.HasPrefix(kv, "LC_ALL=") || strings.HasPrefix(kv, "LANG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CEILING_DIRECTORIES="+filepath.Dir(dir),
		"GIT_AUTHOR_NAME=klab", "GIT_AUTHOR_EMAIL=klab@localhost",
		"GIT_COMMITTER_NAME=klab", "GIT_COMMITTER_EMAIL=klab@localhost",
		"GIT_TERMINAL_PROMPT=0",
	)
}

// git runs git in dir with gitEnv.
func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return proc.Run(ctx, proc.Opts{Dir: dir, Env: gitEnv(dir), Timeout: 30 * time.Minute}, append([]string{"git"}, args...)...)
}

// applyPatch applies p (number n of total, written at file) to the tree
// src. In a git tree (isGit) it uses git am, or for a plain diff git apply
// --index and a commit; otherwise git apply, falling back to patch -p1
// (which tolerates fuzz) when git apply refuses. It returns a note when
// the patch needed fuzz, and a *PatchError when it does not apply.
func applyPatch(ctx context.Context, src string, isGit bool, p Patch, file string, n, total int) (note string, err error) {
	fail := func(tool, out string, fs []HunkFailure) error {
		return &PatchError{Patch: p, N: n, Total: total, Tool: tool, Output: out, Failures: resolveHunks(p, fs)}
	}
	if isGit {
		if p.Mail {
			out, err := git(ctx, src, "am", "--quiet", "--no-3way", file)
			if err == nil {
				return "", nil
			}
			_, _ = git(ctx, src, "am", "--abort")
			msg := procOutput(out, err)
			if !strings.Contains(msg, "Patch format detection failed") && !strings.Contains(msg, "Patch is empty") {
				return "", fail("git am", msg, ParseGitApplyErrors(msg))
			}
		}
		out, err := git(ctx, src, "apply", "--index", file)
		if err != nil {
			msg := procOutput(out, err)
			return "", fail("git apply", msg, ParseGitApplyErrors(msg))
		}
		if _, err := git(ctx, src, "commit", "--quiet", "--no-verify", "-m", p.Subject); err != nil {
			return "", fmt.Errorf("committing %s: %w", p.Path, err)
		}
		return "", nil
	}
	out, gitErr := git(ctx, src, "apply", file)
	if gitErr == nil {
		return "", nil
	}
	gitMsg := procOutput(out, gitErr)
	// patch(1) takes some diffs git apply refuses. It runs without fuzz:
	// a hunk whose context does not match is an error, as with git. It
	// applies what it can and rejects the rest, so ask it first.
	argv := func(extra ...string) []string {
		return append(append([]string{"patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch", "--reject-file=-"},
			extra...), "-i", file)
	}
	pout, perr := proc.Run(ctx, proc.Opts{Dir: src, Timeout: 10 * time.Minute}, argv("--dry-run", "--fuzz=0")...)
	if perr != nil {
		fs := ParseGitApplyErrors(gitMsg)
		if pfs := ParsePatchErrors(procOutput(pout, perr)); len(pfs) > 0 {
			fs = pfs // patch(1) numbers the hunks
		}
		pe := fail("git apply and patch -p1", gitMsg+"\n"+procOutput(pout, perr), fs).(*PatchError)
		// Would it go in with fuzz? Say so: the fix is then a rebase.
		if fout, ferr := proc.Run(ctx, proc.Opts{Dir: src, Timeout: 10 * time.Minute}, argv("--dry-run")...); ferr == nil {
			pe.Fuzz = fuzzLines(string(fout))
		}
		return "", pe
	}
	pout, perr = proc.Run(ctx, proc.Opts{Dir: src, Timeout: 10 * time.Minute}, argv("--fuzz=0")...)
	if perr != nil {
		msg := procOutput(pout, perr)
		return "", fail("patch -p1", msg, ParsePatchErrors(msg))
	}
	if offs := fuzzLines(string(pout)); len(offs) > 0 {
		note = fmt.Sprintf("%s applied by patch -p1 (git apply refused it): %s", p.Path, strings.Join(offs, "; "))
	}
	return note, nil
}

// fuzzLines returns patch(1)'s "Hunk #n succeeded at L with fuzz F" and
// "... (offset N lines)" lines.
func fuzzLines(out string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Hunk #") && (strings.Contains(l, "with fuzz") || strings.Contains(l, "offset")) {
			ls = append(ls, strings.TrimSpace(l))
		}
	}
	return ls
}

// procOutput is a command's output: the stdout it returned, or the
// captured output of a *proc.Error.
func procOutput(stdout []byte, err error) string {
	var pe *proc.Error
	if errors.As(err, &pe) {
		return pe.Output
	}
	if err != nil {
		return string(stdout) + "\n" + err.Error()
	}
	return string(stdout)
}

// Patterns of git apply / git am errors.
var (
	gitPatchFailedRe = regexp.MustCompile(`^error: patch failed: (.+):(\d+)$`)
	gitNoApplyRe     = regexp.MustCompile(`^error: (.+): patch does not apply$`)
	gitMissingRe     = regexp.MustCompile(`^error: (.+): (No such file or directory|does not exist in index)$`)
	gitExistsRe      = regexp.MustCompile(`^error: (.+): already exists in (working directory|index)$`)
	gitCorruptRe     = regexp.MustCompile(`^error: corrupt patch at line (\d+)$`)
)

// ParseGitApplyErrors reads the output of a failed git apply or git am
// and returns what failed. "patch failed: f:L" and "f: patch does not
// apply" for the same file give one entry with the line.
func ParseGitApplyErrors(out string) []HunkFailure {
	var fs []HunkFailure
	has := func(file string) bool {
		for _, f := range fs {
			if f.File == file {
				return true
			}
		}
		return false
	}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case gitPatchFailedRe.MatchString(line):
			m := gitPatchFailedRe.FindStringSubmatch(line)
			n, _ := strconv.Atoi(m[2])
			fs = append(fs, HunkFailure{File: m[1], Line: n, Reason: "does not apply"})
		case gitNoApplyRe.MatchString(line):
			if f := gitNoApplyRe.FindStringSubmatch(line)[1]; !has(f) {
				fs = append(fs, HunkFailure{File: f, Reason: "does not apply"})
			}
		case gitMissingRe.MatchString(line):
			fs = append(fs, HunkFailure{File: gitMissingRe.FindStringSubmatch(line)[1], Reason: "is not in the tree"})
		case gitExistsRe.MatchString(line):
			fs = append(fs, HunkFailure{File: gitExistsRe.FindStringSubmatch(line)[1], Reason: "already exists, but the patch creates it"})
		case gitCorruptRe.MatchString(line):
			fs = append(fs, HunkFailure{Reason: "is corrupt at line " + gitCorruptRe.FindStringSubmatch(line)[1] + " of the patch"})
		case line == "Patch format detection failed.", strings.HasPrefix(line, "error: No valid patches in input"):
			fs = append(fs, HunkFailure{Reason: "is not a patch git understands (no diff found)"})
		}
	}
	return fs
}

// Patterns of patch(1) output.
var (
	patchFileRe    = regexp.MustCompile(`^(?:checking|patching) file (.+)$`)
	patchHunkRe    = regexp.MustCompile(`^Hunk #(\d+) FAILED at (\d+)`)
	patchNoFileRe  = regexp.MustCompile(`^can't find file to patch at input line \d+`)
	patchIndexRe   = regexp.MustCompile(`^\|(?:---|\+\+\+) (\S+)`)
	patchReverseRe = regexp.MustCompile(`^Reversed \(or previously applied\) patch detected`)
	patchBadRe     = regexp.MustCompile(`^patch: \*\*\*\* (malformed patch at line \d+|Only garbage was found in the patch input)`)
)

// ParsePatchErrors reads the output of a failed patch(1) run and returns
// what failed.
func ParsePatchErrors(out string) []HunkFailure {
	var fs []HunkFailure
	cur := ""
	missing := false
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case patchFileRe.MatchString(line):
			cur = strings.Trim(patchFileRe.FindStringSubmatch(line)[1], "'")
		case patchHunkRe.MatchString(line):
			m := patchHunkRe.FindStringSubmatch(line)
			h, _ := strconv.Atoi(m[1])
			l, _ := strconv.Atoi(m[2])
			fs = append(fs, HunkFailure{File: cur, Hunk: h, Line: l, Reason: "does not apply"})
		case patchNoFileRe.MatchString(line):
			missing = true
		case missing && patchIndexRe.MatchString(line):
			f := stripPrefix(patchIndexRe.FindStringSubmatch(line)[1])
			if f != "/dev/null" {
				fs = append(fs, HunkFailure{File: f, Reason: "is not in the tree"})
				missing = false
			}
		case patchReverseRe.MatchString(line):
			fs = append(fs, HunkFailure{File: cur, Reason: "looks already applied (patch found it reversed)"})
		case patchBadRe.MatchString(line):
			fs = append(fs, HunkFailure{Reason: "is not a valid patch: " + patchBadRe.FindStringSubmatch(line)[1]})
		}
	}
	return fs
}

// resolveHunks fills in the hunk numbers and headers of failures from the
// patch itself: git names the failing hunk by the line where it starts.
func resolveHunks(p Patch, fs []HunkFailure) []HunkFailure {
	for i := range fs {
		f := &fs[i]
		for _, h := range p.Hunks {
			if h.File != f.File {
				continue
			}
			if (f.Hunk > 0 && h.N == f.Hunk) || (f.Hunk == 0 && f.Line > 0 && h.OldStart == f.Line) {
				f.Hunk, f.Header = h.N, h.Header
				if f.Line == 0 {
					f.Line = h.OldStart
				}
				break
			}
		}
	}
	return fs
}
