package experiments

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMESketch: the experiment sketch in README.md is a valid spec
// that lists what its kernel needs.
func TestREADMESketch(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "```yaml\n")
	if !ok {
		t.Fatal("README.md has no ```yaml block")
	}
	sketch, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md's yaml block is not closed")
	}
	f, err := Load("README.md", []byte(sketch))
	if err != nil {
		t.Fatalf("README.md's sketch does not validate:\n%v", err)
	}
	// Its uring cells need fuse-io-uring, and it says so.
	if !slices.Contains(f.Spec.Requires.Features, "fuse-io-uring") || len(f.Spec.Requires.Implied) != 0 {
		t.Errorf("sketch requires %+v, want features: [fuse-io-uring] written", f.Spec.Requires)
	}
	p, err := MakePlan(f, PlanOptions{Kernels: []string{"debian:7.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rows) != 2 || p.A != "transport=dev" || p.B != "transport=uring" {
		t.Errorf("sketch plan: rows %+v, A %s, B %s", p.Rows, p.A, p.B)
	}
}

// TestREADMEListsShipped: experiments/README.md has a table row for every
// shipped experiment, and its suite sketch is a valid suite section.
func TestREADMEListsShipped(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range Shipped() {
		if !strings.Contains(string(data), "\n| `"+n+"` |") {
			t.Errorf("README.md has no table row for the shipped experiment %s", n)
		}
	}
	_, rest, ok := strings.Cut(string(data), "```yaml\nsuite:\n")
	if !ok {
		t.Fatal("README.md has no ```yaml block of a suite")
	}
	sketch, _, _ := strings.Cut(rest, "```")
	f, err := Load("README.md", []byte("name: sketch\nsuite:\n"+sketch))
	if err != nil {
		t.Fatalf("the suite sketch does not validate:\n%v", err)
	}
	if f.Spec.Suite.Fstests.Config != "fuse-klab-uring" {
		t.Errorf("sketch suite %+v", f.Spec.Suite.Fstests)
	}
}

// specFields are the YAML fields of t and of the types inside it, each
// as its path from the spec's top ("workloads.make_dirs").
func specFields(t reflect.Type, path string, out map[string]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		p := tag
		if path != "" {
			p = path + "." + tag
		}
		out[p] = tag
		specFields(f.Type, p, out)
	}
}

// TestREADMEDocumentsEveryField: every field the spec loader takes is
// named in experiments/README.md's "The spec, field by field", in code
// (`make_dirs`, or inside `brd: {count, size_mb}`), so that no field is
// accepted but undocumented.
func TestREADMEDocumentsEveryField(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## The spec, field by field\n")
	if !ok {
		t.Fatal(`README.md has no section "The spec, field by field"`)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	named := map[string]bool{}
	for _, code := range regexp.MustCompile("`[^`]+`").FindAllString(section, -1) {
		for _, w := range regexp.MustCompile(`[A-Za-z0-9_]+`).FindAllString(code, -1) {
			named[w] = true
		}
	}
	fields := map[string]string{}
	specFields(reflect.TypeOf(Spec{}), "", fields)
	if len(fields) < 80 || fields["workloads.make_dirs"] != "make_dirs" || fields["workloads.expect.needs.min_cpus"] != "min_cpus" {
		t.Fatalf("the walk over Spec found %d fields: %v", len(fields), fields)
	}
	var missing []string
	for path, tag := range fields {
		if !named[tag] {
			missing = append(missing, path)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("experiments/README.md's field table does not name %s", strings.Join(missing, ", "))
	}
}
