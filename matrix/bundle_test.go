package matrix

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"klab/results"
	"klab/results/bundle"
)

// filesOpener is fakeOpener whose kernels have files: an image of their
// own and one config that all share.
type filesOpener struct {
	fakeOpener
	dir string
}

func (o filesOpener) ResolveKernel(ctx context.Context, ref string) (*results.Kernel, error) {
	k, err := resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	kdir := filepath.Join(o.dir, safe(ref))
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		return nil, err
	}
	for name, data := range map[string]string{"vmlinuz": "MZ " + ref, "config": "CONFIG_FUSE_FS=m\nCONFIG_FUSE_IO_URING=y\n"} {
		if err := os.WriteFile(filepath.Join(kdir, name), []byte(data), 0o644); err != nil {
			return nil, err
		}
	}
	k.ID = fmt.Sprintf("k-%x", sha256.Sum256([]byte(ref)))[:18]
	k.Image, k.Config = filepath.Join(kdir, "vmlinuz"), filepath.Join(kdir, "config")
	return k, nil
}

// TestPackTree: a tree's bundle holds its files and the kernels its six
// cells used, each once (three kernels, each in two cells), and the tree
// unpacked and placed elsewhere reports what the tree does.
func TestPackTree(t *testing.T) {
	f := testFile(t, matrixYAML)
	root := t.TempDir()
	o, _ := options(filepath.Join(root, "smoke-tree"), 2, Shard{1, 1})
	o.Opener = filesOpener{fakeOpener{mu: &sync.Mutex{}, opened: new(int)}, filepath.Join(root, "cache")}
	tr, err := Run(context.Background(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	if !IsTree(tr.Dir) || IsTree(root) {
		t.Error("IsTree")
	}
	want := rowsOf(tr.Report())
	out := filepath.Join(root, "smoke"+bundle.Extension)
	res, err := tr.Pack(out, bundle.PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	if !ix.IsMatrix() || ix.Tree.Name != "smoke-tree" || ix.Tree.Matrix != "t" || len(ix.Tree.Cells) != 6 || len(ix.Kernels) != 3 {
		t.Fatalf("index: %+v", ix)
	}
	blobs := 0
	for _, m := range ix.Members {
		if strings.HasPrefix(m.Name, bundle.BlobPrefix) {
			blobs++
		}
	}
	if blobs != 4 { // three images, one config
		t.Errorf("%d blobs, want 4", blobs)
	}
	for _, c := range ix.Tree.Cells {
		if c.Status != StatusComplete || !strings.HasPrefix(c.Run, "cells/"+c.ID+"/") {
			t.Errorf("cell %+v", c)
		}
	}

	unpacked := filepath.Join(root, "unpacked")
	got, err := bundle.Unpack(out, unpacked, bundle.UnpackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	placed, err := bundle.PlaceTree(unpacked, got, filepath.Join(root, "elsewhere", got.Tree.Name), filepath.Join(root, "bundles"))
	if err != nil {
		t.Fatal(err)
	}
	back, err := Open(placed.TreeDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(back.Report()); !slices.Equal(got, want) {
		t.Errorf("placed tree's rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
