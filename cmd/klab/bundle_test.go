package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"klab/experiments"
	"klab/results"
	"klab/results/bundle"
)

// withFakeKernel gives the run in dir a resolved kernel of small files,
// and returns the kernel.
func withFakeKernel(t *testing.T, dir string) results.Kernel {
	t.Helper()
	kdir := t.TempDir()
	files := map[string]string{"vmlinuz": "MZ fake", "config": "CONFIG_FUSE_FS=m\n", "modules/modules.dep": "", "modules/kernel/fs/fuse/fuse.ko": "\x7fELF"}
	for name, data := range files {
		p := filepath.Join(kdir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k := results.Kernel{Name: "debian:7.3", ID: "k-00112233445566ff", Source: "debian", Package: "linux-image-7.3.0-1-cloud-amd64",
		PackageVersion: "7.3.0-1", Image: filepath.Join(kdir, "vmlinuz"), Config: filepath.Join(kdir, "config"), Modules: filepath.Join(kdir, "modules")}
	p := filepath.Join(dir, experiments.ManifestFileName)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m experiments.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m.Kernels[0].Kernel = k
	if data, err = json.Marshal(&m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return k
}

// TestRunsPackUnpack: klab runs pack writes RUNID.klab.tar.zst, refuses
// to overwrite it without --force; klab runs unpack places the run and
// its kernel; klab report and klab compare read bundles as they read run
// directories.
func TestRunsPackUnpack(t *testing.T) {
	runs := t.TempDir()
	idA, idB := "20260301-101500-exp-refrun-a1b2c3", "20260302-101500-exp-refrun-d4e5f6"
	dirA, dirB := writeRefRunAs(t, runs, idA), writeRefRunAs(t, runs, idB)
	k := withFakeKernel(t, dirA)
	out := t.TempDir()
	t.Chdir(out)
	code, stdout, stderr := runCLI(t, "--runs-dir", runs, "runs", "pack", idA)
	fileA := idA + bundle.Extension
	if code != 0 || !strings.HasPrefix(stdout, fileA+": ") || !strings.Contains(stdout, "members, run "+idA+", with the artefacts of 1 kernel(s)\n") {
		t.Fatalf("runs pack: status %d, stderr %q:\n%s", code, stderr, stdout)
	}
	code, _, stderr = runCLI(t, "--runs-dir", runs, "runs", "pack", idA)
	if code != exitBadInput || !strings.Contains(stderr, fileA+" exists already; give --force") {
		t.Errorf("runs pack again: status %d, stderr %q", code, stderr)
	}
	if code, _, stderr = runCLI(t, "--runs-dir", runs, "runs", "pack", idA, "--force"); code != 0 {
		t.Errorf("runs pack --force: status %d, stderr %q", code, stderr)
	}
	fileB := filepath.Join(out, "b"+bundle.Extension)
	code, stdout, stderr = runCLI(t, "--runs-dir", runs, "runs", "pack", dirB, "-o", fileB, "--results-only")
	if code != 0 || !strings.Contains(stdout, "results only\n") {
		t.Fatalf("runs pack --results-only: status %d, stderr %q:\n%s", code, stderr, stdout)
	}

	// Reports and comparisons of bundles are those of the runs.
	for _, format := range []string{"text", "json"} {
		_, fromDir, _ := runCLI(t, "report", dirA, "--format", format)
		code, fromFile, stderr := runCLI(t, "report", fileA, "--format", format)
		// JSON names the run's directory: the bundle's, for a bundle.
		fromFile = strings.Replace(fromFile, `"run_dir": "`+fileA+`"`, `"run_dir": "`+dirA+`"`, 1)
		if code != 0 || fromFile != fromDir || fromDir == "" {
			t.Errorf("report FILE --format %s: status %d, stderr %q:\n%s\nwant:\n%s", format, code, stderr, fromFile, fromDir)
		}
	}
	_, fromDirs, _ := runCLI(t, "compare", dirA, dirB)
	code, fromFiles, stderr := runCLI(t, "compare", fileA, fileB)
	if code != 0 || fromFiles != fromDirs || !strings.Contains(fromFiles, "A: "+idA+"\n") {
		t.Errorf("compare FILE_A FILE_B: status %d, stderr %q:\n%s\nwant:\n%s", code, stderr, fromFiles, fromDirs)
	}

	// Unpacking places the run and the kernel.
	runs2, cache2 := t.TempDir(), t.TempDir()
	code, stdout, stderr = runCLI(t, "--runs-dir", runs2, "--cache-dir", cache2, "runs", "unpack", fileA)
	kdir := filepath.Join(cache2, "bundles", k.ID)
	want := "run " + idA + ": " + filepath.Join(runs2, idA) + "\nkernel debian:7.3 (" + k.ID + "): " + kdir + ", placed; klab boot --kernel bundle:" + k.ID + " boots it\n"
	if code != 0 || stdout != want {
		t.Fatalf("runs unpack: status %d, stderr %q:\n%s\nwant:\n%s", code, stderr, stdout, want)
	}
	for _, rel := range []string{experiments.ManifestFileName, experiments.SamplesFileName} {
		a, _ := os.ReadFile(filepath.Join(dirA, rel))
		b, err := os.ReadFile(filepath.Join(runs2, idA, rel))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("unpacked %s differs (%v)", rel, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(kdir, "modules", "kernel", "fs", "fuse", "fuse.ko")); err != nil || string(b) != "\x7fELF" {
		t.Errorf("unpacked module: %q, %v", b, err)
	}
	code, stdout, _ = runCLI(t, "--runs-dir", runs2, "runs", "list")
	if code != 0 || !strings.Contains(stdout, idA) {
		t.Errorf("runs list after unpack:\n%s", stdout)
	}
	code, _, stderr = runCLI(t, "--runs-dir", runs2, "--cache-dir", cache2, "runs", "unpack", fileA)
	if code == 0 || !strings.Contains(stderr, "exists already") {
		t.Errorf("runs unpack again: status %d, stderr %q", code, stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(runs2, ".*")); len(left) != 0 {
		t.Errorf("left in the runs directory: %v", left)
	}
}

// TestBadBundle: a bundle with a byte changed is refused by klab runs
// unpack, klab report and klab compare with status 2 and the member
// named, and klab runs unpack leaves nothing in the runs directory or
// the cache.
func TestBadBundle(t *testing.T) {
	runs := t.TempDir()
	id := "20260301-101500-exp-refrun-a1b2c3"
	dir := writeRefRunAs(t, runs, id)
	file := filepath.Join(t.TempDir(), "a"+bundle.Extension)
	if _, err := bundle.Pack(dir, file, bundle.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad"+bundle.Extension)
	corrupt(t, file, bad, "run/"+experiments.SamplesFileName)
	runs2, cache2 := t.TempDir(), t.TempDir()
	for _, args := range [][]string{{"runs", "unpack", bad}, {"report", bad}, {"compare", file, bad}, {"rerun", bad}} {
		code, _, stderr := runCLI(t, append([]string{"--runs-dir", runs2, "--cache-dir", cache2}, args...)...)
		if code != exitBadInput || !strings.Contains(stderr, "member run/samples.json: SHA-256") {
			t.Errorf("klab %s: status %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
	}
	for _, d := range []string{runs2, cache2} {
		if left, _ := os.ReadDir(d); len(left) != 0 {
			t.Errorf("left in %s: %v", d, left)
		}
	}
}

// corrupt copies the bundle src to dst with the first byte of member
// flipped.
func corrupt(t *testing.T, src, dst, member string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == member && len(data) > 0 {
			data[0] ^= 1
			found = true
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatalf("no member %s in %s", member, src)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
