package images

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/u-root/mkuimage/cpio"

	"klab/internal/testenv"
)

func checkClosure(t *testing.T, files []ExtraFile, prog string) {
	t.Helper()
	seen := map[string]bool{}
	var dests []string
	for _, f := range files {
		if seen[f.Dest] {
			t.Errorf("%s twice", f.Dest)
		}
		seen[f.Dest] = true
		dests = append(dests, f.Dest)
		if _, err := os.Stat(f.Source); err != nil {
			t.Errorf("source of %s: %v", f.Dest, err)
		}
		if !filepath.IsAbs(f.Dest) {
			t.Errorf("dest %s is not absolute", f.Dest)
		}
	}
	if !seen["/usr/bin/"+prog] {
		t.Errorf("no /usr/bin/%s in %q", prog, dests)
	}
	if !seen["/lib64/ld-linux-x86-64.so.2"] {
		t.Errorf("no interpreter in %q", dests)
	}
	libc := false
	for _, d := range dests {
		if strings.HasSuffix(d, "/libc.so.6") {
			libc = true
		}
	}
	if !libc {
		t.Errorf("no libc.so.6 in %q", dests)
	}
	if !slices.IsSorted(dests) {
		t.Error("not sorted by Dest")
	}
}

func TestHostProgramLs(t *testing.T) {
	files, err := HostProgram("ls", LibSearch{})
	if err != nil {
		t.Fatal(err)
	}
	checkClosure(t, files, "ls")
}

// TestHostProgramFio checks the closure of Debian's fio, including a
// library found only through another library's DT_RUNPATH.
func TestHostProgramFio(t *testing.T) {
	testenv.RequiresCommand(t, "fio")
	files, err := HostProgram("fio", LibSearch{})
	if err != nil {
		t.Fatal(err)
	}
	checkClosure(t, files, "fio")
	var size int64
	runpathLib := false
	for _, f := range files {
		fi, _ := os.Stat(f.Source)
		size += fi.Size()
		if strings.Contains(f.Dest, "/ceph/") {
			runpathLib = true
		}
	}
	t.Logf("fio closure: %d files, %.1f MB", len(files), float64(size)/1e6)
	if !runpathLib {
		t.Error("no library from librbd's DT_RUNPATH (ceph/): RUNPATH is not followed")
	}
}

func TestHostProgramErrors(t *testing.T) {
	if _, err := HostProgram("no-such-program-klab", LibSearch{}); err == nil {
		t.Error("missing program: no error")
	}
	script := filepath.Join(t.TempDir(), "script")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	if _, err := HostProgram(script, LibSearch{}); err == nil {
		t.Error("a shell script is not ELF: no error")
	}
	// With no library directories, ls's libraries cannot be found.
	_, err := HostProgram("ls", LibSearch{Dirs: []string{t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "libc.so.6") {
		t.Errorf("err %v, want a missing libc", err)
	}
}

func TestLdSoConfDirs(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/ld.so.conf.d"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/ld.so.conf"), []byte("# top\ninclude /etc/ld.so.conf.d/*.conf\n/opt/lib # trailing comment\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/ld.so.conf.d/b.conf"), []byte("/b\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/ld.so.conf.d/a.conf"), []byte("\n/a1\n/a2\n"), 0o644)
	got := ldSoConfDirs(root, "/etc/ld.so.conf")
	if want := []string{"/a1", "/a2", "/b", "/opt/lib"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := ldSoConfDirs(root, "/etc/none.conf"); got != nil {
		t.Errorf("missing file gave %q", got)
	}
}

func TestSplitPath(t *testing.T) {
	got := splitPath([]string{"$ORIGIN/../lib:/x", "${ORIGIN}"}, "/opt/app/bin/prog")
	if want := []string{"/opt/app/bin/../lib", "/x", "/opt/app/bin"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestExtraRecords(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tool")
	os.WriteFile(src, []byte("#!/bin/sh\necho hi\n"), 0o750)
	recs, err := extraRecords([]ExtraFile{{Source: src, Dest: "/usr/bin/tool"}, {Source: src, Dest: "opt/t", Mode: 0o644}})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Name != "usr/bin/tool" || recs[0].Mode&0o777 != 0o750 || recs[1].Name != "opt/t" || recs[1].Mode&0o777 != 0o644 {
		t.Errorf("records %+v", recs)
	}
	if recs[0].Mode&cpio.S_IFMT != cpio.S_IFREG {
		t.Errorf("mode %o is not a regular file", recs[0].Mode)
	}
	if _, err := extraRecords([]ExtraFile{{Source: src, Dest: "/"}}); err == nil {
		t.Error("empty destination accepted")
	}
	if _, err := extraRecords([]ExtraFile{{Source: "/no/such/file", Dest: "/x"}}); err == nil {
		t.Error("missing source accepted")
	}
}
