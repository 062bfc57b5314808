package userspace

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"klab/results"
)

func TestNormalize(t *testing.T) {
	s, err := Spec{}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if s.Suite != DefaultSuite || len(s.Packages) != len(DefaultPackages())+len(LibraryPackages(DefaultSuite)) || !slices.IsSorted(s.Packages) ||
		!slices.Contains(s.Packages, "libaio1t64") {
		t.Errorf("defaults: %+v", s)
	}
	if b, _ := (Spec{Suite: "bookworm"}).Normalize(); !slices.Contains(b.Packages, "libaio1") {
		t.Errorf("bookworm defaults lack its libaio package: %v", b.Packages)
	}
	s, err = Spec{Suite: "sid", Packages: []string{"xfsprogs", " bash", "bash", "libc6"}}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"bash", "libc6", "xfsprogs"}; !reflect.DeepEqual(s.Packages, want) {
		t.Errorf("packages %v, want %v", s.Packages, want)
	}
	if _, err := (Spec{Suite: "trixie-backports"}).Normalize(); err == nil {
		t.Error("a backports suite accepted")
	}
	_, err = Spec{Suite: "woody", Packages: []string{"Bash", "ok", "a;b"}}.Normalize()
	if err == nil {
		t.Fatal("bad spec accepted")
	}
	for _, want := range []string{`suite "woody"`, `"Bash"`, `"a;b"`, "trixie"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), `"ok"`) {
		t.Errorf("error %q names a good package", err)
	}
}

func TestKeys(t *testing.T) {
	a, _ := Spec{Packages: []string{"bash", "gawk"}}.Normalize()
	b, _ := Spec{Packages: []string{"gawk", "bash", "gawk"}}.Normalize()
	if a.Key() != b.Key() {
		t.Errorf("the order of packages changes the key: %q %q", a.Key(), b.Key())
	}
	c, _ := Spec{Suite: "sid", Packages: []string{"bash", "gawk"}}.Normalize()
	if a.Key() == c.Key() {
		t.Error("the suite is not in the key")
	}
	pkgs := []Package{{"bash", "5.2-1", "amd64"}, {"libc6", "2.41-1", "amd64"}}
	id := imageID(a, pkgs)
	if !strings.HasPrefix(id, "trixie-") || len(id) != len("trixie-")+16 {
		t.Errorf("id %q", id)
	}
	if id != imageID(b, pkgs) {
		t.Error("the same spec and packages give two ids")
	}
	newer := slices.Clone(pkgs)
	newer[1].Version = "2.41-2"
	for name, other := range map[string]string{
		"a version":          imageID(a, newer),
		"the requested list": imageID(Spec{Suite: a.Suite, Packages: []string{"bash"}}, pkgs),
		"the suite":          imageID(c, pkgs),
	} {
		if other == id {
			t.Errorf("changing %s keeps the id", name)
		}
	}
}

// simulation is the shape of apt-get -s -q install output, from trixie.
const simulation = `NOTE: This is only a simulation!
      apt-get needs root privileges for real execution.
Reading package lists...
Building dependency tree...
The following NEW packages will be installed:
  bash gawk libc6
Inst gcc-14-base (14.2.0-19 Debian:13.8/stable [amd64])
Inst libc6 (2.41-12+deb13u5 Debian:13.8/stable [amd64]) []
Inst hostname (3.25 Debian:13.8/stable, Debian:unstable [amd64])
Inst gawk (1:5.2.1-2+b1 Debian:13.8/stable [amd64])
Inst readline-common (8.2-6 Debian:13.8/stable [all])
Inst bash:amd64 (5.2.37-2+b10 Debian:13.8/stable [amd64])
Conf gcc-14-base (14.2.0-19 Debian:13.8/stable [amd64])
Conf libc6 (2.41-12+deb13u5 Debian:13.8/stable [amd64])
`

func TestParseSimulation(t *testing.T) {
	got, err := parseSimulation([]byte(simulation))
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{
		{"bash", "5.2.37-2+b10", "amd64"},
		{"gawk", "1:5.2.1-2+b1", "amd64"},
		{"gcc-14-base", "14.2.0-19", "amd64"},
		{"hostname", "3.25", "amd64"},
		{"libc6", "2.41-12+deb13u5", "amd64"},
		{"readline-common", "8.2-6", "all"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
	if _, err := parseSimulation([]byte("Reading package lists...\n")); err == nil {
		t.Error("an empty plan is not an error")
	}
	if _, err := parseSimulation([]byte("Inst bash garbage\n")); err == nil {
		t.Error("an unreadable Inst line is not an error")
	}
	if got := debFileName(want[1]); got != "gawk_1%3a5.2.1-2+b1_amd64.deb" {
		t.Errorf("deb file name %q", got)
	}
}

func TestAptErrors(t *testing.T) {
	out := "Reading package lists...\nE: Unable to locate package nosuch\nE: Couldn't find any package by glob 'x*'\n"
	if got := aptErrors(out); got != "Unable to locate package nosuch; Couldn't find any package by glob 'x*'" {
		t.Errorf("got %q", got)
	}
}

func TestPickAlternatives(t *testing.T) {
	gawk := `#!/bin/sh
set -e
# update-alternatives --install /usr/bin/awk awk /usr/bin/commented 99
update-alternatives --quiet --install /usr/bin/awk awk /usr/bin/gawk 10 \
  --slave /usr/share/man/man1/awk.1.gz awk.1.gz /usr/share/man/man1/gawk.1.gz \
  --slave /usr/bin/nawk nawk /usr/bin/gawk
`
	mawk := "update-alternatives --install /usr/bin/awk awk /usr/bin/mawk 5 --slave /usr/bin/nawk nawk /usr/bin/mawk\n"
	pager := "if [ x ]; then\n\tupdate-alternatives --install /usr/bin/pager pager /bin/more 50 \\\n\t--slave /usr/share/man/man1/pager.1.gz pager.1.gz \\\n\t/usr/share/man/man1/more.1.gz\nfi\n"
	got := pickAlternatives([]string{mawk, gawk, pager, "update-alternatives --install broken"})
	var links []string
	for _, a := range got {
		links = append(links, a.link+"->"+a.path)
	}
	want := []string{
		"/usr/bin/awk->/usr/bin/gawk",
		"/usr/bin/nawk->/usr/bin/gawk",
		"/usr/bin/pager->/bin/more",
		"/usr/share/man/man1/awk.1.gz->/usr/share/man/man1/gawk.1.gz",
		"/usr/share/man/man1/pager.1.gz->/usr/share/man/man1/more.1.gz",
	}
	if !reflect.DeepEqual(links, want) {
		t.Errorf("got %v\nwant %v", links, want)
	}
}

// makeTree lays out a merged-/usr tree like Debian's: /bin -> usr/bin.
func makeTree(t *testing.T) string {
	t.Helper()
	tree := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/sbin", "etc/pam.d", "usr/share/doc/bash", "usr/share/locale/de"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, l := range [][2]string{{"usr/bin", "bin"}, {"usr/sbin", "sbin"}} {
		if err := os.Symlink(l[0], filepath.Join(tree, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"usr/bin/gawk", "usr/bin/bash", "usr/bin/more", "usr/share/doc/bash/README"} {
		if err := os.WriteFile(filepath.Join(tree, f), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return tree
}

func TestResolveInTree(t *testing.T) {
	tree := makeTree(t)
	if err := os.Symlink("/usr/bin/gawk", filepath.Join(tree, "usr/bin/awk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/loop", filepath.Join(tree, "etc/loop")); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		"/bin/awk":         "usr/bin/gawk",
		"/bin/more":        "usr/bin/more",
		"/usr/bin/nope":    "",
		"/etc/loop":        "",
		"/bin/../etc":      "", // /usr/etc, as the kernel resolves it
		"/bin/../bin/more": "usr/bin/more",
		"/sbin/../sbin/":   "usr/sbin",
	} {
		got := resolveInTree(tree, p)
		if want != "" {
			want = filepath.Join(tree, want)
		}
		if got != want {
			t.Errorf("resolveInTree(%s) = %q, want %q", p, got, want)
		}
	}
}

func TestSetup(t *testing.T) {
	tree := makeTree(t)
	gawk := "update-alternatives --install /usr/bin/awk awk /usr/bin/gawk 10 --slave /usr/bin/nawk nawk /usr/bin/gawk --slave /usr/share/man/man1/awk.1.gz awk.1.gz /usr/share/man/man1/gawk.1.gz\n"
	if err := setup(tree, []string{gawk}); err != nil {
		t.Fatal(err)
	}
	for link, want := range map[string]string{"usr/bin/awk": "/usr/bin/gawk", "usr/bin/nawk": "/usr/bin/gawk", "usr/bin/sh": "/usr/bin/bash", "etc/mtab": "../proc/self/mounts",
		"usr/sbin/mount.fuse.klab": "/run/klab/mount.fuse.klab", "usr/sbin/mount.fuse.passthrough_hp": "/run/klab/mount.fuse.passthrough_hp"} {
		if got, err := os.Readlink(filepath.Join(tree, link)); err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %s", link, got, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(tree, "usr/share/man/man1/awk.1.gz")); err == nil {
		t.Error("a link to a missing manual page was made")
	}
	for _, gone := range []string{"usr/share/doc", "usr/share/locale"} {
		if _, err := os.Stat(filepath.Join(tree, gone)); err == nil {
			t.Errorf("%s was kept", gone)
		}
	}
	for _, m := range mountPoints {
		if fi, err := os.Stat(filepath.Join(tree, m)); err != nil || !fi.IsDir() {
			t.Errorf("mount point %s: %v", m, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(tree, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("/tmp mode %v (%v)", fi.Mode(), err)
	}
	passwd, _ := os.ReadFile(filepath.Join(tree, "etc/passwd"))
	group, _ := os.ReadFile(filepath.Join(tree, "etc/group"))
	for _, u := range []string{"root:x:0:0:", "fsgqa:x:1000:1000:", "fsgqa2:x:1001:", "123456-fsgqa:x:1002:"} {
		if !strings.Contains(string(passwd), "\n"+u) && !strings.HasPrefix(string(passwd), u) {
			t.Errorf("passwd lacks %s:\n%s", u, passwd)
		}
	}
	for _, g := range []string{"fsgqa:x:1000:", "fsgqa2:x:1001:", "123456-fsgqa:x:1002:", "sys:x:3:", "bin:x:2:", "nogroup:x:65534:"} {
		if !strings.Contains(string(group), g) {
			t.Errorf("group lacks %s:\n%s", g, group)
		}
	}
	if data, err := os.ReadFile(filepath.Join(tree, "etc/pam.d/common-auth")); err != nil || !strings.Contains(string(data), "pam_unix.so") {
		t.Errorf("common-auth: %q %v", data, err)
	}
	if got := userNames(); !reflect.DeepEqual(got, []string{"fsgqa", "fsgqa2", "123456-fsgqa"}) {
		t.Errorf("users %v", got)
	}
	// A package's own file wins over the base one.
	tree2 := makeTree(t)
	if err := os.WriteFile(filepath.Join(tree2, "etc/hosts"), []byte("own\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := setup(tree2, nil); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(tree2, "etc/hosts")); string(data) != "own\n" {
		t.Errorf("hosts replaced: %q", data)
	}
}

func TestAttach(t *testing.T) {
	img := &Image{Path: "/c,d/rootfs.ext4", Descriptor: Descriptor{Format: Format}}
	dir := t.TempDir()
	cfgPath := func(body string) string {
		p := filepath.Join(dir, "config")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k := &results.Kernel{Name: "debian:7.3", Version: "7.3.4", Config: cfgPath("CONFIG_VIRTIO_PCI=y\nCONFIG_VIRTIO_BLK=m\nCONFIG_EXT4_FS=y\n")}
	a, err := Attach(img, k)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Modules, []string{"virtio_blk"}) {
		t.Errorf("modules %v", a.Modules)
	}
	if args := strings.Join(a.QEMUArgs, " "); !strings.Contains(args, "file=/c,,d/rootfs.ext4,") || !strings.Contains(args, "readonly=on") || !strings.Contains(args, "serial="+Serial) {
		t.Errorf("qemu args %q", args)
	}
	u := a.Step.Userspace
	if u == nil || u.Root != GuestRoot || u.Serial != Serial || u.FSType != "ext4" || !slices.Contains(u.Writable, "/tmp") {
		t.Errorf("step %+v", a.Step)
	}
	k.Config = cfgPath("CONFIG_VIRTIO_PCI=y\nCONFIG_EXT4_FS=y\n")
	if _, err := Attach(img, k); err == nil || !strings.Contains(err.Error(), "CONFIG_VIRTIO_BLK") {
		t.Errorf("a kernel without virtio-blk: %v", err)
	}
	k.Config = ""
	if a, err := Attach(img, k); err != nil || len(a.Modules) != 0 {
		t.Errorf("a kernel without a config: %v %v", a, err)
	}
	if e := Exec([]string{"bash"}, "", 5); e.Root != GuestRoot || e.Argv[0] != "bash" || e.TimeoutMs != 5 {
		t.Errorf("exec step %+v", e)
	}
}

func TestLoadEntry(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, imageFile), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &Descriptor{ID: "trixie-0123456789abcdef", Recipe: Recipe, Suite: "trixie", Format: Format, ImageBytes: 4096,
		Packages: []Package{{"bash", "5.2", "amd64"}}}
	if err := writeDescriptor(dir, d); err != nil {
		t.Fatal(err)
	}
	img, err := loadEntry(dir)
	if err != nil {
		t.Fatal(err)
	}
	if img.Path != filepath.Join(dir, imageFile) || !reflect.DeepEqual(img.Descriptor.Packages, d.Packages) {
		t.Errorf("loaded %+v", img)
	}
	cache := t.TempDir()
	if err := os.MkdirAll(Dir(cache), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir, filepath.Join(Dir(cache), d.ID)); err != nil {
		t.Fatal(err)
	}
	if img, err := Load(cache, d.ID); err != nil || !img.Cached || img.Descriptor.ID != d.ID {
		t.Errorf("Load: %+v %v", img, err)
	}
	for _, bad := range []string{"", "../x", ".tmp-1", "trixie-ffffffffffffffff"} {
		if _, err := Load(cache, bad); err == nil {
			t.Errorf("Load(%q) worked", bad)
		}
	}
	dir = filepath.Join(Dir(cache), d.ID)
	if err := os.Truncate(filepath.Join(dir, imageFile), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := loadEntry(dir); err == nil {
		t.Error("a cut image loads")
	}
}

// TestSetupStaysInTree: links in the tree, absolute ones included, are
// the tree's: setup never writes through them to the host.
func TestSetupStaysInTree(t *testing.T) {
	tree, outside := makeTree(t), t.TempDir()
	if err := os.RemoveAll(filepath.Join(tree, "etc/pam.d")); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"etc/pam.d": outside, "usr/bin/awk": outside + "/awk"} {
		if err := os.Symlink(target, filepath.Join(tree, link)); err != nil {
			t.Fatal(err)
		}
	}
	err := setup(tree, []string{"update-alternatives --install " + outside + "/nawk nawk /usr/bin/gawk 10\n"})
	if err != nil {
		t.Fatal(err)
	}
	if des, _ := os.ReadDir(outside); len(des) != 0 {
		t.Errorf("setup wrote outside the tree: %v", des)
	}
}

func TestMissingLibs(t *testing.T) {
	d := &Descriptor{Libs: []string{"libacl.so.1", "libaio.so.1t64", "libuuid.so.1"}}
	got := d.MissingLibs([]string{"libacl.so.1", "libaio.so.1", "libc.so.6", "libuuid.so.1"})
	if !slices.Equal(got, []string{"libaio.so.1"}) {
		t.Errorf("missing %v, want libaio.so.1 alone (libc is every image's)", got)
	}
	if got := (&Descriptor{}).MissingLibs([]string{"libaio.so.1"}); got != nil {
		t.Errorf("an old descriptor without sonames: missing %v", got)
	}
}
