package debian

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/images/apt"
	"klab/images/internal/imagetest"
	"klab/images/keyed"
)

func TestParseDebianSourceRef(t *testing.T) {
	for ref, want := range map[string][2]string{
		"debian:7.3":                 {"7.3", ""},
		"6.12":                       {"6.12", ""},
		"debian:linux-source-6.1":    {"6.1", ""},
		"debian:7.3=7.3.4-1~bpo13+1": {"7.3", "7.3.4-1~bpo13+1"},
	} {
		s, pin, err := parseSourceRef(ref)
		if err != nil || s != want[0] || pin != want[1] {
			t.Errorf("parseSourceRef(%q) = %q, %q, %v", ref, s, pin, err)
		}
	}
	for _, bad := range []string{"debian:latest", "debian:7.3=", "debian:7.3.4"} {
		if _, _, err := parseSourceRef(bad); err == nil || !strings.Contains(err.Error(), "6.1, 6.12, 7.2, 7.3") {
			t.Errorf("parseSourceRef(%q): err = %v", bad, err)
		}
	}
}

func TestPickSource(t *testing.T) {
	lines := parseMadison([]byte(`linux-source-7.2 |   7.2.13-1 | http://mirror.example/debian sid/main amd64 Packages
linux-source-7.2 | 7.2.12-1~bpo13+1 | http://mirror.example/debian trixie-backports/main amd64 Packages
linux-source-7.2 |   7.2.13-1 | http://mirror.example/debian sid/main Sources
linux-source-7.2 | 7.2.14-1 | http://mirror.example/debian experimental/main amd64 Packages
`))
	l, err := pickSource(lines, "linux-source-7.2", "")
	if err != nil || l.version != "7.2.13-1" || l.suite != "sid" {
		t.Errorf("newest = %+v, %v; want 7.2.13-1 from sid (experimental is not searched)", l, err)
	}
	l, err = pickSource(lines, "linux-source-7.2", "7.2.12-1~bpo13+1")
	if err != nil || l.suite != "trixie-backports" {
		t.Errorf("pinned = %+v, %v", l, err)
	}
	if _, err := pickSource(lines, "linux-source-7.2", "7.2.1-1"); err == nil || !strings.Contains(err.Error(), "there are: 7.2.13-1 7.2.12-1~bpo13+1") {
		t.Errorf("missing pin: %v", err)
	}
	if _, err := pickSource(lines, "linux-source-5.10", ""); err == nil || !strings.Contains(err.Error(), "Debian ships kernel sources for 6.1, 6.12, 7.2, 7.3") {
		t.Errorf("missing series: %v", err)
	}
}

func TestDebianSourceCachedOffline(t *testing.T) {
	cache := t.TempDir()
	sdir := filepath.Join(cache, "sources", "debian")
	dir := filepath.Join(sdir, "linux-source-7.3_7.3.4-1")
	imagetest.WriteFile(t, filepath.Join(dir, "linux-source-7.3.tar.xz"), []byte("tarball"))
	imagetest.WriteFile(t, filepath.Join(dir, "source.json"), []byte(`{"package":"linux-source-7.3","version":"7.3.4-1","tarball":"linux-source-7.3.tar.xz","sha256":"abc"}`))
	if err := keyed.AddAlias(sdir, "7.3", filepath.Base(dir)); err != nil {
		t.Fatal(err)
	}
	// No mirror is configured for the test: a cached answer needs none.
	t.Setenv(apt.MirrorEnv, "")
	s, err := FetchSource(t.Context(), "debian:7.3", Options{CacheDir: cache})
	if err != nil || s.Tarball != filepath.Join(dir, "linux-source-7.3.tar.xz") || s.SHA256 != "abc" {
		t.Fatalf("FetchSource = %+v, %v", s, err)
	}
	if err := os.Remove(s.Tarball); err != nil {
		t.Fatal(err)
	}
	if _, ok := debianSourceCache(sdir, nil).Lookup("7.3"); ok {
		t.Error("an alias to a directory without its tarball answered")
	}
}
