package bundle

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/results"
)

// writeFile writes s to p, making its directory.
func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeKernel writes a kernel's files (image, config, modules) into dir
// and returns the kernel.
func fakeKernel(t *testing.T, dir, name, id, image string) results.Kernel {
	t.Helper()
	writeFile(t, filepath.Join(dir, "vmlinuz"), image)
	writeFile(t, filepath.Join(dir, "config"), "CONFIG_FUSE_FS=m\n")
	writeFile(t, filepath.Join(dir, "modules", "modules.dep"), "kernel/fs/fuse/fuse.ko:\n")
	writeFile(t, filepath.Join(dir, "modules", "kernel", "fs", "fuse", "fuse.ko"), "\x7fELF fuse")
	return results.Kernel{Name: name, ID: id, Source: "debian", Version: "7.3.0",
		Image: filepath.Join(dir, "vmlinuz"), Config: filepath.Join(dir, "config"), Modules: filepath.Join(dir, "modules")}
}

// fakeTree writes a matrix results tree of three cells: fx and px on
// kernel A (sharing it), fx on kernel B (whose config and modules are
// A's, byte for byte), and a cell that failed before it made a run. It
// returns the tree's directory and its description.
func fakeTree(t *testing.T) (string, Tree) {
	t.Helper()
	root := t.TempDir()
	ka := fakeKernel(t, filepath.Join(root, "cache", "a"), "debian:7.3", "k-aaaaaaaaaaaaaaaa", "MZ kernel A")
	kb := fakeKernel(t, filepath.Join(root, "cache", "b"), "debian:6.12", "k-bbbbbbbbbbbbbbbb", "MZ kernel B")
	dir := filepath.Join(root, "runs", "merged")
	writeFile(t, filepath.Join(dir, "matrix.json"), `{"schema":"klab.matrix-run/v1","name":"smoke"}`)
	writeFile(t, filepath.Join(dir, "matrix.yaml"), "name: smoke\n")
	writeFile(t, filepath.Join(dir, "report.md"), "# smoke\n")
	tree := Tree{Name: "merged", Matrix: "smoke"}
	// One initramfs image per kernel, as the lab assembles them.
	imgs := map[string]string{}
	for _, k := range []results.Kernel{ka, kb} {
		imgs[k.ID] = filepath.Join(root, "cache", "initramfs", "klab-"+k.ID+".cpio")
		writeFile(t, imgs[k.ID], "070701 initramfs for "+k.ID)
	}
	for _, c := range []struct {
		id, exp string
		k       results.Kernel
	}{{"fx@debian_7.3", "fx", ka}, {"px@debian_7.3", "px", ka}, {"fx@debian_6.12", "fx", kb}} {
		run := "cells/" + c.id + "/20260301-101500-exp-" + c.exp + "-a1b2c3"
		man, err := json.Marshal(map[string]any{"schema": 1, "kernels": []map[string]any{{"ref": c.k.Name, "kernel": c.k}},
			"initramfs": []results.Initramfs{{Path: imgs[c.k.ID], SHA256: strings.Repeat("0", 64)}}})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, run, "experiment.json"), string(man))
		writeFile(t, filepath.Join(dir, run, "samples.json"), `{"samples":[]}`)
		writeFile(t, filepath.Join(dir, "cells", c.id, "cell.json"), `{"id":"`+c.id+`","status":"complete"}`)
		tree.Cells = append(tree.Cells, TreeCell{ID: c.id, Kernel: c.k.Name, Experiment: c.exp, Status: "complete", Run: run})
	}
	writeFile(t, filepath.Join(dir, "cells", "bx@debian_7.3", "cell.json"), `{"id":"bx@debian_7.3","status":"error"}`)
	tree.Cells = append(tree.Cells, TreeCell{ID: "bx@debian_7.3", Kernel: "debian:7.3", Experiment: "bx", Status: "error"})
	return dir, tree
}

// treeFiles are the files of a tree, relative, with their contents.
func treeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// packTree packs a tree into a fresh directory.
func packTree(t *testing.T, dir string, tree Tree, opts PackOptions) (string, *PackResult) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "merged"+Extension)
	res, err := PackTree(dir, out, tree, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out, res
}

// TestTreeRoundTrip: a packed tree holds each of its files, each kernel
// that its cells share once and each blob once; it unpacks to the same
// bytes, and PlaceTree puts the tree at its destination and the kernels
// in the kernels directory.
func TestTreeRoundTrip(t *testing.T) {
	dir, tree := fakeTree(t)
	file, res := packTree(t, dir, tree, PackOptions{KlabVersion: "klab test"})
	ix := res.Index
	if ix.Schema != SchemaV2 || ix.Kind != KindMatrix || ix.RunID != "" || ix.Tree == nil || ix.Tree.Name != "merged" || len(ix.Tree.Cells) != 4 {
		t.Fatalf("index: %+v", ix)
	}
	if len(ix.Kernels) != 2 || ix.Kernels[0].Kernel.ID != "k-aaaaaaaaaaaaaaaa" || ix.Kernels[1].Kernel.ID != "k-bbbbbbbbbbbbbbbb" {
		t.Errorf("kernels: %+v", ix.Kernels)
	}
	files := treeFiles(t, dir)
	var blobs, treeMembers int
	for _, m := range ix.Members {
		switch {
		case strings.HasPrefix(m.Name, BlobPrefix):
			blobs++
		case strings.HasPrefix(m.Name, TreePrefix):
			treeMembers++
			if _, ok := files[strings.TrimPrefix(m.Name, TreePrefix)]; !ok {
				t.Errorf("member %s is no file of the tree", m.Name)
			}
		default:
			t.Errorf("member %s", m.Name)
		}
	}
	// Two images; the config, modules.dep and fuse.ko are the same in
	// both kernels; two initramfs images, each once.
	if blobs != 7 || treeMembers != len(files) || len(ix.Initramfs) != 2 {
		t.Errorf("%d blobs, %d tree members and %d initramfs, want 7, %d and 2", blobs, treeMembers, len(ix.Initramfs), len(files))
	}
	if got := ix.Tree.Cells[0].RunID(); got != "20260301-101500-exp-fx-a1b2c3" {
		t.Errorf("run id of cell 0: %q", got)
	}
	if head, err := ReadIndex(file, Limits{}); err != nil || !head.IsMatrix() || len(head.Members) != len(ix.Members) {
		t.Errorf("ReadIndex: %+v, %v", head, err)
	}

	dest := filepath.Join(t.TempDir(), "x")
	got, err := Unpack(file, dest, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.IsMatrix() || got.Tree.Name != "merged" {
		t.Fatalf("unpacked index %+v", got)
	}
	if _, err := Place(dest, got, t.TempDir(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "matrix results tree merged, not a run") {
		t.Errorf("Place of a tree: %v", err)
	}
	runs, kernels := t.TempDir(), filepath.Join(t.TempDir(), "bundles")
	placed, err := PlaceTree(dest, got, filepath.Join(runs, got.Tree.Name), kernels)
	if err != nil {
		t.Fatal(err)
	}
	if placed.TreeDir != filepath.Join(runs, "merged") || placed.RunDir != "" || len(placed.Kernels) != 2 || len(placed.Initramfs) != 2 {
		t.Fatalf("placed %+v", placed)
	}
	if after := treeFiles(t, placed.TreeDir); len(after) != len(files) {
		t.Errorf("placed tree has %d files, want %d", len(after), len(files))
	} else {
		for rel, data := range files {
			if after[rel] != data {
				t.Errorf("placed %s differs", rel)
			}
		}
	}
	for i, k := range placed.Kernels {
		info, err := ReadKernelInfo(k.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if info.ID != ix.Kernels[i].Kernel.ID || info.Image != filepath.Join(k.Dir, "vmlinuz") {
			t.Errorf("kernel.json of %s: %+v", k.Dir, info)
		}
		sameFile(t, ix.Kernels[i].Kernel.Image, info.Image)
		sameFile(t, filepath.Join(ix.Kernels[i].Kernel.Modules, "kernel/fs/fuse/fuse.ko"), filepath.Join(k.Dir, "modules/kernel/fs/fuse/fuse.ko"))
	}
	// Again at the same place: refused before anything is placed.
	dest2 := filepath.Join(t.TempDir(), "y")
	got2, err := Unpack(file, dest2, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PlaceTree(dest2, got2, placed.TreeDir, kernels); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("second PlaceTree: %v", err)
	}
	if _, err := PlaceTree(dest2, &Index{RunID: runID}, filepath.Join(runs, "z"), kernels); err == nil {
		t.Error("PlaceTree of a run's index")
	}
}

// TestTreeResultsOnly: a results-only tree bundle holds the tree's files
// and no blob.
func TestTreeResultsOnly(t *testing.T) {
	dir, tree := fakeTree(t)
	_, full := packTree(t, dir, tree, PackOptions{})
	file, res := packTree(t, dir, tree, PackOptions{ResultsOnly: true})
	if !res.Index.ResultsOnly || len(res.Index.Kernels) != 0 || len(res.Index.Members) != len(treeFiles(t, dir)) || res.Size >= full.Size {
		t.Errorf("index %+v, %d bytes (with kernels %d)", res.Index, res.Size, full.Size)
	}
	if _, err := Unpack(file, filepath.Join(t.TempDir(), "x"), UnpackOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPackTreeRefuses: a tree with a link, a bad name or a cell whose
// run is gone is not packed, and no file is left.
func TestPackTreeRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		edit func(t *testing.T, dir string, tree *Tree)
		want string
	}{
		"link": {func(t *testing.T, dir string, _ *Tree) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, "cells", "passwd")); err != nil {
				t.Fatal(err)
			}
		}, "passwd: not a regular file"},
		"name": {func(_ *testing.T, _ string, tree *Tree) { tree.Name = "my results" }, `tree's name "my results" is not a plain name`},
		"run gone": {func(t *testing.T, dir string, tree *Tree) {
			if err := os.RemoveAll(filepath.Join(dir, tree.Cells[1].Run)); err != nil {
				t.Fatal(err)
			}
		}, "cell px@debian_7.3: its run directory cells/px@debian_7.3/20260301-101500-exp-px-a1b2c3 is missing"},
	} {
		t.Run(name, func(t *testing.T) {
			dir, tree := fakeTree(t)
			c.edit(t, dir, &tree)
			out := filepath.Join(t.TempDir(), "b"+Extension)
			if _, err := PackTree(dir, out, tree, PackOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("PackTree: %v, want %q", err, c.want)
			}
			if left, _ := os.ReadDir(filepath.Dir(out)); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

// TestTreeUnpackRefuses: a damaged, edited or hostile tree bundle is
// refused with the member or cell at fault named, and nothing is left.
func TestTreeUnpackRefuses(t *testing.T) {
	dir, tree := fakeTree(t)
	good, _ := packTree(t, dir, tree, PackOptions{})
	es := readEntries(t, good)
	report := -1
	for i, e := range es {
		if e.hdr.Name == "tree/report.md" {
			report = i
		}
	}
	if report < 0 {
		t.Fatal("no tree/report.md in the bundle")
	}
	reg := func(name, data string) entry {
		return entry{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, []byte(data)}
	}
	clone := func() []entry { return append([]entry(nil), es...) }
	index := func(edit func(*Index)) func() []entry {
		return func() []entry { return withIndex(t, clone(), edit) }
	}
	cases := map[string]struct {
		es    func() []entry
		wants []string
	}{
		"one byte changed": {func() []entry {
			out := clone()
			d := bytes.Clone(out[report].data)
			d[0] ^= 1
			out[report].data = d
			return out
		}, []string{"member tree/report.md: SHA-256"}},
		"escaping":        {func() []entry { return append(clone(), reg("tree/../../x", "x")) }, []string{`member "tree/../../x": path leaves`}},
		"listed escaping": {index(func(ix *Index) { ix.Members[0].Name = "tree/../x" }), []string{`member "tree/../x": path leaves the destination`}},
		"symlink": {func() []entry {
			return append(clone(), entry{tar.Header{Typeflag: tar.TypeSymlink, Name: "tree/cells/link", Linkname: "/etc/passwd"}, nil})
		}, []string{"member tree/cells/link: a symbolic link"}},
		"hard link": {func() []entry {
			return withIndex(t, append(clone(), entry{tar.Header{Typeflag: tar.TypeLink, Name: "tree/hard", Linkname: "tree/report.md"}, nil}), func(ix *Index) {
				ix.Members = append(ix.Members, Member{Name: "tree/hard", Size: 0, SHA256: strings.Repeat("0", 64)})
			})
		}, []string{"member tree/hard: a hard link"}},
		"a run's member": {index(func(ix *Index) {
			ix.Members = append(ix.Members, Member{Name: "run/x", Size: 1, SHA256: strings.Repeat("0", 64)})
		}), []string{`member "run/x": want a name under tree/ or blobs/sha256/`}},
		"cell run escaping": {index(func(ix *Index) { ix.Tree.Cells[0].Run = "../../etc" }), []string{`cell fx@debian_7.3: run "../../etc": path leaves the destination`}},
		"cell run empty":    {index(func(ix *Index) { ix.Tree.Cells[0].Run = "cells/none" }), []string{"cell fx@debian_7.3: run cells/none holds no member"}},
		"cell id a path":    {index(func(ix *Index) { ix.Tree.Cells[0].ID = "a/b" }), []string{`cell "a/b": the id is not a plain name`}},
		"cell twice":        {index(func(ix *Index) { ix.Tree.Cells[1].ID = ix.Tree.Cells[0].ID }), []string{"cell fx@debian_7.3 listed twice"}},
		"tree name":         {index(func(ix *Index) { ix.Tree.Name = "../runs" }), []string{`tree name "../runs" is not a plain name`}},
		"no tree":           {index(func(ix *Index) { ix.Tree = nil }), []string{"a matrix tree's bundle without its tree"}},
		"kind in v1":        {index(func(ix *Index) { ix.Schema = Schema }), []string{`kind "matrix" in a klab.bundle/v1 bundle`}},
		"unknown kind":      {index(func(ix *Index) { ix.Kind = "lab" }), []string{`kind "lab", want run or matrix`}},
		"unknown schema":    {index(func(ix *Index) { ix.Schema = "klab.bundle/v9" }), []string{`schema "klab.bundle/v9"`, "a newer klab may read it"}},
		"kernel file escaping": {index(func(ix *Index) { ix.Kernels[1].Files[0].Path = "../../etc/x" }),
			[]string{`kernel k-bbbbbbbbbbbbbbbb: file "../../etc/x": path leaves the destination`}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			file := filepath.Join(t.TempDir(), "bad"+Extension)
			writeEntries(t, file, c.es())
			_, err := Unpack(file, filepath.Join(parent, "dest"), UnpackOptions{})
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
		})
	}
}

// TestV1Index: a run's bundle is v1 without a kind, as before matrix
// trees could be packed, and a v1 bundle as an older klab wrote it
// unpacks and places.
func TestV1Index(t *testing.T) {
	run, _ := fakeRun(t)
	file, _ := pack(t, run, PackOptions{})
	es := readEntries(t, file)
	var raw map[string]any
	if err := json.Unmarshal(es[0].data, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["schema"] != Schema || raw["run_id"] != runID {
		t.Errorf("bundle.json: schema %v, run_id %v", raw["schema"], raw["run_id"])
	}
	for _, k := range []string{"kind", "tree"} {
		if _, ok := raw[k]; ok {
			t.Errorf("a run's bundle.json has %q", k)
		}
	}
	// bundle.json with exactly the fields of the first klab.bundle/v1.
	old := map[string]any{}
	for _, k := range []string{"schema", "run_id", "klab_version", "created", "members", "kernels"} {
		if v, ok := raw[k]; ok {
			old[k] = v
		}
	}
	data, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	es[0].data = data
	v1 := filepath.Join(t.TempDir(), "v1"+Extension)
	writeEntries(t, v1, es)
	dest := filepath.Join(t.TempDir(), "x")
	ix, err := Unpack(v1, dest, UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ix.IsMatrix() || ix.RunID != runID {
		t.Errorf("index %+v", ix)
	}
	if _, err := PlaceTree(dest, ix, filepath.Join(t.TempDir(), "t"), t.TempDir()); err == nil {
		t.Error("PlaceTree placed a run")
	}
	placed, err := Place(dest, ix, t.TempDir(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(run, "samples.json"), filepath.Join(placed.RunDir, "samples.json"))
}
