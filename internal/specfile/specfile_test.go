package specfile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func problems(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%T %v, want an *Error", err, err)
	}
	var out []string
	for _, p := range e.Problems {
		out = append(out, p.Error())
	}
	return out
}

func TestProblems(t *testing.T) {
	ps := NewProblems("f.yaml")
	if ps.Err() != nil {
		t.Fatal("no problems, want a nil error")
	}
	ps.Add(3, 2, "c")
	ps.Add(0, 0, "whole file")
	ps.Add(3, 0, "b")
	ps.Add(1, 5, "a")
	ps.Add(1, 5, "a")
	want := []string{"f.yaml: whole file", "f.yaml:1:5: a", "f.yaml:3: b", "f.yaml:3:2: c"}
	if got := problems(t, ps.Err()); !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

func TestParseAndFields(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"syntax", "a: 1\nb: [1, 2\nc: 3\n", []string{"f.yaml:2: did not find expected ',' or ']'"}},
		{"not a mapping", "- a\n", []string{"f.yaml:1:1: want a mapping"}},
		{"fields", "a: 1\nx: 2\na: 3\nb: [1, [2]]\nc: {d: 1}\n", []string{
			`f.yaml:2:1: top: unknown field "x", want one of a, b, c`,
			"f.yaml:3:1: top: a is given twice",
			"f.yaml:4:8: b: want a single value",
			"f.yaml:5:4: c: want a single value",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := NewProblems("f.yaml")
			root := Parse(ps, []byte(tc.yaml), "want a mapping")
			if root != nil {
				Fields(ps, root, "top", []string{"a", "b", "c"}, func(k string, v *yaml.Node) {
					switch k {
					case "a", "c":
						Scalar(ps, v, k)
					case "b":
						Scalars(ps, v, k)
					}
				})
			}
			if got := problems(t, ps.Err()); !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestFieldsDidYouMean: an unknown field names the fields a typo meant,
// then every field allowed.
func TestFieldsDidYouMean(t *testing.T) {
	allowed := []string{"rounds", "order", "seed", "make_dirs", "seeds"}
	for key, want := range map[string]string{
		"round":     `f.yaml:1:1: top: unknown field "round" (did you mean "rounds"?), want one of rounds, order, seed, make_dirs, seeds`,
		"make-dirs": `f.yaml:1:1: top: unknown field "make-dirs" (did you mean "make_dirs"?), want one of rounds, order, seed, make_dirs, seeds`,
		"sed":       `f.yaml:1:1: top: unknown field "sed" (did you mean "seed"?), want one of rounds, order, seed, make_dirs, seeds`,
		"seedz":     `f.yaml:1:1: top: unknown field "seedz" (did you mean "seed" or "seeds"?), want one of rounds, order, seed, make_dirs, seeds`,
		"colour":    `f.yaml:1:1: top: unknown field "colour", want one of rounds, order, seed, make_dirs, seeds`,
	} {
		ps := NewProblems("f.yaml")
		root := Parse(ps, []byte(key+": 1\n"), "want a mapping")
		Fields(ps, root, "top", allowed, func(string, *yaml.Node) {})
		if got := problems(t, ps.Err()); !slices.Equal(got, []string{want}) {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
}

func TestNode(t *testing.T) {
	ps := NewProblems("f.yaml")
	root := Parse(ps, []byte("a:\n  b: [x, y]\n"), "")
	if n := Node(root, "a", "b", 1); n.Value != "y" || n.Line != 2 {
		t.Errorf("a.b[1] = %q at line %d", n.Value, n.Line)
	}
	if n := Node(root, "a", "missing"); n != Node(root, "a") {
		t.Errorf("a.missing = %v, want a's node", n)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.yaml")
	os.WriteFile(p, []byte("0123456789"), 0o644)
	if data, err := Read("spec", p, 10); err != nil || string(data) != "0123456789" {
		t.Errorf("Read = %q, %v", data, err)
	}
	if got := problems(t, func() error { _, err := Read("spec", p, 9); return err }()); !slices.Equal(got, []string{p + ": larger than 9 bytes"}) {
		t.Errorf("Read over the bound: %q", got)
	}
	if _, err := Read("spec", filepath.Join(dir, "none"), 9); err == nil || !strings.HasPrefix(err.Error(), "spec: open ") {
		t.Errorf("Read of a missing file: %v", err)
	}
}

func TestBadInputError(t *testing.T) {
	inner := errors.New("no kernel meets its requires")
	var err error = &BadInputError{Err: inner}
	if !errors.Is(err, inner) || err.Error() != inner.Error() {
		t.Errorf("BadInputError hides its cause: %v", err)
	}
}
