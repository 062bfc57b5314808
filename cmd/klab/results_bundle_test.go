package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"klab/experiments"
	"klab/matrix"
	"klab/results"
	"klab/results/bundle"
)

// setRunKernel makes k the kernel of the experiment run in dir.
func setRunKernel(t *testing.T, dir string, k results.Kernel) {
	t.Helper()
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
}

// writeTree writes a matrix results tree named name in runs: the matrix
// smoke, two experiments on debian:7.3, each cell a finished run of
// refRunSpec, both with the same kernel of small files. It returns the
// tree's directory and the kernel.
func writeTree(t *testing.T, runs, name string) (string, results.Kernel) {
	t.Helper()
	dir := filepath.Join(runs, name)
	m := &matrix.Manifest{Schema: matrix.ManifestSchema, Name: "smoke", File: "matrices/smoke.yaml", SHA256: strings.Repeat("a", 64),
		Kernels: []string{"debian:7.3"}, Experiments: []string{"refrun", "refrun2"}, Baseline: "debian:7.3", Total: 2,
		Start: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	var k results.Kernel
	for i, exp := range m.Experiments {
		c := matrix.Cell{ID: exp + "@debian_7.3", Kernel: "debian:7.3", Experiment: exp, E: i}
		m.Cells = append(m.Cells, c)
		cellDir := filepath.Join(dir, matrix.CellsDir, c.ID)
		run := writeRefRunAs(t, cellDir, "20260301-101500-exp-refrun-a1b2c3")
		if i == 0 {
			k = withFakeKernel(t, run)
		} else {
			setRunKernel(t, run, k)
		}
		r := matrix.CellResult{Cell: c, Status: matrix.StatusComplete, Run: filepath.Join(matrix.CellsDir, c.ID, filepath.Base(run)), Start: m.Start, End: m.Start}
		for file, v := range map[string]any{filepath.Join(cellDir, matrix.CellFile): r} {
			data, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{matrix.ManifestFile: data, matrix.FileCopy: []byte("name: smoke\n")} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, k
}

// TestResultsPackUnpack: klab results pack writes NAME.klab.tar.zst with
// the tree and its one shared kernel, refuses to overwrite it without
// --force, and refuses what is no matrix tree; klab report and klab
// matrix report read the bundle as they read the tree; klab compare
// refuses it; klab results unpack and klab runs unpack place the tree
// and the kernel.
func TestResultsPackUnpack(t *testing.T) {
	runs := t.TempDir()
	treeDir, k := writeTree(t, runs, "smoke-tree")
	out := t.TempDir()
	t.Chdir(out)
	file := "smoke-tree" + bundle.Extension
	code, stdout, stderr := runCLI(t, "--runs-dir", runs, "results", "pack", "smoke-tree")
	if code != 0 || !strings.HasPrefix(stdout, file+": ") || !strings.HasSuffix(stdout, " members, matrix smoke (tree smoke-tree, 2 cells), with the artefacts of 1 kernel(s)\n") {
		t.Fatalf("results pack: status %d, stderr %q:\n%s", code, stderr, stdout)
	}
	ix, err := bundle.ReadIndex(file, bundle.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !ix.IsMatrix() || len(ix.Kernels) != 1 || len(ix.Tree.Cells) != 2 || ix.Tree.Cells[1].Run != "cells/refrun2@debian_7.3/20260301-101500-exp-refrun-a1b2c3" {
		t.Errorf("index: %+v", ix)
	}
	code, _, stderr = runCLI(t, "--runs-dir", runs, "results", "pack", treeDir)
	if code != exitBadInput || !strings.Contains(stderr, file+" exists already; give --force") {
		t.Errorf("results pack again: status %d, stderr %q", code, stderr)
	}
	if code, _, stderr = runCLI(t, "results", "pack", treeDir, "--force"); code != 0 {
		t.Errorf("results pack --force: status %d, stderr %q", code, stderr)
	}
	small := filepath.Join(out, "results"+bundle.Extension)
	code, stdout, stderr = runCLI(t, "results", "pack", treeDir, "--results-only", "-o", small)
	if code != 0 || !strings.HasSuffix(stdout, "(tree smoke-tree, 2 cells), results only\n") {
		t.Errorf("results pack --results-only: status %d, stderr %q:\n%s", code, stderr, stdout)
	}
	full, _ := os.Stat(file)
	resultsOnly, _ := os.Stat(small)
	t.Logf("a tree of 2 cells sharing 1 kernel of 4 small files: %d bytes packed, %d results only", full.Size(), resultsOnly.Size())

	// What is no matrix tree.
	run := filepath.Join(treeDir, ix.Tree.Cells[0].Run)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"results", "pack", run}, "is a run, not a matrix results tree: klab runs pack"},
		{[]string{"results", "pack", out}, "is not a matrix results tree (it has no matrix.json"},
		{[]string{"results", "pack", "nosuch"}, "nosuch: no such directory, nor a matrix results tree in"},
		{[]string{"runs", "pack", treeDir}, "is a matrix results tree, not a run: klab results pack"},
		{[]string{"compare", file, small}, "holds a matrix results tree, and klab compare compares two runs of one experiment: klab report"},
		{[]string{"compare", treeDir}, "holds a matrix results tree"},
	} {
		code, _, stderr := runCLI(t, append([]string{"--runs-dir", runs}, c.args...)...)
		if code != exitBadInput || !strings.Contains(stderr, c.want) {
			t.Errorf("klab %s: status %d, stderr %q, want 2 and %q", strings.Join(c.args, " "), code, stderr, c.want)
		}
	}

	// Reports of the bundles are those of the tree.
	for _, format := range []string{"text", "json"} {
		code, fromDir, stderr := runCLI(t, "report", treeDir, "--format", format)
		if code != 0 || !strings.Contains(fromDir, "refrun2") {
			t.Fatalf("report DIR --format %s: status %d, stderr %q:\n%s", format, code, stderr, fromDir)
		}
		for _, args := range [][]string{{"report", file}, {"matrix", "report", file}, {"report", small}} {
			code, fromFile, stderr := runCLI(t, append(args, "--format", format)...)
			fromFile = strings.ReplaceAll(fromFile, args[len(args)-1], treeDir)
			if code != 0 || fromFile != fromDir {
				t.Errorf("%s --format %s: status %d, stderr %q:\n%s\nwant:\n%s", strings.Join(args, " "), format, code, stderr, fromFile, fromDir)
			}
		}
	}

	// Unpacking places the tree and the kernel once.
	runs2, cache2 := t.TempDir(), t.TempDir()
	kdir := filepath.Join(cache2, "bundles", k.ID)
	code, stdout, stderr = runCLI(t, "--runs-dir", runs2, "--cache-dir", cache2, "results", "unpack", file)
	want := "matrix smoke, tree smoke-tree (2 cells): " + filepath.Join(runs2, "smoke-tree") + "\nkernel debian:7.3 (" + k.ID + "): " + kdir + ", placed; klab boot --kernel bundle:" + k.ID + " boots it\n"
	if code != 0 || stdout != want {
		t.Fatalf("results unpack: status %d, stderr %q:\n%s\nwant:\n%s", code, stderr, stdout, want)
	}
	if b, err := os.ReadFile(filepath.Join(kdir, "modules", "kernel", "fs", "fuse", "fuse.ko")); err != nil || string(b) != "\x7fELF" {
		t.Errorf("unpacked module: %q, %v", b, err)
	}
	if _, err := matrix.Open(filepath.Join(runs2, "smoke-tree")); err != nil {
		t.Errorf("the placed tree: %v", err)
	}
	code, _, stderr = runCLI(t, "--runs-dir", runs2, "--cache-dir", cache2, "results", "unpack", file)
	if code != exitBadInput || !strings.Contains(stderr, "exists already; klab results unpack "+file+" -o DIR puts it elsewhere") {
		t.Errorf("results unpack again: status %d, stderr %q", code, stderr)
	}
	other := filepath.Join(t.TempDir(), "smoke")
	code, stdout, stderr = runCLI(t, "--runs-dir", runs2, "--cache-dir", cache2, "results", "unpack", file, "-o", other)
	if code != 0 || !strings.HasPrefix(stdout, "matrix smoke, tree smoke-tree (2 cells): "+other+"\n") || !strings.HasSuffix(stdout, ", there already; klab boot --kernel bundle:"+k.ID+" boots it\n") {
		t.Errorf("results unpack -o: status %d, stderr %q:\n%s", code, stderr, stdout)
	}
	runs3 := t.TempDir()
	code, stdout, stderr = runCLI(t, "--runs-dir", runs3, "--cache-dir", cache2, "runs", "unpack", small)
	if code != 0 || stdout != "matrix smoke, tree smoke-tree (2 cells): "+filepath.Join(runs3, "smoke-tree")+"\n" {
		t.Errorf("runs unpack of a tree: status %d, stderr %q:\n%s", code, stderr, stdout)
	}
	for _, d := range []string{runs2, runs3, filepath.Dir(other)} {
		if left, _ := filepath.Glob(filepath.Join(d, ".*")); len(left) != 0 {
			t.Errorf("left in %s: %v", d, left)
		}
	}

	// A run's bundle is not a tree's.
	runFile := filepath.Join(out, "run"+bundle.Extension)
	if _, err := bundle.Pack(run, runFile, bundle.PackOptions{ResultsOnly: true}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"results", "unpack", runFile}, {"matrix", "report", runFile}} {
		code, _, stderr = runCLI(t, append([]string{"--runs-dir", runs2}, args...)...)
		if code != exitBadInput || !strings.Contains(stderr, "holds") || !strings.Contains(stderr, "not a matrix results tree") {
			t.Errorf("klab %s: status %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
	}
}

// TestBadTreeBundle: a tree's bundle with a byte changed is refused by
// klab results unpack, klab runs unpack and klab report with status 2
// and the member named, leaving nothing in the runs directory or the
// cache.
func TestBadTreeBundle(t *testing.T) {
	treeDir, _ := writeTree(t, t.TempDir(), "smoke-tree")
	file := filepath.Join(t.TempDir(), "a"+bundle.Extension)
	t2, err := matrix.Open(treeDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := t2.Pack(file, bundle.PackOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad"+bundle.Extension)
	corrupt(t, file, bad, "tree/cells/refrun2@debian_7.3/20260301-101500-exp-refrun-a1b2c3/"+experiments.SamplesFileName)
	runs2, cache2 := t.TempDir(), t.TempDir()
	for _, args := range [][]string{{"results", "unpack", bad}, {"runs", "unpack", bad}, {"report", bad}, {"matrix", "report", bad}, {"rerun", bad}} {
		code, _, stderr := runCLI(t, append([]string{"--runs-dir", runs2, "--cache-dir", cache2}, args...)...)
		if code != exitBadInput || !strings.Contains(stderr, "member tree/cells/refrun2@debian_7.3/20260301-101500-exp-refrun-a1b2c3/samples.json: SHA-256") {
			t.Errorf("klab %s: status %d, stderr %q", strings.Join(args, " "), code, stderr)
		}
	}
	// A tree's bundle is not a run to repeat.
	if code, _, stderr := runCLI(t, "--runs-dir", runs2, "--cache-dir", cache2, "rerun", file); code != exitBadInput || !strings.Contains(stderr, "holds the matrix results tree smoke-tree, not a run") {
		t.Errorf("klab rerun of a tree's bundle: status %d, stderr %q", code, stderr)
	}
	for _, d := range []string{runs2, cache2} {
		if left, _ := os.ReadDir(d); len(left) != 0 {
			t.Errorf("left in %s: %v", d, left)
		}
	}
}
