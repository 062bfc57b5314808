package apt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"klab/internal/flock"
	"klab/internal/testenv"
)

// TestAptLock: every apt call waits for the one lock on the apt
// directory, which another klab process (here, the test) may hold, and
// Update's own apt call does not wait for itself.
func TestAptLock(t *testing.T) {
	e, err := New(filepath.Join(t.TempDir(), "apt"), Options{Mirror: "http://mirror.example/debian", StageRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := flock.Lock(context.Background(), e.path(".lock"), func() {})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Run(context.Background(), time.Minute, "true")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("apt ran while another process held the lock: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("apt did not run once the lock was free")
	}
	// Held by this Env: a nested call goes on at once.
	release, err := e.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(context.Background(), time.Minute, "true"); err != nil {
		t.Fatal(err)
	}
	release()
}

func TestEnvFiles(t *testing.T) {
	suites := []string{"bookworm", "trixie", "sid"}
	e, err := New(filepath.Join(t.TempDir(), "apt"), Options{Mirror: "http://mirror.example/debian", Keyring: "/usr/share/keyrings/k.gpg", Suites: suites, StageRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sl := e.sourcesList()
	for _, s := range suites {
		if !strings.Contains(sl, "deb [arch=amd64 target=Packages signed-by=/usr/share/keyrings/k.gpg] http://mirror.example/debian "+s+" main\n") {
			t.Errorf("sources.list lacks %s:\n%s", s, sl)
		}
	}
	conf := e.aptConf()
	for _, s := range []string{"Dir::Etc::SourceList", "Dir::Etc::SourceParts", "Dir::State::Lists", "Dir::State::Status", "Dir::Cache ", "APT::Architecture \"amd64\"", "Debug::NoLocking \"1\""} {
		if !strings.Contains(conf, s) {
			t.Errorf("apt.conf lacks %s:\n%s", s, conf)
		}
	}
	if strings.Contains(conf, "/etc/apt/") || strings.Contains(conf, "/var/lib/") {
		t.Errorf("apt.conf points at host state:\n%s", conf)
	}
	src, err := New(filepath.Join(t.TempDir(), "apt-src"), Options{Mirror: "http://mirror.example/debian", Suites: []string{"sid"}, Source: true, StageRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if sl := src.sourcesList(); !strings.Contains(sl, "deb-src http://mirror.example/debian sid main\n") || strings.Contains(sl, "deb [") {
		t.Errorf("source sources.list:\n%s", sl)
	}
}

// TestUntraversable: a directory on the way that the user may not search
// is named, the outermost one.
func TestUntraversable(t *testing.T) {
	const other = 65534 // a user that owns none of it
	base := openTempDir(t, identity{aptUID: other, aptGID: other})
	deep := filepath.Join(base, "home", "cache", "klab")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if b := untraversable(deep, other, other); b != "" {
		t.Errorf("untraversable = %q in a tree of 0755 directories", b)
	}
	os.Chmod(filepath.Join(base, "home"), 0o700)
	os.Chmod(filepath.Join(base, "home", "cache"), 0o700)
	t.Cleanup(func() { os.Chmod(filepath.Join(base, "home"), 0o755) })
	if b, want := untraversable(deep, other, other), filepath.Join(base, "home")+" is mode 0700"; b != want {
		t.Errorf("untraversable = %q, want %q", b, want)
	}
	// The owner may.
	if b := untraversable(deep, os.Getuid(), os.Getgid()); b != "" {
		t.Errorf("the owner: untraversable = %q", b)
	}
}

// TestSandboxKept: as root, apt's downloads keep the _apt sandbox. A
// cache _apt can reach holds the directories _apt writes; a cache under a
// closed directory (root's home is mode 0700) gets a staging directory
// root owns, with them inside. The private configuration never turns the
// sandbox off then.
func TestSandboxKept(t *testing.T) {
	testenv.RequiresRoot(t)
	id := currentIdentity()
	if !id.aptOK {
		testenv.Missing(t, "the system has no _apt user")
	}
	open := openTempDir(t, id)
	check := func(e *Env, stage string) {
		t.Helper()
		if !e.sandboxed() || e.sb.stage != stage {
			t.Fatalf("sandbox = %+v, want _apt with the stage %s", e.sb, stage)
		}
		for _, d := range []string{"lists/partial", "download", "tmp"} {
			fi, err := os.Lstat(filepath.Join(stage, d))
			if err != nil {
				t.Fatal(err)
			}
			if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != id.aptUID || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
				t.Errorf("%s: uid %d mode %v, want _apt's (%d) 0700 directory", d, st.Uid, fi.Mode(), id.aptUID)
			}
		}
		if b := untraversable(filepath.Join(stage, "lists", "partial"), id.aptUID, id.aptGID); b != "" {
			t.Errorf("_apt cannot reach the partial directory: %s", b)
		}
		conf := e.aptConf()
		if strings.Contains(conf, `APT::Sandbox::User "root"`) || !strings.Contains(conf, `APT::Sandbox::User "_apt"`) ||
			!strings.Contains(conf, `Dir::State::Lists "`+filepath.Join(stage, "lists")+`"`) {
			t.Errorf("apt.conf:\n%s", conf)
		}
	}

	// Reachable: everything stays in the cache.
	dir := filepath.Join(open, "cache", "apt")
	var warned []string
	logf := func(f string, a ...any) { warned = append(warned, f) }
	e, err := New(dir, Options{Log: logf, StageRoot: filepath.Join(open, "stage-root")})
	if err != nil {
		t.Fatal(err)
	}
	check(e, dir)

	// Closed, like /root: a staging directory, one per cache.
	home := filepath.Join(open, "root")
	os.Mkdir(home, 0o700)
	stageRoot := filepath.Join(open, "var-cache-klab")
	closed := filepath.Join(home, ".cache", "klab", "apt")
	// The staging directories of caches that are gone go, an hour after
	// their last use; others stay.
	old := time.Now().Add(-2 * time.Hour)
	for name, owner := range map[string]string{"apt-gone": filepath.Join(open, "gone", "apt"), "apt-here": dir, "apt-recent": filepath.Join(open, "gone2")} {
		writeFile(t, filepath.Join(stageRoot, name, "owner"), []byte(owner+"\n"))
		if name != "apt-recent" {
			os.Chtimes(filepath.Join(stageRoot, name), old, old)
		}
	}
	e, err = New(closed, Options{Log: logf, StageRoot: stageRoot})
	if err != nil {
		t.Fatal(err)
	}
	check(e, stageDir(stageRoot, closed))
	if fi, err := os.Stat(stageRoot); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("stage root: %v, %v", fi, err)
	}
	if owner, _ := os.ReadFile(filepath.Join(e.sb.stage, "owner")); string(owner) != closed+"\n" {
		t.Errorf("owner file = %q", owner)
	}
	for name, want := range map[string]bool{"apt-gone": false, "apt-here": true, "apt-recent": true} {
		if _, err := os.Stat(filepath.Join(stageRoot, name)); (err == nil) != want {
			t.Errorf("%s: kept = %v, want %v", name, err == nil, want)
		}
	}
	if len(warned) != 0 {
		t.Errorf("warnings with the sandbox kept: %q", warned)
	}
	// A second Env reuses it; a link planted where _apt's directory was
	// is replaced, not followed.
	victim := filepath.Join(open, "victim")
	os.Mkdir(victim, 0o755)
	os.RemoveAll(filepath.Join(e.sb.stage, "download"))
	os.Symlink(victim, filepath.Join(e.sb.stage, "download"))
	e, err = New(closed, Options{StageRoot: stageRoot})
	if err != nil {
		t.Fatal(err)
	}
	check(e, stageDir(stageRoot, closed))
	if fi, _ := os.Stat(victim); fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Error("the link's target was chowned")
	}

	// A stage root others may write is refused: the sandbox is off, and
	// one warning says why.
	bad := filepath.Join(open, "bad-root")
	os.Mkdir(bad, 0o777)
	os.Chmod(bad, 0o777)
	warned = nil
	e, err = New(filepath.Join(home, "other", "apt"), Options{Log: func(f string, a ...any) {
		warned = append(warned, strings.TrimSpace(fmt.Sprintf(f, a...)))
	}, StageRoot: bad})
	if err != nil {
		t.Fatal(err)
	}
	if e.sandboxed() || len(warned) != 1 || !strings.Contains(warned[0], "without apt's sandbox") ||
		!strings.Contains(warned[0], home+" is mode 0700") || !strings.Contains(warned[0], "writable by others") {
		t.Errorf("sandbox %+v, warnings %q", e.sb, warned)
	}
	if conf := e.aptConf(); !strings.Contains(conf, `APT::Sandbox::User "root"`) {
		t.Errorf("apt.conf with the sandbox off:\n%s", conf)
	}
}

// TestSandboxNotRoot: apt drops privileges only as root; as another user
// nothing changes hands and no warning is printed.
func TestSandboxNotRoot(t *testing.T) {
	dir := t.TempDir()
	sb := prepareSandbox(dir, t.TempDir(), identity{euid: 1000, aptUID: 42, aptOK: true})
	if sb.user != "" || sb.root || sb.why != "" || sb.stage != dir {
		t.Errorf("sandbox = %+v", sb)
	}
	sb = prepareSandbox(dir, t.TempDir(), identity{euid: 0})
	if sb.user != "" || !sb.root || !strings.Contains(sb.why, "no _apt user") {
		t.Errorf("no _apt: sandbox = %+v", sb)
	}
}

// TestDownloadStaged: under the sandbox, apt-get runs in the staging
// directory and what it leaves there (regular files only) lands in the
// caller's directory.
func TestDownloadStaged(t *testing.T) {
	testenv.RequiresRoot(t)
	if !currentIdentity().aptOK {
		testenv.Missing(t, "the system has no _apt user")
	}
	bin := t.TempDir()
	writeFile(t, filepath.Join(bin, "apt-get"), []byte("#!/bin/sh\npwd > \"$FAKE_OUT/cwd\"\necho deb > ./pkg_1_amd64.deb\nln -s /etc/passwd ./link.deb\n[ -n \"$FAKE_NOTICE\" ] && echo \"W: Download is performed unsandboxed as root as file 'x' couldn't be accessed by user '_apt'.\" >&2\nexit 0\n"))
	os.Chmod(filepath.Join(bin, "apt-get"), 0o755)
	out := t.TempDir()
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("FAKE_OUT", out)
	open := openTempDir(t, currentIdentity())
	var warned []string
	e, err := New(filepath.Join(open, "root", "apt"), Options{StageRoot: filepath.Join(open, "stage"), Log: func(f string, a ...any) {
		warned = append(warned, fmt.Sprintf(f, a...))
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !e.sandboxed() {
		t.Fatalf("not sandboxed: %s", e.sb.why)
	}
	dest := t.TempDir()
	if err := e.Download(t.Context(), time.Minute, dest, "-q", "download", "pkg=1"); err != nil {
		t.Fatal(err)
	}
	if cwd, _ := os.ReadFile(filepath.Join(out, "cwd")); strings.TrimSpace(string(cwd)) != e.sb.dir("download") {
		t.Errorf("apt-get ran in %s, want the staging directory %s", cwd, e.sb.dir("download"))
	}
	if b, err := os.ReadFile(filepath.Join(dest, "pkg_1_amd64.deb")); err != nil || string(b) != "deb\n" {
		t.Errorf("downloaded file: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dest, "link.deb")); err == nil {
		t.Error("a link left in the staging directory was moved")
	}
	if des, _ := os.ReadDir(e.sb.dir("download")); len(des) != 0 {
		t.Errorf("the staging directory keeps %d entries", len(des))
	}
	if len(warned) != 0 {
		t.Errorf("warnings: %q", warned)
	}
	// Should apt give the sandbox up after all, klab says so.
	t.Setenv("FAKE_NOTICE", "1")
	if err := e.Download(t.Context(), time.Minute, dest, "-q", "download", "pkg=1"); err != nil {
		t.Fatal(err)
	}
	if len(warned) != 1 || !strings.HasPrefix(warned[0], "warning: apt: W: Download is performed unsandboxed") {
		t.Errorf("warnings: %q", warned)
	}
}

// openTempDir is a temporary directory that the user id.aptUID (_apt)
// can reach.
func openTempDir(t *testing.T, id identity) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if b := untraversable(dir, id.aptUID, id.aptGID); b != "" {
		t.Skipf("the temporary directory is not reachable by _apt: %s", b)
	}
	return dir
}
