package bundle

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"klab/images/kerneldir"
	"klab/results"
)

const runID = "20260301-101500-exp-refrun-a1b2c3"

// fakeRun writes a run directory with a manifest naming one built kernel
// whose files (image, config, modules, build log, a patch) are small, and
// returns the run directory and the kernel.
func fakeRun(t *testing.T) (string, results.Kernel) {
	t.Helper()
	root := t.TempDir()
	kdir := filepath.Join(root, "cache", "kernels", "build", "results", "key1")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(kdir, "vmlinuz"), "MZ fake bzImage\x00\x01\x02")
	write(filepath.Join(kdir, "config"), "CONFIG_FUSE_FS=m\n")
	write(filepath.Join(kdir, "build.log"), "make bzImage\n")
	write(filepath.Join(kdir, "modules", "modules.dep"), "kernel/fs/fuse/fuse.ko:\n")
	write(filepath.Join(kdir, "modules", "kernel", "fs", "fuse", "fuse.ko"), "\x7fELF fuse")
	// A second module with the same content is stored once.
	write(filepath.Join(kdir, "modules", "kernel", "fs", "fuse", "copy.ko"), "\x7fELF fuse")
	if err := os.Symlink("/nonexistent/src", filepath.Join(kdir, "modules", "build")); err != nil {
		t.Fatal(err)
	}
	patch := filepath.Join(root, "fix.patch")
	write(patch, "From: a\nSubject: [PATCH] fix\n")
	k := results.Kernel{Name: "build:fix", Source: "build", Version: "7.3.0",
		Image: filepath.Join(kdir, "vmlinuz"), Config: filepath.Join(kdir, "config"), Modules: filepath.Join(kdir, "modules"),
		Build: &results.KernelBuild{Tree: "/src/linux", Log: filepath.Join(kdir, "build.log"),
			Patches:   []results.FileHash{{Path: patch, SHA256: "x"}},
			Fragments: []results.FileHash{{Path: "lab"}}}}
	id, err := kerneldir.ID(k.Image, k.Config)
	if err != nil {
		t.Fatal(err)
	}
	k.ID = id
	run := filepath.Join(root, "runs", runID)
	man := map[string]any{"schema": 1, "run_id": runID, "kernels": []map[string]any{{"ref": "build:fix", "kernel": k}}}
	data, err := json.Marshal(man)
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(run, "experiment.json"), string(data))
	write(filepath.Join(run, "samples.json"), `{"samples":[]}`)
	write(filepath.Join(run, "guests", "g1", "console.log"), "Linux version 7.3.0\n")
	return run, k
}

// pack packs run into a fresh directory and returns the bundle's path.
func pack(t *testing.T, run string, opts PackOptions) (string, *PackResult) {
	t.Helper()
	out := filepath.Join(t.TempDir(), runID+Extension)
	res, err := Pack(run, out, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out, res
}

// sameFile fails unless a and b hold the same bytes.
func sameFile(t *testing.T, a, b string) {
	t.Helper()
	da, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(da, db) {
		t.Errorf("%s and %s differ", a, b)
	}
}

// TestRoundTrip: a packed run unpacks elsewhere to the same bytes, and
// Place puts the run in a runs directory and the kernel's files, with a
// kernel.json pointing at them, in a kernels directory.
func TestRoundTrip(t *testing.T) {
	run, k := fakeRun(t)
	file, res := pack(t, run, PackOptions{KlabVersion: "klab test"})
	ix := res.Index
	if ix.Schema != Schema || ix.RunID != runID || len(ix.Kernels) != 1 || ix.KlabVersion != "klab test" {
		t.Fatalf("index: %+v", ix)
	}
	blobs := 0
	for _, m := range ix.Members {
		if strings.HasPrefix(m.Name, BlobPrefix) {
			blobs++
		}
	}
	// vmlinuz, config, modules.dep, fuse.ko (= copy.ko), build.log, patch.
	if blobs != 6 || len(ix.Kernels[0].Files) != 7 {
		t.Errorf("%d blobs and %d kernel files, want 6 and 7: %+v", blobs, len(ix.Kernels[0].Files), ix.Kernels[0].Files)
	}
	dest := filepath.Join(t.TempDir(), "x")
	got, err := Unpack(file, dest, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.RunID != runID || len(got.Members) != len(ix.Members) {
		t.Errorf("unpacked index %+v", got)
	}
	for _, rel := range []string{"experiment.json", "samples.json", "guests/g1/console.log"} {
		sameFile(t, filepath.Join(run, rel), filepath.Join(dest, "run", rel))
	}
	runs, kernels := t.TempDir(), filepath.Join(t.TempDir(), "bundles")
	placed, err := Place(dest, got, runs, kernels)
	if err != nil {
		t.Fatal(err)
	}
	if placed.RunDir != filepath.Join(runs, runID) || len(placed.Kernels) != 1 || placed.Kernels[0].Existed {
		t.Fatalf("placed %+v", placed)
	}
	sameFile(t, filepath.Join(run, "samples.json"), filepath.Join(placed.RunDir, "samples.json"))
	kd := placed.Kernels[0].Dir
	for from, to := range map[string]string{k.Image: "vmlinuz", k.Config: "config", k.Build.Log: "build.log",
		filepath.Join(k.Modules, "kernel/fs/fuse/fuse.ko"): "modules/kernel/fs/fuse/fuse.ko",
		filepath.Join(k.Modules, "kernel/fs/fuse/copy.ko"): "modules/kernel/fs/fuse/copy.ko",
		k.Build.Patches[0].Path:                            "patches/0001-fix.patch"} {
		sameFile(t, from, filepath.Join(kd, to))
	}
	if _, err := os.Lstat(filepath.Join(kd, "modules", "build")); err == nil {
		t.Error("the modules tree's symbolic link was packed")
	}
	info, err := ReadKernelInfo(kd)
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != k.ID || info.Image != filepath.Join(kd, "vmlinuz") || info.Modules != filepath.Join(kd, "modules") || info.Build.Log != filepath.Join(kd, "build.log") {
		t.Errorf("kernel.json: %+v", info)
	}
	// Again: the kernel is kept, the run is refused.
	dest2 := filepath.Join(t.TempDir(), "y")
	got2, err := Unpack(file, dest2, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Place(dest2, got2, runs, kernels); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second Place: %v", err)
	}
	if _, err := Pack(run, file, PackOptions{}); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("Pack over an existing file: %v", err)
	}
}

// TestResultsOnly: a results-only bundle holds the run and no blobs.
func TestResultsOnly(t *testing.T) {
	run, _ := fakeRun(t)
	_, full := pack(t, run, PackOptions{})
	file, res := pack(t, run, PackOptions{ResultsOnly: true})
	if !res.Index.ResultsOnly || len(res.Index.Kernels) != 0 {
		t.Errorf("index %+v", res.Index)
	}
	for _, m := range res.Index.Members {
		if !strings.HasPrefix(m.Name, RunPrefix) {
			t.Errorf("member %s in a results-only bundle", m.Name)
		}
	}
	if len(res.Index.Members) != 3 || res.Size >= full.Size {
		t.Errorf("%d members, %d bytes (full: %d)", len(res.Index.Members), res.Size, full.Size)
	}
	dest := filepath.Join(t.TempDir(), "x")
	if _, err := Unpack(file, dest, UnpackOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dest, "blobs")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("blobs/ in a results-only unpack: %v", err)
	}
}

// TestSkipBlobs: SkipBlobs verifies the artefacts but writes only the run.
func TestSkipBlobs(t *testing.T) {
	run, _ := fakeRun(t)
	file, _ := pack(t, run, PackOptions{})
	dest := filepath.Join(t.TempDir(), "x")
	if _, err := Unpack(file, dest, UnpackOptions{SkipBlobs: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dest, "blobs")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("blobs/ written with SkipBlobs: %v", err)
	}
	sameFile(t, filepath.Join(run, "experiment.json"), filepath.Join(dest, "run", "experiment.json"))
}

// TestPackRefusesLinks: a run directory holding a symbolic link is not
// packed.
func TestPackRefusesLinks(t *testing.T) {
	run, _ := fakeRun(t)
	if err := os.Symlink("/etc/passwd", filepath.Join(run, "passwd")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b"+Extension)
	if _, err := Pack(run, out, PackOptions{}); err == nil || !strings.Contains(err.Error(), "passwd: not a regular file") {
		t.Errorf("Pack: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused pack left %s", out)
	}
}

// TestWriteSourceChanged: a file that changes between hashing and
// writing is refused.
func TestWriteSourceChanged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := hashSource(p, "run/f")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(io.Discard)
	if err := writeSource(tw, s, &tar.Header{Name: "run/f", Size: 3, Typeflag: tar.TypeReg}); !errors.Is(err, ErrChanged) {
		t.Errorf("writeSource of a changed file: %v", err)
	}
}

// entry is one member of an archive being edited.
type entry struct {
	hdr  tar.Header
	data []byte
}

// readEntries reads every member of a bundle.
func readEntries(t *testing.T, file string) []entry {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var es []entry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return es
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, entry{*h, data})
	}
}

// writeEntries writes es as a bundle file.
func writeEntries(t *testing.T, file string, es []entry) {
	t.Helper()
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	for _, e := range es {
		h := e.hdr
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// withIndex returns es with bundle.json edited by edit.
func withIndex(t *testing.T, es []entry, edit func(*Index)) []entry {
	t.Helper()
	var ix Index
	if err := json.Unmarshal(es[0].data, &ix); err != nil {
		t.Fatal(err)
	}
	edit(&ix)
	data, err := json.Marshal(&ix)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]entry{{es[0].hdr, data}}, es[1:]...)
	return out
}

// TestUnpackRefuses: a damaged, edited or hostile bundle is refused with
// the member at fault named, and nothing is left next to dest.
func TestUnpackRefuses(t *testing.T) {
	run, _ := fakeRun(t)
	good, _ := pack(t, run, PackOptions{})
	es := readEntries(t, good)
	samples := -1
	for i, e := range es {
		if e.hdr.Name == "run/samples.json" {
			samples = i
		}
	}
	if samples < 0 {
		t.Fatal("no run/samples.json in the bundle")
	}
	reg := func(name, data string) entry {
		return entry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, []byte(data)}
	}
	clone := func() []entry { return append([]entry(nil), es...) }
	cases := map[string]struct {
		es    func() []entry
		lim   Limits
		wants []string
	}{
		"one byte changed": {func() []entry {
			out := clone()
			d := bytes.Clone(out[samples].data)
			d[0] ^= 1
			out[samples].data = d
			return out
		}, Limits{}, []string{"member run/samples.json: SHA-256"}},
		"one member missing": {func() []entry {
			out := clone()
			return append(out[:samples], out[samples+1:]...)
		}, Limits{}, []string{"member run/samples.json: listed in bundle.json but missing"}},
		"extra member":     {func() []entry { return append(clone(), reg("run/extra", "x")) }, Limits{}, []string{"member run/extra: not listed"}},
		"duplicate member": {func() []entry { return append(clone(), es[samples]) }, Limits{}, []string{"member run/samples.json: appears twice"}},
		"escaping ..":      {func() []entry { return append(clone(), reg("../x", "x")) }, Limits{}, []string{`member "../x": path leaves the destination`}},
		"escaping inside":  {func() []entry { return append(clone(), reg("run/../../x", "x")) }, Limits{}, []string{`member "run/../../x": path leaves`}},
		"absolute":         {func() []entry { return append(clone(), reg("/etc/x", "x")) }, Limits{}, []string{`member "/etc/x": absolute path`}},
		"listed escaping": {func() []entry {
			return withIndex(t, append(clone(), reg("../x", "x")), func(ix *Index) {
				ix.Members = append(ix.Members, Member{Name: "../x", Size: 1, SHA256: strings.Repeat("0", 64)})
			})
		}, Limits{}, []string{`member "../x": path leaves the destination`}},
		"symlink": {func() []entry {
			return append(clone(), entry{tar.Header{Typeflag: tar.TypeSymlink, Name: "run/link", Linkname: "/etc/passwd"}, nil})
		}, Limits{}, []string{"member run/link: a symbolic link"}},
		"hard link": {func() []entry {
			return withIndex(t, append(clone(), entry{tar.Header{Typeflag: tar.TypeLink, Name: "run/hard", Linkname: "run/samples.json"}, nil}), func(ix *Index) {
				ix.Members = append(ix.Members, Member{Name: "run/hard", Size: 0, SHA256: strings.Repeat("0", 64)})
			})
		}, Limits{}, []string{"member run/hard: a hard link"}},
		"device": {func() []entry {
			return append(clone(), entry{tar.Header{Typeflag: tar.TypeChar, Name: "run/dev", Devmajor: 1, Devminor: 3}, nil})
		}, Limits{}, []string{"member run/dev: a device"}},
		"oversized member": {clone, Limits{MaxIndex: 1 << 20, MaxMembers: 100, MaxMember: 12, MaxTotal: 1 << 20, MaxName: 256},
			[]string{"member run/experiment.json: size", "want 0..12"}},
		"too many members": {clone, Limits{MaxIndex: 1 << 20, MaxMembers: 2, MaxMember: 1 << 20, MaxTotal: 1 << 20, MaxName: 256},
			[]string{"members, at most 2 allowed"}},
		"a file as a directory": {func() []entry {
			return withIndex(t, append(clone(), reg("run/samples.json/x", "x")), func(ix *Index) {
				ix.Members = append(ix.Members, Member{Name: "run/samples.json/x", Size: 1, SHA256: "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"})
			})
		}, Limits{}, []string{"member run/samples.json/x: run/samples.json is a file, not a directory"}},
		"kernel file named kernel.json": {func() []entry {
			return withIndex(t, clone(), func(ix *Index) { ix.Kernels[0].Files[0].Path = "kernel.json" })
		}, Limits{}, []string{"file kernel.json: the name is klab's own"}},
		"kernel file escaping": {func() []entry {
			return withIndex(t, clone(), func(ix *Index) { ix.Kernels[0].Files[0].Path = "../../etc/x" })
		}, Limits{}, []string{`file "../../etc/x": path leaves the destination`}},
		"index not first": {func() []entry { return append([]entry{reg("run/x", "x")}, clone()...) }, Limits{}, []string{`first member is "run/x", want bundle.json`}},
		"size differs from the index": {func() []entry {
			out := clone()
			out[samples].data = append(bytes.Clone(out[samples].data), ' ')
			return out
		}, Limits{}, []string{"member run/samples.json: ", "bytes, bundle.json says"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			file := filepath.Join(t.TempDir(), "bad"+Extension)
			writeEntries(t, file, c.es())
			_, err := Unpack(file, filepath.Join(parent, "dest"), UnpackOptions{Limits: c.lim})
			if err == nil {
				t.Fatal("Unpack accepted it")
			}
			if !errors.Is(err, ErrBad) {
				t.Errorf("error %v is not ErrBad", err)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
			for _, p := range []string{"/x", filepath.Join(parent, "..", "x")} {
				if _, err := os.Lstat(p); err == nil && p != "/x" {
					t.Errorf("%s written", p)
				}
			}
		})
	}
}

// TestUnpackNotABundle: a file that is no bundle is refused as bad.
func TestUnpackNotABundle(t *testing.T) {
	file := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(file, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	if _, err := Unpack(file, filepath.Join(parent, "d"), UnpackOptions{}); !errors.Is(err, ErrBad) || !strings.Contains(err.Error(), "member bundle.json: ") || !strings.Contains(err.Error(), "not a klab bundle") {
		t.Errorf("Unpack: %v", err)
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestPackCompletesFromKernelDir: an experiment's manifest records no
// modules directory nor build log; Pack finds them in the cached kernel's
// directory beside the image, and the kernel directory Place makes loads
// as a cached kernel.
func TestPackCompletesFromKernelDir(t *testing.T) {
	run, k := fakeRun(t)
	kdir := filepath.Dir(k.Image)
	data, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(kdir, "kernel.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	bare := k
	bare.Modules = ""
	b := *k.Build
	b.Log = ""
	bare.Build = &b
	man := map[string]any{"schema": 1, "run_id": runID, "kernels": []map[string]any{{"ref": "build:fix", "kernel": bare}}}
	if data, err = json.Marshal(man); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "experiment.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	file, res := pack(t, run, PackOptions{})
	roles := map[string]int{}
	for _, f := range res.Index.Kernels[0].Files {
		roles[f.Role]++
	}
	if roles[RoleModule] != 3 || roles[RoleBuildLog] != 1 {
		t.Errorf("files by role %v, want 3 modules and the build log", roles)
	}
	dest := filepath.Join(t.TempDir(), "x")
	ix, err := Unpack(file, dest, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	placed, err := Place(dest, ix, t.TempDir(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got, err := kerneldir.Load(placed.Kernels[0].Dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := kerneldir.ID(got.Image, got.Config)
	if err != nil {
		t.Fatal(err)
	}
	if got.Modules == "" || got.ImageSize == 0 || got.Name != k.Name || id != k.ID || got.ID != k.ID {
		t.Errorf("loaded %+v, id of its files %s; want %s", got, id, k.ID)
	}
}

// TestInitramfs: the initramfs images the manifest records are packed by
// content and placed at initramfs/<sha256>.cpio; one that is gone is
// named as missing.
func TestInitramfs(t *testing.T) {
	run, _ := fakeRun(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "klab-1.cpio")
	changed := filepath.Join(dir, "klab-2.cpio")
	for _, p := range []string{img, changed} {
		if err := os.WriteFile(p, []byte("070701 cpio of "+p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum := func(p string) string {
		s, err := hashSource(p, "")
		if err != nil {
			t.Fatal(err)
		}
		return s.member.SHA256
	}
	mp := filepath.Join(run, "experiment.json")
	var man map[string]any
	data, err := os.ReadFile(mp)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &man); err != nil {
		t.Fatal(err)
	}
	man["initramfs"] = []results.Initramfs{{Path: img, SHA256: strings.Repeat("0", 64)}, {Path: changed, SHA256: strings.Repeat("1", 64)},
		{Path: filepath.Join(dir, "gone.cpio"), SHA256: strings.Repeat("2", 64)}}
	if data, err = json.Marshal(man); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	file, res := pack(t, run, PackOptions{})
	if len(res.Index.Initramfs) != 2 || res.Index.Initramfs[0].Blob != BlobPrefix+sum(img) || res.Index.Initramfs[0].Key != strings.Repeat("0", 64) {
		t.Fatalf("initramfs %+v, want the two images there", res.Index.Initramfs)
	}
	if missing := strings.Join(res.Index.Missing, "\n"); !strings.Contains(missing, "gone.cpio: no longer on this machine") {
		t.Errorf("missing:\n%s", missing)
	}
	dest := filepath.Join(t.TempDir(), "x")
	ix, err := Unpack(file, dest, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kernels := filepath.Join(t.TempDir(), "bundles")
	placed, err := Place(dest, ix, filepath.Join(t.TempDir(), "runs"), kernels)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(kernels, InitramfsDir, sum(img)+".cpio")
	if len(placed.Initramfs) != 2 || placed.Initramfs[0] != want {
		t.Fatalf("placed %v, want %s", placed.Initramfs, want)
	}
	sameFile(t, img, want)

	// An index naming an initramfs blob that is no member is refused.
	bad := *ix
	bad.Initramfs = []InitramfsFile{{Path: img, Blob: BlobPrefix + strings.Repeat("2", 64)}}
	if err := bad.Check(DefaultLimits); err == nil || !strings.Contains(err.Error(), "is not a member") {
		t.Errorf("Check: %v", err)
	}

	// A results-only bundle has none.
	if _, res := pack(t, run, PackOptions{ResultsOnly: true}); len(res.Index.Initramfs) != 0 {
		t.Errorf("results-only: initramfs %+v", res.Index.Initramfs)
	}
}
