// Package matrix runs experiments across kernels: a matrix file names
// kernels (Debian refs, builds, build recipes) and experiments; every
// pair is a cell, run in parallel VMs into one results tree that survives
// interruption (resume runs only what is missing), splits into shards for
// CI engines, merges back, and reports across kernels.
package matrix

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"klab/experiments"
	"klab/internal/specfile"
)

// maxFileSize bounds a matrix file.
const maxFileSize = 1 << 20

// File is a loaded, checked matrix file.
type File struct {
	// Path is the file as given; Dir the directory relative paths in it
	// are resolved against; SHA256 the hash of its content.
	Path   string
	Dir    string
	Data   []byte
	SHA256 string
	// Name and Description are the matrix's.
	Name        string
	Description string
	// Kernels are the columns in the file's order; Baseline the ref the
	// others are compared against (the first kernel by default).
	Kernels  []Kernel
	Baseline string
	// Experiments are the rows' experiments in the file's order.
	Experiments []Experiment
}

// Kernel is one kernel of the matrix: a reference, or a recipe built
// (and cached) before the cells run, referred to as build:NAME.
type Kernel struct {
	Ref   string
	Build *Recipe
	line  int
}

// Recipe builds a kernel: a source with patches and config fragments,
// as klab kernels build takes them.
type Recipe struct {
	// Name is the build's name (the kernel is build:NAME).
	Name string `json:"name"`
	// Source is debian:SERIES, a git tree or a tarball; Rev a commit of
	// a git tree.
	Source string `json:"source"`
	Rev    string `json:"rev,omitempty"`
	// Config are config fragments (lab, debug or files); Patches patch
	// files, mboxes or directories. Paths are absolute, resolved against
	// the matrix file's directory.
	Config  []string `json:"config,omitempty"`
	Patches []string `json:"patches,omitempty"`
}

// Experiment is one experiment of the matrix with its overrides.
type Experiment struct {
	// Name is a shipped experiment's name or a spec file (resolved
	// against the matrix file's directory).
	Name string
	// Set overrides parameters, as klab run --set does.
	Set map[string]string
	// Rounds overrides the spec's rounds when not 0.
	Rounds int
	// Label names the experiment in reports: its name, with its
	// overrides ("fuse-uring jobs=1").
	Label string
	// Spec is the experiment file as loaded.
	Spec *experiments.File
	line int
}

// LoadFile reads and checks a matrix file.
func LoadFile(path string) (*File, error) {
	data, err := specfile.Read("matrix", path, maxFileSize)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("matrix %s: %w", path, err)
	}
	return Load(path, dir, data)
}

var (
	topFields        = []string{"name", "description", "baseline", "kernels", "experiments"}
	recipeFields     = []string{"name", "source", "tree", "rev", "config", "patches"}
	experimentFields = []string{"name", "set", "rounds"}
	nameRe           = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// Load parses and checks a matrix file's data; dir resolves its relative
// paths. Every problem is reported with its line, at once.
func Load(path, dir string, data []byte) (*File, error) {
	ps := specfile.NewProblems(path)
	sum := sha256.Sum256(data)
	f := &File{Path: path, Dir: dir, Data: data, SHA256: hex.EncodeToString(sum[:])}
	root := specfile.Parse(ps, data, "a matrix file is a YAML mapping (name:, kernels:, experiments:)")
	if root == nil {
		return nil, ps.Err()
	}
	var kernelsNode, expsNode, baselineNode *yaml.Node
	specfile.Fields(ps, root, "matrix", topFields, func(k string, v *yaml.Node) {
		switch k {
		case "name":
			f.Name = specfile.Scalar(ps, v, "name")
		case "description":
			f.Description = specfile.Scalar(ps, v, "description")
		case "baseline":
			f.Baseline, baselineNode = specfile.Scalar(ps, v, "baseline"), v
		case "kernels":
			kernelsNode = v
		case "experiments":
			expsNode = v
		}
	})
	if f.Name == "" {
		ps.At(root, "name: missing, want a plain name (letters, digits, '.', '_', '-')")
	} else if !nameRe.MatchString(f.Name) {
		ps.At(specfile.Node(root, "name"), "name: %q is not a plain name, want letters, digits, '.', '_' and '-' (at most 64)", f.Name)
	}
	f.Kernels = loadKernels(ps, root, kernelsNode, dir)
	f.Experiments = loadExperiments(ps, root, expsNode, dir)
	if f.Baseline == "" && len(f.Kernels) > 0 {
		f.Baseline = f.Kernels[0].Ref
	} else if f.Baseline != "" && !slices.ContainsFunc(f.Kernels, func(k Kernel) bool { return k.Ref == f.Baseline }) {
		var refs []string
		for _, k := range f.Kernels {
			refs = append(refs, k.Ref)
		}
		ps.At(baselineNode, "baseline: %q is not one of the kernels, want one of %s", f.Baseline, strings.Join(refs, ", "))
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	// Cell names must not collide once made file-name safe.
	seen := map[string]string{}
	for _, c := range f.Cells() {
		if other, ok := seen[c.ID]; ok {
			ps.Add(0, 0, "cells %q and %q have the same directory name %s; rename a build or an experiment", other, c.Name(), c.ID)
		}
		seen[c.ID] = c.Name()
	}
	return f, ps.Err()
}

// abs resolves p against dir unless it is absolute.
func abs(dir, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

var refRe = regexp.MustCompile(`^(debian:[0-9][0-9a-z.+~-]*|build:[A-Za-z0-9][A-Za-z0-9._-]*|/.+|\..+)$`)

func loadKernels(ps *specfile.Problems, root, n *yaml.Node, dir string) []Kernel {
	if n == nil {
		ps.At(root, "kernels: missing, want a list of kernels (debian:7.3, build:NAME, or {build: {name, source, ...}})")
		return nil
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		ps.At(n, "kernels: want a non-empty list")
		return nil
	}
	var out []Kernel
	seen := map[string]bool{}
	for i, x := range n.Content {
		what := fmt.Sprintf("kernels[%d]", i)
		var k Kernel
		k.line = x.Line
		switch x.Kind {
		case yaml.ScalarNode:
			k.Ref = x.Value
			if !refRe.MatchString(k.Ref) {
				ps.At(x, "%s: %q is not a kernel, want debian:SERIES (debian:7.3), build:NAME or a path to a bzImage", what, k.Ref)
				continue
			}
			if strings.HasPrefix(k.Ref, ".") {
				k.Ref = abs(dir, k.Ref)
			}
		case yaml.MappingNode:
			specfile.Fields(ps, x, what, []string{"build"}, func(_ string, v *yaml.Node) {
				k.Build = loadRecipe(ps, v, what+".build", dir)
			})
			if k.Build == nil {
				ps.At(x, "%s: want build: {name, source, config, patches}", what)
				continue
			}
			k.Ref = "build:" + k.Build.Name
		default:
			ps.At(x, "%s: want a kernel reference or build: {...}", what)
			continue
		}
		if seen[k.Ref] {
			ps.At(x, "%s: %s is listed twice", what, k.Ref)
			continue
		}
		seen[k.Ref] = true
		out = append(out, k)
	}
	return out
}

func loadRecipe(ps *specfile.Problems, n *yaml.Node, what, dir string) *Recipe {
	r := &Recipe{}
	var tree string
	specfile.Fields(ps, n, what, recipeFields, func(k string, v *yaml.Node) {
		switch k {
		case "name":
			r.Name = specfile.Scalar(ps, v, what+".name")
		case "source":
			r.Source = specfile.Scalar(ps, v, what+".source")
		case "tree":
			tree = specfile.Scalar(ps, v, what+".tree")
		case "rev":
			r.Rev = specfile.Scalar(ps, v, what+".rev")
		case "config":
			for _, c := range specfile.Scalars(ps, v, what+".config") {
				for _, part := range strings.Split(c, ",") {
					if part = strings.TrimSpace(part); part == "lab" || part == "debug" {
						r.Config = append(r.Config, part)
					} else if part != "" {
						r.Config = append(r.Config, abs(dir, part))
					}
				}
			}
		case "patches":
			for _, p := range specfile.Scalars(ps, v, what+".patches") {
				r.Patches = append(r.Patches, abs(dir, p))
			}
		}
	})
	if !nameRe.MatchString(r.Name) {
		ps.At(n, "%s.name: %q is not a plain name, want letters, digits, '.', '_' and '-'", what, r.Name)
	}
	switch {
	case r.Source != "" && tree != "":
		ps.At(n, "%s: give source or tree, not both", what)
	case tree != "":
		r.Source = abs(dir, tree)
	case r.Source == "":
		ps.At(n, "%s: source: missing, want debian:SERIES, a git tree (tree: PATH) or a tarball", what)
	case !strings.HasPrefix(r.Source, "debian:"):
		r.Source = abs(dir, r.Source)
	}
	if len(r.Config) == 0 {
		r.Config = []string{"lab"}
	}
	for _, p := range r.Patches {
		if _, err := os.Stat(p); err != nil {
			ps.At(specfile.Node(n, "patches"), "%s.patches: %v", what, err)
		}
	}
	return r
}

func loadExperiments(ps *specfile.Problems, root, n *yaml.Node, dir string) []Experiment {
	if n == nil {
		ps.At(root, "experiments: missing, want a list of experiments (names or {name, set, rounds})")
		return nil
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		ps.At(n, "experiments: want a non-empty list")
		return nil
	}
	var out []Experiment
	labels := map[string]bool{}
	for i, x := range n.Content {
		what := fmt.Sprintf("experiments[%d]", i)
		e := Experiment{line: x.Line}
		switch x.Kind {
		case yaml.ScalarNode:
			e.Name = x.Value
		case yaml.MappingNode:
			specfile.Fields(ps, x, what, experimentFields, func(k string, v *yaml.Node) {
				switch k {
				case "name":
					e.Name = specfile.Scalar(ps, v, what+".name")
				case "rounds":
					r, err := strconv.Atoi(specfile.Scalar(ps, v, what+".rounds"))
					if err != nil || r < 1 || r > 1000 {
						ps.At(v, "%s.rounds: %q, want 1..1000", what, v.Value)
					}
					e.Rounds = r
				case "set":
					if v.Kind != yaml.MappingNode {
						ps.At(v, "%s.set: want a mapping of parameters to values (jobs: 1)", what)
						return
					}
					e.Set = map[string]string{}
					for j := 0; j+1 < len(v.Content); j += 2 {
						e.Set[v.Content[j].Value] = specfile.Scalar(ps, v.Content[j+1], what+".set."+v.Content[j].Value)
					}
				}
			})
		default:
			ps.At(x, "%s: want an experiment name or {name, set, rounds}", what)
			continue
		}
		if e.Name == "" {
			ps.At(x, "%s: name: missing", what)
			continue
		}
		ref := e.Name
		if strings.ContainsAny(ref, "/") || strings.HasSuffix(ref, ".yaml") {
			ref = abs(dir, ref)
		}
		spec, err := experiments.Find(ref)
		if err != nil {
			ps.At(x, "%s: %v", what, err)
			continue
		}
		if spec.Spec.Suite != nil && e.Rounds != 0 {
			ps.At(x, "%s.rounds: %s runs a test suite (fstests), once per cell; its reruns of new failures are the suite's", what, spec.Path)
			continue
		}
		if spec.Spec.Suite != nil && len(e.Set) > 0 {
			ps.At(x, "%s.set: %s runs a test suite (fstests) and has no parameters: copy the spec to change its tests or configuration", what, spec.Path)
			continue
		}
		if len(e.Set) > 0 {
			if spec, err = spec.WithSets(e.Set); err != nil {
				ps.At(x, "%s.set: %v", what, err)
				continue
			}
		}
		e.Spec = spec
		e.Label = spec.Spec.Name
		for _, k := range sortedKeys(e.Set) {
			e.Label += " " + k + "=" + e.Set[k]
		}
		if labels[e.Label] {
			ps.At(x, "%s: %s is listed twice", what, e.Label)
			continue
		}
		labels[e.Label] = true
		out = append(out, e)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
