package matrix

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"klab/internal/option"
)

// Engines are the CI engines Emit writes for.
var Engines = []string{"github", "gitlab"}

// CacheKey is a key for a CI cache of klab's kernels and builds: it
// changes when a kernel of the matrix or a recipe's input (source,
// revision, config fragments, patch contents) does, so that a CI run
// restores the kernels it built before.
func (f *File) CacheKey() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "klab-matrix-cache/v1\n")
	for _, k := range f.Kernels {
		fmt.Fprintf(h, "kernel %s\n", k.Ref)
		if k.Build == nil {
			continue
		}
		fmt.Fprintf(h, "source %s rev %s\n", k.Build.Source, k.Build.Rev)
		for _, c := range k.Build.Config {
			if err := hashInput(h, "config", c); err != nil {
				return "", err
			}
		}
		for _, p := range k.Build.Patches {
			if err := hashInput(h, "patch", p); err != nil {
				return "", err
			}
		}
	}
	return "klab-" + f.Name + "-" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// hashInput hashes a file's (or a directory's files') contents, or the
// name of a shipped fragment.
func hashInput(h io.Writer, what, p string) error {
	if !filepath.IsAbs(p) {
		_, err := fmt.Fprintf(h, "%s %s\n", what, p)
		return err
	}
	return filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("cache key: %w", err)
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("cache key: %w", err)
		}
		sum := sha256.Sum256(data)
		_, err = fmt.Fprintf(h, "%s %s %x\n", what, filepath.Base(path), sum)
		return err
	})
}

// EmitOptions shape an emitted CI configuration.
type EmitOptions struct {
	// Engine is one of Engines; Shards how many jobs share the cells.
	Engine string
	Shards int
	// File is the matrix file's path relative to the repository root.
	File string
}

// Emit writes a CI configuration that runs the matrix in o.Shards
// parallel jobs (klab matrix run --shard i/n), caches klab's kernels and
// builds across runs under the matrix's cache key, keeps every shard's
// results tree, and merges them into one report in a final job.
func Emit(w io.Writer, o EmitOptions) error {
	if o.Shards < 1 || o.Shards > 256 {
		return option.Errorf("shards", "%d: want 1..256", o.Shards)
	}
	if o.File == "" || strings.ContainsAny(o.File, "\"'`$\\\n ") || filepath.IsAbs(o.File) {
		return fmt.Errorf("matrix file %q: want a plain path relative to the repository root", o.File)
	}
	switch o.Engine {
	case "github":
		return emitGitHub(w, o)
	case "gitlab":
		return emitGitLab(w, o)
	}
	return option.Errorf("engine", "%q: want one of %s", o.Engine, strings.Join(Engines, ", "))
}

func emitGitHub(w io.Writer, o EmitOptions) error {
	var shards []string
	for i := 1; i <= o.Shards; i++ {
		shards = append(shards, fmt.Sprint(i))
	}
	_, err := fmt.Fprintf(w, `# klab matrix %[1]s in %[2]d shards: each job runs its share of the cells,
# the last merges them into one cross-kernel report and packs it in one file.
# Written by: klab matrix emit %[1]s --engine github --shards %[2]d
name: klab matrix

on:
  push:
  pull_request:
  workflow_dispatch:

jobs:
  cells:
    runs-on: ubuntu-latest
    timeout-minutes: 350
    strategy:
      fail-fast: false
      matrix:
        shard: [%[3]s]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-go@v5
        with:
          go-version: "1.26"
      - name: Let klab use KVM
        run: |
          echo 'KERNEL=="kvm", GROUP="kvm", MODE="0666", OPTIONS+="static_node=kvm"' | sudo tee /etc/udev/rules.d/99-kvm.rules
          sudo udevadm control --reload-rules && sudo udevadm trigger --name-match=kvm || true
      - name: Install what klab needs
        run: sudo make deps && make build
      - name: Cache key
        id: key
        run: echo "key=$(bin/klab matrix cache-key %[1]s)" >> "$GITHUB_OUTPUT"
      - uses: actions/cache@v4
        with:
          path: ~/.cache/klab
          key: ${{ steps.key.outputs.key }}-shard-${{ matrix.shard }}
          restore-keys: |
            ${{ steps.key.outputs.key }}-
      - name: Run shard ${{ matrix.shard }} of %[2]d
        run: bin/klab matrix run %[1]s --shard ${{ matrix.shard }}/%[2]d --out results-${{ matrix.shard }} --format md >> "$GITHUB_STEP_SUMMARY"
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: klab-shard-${{ matrix.shard }}
          path: results-${{ matrix.shard }}

  report:
    needs: cells
    if: always()
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-go@v5
        with:
          go-version: "1.26"
      # Merging and packing boot nothing: klab without its guest parts will do.
      - run: go build -o bin/klab ./cmd/klab
      - uses: actions/download-artifact@v4
        with:
          pattern: klab-shard-*
          path: shards
      # A failed cell or a splat new against the baseline fails this step,
      # and the workflow with it; the steps below run all the same.
      - name: Merge the shards
        run: bin/klab results merge shards/* --out merged --format md >> "$GITHUB_STEP_SUMMARY"
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: klab-matrix-report
          path: merged
      # The merged report in JUnit, one test suite per kernel, the failed
      # cells and new splats as failures: for the actions that show test
      # reports on a pull request.
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: klab-matrix-junit
          path: merged/report.xml
%[4]s      - name: Pack the merged tree
        if: always()
        run: bin/klab results pack merged --results-only
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: klab-matrix-bundle
          path: merged.klab.tar.zst
          compression-level: 0
`, o.File, o.Shards, strings.Join(shards, ", "), bundleComment("      "))
	return err
}

func emitGitLab(w io.Writer, o EmitOptions) error {
	_, err := fmt.Fprintf(w, `# klab matrix %[1]s in %[2]d shards: each job runs its share of the cells,
# the last merges them into one cross-kernel report and packs it in one file.
# Written by: klab matrix emit %[1]s --engine gitlab --shards %[2]d
stages:
  - cells
  - report

variables:
  # GitLab caches paths inside the project only.
  XDG_CACHE_HOME: "$CI_PROJECT_DIR/.cache"

klab-cells:
  stage: cells
  image: golang:1.26-bookworm
  parallel: %[2]d
  timeout: 6h
  # One cache per shard: a shard runs the same cells each time, and parallel
  # jobs that shared one key would each save their own kernels over the
  # others'.
  cache:
    key:
      files:
        - %[1]s
      prefix: klab-kernels-$CI_NODE_INDEX
    paths:
      - .cache/klab
  script:
    - make deps build
    - bin/klab matrix run %[1]s --shard "$CI_NODE_INDEX/$CI_NODE_TOTAL" --out "results-$CI_NODE_INDEX"
  artifacts:
    when: always
    paths:
      - results-*

klab-report:
  stage: report
  image: golang:1.26-bookworm
  when: always
  needs:
    - job: klab-cells
      artifacts: true
  script:
    # Merging and packing boot nothing: klab without its guest parts will do.
    - go build -o bin/klab ./cmd/klab
    # A failed cell or a splat new against the baseline makes the merge exit
    # 1, and this job with it, once the tree is packed.
    - bin/klab results merge results-* --out merged --format md || merge_status=$?
%[3]s    - bin/klab results pack merged --results-only
    - exit "${merge_status:-0}"
  artifacts:
    when: always
    paths:
      - merged
      - merged.klab.tar.zst
    # The merged report in JUnit, one test suite per kernel: a merge request
    # shows the failed cells and the new splats.
    reports:
      junit: merged/report.xml
`, o.File, o.Shards, bundleComment("    "))
	return err
}

// bundleComment is the emitted comment on the merge job's bundle, each
// line indented by indent: what the bundle is for, and why it is packed
// without the kernels.
func bundleComment(indent string) string {
	lines := []string{
		"The merged tree in one verified file, kept as an artifact: klab report",
		"merged.klab.tar.zst prints its report and klab results unpack places it,",
		"on any machine, long after the run. It is --results-only: this job has",
		"none of the kernels (the shard jobs fetched or built them into their own",
		"caches, which are saved only when a shard passes, so packing kernels here",
		"would fail just when a regression makes the bundle worth keeping), a Debian",
		"kernel adds about 35 MiB to every pipeline's artifacts, and CI gets the",
		"kernels back from its cache or from matrix.yaml in the bundle, which names",
		"every kernel and recipe. For a bundle with the kernels, for a rerun",
		"elsewhere, run klab results pack DIR where the kernels are.",
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(indent + "# " + l + "\n")
	}
	return b.String()
}
