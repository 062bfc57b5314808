// Package specfile owns what klab's YAML input files (experiment specs and
// matrix files) share: reading a file with a bound on its size, parsing
// it into positioned nodes, and reporting every problem at once, each as
// file:line:col with what was found and what is allowed (unknown fields,
// with the ones a typo meant; keys given twice, a list where a single
// value belongs). It also owns BadInputError, the error of input that is
// wrong before anything runs. The files' own fields and rules stay with
// their packages.
package specfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"klab/internal/suggest"
)

// BadInputError is input that is wrong before anything runs: a file with
// problems, a kernel that does not resolve, an axis that does not fit,
// requires that no kernel meets, a results directory that cannot be
// resumed. Commands exit with their bad-input status for it.
type BadInputError struct{ Err error }

func (e *BadInputError) Error() string { return e.Err.Error() }
func (e *BadInputError) Unwrap() error { return e.Err }

// Problem is one problem of a file, with where it is: Line and Col are
// 1-based, 0 when unknown (Line 0: the file as a whole).
type Problem struct {
	File      string
	Line, Col int
	Msg       string
}

func (p Problem) Error() string {
	switch {
	case p.Line > 0 && p.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.Msg)
	case p.Line > 0:
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Msg)
}

// Error is every problem of an invalid file, one per line.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// Problems collects a file's problems, each once.
type Problems struct {
	file string
	list []Problem
	seen map[string]bool
	// claimed are the positions whose problem is reported (Claim).
	claimed map[[2]int]bool
}

// NewProblems returns an empty collection for the file named file.
func NewProblems(file string) *Problems { return &Problems{file: file} }

// File is the name the problems carry.
func (ps *Problems) File() string { return ps.file }

// Add adds a problem at line and col (0 when unknown), unless the same
// problem is there already or the position is claimed (see Claim).
func (ps *Problems) Add(line, col int, format string, args ...any) {
	if ps.claimed[[2]int{line, col}] {
		return
	}
	p := Problem{File: ps.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
	if ps.seen == nil {
		ps.seen = map[string]bool{}
	}
	if k := p.Error(); !ps.seen[k] {
		ps.seen[k] = true
		ps.list = append(ps.list, p)
	}
}

// Claim marks the position of n as reported: the problems added there
// from now on follow from the one reported (a value that is wrong
// because of an unknown ${name} in it), and are left out.
func (ps *Problems) Claim(n *yaml.Node) {
	if ps.claimed == nil {
		ps.claimed = map[[2]int]bool{}
	}
	ps.claimed[[2]int{n.Line, n.Column}] = true
}

// At adds a problem at n's position; a nil n is the file as a whole.
func (ps *Problems) At(n *yaml.Node, format string, args ...any) {
	if n == nil {
		ps.Add(0, 0, format, args...)
		return
	}
	ps.Add(n.Line, n.Column, format, args...)
}

// List returns the problems so far, in the order they were added.
func (ps *Problems) List() []Problem { return ps.list }

// Err returns the problems sorted by position as an *Error, or nil when
// there are none.
func (ps *Problems) Err() error {
	if len(ps.list) == 0 {
		return nil
	}
	sort.SliceStable(ps.list, func(i, j int) bool {
		a, b := ps.list[i], ps.list[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	return &Error{Problems: ps.list}
}

// Read reads the file path, at most max bytes; what names the kind of
// file in errors ("experiment", "matrix"). A larger file is an *Error.
func Read(what, path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, int64(max)+1)); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if buf.Len() > max {
		return nil, &Error{Problems: []Problem{{File: path, Msg: fmt.Sprintf("larger than %d bytes", max)}}}
	}
	return buf.Bytes(), nil
}

// Parse parses data as one YAML document holding a mapping and returns
// the mapping's node. A syntax error, or a document that is not a
// mapping, is added to ps (notMapping says what the file should be) and
// Parse returns nil.
func Parse(ps *Problems, data []byte, notMapping string) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		ps.Add(syntaxLine(data, err), 0, "%s", strings.TrimPrefix(Message(err), "yaml: "))
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		ps.Add(1, 1, "%s", notMapping)
		return nil
	}
	return doc.Content[0]
}

// Fields calls fn for each key of the mapping n in order, adding a
// problem for each key not in allowed and each key given twice (fn is
// called for its first value only). what names n in problems ("matrix",
// "kernels[0].build"); a node that is not a mapping is a problem too.
func Fields(ps *Problems, n *yaml.Node, what string, allowed []string, fn func(key string, v *yaml.Node)) {
	if n.Kind != yaml.MappingNode {
		ps.At(n, "%s: want a mapping with %s", what, strings.Join(allowed, ", "))
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case !slices.Contains(allowed, k.Value):
			ps.At(k, "%s: unknown field %q%s, want one of %s", what, k.Value, DidYouMean(k.Value, allowed), strings.Join(allowed, ", "))
		case seen[k.Value]:
			ps.At(k, "%s: %s is given twice", what, k.Value)
		default:
			seen[k.Value] = true
			fn(k.Value, v)
		}
	}
}

// DidYouMean is " (did you mean "x"?)", naming the entries of known
// nearest to word (see package suggest), or "" when none is near.
func DidYouMean(word string, known []string) string {
	s := suggest.Nearest(word, known)
	if len(s) == 0 {
		return ""
	}
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = strconv.Quote(x)
	}
	if len(q) > 1 {
		q = []string{strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]}
	}
	return " (did you mean " + q[0] + "?)"
}

// Scalar returns n's value, or adds a problem and returns "" when n is a
// list or a mapping.
func Scalar(ps *Problems, n *yaml.Node, what string) string {
	if n.Kind != yaml.ScalarNode {
		ps.At(n, "%s: want a single value", what)
		return ""
	}
	return n.Value
}

// Scalars returns the values of a list of single values; a single value
// is a list of one.
func Scalars(ps *Problems, n *yaml.Node, what string) []string {
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	if n.Kind != yaml.SequenceNode {
		ps.At(n, "%s: want a list", what)
		return nil
	}
	var out []string
	for _, x := range n.Content {
		if s := Scalar(ps, x, what); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Node follows path from root, each element a mapping key (string) or a
// list index (int), and returns the node it reaches, or the last node on
// the way that exists: a problem about a missing field is reported where
// the field belongs.
func Node(root *yaml.Node, path ...any) *yaml.Node {
	n := root
	for _, p := range path {
		switch k := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return n
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					n, found = n.Content[i+1], true
					break
				}
			}
			if !found {
				return n
			}
		case int:
			if n.Kind != yaml.SequenceNode || k >= len(n.Content) {
				return n
			}
			n = n.Content[k]
		}
	}
	return n
}

var (
	lineRe   = regexp.MustCompile(`line (\d+)`)
	prefixRe = regexp.MustCompile(`^yaml: (line \d+: )?`)
)

// Line is the line a YAML decoder error names, 0 when none.
func Line(err error) int {
	if m := lineRe.FindStringSubmatch(err.Error()); m != nil {
		var n int
		fmt.Sscan(m[1], &n)
		return n
	}
	return 0
}

// Message is a YAML decoder error without its "yaml: line N: " prefix.
func Message(err error) string {
	return prefixRe.ReplaceAllString(err.Error(), "")
}

// syntaxLine is the line of a YAML syntax error. yaml.v3 names where the
// enclosing block starts (for parser errors, the line before it), often
// lines above the mistake: the mistake is on the first line at which
// the file's beginning fails the same way.
func syntaxLine(data []byte, err error) int {
	msg := Message(err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	fails := func(n int) bool {
		var x yaml.Node
		e := yaml.Unmarshal(bytes.Join(lines[:n], nil), &x)
		return e != nil && Message(e) == msg
	}
	lo, hi := 0, len(lines)
	if !fails(hi) {
		return Line(err)
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fails(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}
