package experiments

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"klab/internal/specfile"
	"klab/results/reference"
)

// OneOrMany is a list that a spec may also write as its single item: a
// mapping, or a list of mappings (expect:).
type OneOrMany[T any] []T

// UnmarshalYAML takes a mapping as a list of one. A single value leaves
// the list empty: checkFields reports it, with what is allowed.
func (l *OneOrMany[T]) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode, yaml.AliasNode:
		return nil
	case yaml.MappingNode:
		var v T
		err := n.Decode(&v)
		*l = OneOrMany[T]{v}
		return err
	}
	var s []T
	var errs []string
	for _, item := range n.Content {
		var v T
		if item.Kind != yaml.MappingNode {
			s = append(s, v) // checkFields reports it
			continue
		}
		err := item.Decode(&v)
		var te *yaml.TypeError
		switch {
		case errors.As(err, &te):
			errs = append(errs, te.Errors...)
		case err != nil:
			return err
		}
		s = append(s, v)
	}
	*l = s
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	return nil
}

// oneOrMany marks OneOrMany for checkFields, which takes a mapping as its
// item.
func (OneOrMany[T]) oneOrMany() {}

// oneOrManyType is the interface every OneOrMany has.
var oneOrManyType = reflect.TypeOf((*interface{ oneOrMany() })(nil)).Elem()

// expectItem is the node of the j-th expectation under an expect: node,
// and its name in problems: "workloads[0].expect" for a single mapping,
// "workloads[0].expect[1]" in a list.
func expectItem(n *yaml.Node, pre string, j int) (*yaml.Node, string) {
	if n.Kind == yaml.SequenceNode && j < len(n.Content) {
		return n.Content[j], fmt.Sprintf("%s.expect[%d]", pre, j)
	}
	return n, pre + ".expect"
}

// validateExpects checks the i-th workload's expectations: a source, a
// direction or figure that agree with each other and the metric, a
// metric the workload has, parameters of the matrix (not the axis),
// needs a run can meet, and no two expectations for the same row. With
// axis false (--set narrowed the matrix) the parameter values are not
// held to the narrowed lists.
func validateExpects(ps *specfile.Problems, root *yaml.Node, s *Spec, params Params, axis bool, i int) {
	w := &s.Workloads[i]
	pre := fmt.Sprintf("workloads[%d]", i)
	list := specfile.Node(root, "workloads", i, "expect")
	names := metricNames(w)
	for j, e := range w.Expect {
		n, what := expectItem(list, pre, j)
		if n.Kind != yaml.MappingNode {
			continue // checkFields reports it
		}
		at := func(f string) *yaml.Node { return specfile.Node(n, f) }
		has := func(f string) bool { return at(f) != n }
		validateSource(ps, at("source"), what, e.Source)
		validateNeeds(ps, n, what, e.Needs)
		metric := e.Metric
		if metric == "" {
			metric = names[0]
		} else if !slices.Contains(names, metric) {
			ps.At(at("metric"), "%s.metric: %q is not a metric of %s, want one of %s", what, metric, w.Name, strings.Join(names, ", "))
		}
		_, dir := metricInfo(metric)
		if e.Direction != "" && !slices.Contains(reference.Directions, e.Direction) {
			ps.At(at("direction"), "%s.direction: %q is not allowed, want one of %s", what, e.Direction, directionList())
		}
		if !has("direction") && !has("ratio") && !has("range") {
			ps.At(n, "%s: want direction (%s), ratio (the reference's B/A) or range ([lo, hi])", what, directionList())
		}
		figure := true
		if has("ratio") && has("range") {
			ps.At(at("range"), "%s.range: give ratio or range, not both", what)
			figure = false
		}
		if has("ratio") && (e.Ratio <= 0 || e.Ratio > 1e6) {
			ps.At(at("ratio"), "%s.ratio: %g is out of range, want the reference's B/A, above 0 (2.57)", what, e.Ratio)
			figure = false
		}
		if has("range") {
			switch r := e.Range; {
			case len(r) != 2:
				ps.At(at("range"), "%s.range: %d values, want [lo, hi]", what, len(r))
				figure = false
			case r[0] <= 0 || r[0] > r[1] || r[1] > 1e6:
				ps.At(at("range"), "%s.range: [%g, %g], want 0 < lo <= hi", what, r[0], r[1])
				figure = false
			}
		}
		if figure && slices.Contains(reference.Directions, e.Direction) {
			if err := e.Agrees(dir); err != nil {
				ps.At(at("direction"), "%s.direction: %v (metric %s)", what, err, metric)
			}
		}
		validateExpectParams(ps, at("params"), what, e.Params, s.Compare, params, axis)
		m := e.MeasuredOn
		mn := func(f string) *yaml.Node { return specfile.Node(n, "measured_on", f) }
		if m.CPUs < 0 || m.CPUs > 1<<16 {
			ps.At(mn("cpus"), "%s.measured_on.cpus: %d is out of range, want 1..65536", what, m.CPUs)
		}
		if m.Accel != "" && !slices.Contains(reference.Accels, m.Accel) {
			ps.At(mn("accel"), "%s.measured_on.accel: %q is not allowed, want one of %s", what, m.Accel, strings.Join(reference.Accels, ", "))
		}
		if len(m.Note) > 200 || strings.ContainsAny(m.Note, "\n\r") {
			ps.At(mn("note"), "%s.measured_on.note: want one line of at most 200 characters", what)
		}
		for k := range j {
			o := w.Expect[k]
			om := o.Metric
			if om == "" {
				om = names[0]
			}
			on, other := expectItem(list, pre, k)
			if on.Kind == yaml.MappingNode && om == metric && overlap(o.Params, e.Params) {
				ps.At(n, "%s: the same rows as %s (metric %s); give them params that tell the rows apart", what, other, metric)
				break
			}
		}
	}
}

// validateCheckExpects checks the i-th check's expectations.
func validateCheckExpects(ps *specfile.Problems, root *yaml.Node, s *Spec, i int) {
	c := &s.Checks[i]
	pre := fmt.Sprintf("checks[%d]", i)
	list := specfile.Node(root, "checks", i, "expect")
	for j, e := range c.Expect {
		n, what := expectItem(list, pre, j)
		if n.Kind != yaml.MappingNode {
			continue // checkFields reports it
		}
		validateSource(ps, specfile.Node(n, "source"), what, e.Source)
		validateNeeds(ps, n, what, e.Needs)
		if e.Outcome != "" && e.Outcome != reference.Pass && e.Outcome != reference.Fail {
			ps.At(specfile.Node(n, "outcome"), "%s.outcome: %q is not allowed, want pass or fail", what, e.Outcome)
		}
		if j > 0 {
			ps.At(n, "%s: a check has one expected outcome; give one expectation", what)
		}
	}
}

// validateSource checks an expectation's source: required, one line.
func validateSource(ps *specfile.Problems, n *yaml.Node, what, src string) {
	switch {
	case strings.TrimSpace(src) == "":
		ps.At(n, "%s.source: required: where the figure comes from (\"seed 003, creates/s table\")", what)
	case len(src) > 300 || strings.ContainsAny(src, "\n\r"):
		ps.At(n, "%s.source: want one line of at most 300 characters (the prose goes in reference:)", what)
	}
}

// validateNeeds checks an expectation's needs.
func validateNeeds(ps *specfile.Problems, n *yaml.Node, what string, nd reference.Needs) {
	at := func(f string) *yaml.Node { return specfile.Node(n, "needs", f) }
	if nd.Accel != "" && !slices.Contains(reference.NeedAccels, nd.Accel) {
		ps.At(at("accel"), "%s.needs.accel: %q is not allowed, want kvm (a row that needs hardware virtualisation; leave it out for any)", what, nd.Accel)
	}
	if nd.MinCPUs < 0 || nd.MinCPUs > 64 {
		ps.At(at("min_cpus"), "%s.needs.min_cpus: %d is out of range, want 1..64 (vm.cpus' range)", what, nd.MinCPUs)
	}
	if nd.Icount && nd.TCGMultithread {
		ps.At(at("tcg_multithread"), "%s.needs: icount and tcg_multithread exclude each other (QEMU counts instructions under single-threaded TCG only); accel: kvm meets both", what)
	}
}

// validateExpectParams checks an expectation's params: parameters of the
// matrix other than the axis, with one of their values.
func validateExpectParams(ps *specfile.Problems, n *yaml.Node, what string, m map[string]string, compare string, params Params, axis bool) {
	for _, k := range sortedKeys(m) {
		at := n
		if n.Kind == yaml.MappingNode {
			for x := 0; x+1 < len(n.Content); x += 2 {
				if n.Content[x].Value == k {
					at = n.Content[x]
				}
			}
		}
		pi := slices.IndexFunc(params, func(p Param) bool { return p.Name == k })
		var names []string
		for _, p := range params {
			if p.Name != compare {
				names = append(names, p.Name)
			}
		}
		switch {
		case k == compare:
			ps.At(at, "%s.params: %s is the A/B axis; an expectation is about B against A, so it cannot pick a side", what, k)
		case pi < 0 && len(names) == 0:
			ps.At(at, "%s.params: %q is not a parameter (this file has none besides the axis)", what, k)
		case pi < 0:
			ps.At(at, "%s.params: %q is not a parameter, want one of %s", what, k, strings.Join(names, ", "))
		case axis && !slices.Contains(params[pi].Values, m[k]):
			ps.At(at, "%s.params: %s: %q is not one of its values (%s)", what, k, m[k], strings.Join(params[pi].Values, ", "))
		}
	}
}

// overlap reports whether a row could match both parameter filters: no
// parameter they both name has two different values.
func overlap(a, b map[string]string) bool {
	for k, v := range a {
		if w, ok := b[k]; ok && w != v {
			return false
		}
	}
	return true
}

// directionList lists the directions for problems.
func directionList() string {
	var l []string
	for _, d := range reference.Directions {
		l = append(l, string(d))
	}
	return strings.Join(l, ", ")
}

// checkExpectRefs reports ${param} references in expectations: an
// expectation picks its rows with params, and holds for every point.
func checkExpectRefs(ps *specfile.Problems, root *yaml.Node) {
	for _, list := range []string{"workloads", "checks"} {
		l := specfile.Node(root, list)
		if l == root || l.Kind != yaml.SequenceNode {
			continue
		}
		for i, item := range l.Content {
			e := specfile.Node(item, "expect")
			if e == item {
				continue
			}
			items := []*yaml.Node{e}
			if e.Kind == yaml.SequenceNode {
				items = e.Content
			}
			for j, x := range items {
				_, what := expectItem(e, fmt.Sprintf("%s[%d]", list, i), j)
				walkScalars(x, func(s *yaml.Node) {
					if m := refRe.FindString(s.Value); m != "" {
						ps.At(s, "%s: %s: parameters are not allowed in an expectation; pick its rows with params: {name: value}", what, m)
					}
				})
			}
		}
	}
}
