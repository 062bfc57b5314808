package build

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// b4Series is a series as `b4 am -o -` writes it: an mbox with the cover
// letter first, the patches out of order (as a mailing list may deliver
// them), and a reply that carries no diff.
const b4Series = `From git@z Thu Jan  1 00:00:00 1970
Subject: [PATCH v2 0/2] fuse: two small things
From: Ann Author <ann@example.org>
Date: Mon, 09 Nov 2026 10:00:00 +0100
Message-Id: <cover@example.org>

Two things. This cover letter has no diff, but it quotes one:

--- a/not/a/real/file
this is prose, not a diff

From git@z Thu Jan  1 00:00:00 1970
Subject: [PATCH v2 2/2] fuse: second
From: Ann Author <ann@example.org>
Date: Mon, 09 Nov 2026 10:00:02 +0100

Second change.

Signed-off-by: Ann Author <ann@example.org>
---
 fs/fuse/dev.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/fs/fuse/dev.c b/fs/fuse/dev.c
index 1111111..2222222 100644
--- a/fs/fuse/dev.c
+++ b/fs/fuse/dev.c
@@ -10,3 +10,3 @@ static int x;
 a
-b
+c
 d
-- 
2.47.0

From git@z Thu Jan  1 00:00:00 1970
Subject: [PATCH v2 1/2] fuse: first, with a long
 folded subject
From: Ann Author <ann@example.org>
Date: Mon, 09 Nov 2026 10:00:01 +0100

First change. A commit message may mention From in a line of its own:

From the FUSE docs: nothing.

---
diff --git a/fs/fuse/inode.c b/fs/fuse/inode.c
new file mode 100644
--- /dev/null
+++ b/fs/fuse/inode.c
@@ -0,0 +1,2 @@
+-- a line that starts like a header
++++ b/not/a/file
-- 
2.47.0
`

func writeTemp(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSplitMbox(t *testing.T) {
	msgs := SplitMbox([]byte(b4Series))
	if len(msgs) != 3 {
		t.Fatalf("SplitMbox: %d messages, want 3", len(msgs))
	}
	for i, m := range msgs {
		if !strings.HasPrefix(string(m), "From git@z ") {
			t.Errorf("message %d starts %q", i, string(m[:20]))
		}
	}
	if got := string(msgs[0]) + string(msgs[1]) + string(msgs[2]); got != b4Series {
		t.Error("the messages do not add up to the mbox")
	}
	// Not an mbox: one message.
	if got := SplitMbox([]byte("diff --git a/x b/x\n")); len(got) != 1 {
		t.Errorf("plain diff split into %d", len(got))
	}
}

func TestLoadPatchesMboxWithCoverLetter(t *testing.T) {
	f := writeTemp(t, t.TempDir(), "series.mbox", b4Series)
	s, err := LoadPatches([]string{f})
	if err != nil {
		t.Fatal(err)
	}
	var subjects, paths []string
	for _, p := range s.Patches {
		subjects = append(subjects, p.Subject)
		paths = append(paths, strings.TrimPrefix(p.Path, f))
		if !p.Mail || p.SHA256 == "" || p.File != f {
			t.Errorf("patch %s: Mail %v, SHA256 %q, File %q", p.Path, p.Mail, p.SHA256, p.File)
		}
	}
	want := []string{"[PATCH v2 1/2] fuse: first, with a long folded subject", "[PATCH v2 2/2] fuse: second"}
	if !reflect.DeepEqual(subjects, want) {
		t.Errorf("subjects = %q, want %q (the cover letter skipped, 1/2 before 2/2)", subjects, want)
	}
	if !reflect.DeepEqual(paths, []string{"#3", "#2"}) {
		t.Errorf("paths = %q, want the message numbers #3 #2", paths)
	}
	if len(s.Skipped) != 1 || !strings.Contains(s.Skipped[0], "0/2] fuse: two small things") {
		t.Errorf("Skipped = %q, want the cover letter", s.Skipped)
	}
	// The hunk body of the new file is not read as headers.
	if got := s.Patches[0].Files; !reflect.DeepEqual(got, []string{"fs/fuse/inode.c"}) {
		t.Errorf("files of 1/2 = %q", got)
	}
	if got := s.Patches[1].Hunks; len(got) != 1 || got[0].File != "fs/fuse/dev.c" || got[0].OldStart != 10 || got[0].N != 1 {
		t.Errorf("hunks of 2/2 = %+v", got)
	}
}

func TestLoadPatchesFormsAndOrder(t *testing.T) {
	dir := t.TempDir()
	plain := `Make the widget faster.

--- linux.orig/drivers/w.c	2026-01-01 00:00:00
+++ linux/drivers/w.c	2026-01-02 00:00:00
@@ -1,2 +1,2 @@
-slow
+fast
 end
`
	fp := writeTemp(t, dir, "plain.diff", plain)
	pdir := filepath.Join(dir, "series")
	writeTemp(t, pdir, "0002-b.patch", strings.Replace(plain, "widget", "gadget", 1))
	writeTemp(t, pdir, "0001-a.patch", plain)
	writeTemp(t, pdir, "README", "not a patch")
	s, err := LoadPatches([]string{fp, pdir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range s.Patches {
		got = append(got, filepath.Base(p.Path)+"|"+p.Subject)
		if p.Mail {
			t.Errorf("%s: a plain diff is not a mail", p.Path)
		}
		if !reflect.DeepEqual(p.Files, []string{"drivers/w.c"}) {
			t.Errorf("%s: files %q", p.Path, p.Files)
		}
	}
	want := []string{"plain.diff|Make the widget faster.", "0001-a.patch|Make the widget faster.", "0002-b.patch|Make the gadget faster."}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("patches = %q, want %q", got, want)
	}

	// A quilt series file decides the order.
	writeTemp(t, pdir, "series", "# quilt\n0002-b.patch -p1\n0001-a.patch\n")
	s, err = LoadPatches([]string{pdir})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Patches) != 2 || filepath.Base(s.Patches[0].Path) != "0002-b.patch" {
		t.Errorf("quilt order not followed: %+v", s.Patches)
	}

	// Every problem is reported at once.
	writeTemp(t, dir, "empty.patch", "just words\n")
	_, err = LoadPatches([]string{filepath.Join(dir, "missing.patch"), filepath.Join(dir, "empty.patch"), t.TempDir()})
	for _, w := range []string{"missing.patch", "empty.patch holds no diff", "holds no patches"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}

func TestParseDiffRenamesAndQuotes(t *testing.T) {
	d := `diff --git a/old name.c b/new name.c
similarity index 90%
rename from old name.c
rename to new name.c
--- a/old name.c
+++ b/new name.c
@@ -1 +1 @@
-x
+y
diff --git "a/tab\there.c" "b/tab\there.c"
deleted file mode 100644
--- "a/tab\there.c"
+++ /dev/null
@@ -1,2 +0,0 @@
-a
-b
`
	files, hunks := ParseDiff([]byte(d))
	if want := []string{"new name.c", "old name.c", "tab\there.c"}; !reflect.DeepEqual(files, want) {
		t.Errorf("files = %q, want %q", files, want)
	}
	if len(hunks) != 2 || hunks[0].File != "old name.c" || hunks[1].File != "tab\there.c" {
		t.Errorf("hunks = %+v", hunks)
	}
}
