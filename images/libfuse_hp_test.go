package images

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"klab/images/apt"
	"klab/images/debian"
	"klab/images/internal/imagetest"
	"klab/images/keyed"
	"klab/internal/proc"
	"klab/internal/testenv"
)

func TestParseDsc(t *testing.T) {
	dsc := []byte(`-----BEGIN PGP SIGNED MESSAGE-----
Hash: SHA512

Format: 3.0 (quilt)
Source: fuse3
Version: 3.18.3-1
Checksums-Sha1:
 1111 2579900 fuse3_3.18.3.orig.tar.gz
Checksums-Sha256:
 aaaa 2579900 fuse3_3.18.3.orig.tar.gz
 bbbb 314 fuse3_3.18.3.orig.tar.gz.asc
 cccc 11940 fuse3_3.18.3-1.debian.tar.xz
Files:
 dddd 2579900 fuse3_3.18.3.orig.tar.gz

-----BEGIN PGP SIGNATURE-----
`)
	files := parseDscFiles(dsc)
	if len(files) != 3 || files[0] != (dscFile{"fuse3_3.18.3.orig.tar.gz", "aaaa"}) {
		t.Fatalf("parseDscFiles = %+v", files)
	}
	orig, deb, err := sourceTarballs(files)
	if err != nil || orig.Name != "fuse3_3.18.3.orig.tar.gz" || orig.SHA256 != "aaaa" || deb != "fuse3_3.18.3-1.debian.tar.xz" {
		t.Errorf("sourceTarballs = %+v, %q, %v", orig, deb, err)
	}
	orig, deb, err = sourceTarballs([]dscFile{{"native_1.0.tar.xz", "eeee"}})
	if err != nil || orig.Name != "native_1.0.tar.xz" || deb != "" {
		t.Errorf("native: %+v, %q, %v", orig, deb, err)
	}
	if _, _, err := sourceTarballs(nil); err == nil {
		t.Error("no tarball accepted")
	}
	if got := parseSeries([]byte("# comment\nfix-a.patch\n\nfix-b.patch -p1 # why\n")); strings.Join(got, ",") != "fix-a.patch,fix-b.patch" {
		t.Errorf("parseSeries = %q", got)
	}
}

func TestPassthroughHPCachedOffline(t *testing.T) {
	cache := t.TempDir()
	hdir := filepath.Join(cache, "libfuse-hp")
	dir := filepath.Join(hdir, "fuse3_3.18.3-1")
	imagetest.WriteFile(t, filepath.Join(dir, "build.json"), []byte(`{"package":"fuse3","version":"3.18.3-1","suite":"sid","binary":"passthrough_hp"}`))
	imagetest.WriteFile(t, filepath.Join(dir, "passthrough_hp"), []byte("#!/bin/sh\n"))
	if err := os.Chmod(filepath.Join(dir, "passthrough_hp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := keyed.AddAlias(hdir, "sid", filepath.Base(dir)); err != nil {
		t.Fatal(err)
	}
	// No mirror and no build tools are needed for a cached answer.
	t.Setenv(apt.MirrorEnv, "")
	t.Setenv("PATH", t.TempDir())
	p, v, err := BuildPassthroughHP(t.Context(), PassthroughHPOptions{DebianOptions: debian.Options{CacheDir: cache}})
	if err != nil || p != filepath.Join(dir, "passthrough_hp") || v != "3.18.3-1" {
		t.Fatalf("BuildPassthroughHP = %q, %q, %v", p, v, err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, ok := passthroughHPCache(hdir, nil).Lookup("sid"); ok {
		t.Error("an alias to a directory without its binary answered")
	}
}

// TestBuildPassthroughHP downloads sid's fuse3 source and builds
// passthrough_hp with io_uring; as root it also mounts it over io_uring.
func TestBuildPassthroughHP(t *testing.T) {
	testenv.OptIn(t, "KLAB_LIBFUSE_HP", "downloads Debian sid's fuse3 source (about 15 MB with the Sources list) and builds libfuse for about a minute")
	for _, c := range []string{"meson", "ninja", "c++", "pkg-config", "apt-get"} {
		testenv.RequiresCommand(t, c)
	}
	cache := os.Getenv("KLAB_LIBFUSE_HP_CACHE") // reuse a cache; empty: a cold build
	if cache == "" {
		cache = t.TempDir()
	}
	var log bytes.Buffer
	o := PassthroughHPOptions{DebianOptions: debian.Options{CacheDir: cache, Progress: &log}}
	start := time.Now()
	bin, version, err := BuildPassthroughHP(context.Background(), o)
	t.Logf("first call: %v\n%s", time.Since(start), log.String())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, "3.") {
		t.Errorf("version %q", version)
	}
	// A cache hit runs nothing: with an empty PATH, any tool it started
	// would fail the call.
	origPath := os.Getenv("PATH")
	t.Setenv("PATH", t.TempDir())
	start = time.Now()
	again, v2, err := BuildPassthroughHP(context.Background(), o)
	t.Logf("second call: %v", time.Since(start))
	t.Setenv("PATH", origPath)
	if err != nil || again != bin || v2 != version {
		t.Errorf("cached call = %q, %q, %v; want %q, %q without running anything", again, v2, err, bin, version)
	}
	help, err := proc.Run(context.Background(), proc.Opts{Timeout: time.Minute}, bin, "--help")
	if err != nil || !bytes.Contains(help, []byte("io_uring_q_depth")) {
		t.Fatalf("%s --help: %v\n%s", bin, err, help)
	}
	t.Run("mount", func(t *testing.T) { mountPassthroughHPURing(t, bin) })
}

// mountPassthroughHPURing mounts bin over io_uring, reads a file through
// it and checks that the reads came over the ring.
func mountPassthroughHPURing(t *testing.T, bin string) {
	testenv.RequiresRoot(t)
	const param = "/sys/module/fuse/parameters/enable_uring"
	old, err := os.ReadFile(param)
	if err != nil {
		testenv.Missingf(t, "the host kernel has no FUSE-over-io_uring: %v", err)
	}
	if err := os.WriteFile(param, []byte("Y"), 0o644); err != nil {
		testenv.Missingf(t, "cannot enable FUSE-over-io_uring: %v", err)
	}
	t.Cleanup(func() { os.WriteFile(param, bytes.TrimSpace(old), 0o644) })

	src, mnt := t.TempDir(), t.TempDir()
	data := bytes.Repeat([]byte("klab passthrough_hp io_uring\n"), 1<<16)
	if err := os.WriteFile(filepath.Join(src, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// --nopassthrough: otherwise the kernel reads the backing file itself
	// and no READ reaches the server.
	cmd := proc.Command(ctx, bin, "--foreground", "--debug-fuse", "--nopassthrough",
		"-o", "io_uring", "-o", "io_uring_q_depth=8", src, mnt)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	mounted := func() bool {
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		return bytes.Contains(mi, []byte(" "+mnt+" ")) && bytes.Contains(mi, []byte(" - fuse"))
	}
	for !mounted() {
		select {
		case err := <-done:
			t.Fatalf("passthrough_hp exited before mounting: %v\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	got, rerr := os.ReadFile(filepath.Join(mnt, "f"))
	if err := syscall.Unmount(mnt, 0); err != nil {
		syscall.Unmount(mnt, syscall.MNT_DETACH)
		t.Errorf("unmount: %v", err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancel()
		<-done
	}
	if rerr != nil || !bytes.Equal(got, data) {
		t.Errorf("reading through the mount: %v (%d bytes, want %d)", rerr, len(got), len(data))
	}
	log := out.String()
	// libfuse's debug output says "dev unique" for a request read from
	// /dev/fuse and "cqe unique" for one taken from the ring.
	if !strings.Contains(log, "starting io-uring") || !strings.Contains(log, "opcode: READ") {
		t.Fatalf("passthrough_hp did not serve reads over io_uring:\n%s", log)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "opcode: READ") && !strings.HasPrefix(line, "cqe unique") {
			t.Errorf("a READ came over /dev/fuse, not the ring: %q", line)
		}
	}
}
