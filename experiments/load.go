package experiments

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"klab/internal/option"
	"klab/internal/specfile"
	"klab/internal/suggest"
)

// maxSpecSize bounds an experiment file.
const maxSpecSize = 1 << 20

// File is a loaded, valid experiment file.
type File struct {
	// Path is the file as given; Data its content, SHA256 its hash.
	Path   string
	Data   []byte
	SHA256 string
	// Spec is the spec with ${param} references left in place; Cell
	// substitutes them.
	Spec *Spec
	root *yaml.Node
	// exclude are the spec's exclude entries, checked.
	exclude []map[string]string
	// Warnings are what is valid but likely wrong in the file (a check
	// that names the server's mountpoint but runs with the server
	// unmounted), each with its position, in the file's order.
	Warnings []specfile.Problem
}

// checkRefs returns the parameters that the i-th check refers to.
func (f *File) checkRefs(i int) []string {
	var out []string
	walkScalars(specfile.Node(f.root, "checks", i), func(s *yaml.Node) {
		for _, m := range refRe.FindAllString(s.Value, -1) {
			if name := m[2 : len(m)-1]; !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	})
	if specfile.Node(f.root, "checks", i) == specfile.Node(f.root, "checks") {
		return nil // no such check
	}
	return out
}

// LoadFile reads and validates an experiment file.
func LoadFile(path string) (*File, error) {
	data, err := specfile.Read("experiment", path, maxSpecSize)
	if err != nil {
		return nil, err
	}
	return Load(path, data)
}

// Load validates an experiment file's content; path names it in errors.
// Every problem is reported at once, in a *specfile.Error.
func Load(path string, data []byte) (*File, error) {
	ps := specfile.NewProblems(path)
	root := specfile.Parse(ps, data, "an experiment file is a YAML mapping (name:, workloads:, ...)")
	if root == nil {
		return nil, ps.Err()
	}
	params := parseParams(ps, root)
	exclude := parseExclude(ps, root, params)
	checkFields(ps, root, reflect.TypeOf(Spec{}), "")
	checkSuiteShape(ps, root)
	refs := checkRefs(ps, root, params)
	checkExpectRefs(ps, root)
	for _, p := range params {
		if !refs[p.Name] {
			ps.Add(p.line, p.col, "params: %s is used by no step (write ${%s} where it goes)", p.Name, p.Name)
		}
	}
	structural := len(ps.List())
	f := &File{Path: path, Data: data, root: root, Spec: &Spec{Params: params}, exclude: exclude}
	if len(f.Points()) == 0 {
		ps.At(specfile.Node(root, "exclude"), "exclude: every point of the matrix is excluded")
		return nil, ps.Err()
	}
	sum := sha256.Sum256(data)
	f.SHA256 = hex.EncodeToString(sum[:])
	first, err := f.substitute(f.Points()[0])
	if err != nil {
		// A value of the wrong type leaves its field zero: validate the
		// rest of the file, so that every problem shows at once.
		lines := typeProblems(ps, root, err)
		if first != nil {
			validateRest(ps, root, first, params, lines)
		}
		return nil, ps.Err()
	}
	if structural > 0 {
		validate(ps, root, first, params, true)
		return nil, ps.Err()
	}
	f.Spec = first
	// Every point of the matrix must decode and validate.
	points := f.Points()
	if len(points) > 4096 {
		ps.Add(0, 0, "params: %d points in the matrix, want at most 4096", len(points))
		return nil, ps.Err()
	}
	var need Requires
	ws := specfile.NewProblems(path)
	for _, pt := range points {
		s, err := f.substitute(pt)
		if err != nil {
			typeProblems(ps, root, err)
			continue
		}
		validate(ps, root, s, params, true)
		mountWarnings(ws, root, s)
		need.addImplied(implied(s))
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	var se *specfile.Error
	if errors.As(ws.Err(), &se) {
		f.Warnings = se.Problems
	}
	f.Spec.Requires.Implied = nil
	f.Spec.Requires.addImplied(need.Implied)
	return f, nil
}

// Points is the parameter matrix: every combination of the values, the
// first parameter varying slowest.
func (f *File) Points() []map[string]string {
	pts := []map[string]string{{}}
	for _, p := range f.Spec.Params {
		var next []map[string]string
		for _, pt := range pts {
			for _, v := range p.Values {
				n := make(map[string]string, len(pt)+1)
				for k, x := range pt {
					n[k] = x
				}
				n[p.Name] = v
				next = append(next, n)
			}
		}
		pts = next
	}
	return slices.DeleteFunc(pts, f.excluded)
}

// excluded reports whether an exclude entry matches pt.
func (f *File) excluded(pt map[string]string) bool {
	for _, e := range f.exclude {
		match := true
		for k, v := range e {
			if pt[k] != v {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// parseExclude reads and checks the exclude entries: each names
// parameters and values of the matrix.
func parseExclude(ps *specfile.Problems, root *yaml.Node, params Params) []map[string]string {
	n := specfile.Node(root, "exclude")
	if n == root {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		ps.At(n, "exclude: want a list of {param: value, ...}")
		return nil
	}
	var out []map[string]string
	for i, e := range n.Content {
		if e.Kind != yaml.MappingNode || len(e.Content) == 0 {
			ps.At(e, "exclude[%d]: want {param: value, ...}", i)
			continue
		}
		m, ok := map[string]string{}, true
		for j := 0; j+1 < len(e.Content); j += 2 {
			k, v := e.Content[j], e.Content[j+1]
			pi := slices.IndexFunc(params, func(p Param) bool { return p.Name == k.Value })
			switch {
			case pi < 0:
				ps.At(k, "exclude[%d]: %q is not a parameter%s", i, k.Value, specfile.DidYouMean(k.Value, params.names()))
				ok = false
			case v.Kind != yaml.ScalarNode || !slices.Contains(params[pi].Values, v.Value):
				ps.At(v, "exclude[%d]: %s: %q is not one of its values (%s)", i, k.Value, v.Value, strings.Join(params[pi].Values, ", "))
				ok = false
			default:
				m[k.Value] = v.Value
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// Cell returns the spec with the point's values substituted.
func (f *File) Cell(point map[string]string) (*Spec, error) {
	s, err := f.substitute(point)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (f *File) substitute(point map[string]string) (*Spec, error) {
	n := cloneNode(f.root)
	walkScalars(n, func(s *yaml.Node) {
		if !strings.Contains(s.Value, "${") {
			return
		}
		s.Value = refRe.ReplaceAllStringFunc(s.Value, func(m string) string {
			if v, ok := point[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
		s.Tag, s.Style = "", 0 // resolve the substituted value anew
	})
	var spec Spec
	if err := decode(n, &spec); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			// What decoded, for Load to validate.
			spec.Params = f.Spec.Params
			return &spec, err
		}
		return nil, err
	}
	spec.Params = f.Spec.Params
	return &spec, nil
}

// validateRest validates a spec that decoded only in part, leaving out
// the problems of the entries (top-level fields, list items) holding a
// type error on one of lines: their zero values are no mistake of the
// file's. Problems of the whole file are left out too.
func validateRest(ps *specfile.Problems, root *yaml.Node, s *Spec, params Params, lines []int) {
	// A top-level key given twice makes the decoder drop every field.
	keys := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if keys[root.Content[i].Value] {
			return
		}
		keys[root.Content[i].Value] = true
	}
	type span struct{ first, last int }
	var spans []span
	last := func(n *yaml.Node) int {
		l := n.Line
		var walk func(*yaml.Node)
		walk = func(x *yaml.Node) {
			l = max(l, x.Line)
			for _, c := range x.Content {
				walk(c)
			}
		}
		walk(n)
		return l
	}
	for _, line := range lines {
		for i := 0; i+1 < len(root.Content); i += 2 {
			k, v := root.Content[i], root.Content[i+1]
			if line < k.Line || line > last(v) {
				continue
			}
			sp := span{k.Line, last(v)}
			if v.Kind == yaml.SequenceNode {
				for _, item := range v.Content {
					if line >= item.Line && line <= last(item) {
						sp = span{item.Line, last(item)}
					}
				}
			}
			spans = append(spans, sp)
		}
	}
	vs := specfile.NewProblems(ps.File())
	validate(vs, root, s, params, true)
	for _, p := range vs.List() {
		if p.Line == root.Line && p.Col == root.Column {
			continue
		}
		if slices.ContainsFunc(spans, func(sp span) bool { return p.Line >= sp.first && p.Line <= sp.last }) {
			continue
		}
		ps.Add(p.Line, p.Col, "%s", p.Msg)
	}
}

func decode(n *yaml.Node, v any) error {
	// Params are parsed by hand; hide them from the typed decoder.
	c := cloneNode(n)
	for i := 0; i+1 < len(c.Content); i += 2 {
		if c.Content[i].Value == "params" {
			c.Content = append(c.Content[:i], c.Content[i+2:]...)
			break
		}
	}
	// Decoding the node keeps the file's line numbers in errors.
	return c.Decode(v)
}

var refRe = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

func parseParams(ps *specfile.Problems, root *yaml.Node) Params {
	var out Params
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value != "params" {
			continue
		}
		if v.Kind != yaml.MappingNode {
			ps.At(v, "params: want a mapping of names to lists of values (jobs: [1, 2, 4])")
			return nil
		}
		if len(v.Content) == 0 {
			ps.At(v, "params: an empty matrix; leave params out, or give each a list of values")
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			name, vals := v.Content[j], v.Content[j+1]
			if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(name.Value) {
				ps.At(name, "params: %q is not a valid name, want letters, digits and _", name.Value)
				continue
			}
			p := Param{Name: name.Value, line: name.Line, col: name.Column}
			switch vals.Kind {
			case yaml.ScalarNode:
				p.Values = []string{vals.Value}
			case yaml.SequenceNode:
				for _, x := range vals.Content {
					if x.Kind != yaml.ScalarNode {
						ps.At(x, "params: %s: values are numbers or strings", p.Name)
						continue
					}
					if slices.Contains(p.Values, x.Value) {
						ps.At(x, "params: %s: %q is listed twice", p.Name, x.Value)
						continue
					}
					p.Values = append(p.Values, x.Value)
				}
				if len(vals.Content) == 0 {
					ps.At(vals, "params: %s: an empty list, want at least one value", p.Name)
				}
			default:
				ps.At(vals, "params: %s: want a list of values", p.Name)
			}
			out = append(out, p)
		}
	}
	return out
}

// names are the parameters' names, in order.
func (ps Params) names() []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// checkRefs reports ${name} references to unknown parameters and returns
// the names used.
func checkRefs(ps *specfile.Problems, root *yaml.Node, params Params) map[string]bool {
	known := map[string]bool{}
	var names []string
	for _, p := range params {
		known[p.Name] = true
		names = append(names, p.Name)
	}
	used := map[string]bool{}
	// A value holding an unknown ${name} is reported once: its type or
	// validation problems, in every point of the matrix, follow from it.
	var bad []*yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i].Value, root.Content[i+1]
		if key == "params" {
			continue
		}
		walkScalars(val, func(s *yaml.Node) {
			for _, m := range refRe.FindAllString(s.Value, -1) {
				name := m[2 : len(m)-1]
				switch {
				case key == "setup" || key == "vm" || key == "requires" || key == "rounds" || key == "reuse":
					ps.At(s, "%s: ${%s}: parameters are not allowed here (it applies to the whole guest); allowed in sysctls, server, workloads and checks", key, name)
					bad = append(bad, s)
				case !known[name]:
					// The parameter a typo meant is used, not idle.
					near := suggest.Nearest(name, names)
					for _, n := range near {
						used[n] = true
					}
					switch {
					case len(names) == 0:
						ps.At(s, "${%s}: no such parameter (this file has no params)", name)
					case len(near) > 0:
						ps.At(s, "${%s}: no such parameter (did you mean %s?), want one of %s", name, refList(near), strings.Join(names, ", "))
					default:
						ps.At(s, "${%s}: no such parameter, want one of %s", name, strings.Join(names, ", "))
					}
					bad = append(bad, s)
				}
				used[name] = true
			}
		})
	}
	for _, s := range bad {
		ps.Claim(s)
	}
	return used
}

// refList is names as references: "${a}", "${a} or ${b}".
func refList(names []string) string {
	refs := make([]string, len(names))
	for i, n := range names {
		refs[i] = "${" + n + "}"
	}
	if len(refs) == 1 {
		return refs[0]
	}
	return strings.Join(refs[:len(refs)-1], ", ") + " or " + refs[len(refs)-1]
}

// checkFields reports every mapping key that the Go type does not have,
// with the keys that it has.
func checkFields(ps *specfile.Problems, n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(oneOrManyType) {
		switch {
		case n.Kind == yaml.MappingNode:
			checkFields(ps, n, t.Elem(), path)
			return
		case n.Kind != yaml.SequenceNode && n.Tag != "!!null":
			ps.At(n, "%s: want a mapping (%s), or a list of them", path, strings.Join(yamlFields(t.Elem())[:3], ", ")+", ...")
			return
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if tag := strings.Split(f.Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
				fields[tag] = f.Type
			}
		}
		specfile.Fields(ps, n, orTop(path), yamlFields(t), func(k string, v *yaml.Node) {
			if path == "" && k == "params" {
				return
			}
			checkFields(ps, v, fields[k], join(path, k))
		})
	case reflect.Slice:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		if n.Kind != yaml.SequenceNode {
			ps.At(n, "%s: want a list", path)
			return
		}
		for i, c := range n.Content {
			checkFields(ps, c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return
		}
		if n.Kind != yaml.MappingNode {
			ps.At(n, "%s: want a mapping of names to values", path)
			return
		}
		for i := 1; i < len(n.Content); i += 2 {
			if n.Content[i].Kind != yaml.ScalarNode {
				ps.At(n.Content[i], "%s.%s: want a single value", path, n.Content[i-1].Value)
			}
		}
	default:
		switch {
		case n.Kind != yaml.ScalarNode:
			ps.At(n, "%s: want a single value, not a %s", path, kindName(n.Kind))
		case n.Tag == "!!float" && isInt(t):
			// The typed decoder would cut it to an integer silently.
			ps.At(n, "%s: want an integer, got %q", path, n.Value)
		}
	}
}

// isInt reports whether t is a plain integer type: not a time.Duration,
// nor one that parses its own values (Size).
func isInt(t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()) {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return t != reflect.TypeOf(time.Duration(0))
	}
	return false
}

func orTop(path string) string {
	if path == "" {
		return "experiment"
	}
	return path
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

func yamlFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			out = append(out, tag)
		}
	}
	return out
}

var lineRe = regexp.MustCompile(`line (\d+): `)

// shapeRe matches the typed decoder's errors that checkFields reports
// better, on the same line: a list or mapping where the field wants
// another shape, and a key given twice.
var shapeRe = regexp.MustCompile(`^(cannot unmarshal !!(seq|map) into |mapping key ".*" already defined)`)

// typeProblems turns the typed decoder's errors ("line 7: cannot
// unmarshal !!str `x` into int") into problems, and returns their lines.
func typeProblems(ps *specfile.Problems, root *yaml.Node, err error) []int {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		var lines []int
		for _, e := range te.Errors {
			line, col := 0, 0
			if m := lineRe.FindStringSubmatch(e); m != nil {
				fmt.Sscan(m[1], &line)
				e = e[len(m[0]):]
			}
			lines = append(lines, line)
			if shapeRe.MatchString(e) && slices.ContainsFunc(ps.List(), func(p specfile.Problem) bool { return p.Line == line }) {
				continue
			}
			msg, found := friendlyType(e)
			if line > 0 {
				n, field := scalarAt(root, line, found)
				if n != nil {
					col = n.Column
					if field != "" {
						msg = field + ": " + msg
					}
					if n.Value != found && strings.Contains(n.Value, "${") {
						msg += fmt.Sprintf(" (from %s)", n.Value)
					}
				}
			}
			if col > 0 && slices.ContainsFunc(ps.List(), func(p specfile.Problem) bool { return p.Line == line && p.Col == col }) {
				continue // checkFields said it (a single value where a list belongs)
			}
			ps.Add(line, col, "%s", msg)
		}
		return lines
	}
	ps.Add(specfile.Line(err), 0, "%s", specfile.Message(err))
	return nil
}

var unmarshalRe = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into (.+)$")

// scalarAt finds the first scalar value on line that is value in the
// file, or produced it (it holds a ${param}), and returns it with the
// field it is the value of ("rounds", "workloads[0].jobs"); nil when
// there is none.
func scalarAt(root *yaml.Node, line int, value string) (*yaml.Node, string) {
	var found *yaml.Node
	var field string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch {
		case found != nil:
		case n.Kind == yaml.ScalarNode:
			if n.Line == line && (n.Value == value || strings.Contains(n.Value, "${")) {
				found, field = n, path
			}
		case n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], join(path, n.Content[i].Value))
			}
		default:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(root, "")
	return found, field
}

func friendlyType(e string) (string, string) {
	m := unmarshalRe.FindStringSubmatch(e)
	if m == nil {
		return e, ""
	}
	want := m[3]
	switch {
	case strings.HasPrefix(want, "int"):
		want = "an integer"
	case want == "bool":
		want = "true or false"
	case want == "float64":
		want = "a number"
	case want == "string":
		want = "a string"
	case want == "time.Duration":
		want = "a duration (90s, 10m)"
	case strings.HasPrefix(want, "[]"):
		want = "a list"
	case strings.HasPrefix(want, "map"):
		want = "a mapping"
	}
	return fmt.Sprintf("want %s, got %q", want, m[2]), m[2]
}

func walkScalars(n *yaml.Node, f func(*yaml.Node)) {
	if n == nil {
		return
	}
	if n.Kind == yaml.ScalarNode {
		f(n)
		return
	}
	for i, c := range n.Content {
		// Mapping keys are names, never substituted.
		if n.Kind == yaml.MappingNode && i%2 == 0 {
			continue
		}
		walkScalars(c, f)
	}
}

func cloneNode(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, x := range n.Content {
		c.Content[i] = cloneNode(x)
	}
	return &c
}

// UnmarshalYAML parses a size; a bad one is a type error with its line,
// as the decoder's own are, so that decoding goes on.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s into a size", n.Line, n.ShortTag())}}
	}
	if err := s.UnmarshalText([]byte(n.Value)); err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal !!str `%s` into a size (bytes, or a number with k, M, G: 4k, 1M)", n.Line, n.Value)}}
	}
	return nil
}

// WithSets returns f with parameters overridden: name -> values
// separated by commas. An unknown name, or a value that does not
// validate, is an error naming what is allowed.
func (f *File) WithSets(sets map[string]string) (*File, error) {
	c := *f
	spec := *f.Spec
	c.Spec = &spec
	params := slices.Clone(f.Spec.Params)
	var errs []error
	for _, name := range sortedKeys(sets) {
		i := slices.IndexFunc(params, func(p Param) bool { return p.Name == name })
		if i < 0 {
			names := params.names()
			errs = append(errs, option.Errorf("set", "%s: %s has no such parameter%s, want one of: %s", name, f.Path, specfile.DidYouMean(name, names), strings.Join(names, ", ")))
			continue
		}
		var vals []string
		for _, v := range strings.Split(sets[name], ",") {
			if v = strings.TrimSpace(v); v != "" && !slices.Contains(vals, v) {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			errs = append(errs, option.Errorf("set", "%s: no values, want %s=V1[,V2...]", name, name))
			continue
		}
		params[i].Values = vals
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.Spec.Params = params
	ps := specfile.NewProblems(f.Path + " (with parameters set)")
	var need Requires
	for _, pt := range c.Points() {
		s, err := c.substitute(pt)
		if err != nil {
			typeProblems(ps, c.root, err)
			continue
		}
		validate(ps, c.root, s, params, false)
		need.addImplied(implied(s))
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	// What the parameters set now run decides what is implied.
	c.Spec.Requires.Implied = nil
	c.Spec.Requires.addImplied(need.Implied)
	return &c, nil
}
