package debian_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"klab/images"
	"klab/images/debian"
	"klab/images/internal/imagetest"
	"klab/images/kerneldir"
	"klab/internal/testenv"
	"klab/results"
)

// fakeApt installs fake apt-get, apt-cache and dpkg-deb commands that
// serve a small made-up archive, and returns the directory holding their
// call log and data.
type fakeArchive struct {
	dir string
}

func (f *fakeArchive) log(t *testing.T) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(f.dir, "log"))
	return string(b)
}

const fakeAptGet = `#!/bin/sh
echo "apt-get $*" >> "$FAKE_APT/log"
conf=""
while [ $# -gt 0 ]; do
  case "$1" in
  -c) conf=$2; shift 2;;
  update|download) cmd=$1; shift; break;;
  *) shift;;
  esac
done
case "$cmd" in
update)
  lists=$(sed -n 's/^Dir::State::Lists "\(.*\)";$/\1/p' "$conf")
  for s in bookworm trixie trixie-backports sid; do
    : > "$lists/mirror.example_debian_dists_${s}_main_binary-amd64_Packages"
  done;;
download)
  for p in "$@"; do
    n=${p%%=*}; v=${p#*=}
    [ -f "$FAKE_APT/debs/$n" ] || { echo "E: Can't find $p" >&2; exit 100; }
    cp "$FAKE_APT/debs/$n" "./${n}_${v}_amd64.deb"
  done;;
esac
`

const fakeAptCache = `#!/bin/sh
echo "apt-cache $*" >> "$FAKE_APT/log"
while [ $# -gt 0 ]; do
  case "$1" in
  -c) shift 2;;
  *) break;;
  esac
done
cmd=$1; shift
case "$cmd" in
pkgnames) cat "$FAKE_APT/pkgnames";;
madison) for n in "$@"; do cat "$FAKE_APT/madison/$n" 2>/dev/null; done;;
show) for p in "$@"; do cat "$FAKE_APT/show/$p" 2>/dev/null && echo; done;;
esac
exit 0
`

const fakeDpkgDeb = `#!/bin/sh
echo "dpkg-deb $*" >> "$FAKE_APT/log"
[ -n "$FAKE_DPKG_FAIL" ] && { echo "dpkg-deb: error: broken" >&2; exit 2; }
[ "$1" = -x ] && exec tar -xf "$2" -C "$3"
exit 2
`

func tarOf(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(files[n])
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func newFakeArchive(t *testing.T) *fakeArchive {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for name, script := range map[string]string{"apt-get": fakeAptGet, "apt-cache": fakeAptCache, "dpkg-deb": fakeDpkgDeb} {
		p := imagetest.WriteFile(t, filepath.Join(bin, name), []byte(script))
		os.Chmod(p, 0o755)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("FAKE_APT", dir)
	t.Setenv("FAKE_DPKG_FAIL", "")

	const r73, v73 = "7.3.4+deb13-cloud-amd64", "7.3.4-1~bpo13+1"
	const r61, v61 = "6.1.0-50-cloud-amd64", "6.1.176-1"
	pkgnames := []string{
		"linux-image-7.3.2+deb13-cloud-amd64", "linux-image-7.3.4+deb13-cloud-amd64",
		"linux-image-7.3.4+deb13-cloud-amd64-dbg", "linux-image-7.3.4+deb13-amd64",
		"linux-image-6.1.0-47-cloud-amd64", "linux-image-6.1.0-50-cloud-amd64",
		"linux-image-6.1.0-50-cloud-amd64-unsigned", "linux-image-6.12.117+deb13-cloud-amd64",
		"linux-image-cloud-amd64",
		"linux-binary-7.3.4+deb13-cloud-amd64", "linux-modules-7.3.4+deb13-cloud-amd64", "linux-base-7.3.4+deb13-cloud-amd64",
		"linux-headers-7.3.4+deb13-cloud-amd64",
		// Newer, but its linux-modules- and linux-base- are not in the
		// archive (as happens for real with 6.19 to 7.1).
		"linux-image-7.3.5+deb13-cloud-amd64", "linux-binary-7.3.5+deb13-cloud-amd64",
		"linux-image-7.0.13+deb13-cloud-amd64", "linux-binary-7.0.13+deb13-cloud-amd64",
	}
	imagetest.WriteFile(t, filepath.Join(dir, "pkgnames"), []byte(strings.Join(pkgnames, "\n")+"\n"))
	madison := map[string]string{
		"linux-image-7.3.2+deb13-cloud-amd64":       "7.3.2-1 | http://mirror.example/debian sid/main amd64 Packages",
		"linux-image-7.3.5+deb13-cloud-amd64":       "7.3.5-1 | http://mirror.example/debian sid/main amd64 Packages",
		"linux-image-7.0.13+deb13-cloud-amd64":      "7.0.13-1~bpo13+1 | http://mirror.example/debian trixie-backports/main amd64 Packages",
		"linux-image-7.3.4+deb13-cloud-amd64":       v73 + " | http://mirror.example/debian trixie-backports/main amd64 Packages",
		"linux-image-6.1.0-47-cloud-amd64":          "6.1.170-3 | http://mirror.example/debian bookworm/main amd64 Packages",
		"linux-image-6.1.0-50-cloud-amd64":          v61 + " | http://mirror.example/debian bookworm/main amd64 Packages",
		"linux-image-6.1.0-50-cloud-amd64-unsigned": v61 + " | http://mirror.example/debian bookworm/main amd64 Packages",
	}
	for n, l := range madison {
		imagetest.WriteFile(t, filepath.Join(dir, "madison", n), []byte(n+" | "+l+"\n"))
	}
	show := func(name, version, depends string, size int) {
		s := fmt.Sprintf("Package: %s\nVersion: %s\nSize: %d\n", name, version, size)
		if depends != "" {
			s += "Depends: " + depends + "\n"
		}
		imagetest.WriteFile(t, filepath.Join(dir, "show", name+"="+version), []byte(s))
	}
	show("linux-image-"+r73, v73, fmt.Sprintf("initramfs-tools | linux-initramfs-tool, linux-base-%[1]s (= %[2]s), linux-binary-%[1]s (= %[2]s), linux-modules-%[1]s (= %[2]s)", r73, v73), 1928)
	show("linux-binary-"+r73, v73, fmt.Sprintf("linux-base-%s (= %s)", r73, v73), 13604064)
	show("linux-modules-"+r73, v73, "kmod, linux-base-"+r73+" (= "+v73+")", 22918420)
	show("linux-base-"+r73, v73, "", 1025208)
	const r75, v75 = "7.3.5+deb13-cloud-amd64", "7.3.5-1"
	show("linux-image-"+r75, v75, fmt.Sprintf("linux-base-%[1]s (= %[2]s), linux-binary-%[1]s (= %[2]s), linux-modules-%[1]s (= %[2]s)", r75, v75), 1928)
	const r70, v70 = "7.0.13+deb13-cloud-amd64", "7.0.13-1~bpo13+1"
	show("linux-image-"+r70, v70, fmt.Sprintf("linux-base-%[1]s (= %[2]s), linux-binary-%[1]s (= %[2]s), linux-modules-%[1]s (= %[2]s)", r70, v70), 1928)
	show("linux-binary-"+r70, v70, fmt.Sprintf("linux-base-%s (= %s)", r70, v70), 12500000)
	imagetest.WriteFile(t, filepath.Join(dir, "debs", "linux-image-"+r70), tarOf(t, map[string][]byte{"usr/share/doc/linux-image-" + r70 + "/README": []byte("meta")}))
	imagetest.WriteFile(t, filepath.Join(dir, "debs", "linux-binary-"+r70), tarOf(t, map[string][]byte{"usr/lib/modules/" + r70 + "/vmlinuz": imagetest.BzImage(r70 + " #1")}))
	show("linux-image-"+r61, v61, "kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool", 26484304)

	debs := filepath.Join(dir, "debs")
	m73 := "usr/lib/modules/" + r73 + "/"
	imagetest.WriteFile(t, filepath.Join(debs, "linux-image-"+r73), tarOf(t, map[string][]byte{"usr/share/doc/linux-image-" + r73 + "/README": []byte("meta")}))
	imagetest.WriteFile(t, filepath.Join(debs, "linux-binary-"+r73), tarOf(t, map[string][]byte{m73 + "vmlinuz": imagetest.BzImage(r73 + " (debian-kernel@lists.example) #1 SMP")}))
	imagetest.WriteFile(t, filepath.Join(debs, "linux-base-"+r73), tarOf(t, map[string][]byte{
		m73 + "config":          []byte("CONFIG_FUSE_FS=y\nCONFIG_BLK_DEV_RAM=m\n"),
		m73 + "modules.builtin": []byte("kernel/fs/fuse/fuse.ko\nkernel/drivers/char/virtio_console.ko\n"),
		m73 + "modules.order":   []byte("kernel/drivers/block/brd.ko\n"),
	}))
	imagetest.WriteFile(t, filepath.Join(debs, "linux-modules-"+r73), tarOf(t, map[string][]byte{
		m73 + "kernel/drivers/block/brd.ko.xz": imagetest.XZ(t, imagetest.Module("depends=")),
	}))
	m61 := "lib/modules/" + r61 + "/"
	imagetest.WriteFile(t, filepath.Join(debs, "linux-image-"+r61), tarOf(t, map[string][]byte{
		"boot/vmlinuz-" + r61:                         imagetest.BzImage(r61 + " (debian-kernel@lists.example) #1 SMP"),
		"boot/config-" + r61:                          []byte("CONFIG_FUSE_FS=m\n"),
		"boot/System.map-" + r61:                      []byte("placeholder"),
		m61 + "modules.builtin":                       []byte("kernel/fs/ext4/ext4.ko\n"),
		m61 + "kernel/fs/fuse/fuse.ko":                imagetest.Module("depends="),
		m61 + "kernel/drivers/block/brd.ko":           imagetest.Module("depends="),
		m61 + "kernel/drivers/char/virtio_console.ko": imagetest.Module("depends="),
	}))
	return &fakeArchive{dir: dir}
}

// downloads returns the packages apt-get download fetched, per the log.
func downloads(log string) string {
	var ps []string
	for _, l := range strings.Split(log, "\n") {
		if _, after, ok := strings.Cut(l, " download "); ok {
			ps = append(ps, after)
		}
	}
	return strings.Join(ps, " ")
}

// openCache is a cache directory for a fetch test, with its parents
// opened (mode 0755), so that as root apt's sandbox keeps its staging
// directories in it; any other staging directory goes to a temporary
// directory, never to /var/cache/klab.
func openCache(t *testing.T) (cache, stage string) {
	t.Helper()
	cache = t.TempDir()
	for _, d := range []string{cache, filepath.Dir(cache)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return cache, t.TempDir()
}

func TestFetchDebianFake(t *testing.T) {
	fa := newFakeArchive(t)
	cache, stage := openCache(t)
	var progress bytes.Buffer
	o := debian.WithAptStage(debian.Options{Mirror: "http://mirror.example/debian", CacheDir: cache, Progress: &progress}, stage)
	ctx := context.Background()

	k, err := debian.Fetch(ctx, "debian:7.3", o)
	if err != nil {
		t.Fatalf("%v\nprogress:\n%s\nlog:\n%s", err, progress.String(), fa.log(t))
	}
	dir := filepath.Join(cache, "kernels", "debian", "linux-image-7.3.4+deb13-cloud-amd64_7.3.4-1~bpo13+1")
	want := results.Kernel{
		Name: "debian:7.3", Version: "7.3.4+deb13-cloud-amd64", Source: "debian",
		Package: "linux-image-7.3.4+deb13-cloud-amd64", PackageVersion: "7.3.4-1~bpo13+1", Suite: "trixie-backports",
		Image: filepath.Join(dir, "vmlinuz"), Config: filepath.Join(dir, "config"), Modules: filepath.Join(dir, "modules"),
	}
	id, _ := kerneldir.ID(want.Image, want.Config)
	want.ID = id
	if fi, err := os.Stat(want.Image); err == nil {
		want.ImageSize = fi.Size()
	}
	if *k != want {
		t.Errorf("kernel =\n%+v\nwant\n%+v", *k, want)
	}
	if !strings.HasPrefix(k.ID, "k-") || len(k.ID) != 18 {
		t.Errorf("ID = %q", k.ID)
	}
	// As root, apt downloaded as _apt, into a directory of _apt's.
	if u, err := user.Lookup("_apt"); err == nil && os.Geteuid() == 0 {
		fi, err := os.Stat(filepath.Join(cache, "apt", "download"))
		if err != nil || fmt.Sprint(fi.Sys().(*syscall.Stat_t).Uid) != u.Uid || strings.Contains(progress.String(), "sandbox") {
			t.Errorf("apt's sandbox is off (%v):\n%s", err, progress.String())
		}
	}
	for _, s := range []string{"resolving debian:7.3 in bookworm trixie trixie-backports sid...", "downloading linux-binary-7.3.4+deb13-cloud-amd64 7.3.4-1~bpo13+1 (13.0 MiB)...", "cached at " + dir} {
		if !strings.Contains(progress.String(), s) {
			t.Errorf("progress lacks %q:\n%s", s, progress.String())
		}
	}
	log := fa.log(t)
	for _, s := range []string{"apt-get -c", " update", "download linux-modules-7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1", "download linux-base-"} {
		if !strings.Contains(log, s) {
			t.Errorf("apt calls lack %q:\n%s", s, log)
		}
	}
	if !strings.Contains(progress.String(), "note: skipping linux-image-7.3.5+deb13-cloud-amd64 7.3.5-1") {
		t.Errorf("progress does not mention the incomplete 7.3.5:\n%s", progress.String())
	}
	if got, want := downloads(log), "linux-image-7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1 linux-base-7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1 linux-binary-7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1 linux-modules-7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1"; got != want {
		t.Errorf("downloads = %s\nwant %s", got, want)
	}
	ms, err := images.ModuleClosure(k.Modules, []string{"fuse", "brd", "virtio_console"})
	if err != nil || moduleNames(ms) != "brd" {
		t.Errorf("ModuleClosure = %v, %v", ms, err)
	}

	// A second fetch, by series or by exact release, is answered from the
	// cache without any apt call, and without a mirror or even a PATH.
	os.Remove(filepath.Join(fa.dir, "log"))
	fakePath := os.Getenv("PATH")
	t.Setenv("PATH", t.TempDir())
	for _, ref := range []string{"debian:7.3", "debian:7.3.4+deb13-cloud-amd64"} {
		k2, err := debian.Fetch(ctx, ref, debian.Options{CacheDir: cache})
		if err != nil {
			t.Fatalf("cached %s: %v", ref, err)
		}
		if k2.ID != k.ID || k2.Name != ref || k2.Image != k.Image {
			t.Errorf("cached %s = %+v", ref, k2)
		}
	}
	if log := fa.log(t); log != "" {
		t.Errorf("cache hit ran:\n%s", log)
	}
	t.Setenv("PATH", fakePath)

	// 6.1: signed over unsigned, newest ABI, the old layout. The lists are
	// fresh, so no second apt-get update.
	progress.Reset()
	k61, err := debian.Fetch(ctx, "debian:6.1", o)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if k61.Package != "linux-image-6.1.0-50-cloud-amd64" || k61.Version != "6.1.0-50-cloud-amd64" || k61.Suite != "bookworm" {
		t.Errorf("6.1 kernel = %+v", k61)
	}
	if log := fa.log(t); strings.Contains(log, "update") || downloads(log) != "linux-image-6.1.0-50-cloud-amd64=6.1.176-1" {
		t.Errorf("6.1 fetch calls:\n%s", log)
	}
	if ms, err := images.ModuleClosure(k61.Modules, []string{"fuse", "brd", "virtio_console"}); err != nil || moduleNames(ms) != "fuse brd virtio_console" {
		t.Errorf("6.1 ModuleClosure = %v, %v", ms, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(k61.Image), "modules", "kernel", "fs", "fuse", "fuse.ko")); err != nil {
		t.Error(err)
	}

	ks, err := debian.CachedKernels(cache)
	if err != nil || len(ks) != 2 || ks[0].Version != "6.1.0-50-cloud-amd64" || ks[1].Name != "debian:7.3.4+deb13-cloud-amd64" {
		t.Errorf("CachedKernels = %+v, %v", ks, err)
	}

	// Refresh re-resolves (and updates the lists) but reuses the files.
	os.Remove(filepath.Join(fa.dir, "log"))
	o.Refresh = true
	if k3, err := debian.Fetch(ctx, "debian:7.3", o); err != nil || k3.ID != k.ID {
		t.Errorf("refresh: %+v, %v", k3, err)
	}
	if log := fa.log(t); !strings.Contains(log, "update") || strings.Contains(log, "download") {
		t.Errorf("refresh calls:\n%s", log)
	}

	// A release whose modules and config are missing from the archive:
	// install what there is, and say so.
	progress.Reset()
	o.Refresh = false
	k70, err := debian.Fetch(ctx, "debian:7.0", o)
	if err != nil {
		t.Fatalf("7.0: %v\n%s", err, progress.String())
	}
	if k70.Modules != "" || k70.Config != "" || k70.Version != "7.0.13+deb13-cloud-amd64" {
		t.Errorf("7.0 kernel = %+v", k70)
	}
	if !strings.Contains(progress.String(), "note: the archive lacks linux-base-7.0.13+deb13-cloud-amd64, linux-modules-7.0.13+deb13-cloud-amd64") ||
		!strings.Contains(progress.String(), "warning: linux-image-7.0.13+deb13-cloud-amd64 7.0.13-1~bpo13+1 has no kernel config and no modules") {
		t.Errorf("7.0 progress:\n%s", progress.String())
	}

	// A cached image changed on disk, its size kept: a miss, fetched
	// again (downloaded, not reused) and replaced; with the archive out
	// of reach, an error that says both.
	flip := func() {
		f, err := os.OpenFile(k.Image, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte{0xde, 0xad}, 1500)
		f.Close()
	}
	flip()
	progress.Reset()
	os.Remove(filepath.Join(fa.dir, "log"))
	k4, err := debian.Fetch(ctx, "debian:7.3", o)
	if err != nil || k4.ID != k.ID {
		t.Fatalf("fetch of a damaged entry: %+v, %v\n%s", k4, err, progress.String())
	}
	if !strings.Contains(progress.String(), "is damaged: "+k.Image+" and its config hash to k-") || !strings.Contains(progress.String(), "fetching it again") ||
		!strings.Contains(downloads(fa.log(t)), "linux-image-7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1") {
		t.Errorf("fetch of a damaged entry:\n%s\n%s", progress.String(), fa.log(t))
	}
	flip()
	t.Setenv("PATH", t.TempDir()) // no apt
	_, err = debian.Fetch(ctx, "debian:7.3", o)
	if err == nil || !strings.Contains(err.Error(), "is damaged") || !strings.Contains(err.Error(), "fetching it again failed") {
		t.Errorf("a damaged entry and no archive: %v", err)
	}
	t.Setenv("PATH", fakePath)

	// Unknown series: the error lists what exists.
	_, err = debian.Fetch(ctx, "debian:5.10", o)
	if err == nil || !strings.Contains(err.Error(), "6.1 6.12 7.0 7.3") {
		t.Errorf("unknown series: err = %v", err)
	}
}

func TestFetchDebianFailureLeavesNothing(t *testing.T) {
	newFakeArchive(t)
	cache, stage := openCache(t)
	t.Setenv("FAKE_DPKG_FAIL", "1")
	_, err := debian.Fetch(context.Background(), "debian:7.3", debian.WithAptStage(debian.Options{Mirror: "http://mirror.example/debian", CacheDir: cache}, stage))
	if err == nil || !strings.Contains(err.Error(), "dpkg-deb") {
		t.Fatalf("err = %v", err)
	}
	des, _ := os.ReadDir(filepath.Join(cache, "kernels", "debian"))
	for _, de := range des {
		if de.Name() != ".lock" {
			t.Errorf("left behind: %s", de.Name())
		}
	}
	if ks, _ := debian.CachedKernels(cache); len(ks) != 0 {
		t.Errorf("CachedKernels = %v", ks)
	}
}

// TestFetchDebianNetwork fetches real kernels from the Debian mirror the
// host's apt sources name (or $KLAB_DEBIAN_MIRROR). It runs only with
// KLAB_NETWORK_TESTS=1, into $KLAB_CACHE_DIR when set (so the downloads can
// be kept), else into a temporary directory.
func TestFetchDebianNetwork(t *testing.T) {
	testenv.OptIn(t, "KLAB_NETWORK_TESTS", "fetches real Debian kernels")
	cache := os.Getenv("KLAB_CACHE_DIR")
	if cache == "" {
		cache = t.TempDir()
	}
	ctx := context.Background()
	origPath := os.Getenv("PATH")
	for _, tc := range []struct {
		ref     string
		modules string // ModuleClosure of fuse, brd, virtio_console
	}{
		{"debian:7.3", "brd"},
		// On 6.1 virtio and virtio_ring are modules too.
		{"debian:6.1", "fuse brd virtio virtio_ring virtio_console"},
	} {
		var progress bytes.Buffer
		start := time.Now()
		k, err := debian.Fetch(ctx, tc.ref, debian.Options{CacheDir: cache, Progress: &progress})
		first := time.Since(start)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.ref, err, progress.String())
		}
		t.Logf("%s: first fetch %.1fs\n%s", tc.ref, first.Seconds(), progress.String())

		t.Setenv("PATH", t.TempDir()) // a cache hit must not run anything
		start = time.Now()
		k2, err := debian.Fetch(ctx, tc.ref, debian.Options{Mirror: "http://unreachable.example/debian", CacheDir: cache})
		second := time.Since(start)
		t.Setenv("PATH", origPath)
		if err != nil || k2.ID != k.ID {
			t.Fatalf("%s: cached fetch: %+v, %v", tc.ref, k2, err)
		}
		t.Logf("%s: second (cached) fetch %v", tc.ref, second)

		v, err := kerneldir.CheckBzImage(k.Image)
		if err != nil || v != k.Version {
			t.Errorf("%s: CheckBzImage = %q, %v (kernel.json says %q)", tc.ref, v, err, k.Version)
		}
		start = time.Now()
		ms, err := images.ModuleClosure(k.Modules, []string{"fuse", "brd", "virtio_console"})
		if err != nil {
			t.Fatalf("%s: %v", tc.ref, err)
		}
		var desc []string
		for _, m := range ms {
			desc = append(desc, m.Name+"="+strings.TrimPrefix(m.Path, k.Modules+"/"))
		}
		t.Logf("%s: %s %s %s (%s) id %s\n  images.ModuleClosure(fuse brd virtio_console) in %v: %s",
			tc.ref, k.Package, k.PackageVersion, k.Suite, k.Version, k.ID, time.Since(start), strings.Join(desc, " "))
		if got := moduleNames(ms); got != tc.modules {
			t.Errorf("%s: ModuleClosure = %q, want %q", tc.ref, got, tc.modules)
		}
		for _, m := range ms {
			if _, err := images.ReadModule(m.Path); err != nil {
				t.Error(err)
			}
		}
		// virtio_console finds its device only through a virtio
		// transport, which no depends= names.
		if ms, err := images.ModuleClosure(k.Modules, []string{"virtio_pci", "virtio_console", "fuse", "brd"}); err != nil {
			t.Error(err)
		} else {
			t.Logf("%s: images.ModuleClosure(virtio_pci virtio_console fuse brd) = %s", tc.ref, moduleNames(ms))
		}
	}
}

// moduleNames lists the names of ms, in order.
func moduleNames(ms []images.Module) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Name)
	}
	return strings.Join(s, " ")
}

// TestFetchDebianPinnedUnavailable: a pinned version that the cache lacks
// and the archive cannot supply (the archive lists other versions only,
// has no such kernel at all, or cannot send a package) fails with a
// PinnedUnavailableError that names the package and version, keeps the
// cause, and says that a run bundle carries the kernel. An unpinned
// reference keeps its plain error. A pinned kernel in the cache needs no
// archive at all.
func TestFetchDebianPinnedUnavailable(t *testing.T) {
	fa := newFakeArchive(t)
	// 7.3.5 is listed in full, but its packages cannot be downloaded.
	imagetest.WriteFile(t, filepath.Join(fa.dir, "show", "linux-binary-7.3.5+deb13-cloud-amd64=7.3.5-1"),
		[]byte("Package: linux-binary-7.3.5+deb13-cloud-amd64\nVersion: 7.3.5-1\nSize: 13604064\n"))
	cache, stage := openCache(t)
	o := debian.WithAptStage(debian.Options{Mirror: "http://mirror.example/debian", CacheDir: cache}, stage)
	ctx := context.Background()
	const bundleHint = "a run bundle carries the kernel (`klab runs pack RUN` on the machine that made the run, then `klab rerun FILE` or `klab runs unpack FILE` here)"
	for _, tc := range []struct {
		ref, pkg, version string
		cause             []string
	}{
		// Gone from the archive, which has another version.
		{"debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+0", "linux-image-7.3.4+deb13-cloud-amd64", "7.3.4-1~bpo13+0", []string{
			"no version of the Debian kernel debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+0 in bookworm trixie trixie-backports sid; versions there: 7.3.4-1~bpo13+1 (trixie-backports)",
		}},
		// A release the archive no longer has at all; the flavour is the
		// default one.
		{"debian:7.2.9+deb13=7.2.9-1~bpo13+1", "linux-image-7.2.9+deb13-cloud-amd64", "7.2.9-1~bpo13+1", []string{
			"no Debian kernel package for debian:7.2.9+deb13-cloud-amd64=7.2.9-1~bpo13+1",
		}},
		// Listed, but the archive cannot send the package.
		{"debian:7.3.5+deb13-cloud-amd64=7.3.5-1", "linux-image-7.3.5+deb13-cloud-amd64", "7.3.5-1", []string{
			"downloading linux-image-7.3.5+deb13-cloud-amd64: ", "Can't find linux-image-7.3.5+deb13-cloud-amd64=7.3.5-1",
		}},
	} {
		_, err := debian.Fetch(ctx, tc.ref, o)
		var pe *debian.PinnedUnavailableError
		if !errors.As(err, &pe) {
			t.Errorf("%s: err = %v, want a PinnedUnavailableError", tc.ref, err)
			continue
		}
		if pe.Package != tc.pkg || pe.Version != tc.version || pe.Err == nil {
			t.Errorf("%s: error = %+v", tc.ref, pe)
		}
		want := "Debian kernel " + tc.pkg + " version " + tc.version + " is not in klab's cache and cannot be fetched; " + bundleHint + ": "
		if msg := err.Error(); msg != want+pe.Err.Error() {
			t.Errorf("%s: message\n%s\nwant %q and the cause", tc.ref, msg, want)
		}
		for _, s := range tc.cause {
			if !strings.Contains(pe.Err.Error(), s) {
				t.Errorf("%s: cause %q lacks %q", tc.ref, pe.Err, s)
			}
		}
		if errors.Unwrap(err) != pe.Err {
			t.Errorf("%s: Unwrap = %v", tc.ref, errors.Unwrap(err))
		}
	}

	// The same failures of unpinned references keep today's errors.
	for ref, want := range map[string]string{
		"debian:7.2.9+deb13-cloud-amd64": "no Debian kernel package for debian:7.2.9+deb13-cloud-amd64 in",
		"debian:7.3.5+deb13-cloud-amd64": "downloading linux-image-7.3.5+deb13-cloud-amd64: ",
	} {
		_, err := debian.Fetch(ctx, ref, o)
		var pe *debian.PinnedUnavailableError
		if err == nil || errors.As(err, &pe) || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "run bundle") {
			t.Errorf("%s: err = %v, want one starting %q", ref, err, want)
		}
	}

	// Once cached, a pinned kernel is there with no mirror to reach.
	const pinned = "debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1"
	k, err := debian.Fetch(ctx, pinned, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	if k2, err := debian.Fetch(ctx, pinned, debian.Options{Mirror: "file:/nonexistent", CacheDir: cache}); err != nil || k2.ID != k.ID {
		t.Errorf("cached pinned kernel: %+v, %v", k2, err)
	}
}

// TestFetchDebianPinnedMirrorUnreachable: a pinned version that the cache
// lacks, from a mirror apt cannot read (apt-get update fails and leaves no
// package lists), fails with a PinnedUnavailableError that keeps apt's
// failure; the same failure for an unpinned reference is the plain one.
// It runs the host's apt-get, which reads nothing but the missing mirror.
func TestFetchDebianPinnedMirrorUnreachable(t *testing.T) {
	testenv.RequiresCommand(t, "apt-get")
	cache, stage := openCache(t)
	o := debian.WithAptStage(debian.Options{Mirror: "file:/nonexistent", CacheDir: cache}, stage)
	ctx := context.Background()
	_, err := debian.Fetch(ctx, "debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1", o)
	var pe *debian.PinnedUnavailableError
	if !errors.As(err, &pe) || pe.Package != "linux-image-7.3.4+deb13-cloud-amd64" || pe.Version != "7.3.4-1~bpo13+1" {
		t.Fatalf("err = %v, want a PinnedUnavailableError", err)
	}
	for _, s := range []string{
		"Debian kernel linux-image-7.3.4+deb13-cloud-amd64 version 7.3.4-1~bpo13+1 is not in klab's cache and cannot be fetched; a run bundle carries the kernel (",
		"`klab runs pack RUN` on the machine that made the run, then `klab rerun FILE` or `klab runs unpack FILE` here): updating Debian package lists: ",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message lacks %q:\n%s", s, err)
		}
	}
	_, err = debian.Fetch(ctx, "debian:7.3", o)
	if err == nil || errors.As(err, &pe) || !strings.HasPrefix(err.Error(), "updating Debian package lists: ") {
		t.Errorf("unpinned: err = %v", err)
	}
}
