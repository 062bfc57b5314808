package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"klab/internal/testenv"
)

// Outputs recorded from git 2.39 and GNU patch 2.7 on Debian 12.
const (
	gitAmFailure = `Applying: fuse: a hunk that does not apply
error: patch failed: fs/fuse/inode.c:2143
error: fs/fuse/inode.c: patch does not apply
Patch failed at 0001 fuse: a hunk that does not apply
hint: Use 'git am --show-current-patch=diff' to see the failed patch
When you have resolved this problem, run "git am --continue".
`
	gitApplyMissing = "error: fs/fuse/nope.c: No such file or directory\n"
	gitApplyCorrupt = "error: corrupt patch at line 14\n"

	patchHunkFailed = `checking file fs/fuse/inode.c
Hunk #1 succeeded at 2143.
Hunk #2 FAILED at 2201.
1 out of 2 hunks FAILED
`
	patchNoFile = `can't find file to patch at input line 4
Perhaps you used the wrong -p or --strip option?
The text leading up to this was:
--------------------------
|diff --git a/fs/fuse/nope.c b/fs/fuse/nope.c
|--- a/fs/fuse/nope.c
|+++ b/fs/fuse/nope.c
--------------------------
No file to patch.  Skipping patch.
1 out of 1 hunk ignored
`
	patchReversed = `checking file fs/fuse/inode.c
Reversed (or previously applied) patch detected!  Skipping patch.
1 out of 1 hunk ignored
`
)

func TestParseGitApplyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []HunkFailure
	}{
		{"am", gitAmFailure, []HunkFailure{{File: "fs/fuse/inode.c", Line: 2143, Reason: "does not apply"}}},
		{"missing", gitApplyMissing, []HunkFailure{{File: "fs/fuse/nope.c", Reason: "is not in the tree"}}},
		{"corrupt", gitApplyCorrupt, []HunkFailure{{Reason: "is corrupt at line 14 of the patch"}}},
		{"nothing", "fatal: something else\n", nil},
	} {
		if got := ParseGitApplyErrors(tc.out); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParsePatchErrors(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []HunkFailure
	}{
		{"hunk", patchHunkFailed, []HunkFailure{{File: "fs/fuse/inode.c", Hunk: 2, Line: 2201, Reason: "does not apply"}}},
		{"no file", patchNoFile, []HunkFailure{{File: "fs/fuse/nope.c", Reason: "is not in the tree"}}},
		{"reversed", patchReversed, []HunkFailure{{File: "fs/fuse/inode.c", Reason: "looks already applied (patch found it reversed)"}}},
	} {
		if got := ParsePatchErrors(tc.out); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestPatchErrorNamesPatchSubjectFileAndHunk(t *testing.T) {
	p := newPatch("/tmp/0002-fuse-x.patch", []byte(`From 1 Mon Sep 17 00:00:00 2001
From: A <a@b>
Subject: [PATCH 2/3] fuse: x

---
--- a/fs/fuse/inode.c
+++ b/fs/fuse/inode.c
@@ -10,2 +10,2 @@ int a;
 x
-y
+z
@@ -2143,6 +2143,7 @@ static int __init fuse_init(void)
 a
+b
 c
`))
	e := &PatchError{Patch: p, N: 2, Total: 3, Tool: "git am", Failures: resolveHunks(p, ParseGitApplyErrors(gitAmFailure))}
	msg := e.Error()
	for _, w := range []string{
		"patch 2/3 does not apply: /tmp/0002-fuse-x.patch",
		`"[PATCH 2/3] fuse: x"`,
		"fs/fuse/inode.c: hunk #2 at line 2143 (@@ -2143,6 +2143,7 @@ static int __init fuse_init(void)) does not apply",
		"nothing was built or cached",
	} {
		if !strings.Contains(msg, w) {
			t.Errorf("error lacks %q:\n%s", w, msg)
		}
	}
	// patch(1) numbers the hunk itself.
	fs := resolveHunks(p, ParsePatchErrors(patchHunkFailed))
	if len(fs) != 1 || fs[0].Header != "@@ -2143,6 +2143,7 @@ static int __init fuse_init(void)" {
		t.Errorf("patch(1) failure resolved to %+v", fs)
	}
}

// TestApplyPatch applies good and broken patches to small trees, with and
// without git.
func TestApplyPatch(t *testing.T) {
	testenv.RequiresCommand(t, "git")
	testenv.RequiresCommand(t, "patch")
	ctx := context.Background()
	orig := "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\n"
	good := `From 0123 Mon Sep 17 00:00:00 2001
From: A <a@example.org>
Subject: [PATCH] x: change line 4

---
diff --git a/x.c b/x.c
--- a/x.c
+++ b/x.c
@@ -2,5 +2,5 @@
 line 2
 line 3
-line 4
+line four
 line 5
 line 6
`
	broken := strings.Replace(strings.Replace(good, " line 6\n", " line six\n", 1), "change line 4", "broken", 1)
	for _, isGit := range []bool{true, false} {
		name := map[bool]string{true: "git", false: "plain"}[isGit]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			writeTemp(t, src, "x.c", orig)
			if isGit {
				for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"commit", "-q", "-m", "base"}} {
					if _, err := git(ctx, src, args...); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i, data := range []string{good, broken} {
				f := writeTemp(t, dir, "p.patch", data)
				p := newPatch(f, []byte(data))
				_, err := applyPatch(ctx, src, isGit, p, f, i+1, 2)
				if i == 0 {
					if err != nil {
						t.Fatalf("good patch: %v", err)
					}
					got, _ := os.ReadFile(filepath.Join(src, "x.c"))
					if !strings.Contains(string(got), "line four") {
						t.Fatalf("good patch not applied: %q", got)
					}
					continue
				}
				var pe *PatchError
				if !errors.As(err, &pe) {
					t.Fatalf("broken patch: err = %v, want a *PatchError", err)
				}
				msg := pe.Error()
				for _, w := range []string{"patch 2/2 does not apply", f, "[PATCH] x: broken", "x.c: hunk #1 at line 2"} {
					if !strings.Contains(msg, w) {
						t.Errorf("error lacks %q:\n%s", w, msg)
					}
				}
			}
			// The broken patch left the tree alone.
			got, _ := os.ReadFile(filepath.Join(src, "x.c"))
			if want := strings.Replace(orig, "line 4", "line four", 1); string(got) != want {
				t.Errorf("after the broken patch x.c = %q", got)
			}
		})
	}
}
