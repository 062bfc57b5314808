package experiments

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"klab/images/debian"
	"klab/internal/option"
)

// Side names the two sides of a comparison.
const (
	SideA = "a"
	SideB = "b"
)

// Plan is what an experiment run does: the rows of its table, the guests
// it boots in order, and the units (one row, one side, one round) each
// guest measures.
type Plan struct {
	// Axis is "kernel" or the name of the compared parameter.
	Axis string `json:"axis"`
	// Kernels are the kernel references, A's first.
	Kernels []string `json:"kernels"`
	// KernelLabels, when set, are the kernels' labels, in Kernels' order
	// (an empty one is KernelLabel's own): a rerun from a bundle boots
	// bundle:<kernel id> under the original run's labels.
	KernelLabels []string `json:"kernel_labels,omitempty"`
	// A and B label the sides; AValue and BValue are the compared
	// parameter's values (empty for the kernel axis).
	A      string `json:"a"`
	B      string `json:"b"`
	AValue string `json:"a_value,omitempty"`
	BValue string `json:"b_value,omitempty"`
	// Single is set when only side A is measured (one kernel of a
	// kernel comparison, as a matrix cell runs it); B is then empty.
	Single bool `json:"single,omitempty"`
	// Rows are the points of the matrix without the axis.
	Rows []PlanRow `json:"rows"`
	// Guests are the boots, in the order they run.
	Guests []GuestPlan `json:"guests"`
	// Rounds, Order, Seed and Reuse are as run.
	Rounds int    `json:"rounds"`
	Order  string `json:"order"`
	Seed   int64  `json:"seed"`
	Reuse  string `json:"reuse"`
}

// maxKernelLabel is the longest label Label gives a kernel: a longer
// reference (a path, a pinned package no shorter form tells apart) is
// called by its side.
const maxKernelLabel = 32

// Label is a side's label in reports and progress lines: the compared
// parameter's value ("transport=dev"), or its kernel's (KernelLabel); ""
// for side B of a single-kernel plan.
func (p *Plan) Label(side string) string {
	switch {
	case p.Axis != "kernel" && side == SideB:
		return p.B
	case p.Axis != "kernel":
		return p.A
	case side == SideB && p.Single:
		return "" // as p.B
	case side == SideB:
		return p.KernelLabel(1)
	}
	return p.KernelLabel(0)
}

// KernelLabel is the label of the plan's kernel i in reports and
// progress lines: its reference, except that a Debian kernel pinned to
// an exact release (as klab rerun pins them,
// "debian:7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1") goes by its series,
// "debian:7.3", or when that does not tell the kernels apart by its
// release, "debian:7.3.4+deb13-cloud-amd64". A label that is still longer
// than maxKernelLabel becomes "kernel A" or "kernel B" ("kernel" for a
// run's only kernel). The report's line naming the sides gives each
// kernel's full name once.
func (p *Plan) KernelLabel(i int) string {
	if i < 0 || i >= len(p.Kernels) {
		return ""
	}
	if i < len(p.KernelLabels) && p.KernelLabels[i] != "" {
		return p.KernelLabels[i]
	}
	forms := make([][3]string, len(p.Kernels))
	for j, ref := range p.Kernels {
		forms[j] = [3]string{ref, ref, ref}
		if series, release, ok := debian.ShortRef(ref); ok {
			forms[j] = [3]string{series, release, ref}
		}
	}
	level := 0
	for ; level < 2; level++ {
		seen := map[string]bool{}
		for _, f := range forms {
			seen[f[level]] = true
		}
		if len(seen) == len(forms) {
			break
		}
	}
	l := forms[i][level]
	if len(l) > maxKernelLabel {
		if len(p.Kernels) == 1 {
			return "kernel"
		}
		return "kernel " + strings.ToUpper(map[int]string{0: SideA, 1: SideB}[i])
	}
	return l
}

// PlanRow is one point of the matrix without the axis.
type PlanRow struct {
	// Label is "jobs=2 transport=dev", or "-" for no parameters.
	Label  string            `json:"label"`
	Params map[string]string `json:"params"`
}

// GuestPlan is one boot.
type GuestPlan struct {
	// Kernel indexes Plan.Kernels.
	Kernel int `json:"kernel"`
	// Units run in this order.
	Units []Unit `json:"units"`
}

// Unit is one row measured on one side in one round.
type Unit struct {
	Row   int    `json:"row"`
	Side  string `json:"side"`
	Round int    `json:"round"`
}

// PlanOptions are the run's choices that override the spec.
type PlanOptions struct {
	// Kernels are the kernel references (at least one).
	Kernels []string
	// KernelLabels are the plan's KernelLabels.
	KernelLabels []string
	// Compare overrides the spec's axis.
	Compare string
	// Rounds overrides the spec's rounds when not 0.
	Rounds int
	// Order and Seed override the spec's when set.
	Order string
	Seed  *int64
	// Single measures an experiment that compares kernels on the one
	// kernel given, side A only: a matrix compares its cells across
	// kernels afterwards.
	Single bool
}

// MakePlan lays out the run of f with o.
func MakePlan(f *File, o PlanOptions) (*Plan, error) {
	s := f.Spec
	p := &Plan{Kernels: o.Kernels, KernelLabels: o.KernelLabels, Rounds: s.Rounds, Order: s.Order, Seed: s.Seed, Reuse: s.Reuse, Axis: s.Compare}
	if o.Rounds != 0 {
		p.Rounds = o.Rounds
	}
	if p.Rounds == 0 {
		p.Rounds = 3
	}
	if p.Rounds < 1 || p.Rounds > 1000 {
		return nil, option.Errorf("rounds", "%d is out of range, want 1..1000", p.Rounds)
	}
	if o.Order != "" {
		p.Order = o.Order
	}
	if p.Order == "" {
		p.Order = "abba"
	}
	if p.Order != "abba" && p.Order != "random" {
		return nil, option.Errorf("order", "%q is not allowed, want abba or random", p.Order)
	}
	if o.Seed != nil {
		p.Seed = *o.Seed
	}
	if p.Reuse == "" {
		p.Reuse = "fresh"
	}
	if o.Compare != "" {
		p.Axis = o.Compare
	}
	if p.Axis == "" {
		p.Axis = "kernel"
	}
	if len(p.Kernels) == 0 {
		return nil, errors.New("no kernel: give kernel A (and kernel B to compare kernels)")
	}
	var axis *Param
	if p.Axis != "kernel" {
		for i := range s.Params {
			if s.Params[i].Name == p.Axis {
				axis = &s.Params[i]
			}
		}
		if axis == nil {
			var names []string
			for _, q := range s.Params {
				names = append(names, q.Name)
			}
			return nil, option.Errorf("compare", "%q is neither kernel nor a parameter of %s, want kernel%s", p.Axis, s.Name, prefixed(", ", names))
		}
		if len(axis.Values) != 2 {
			return nil, option.Errorf("compare", "%s: it has %d values (%s), want exactly 2; set it to two, %s=A,B",
				axis.Name, len(axis.Values), strings.Join(axis.Values, ", "), axis.Name)
		}
		for _, e := range f.exclude {
			if _, ok := e[axis.Name]; ok {
				return nil, fmt.Errorf("%s: exclude names %s, the A/B axis: every row needs both sides", f.Path, axis.Name)
			}
		}
		if len(p.Kernels) != 1 {
			return nil, fmt.Errorf("comparing %s runs on one kernel, got %d; to compare kernels, compare kernel", axis.Name, len(p.Kernels))
		}
		p.AValue, p.BValue = axis.Values[0], axis.Values[1]
		p.A, p.B = axis.Name+"="+p.AValue, axis.Name+"="+p.BValue
	} else if o.Single {
		if len(p.Kernels) != 1 {
			return nil, fmt.Errorf("a single-kernel run needs exactly one kernel, got %d", len(p.Kernels))
		}
		p.Single = true
		p.A = p.Kernels[0]
	} else {
		if len(p.Kernels) != 2 {
			times := fmt.Sprintf("%d times", len(p.Kernels))
			if len(p.Kernels) == 1 {
				times = "once"
			}
			return nil, option.Errorf("kernel", "given %s: comparing kernels needs exactly two (A and B); or compare a parameter", times)
		}
		if p.Kernels[0] == p.Kernels[1] {
			return nil, option.Errorf("kernel", "%s is given twice; A and B must differ", p.Kernels[0])
		}
		p.A, p.B = p.Kernels[0], p.Kernels[1]
	}
	// Rows: the matrix without the axis, in the file's order.
	seen := map[string]bool{}
	for _, pt := range f.Points() {
		row := map[string]string{}
		for k, v := range pt {
			if k != p.Axis {
				row[k] = v
			}
		}
		l := rowLabel(s.Params, row)
		if !seen[l] {
			seen[l] = true
			p.Rows = append(p.Rows, PlanRow{Label: l, Params: row})
		}
	}
	rng := rand.New(rand.NewPCG(uint64(p.Seed), 0x6b6c6162))
	order := func(round int) []string {
		sides := []string{SideA, SideB}
		if p.Order == "random" {
			if rng.IntN(2) == 1 {
				sides[0], sides[1] = sides[1], sides[0]
			}
		} else if round%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		return sides
	}
	units := func(side string, round int) []Unit {
		var u []Unit
		for r := range p.Rows {
			u = append(u, Unit{Row: r, Side: side, Round: round})
		}
		return u
	}
	switch {
	case p.Single && p.Reuse == "fresh":
		for r := 1; r <= p.Rounds; r++ {
			p.Guests = append(p.Guests, GuestPlan{Kernel: 0, Units: units(SideA, r)})
		}
	case p.Single:
		g := GuestPlan{Kernel: 0}
		for r := 1; r <= p.Rounds; r++ {
			g.Units = append(g.Units, units(SideA, r)...)
		}
		p.Guests = []GuestPlan{g}
	case p.Axis == "kernel" && p.Reuse == "fresh":
		for r := 1; r <= p.Rounds; r++ {
			for _, side := range order(r - 1) {
				k := 0
				if side == SideB {
					k = 1
				}
				p.Guests = append(p.Guests, GuestPlan{Kernel: k, Units: units(side, r)})
			}
		}
	case p.Axis == "kernel":
		for k, side := range []string{SideA, SideB} {
			g := GuestPlan{Kernel: k}
			for r := 1; r <= p.Rounds; r++ {
				g.Units = append(g.Units, units(side, r)...)
			}
			p.Guests = append(p.Guests, g)
		}
	default:
		var all []GuestPlan
		for r := 1; r <= p.Rounds; r++ {
			g := GuestPlan{Kernel: 0}
			for row := range p.Rows {
				for _, side := range order(r - 1 + row) {
					g.Units = append(g.Units, Unit{Row: row, Side: side, Round: r})
				}
			}
			all = append(all, g)
		}
		if p.Reuse == "guest" {
			g := GuestPlan{Kernel: 0}
			for _, x := range all {
				g.Units = append(g.Units, x.Units...)
			}
			all = []GuestPlan{g}
		}
		p.Guests = all
	}
	return p, nil
}

// Point is the full parameter point of a unit: its row and its side's
// axis value.
func (p *Plan) Point(u Unit) map[string]string {
	pt := map[string]string{}
	for k, v := range p.Rows[u.Row].Params {
		pt[k] = v
	}
	if p.Axis != "kernel" {
		pt[p.Axis] = p.AValue
		if u.Side == SideB {
			pt[p.Axis] = p.BValue
		}
	}
	return pt
}

// Units counts the units of the plan.
func (p *Plan) Units() int {
	n := 0
	for _, g := range p.Guests {
		n += len(g.Units)
	}
	return n
}

func rowLabel(params Params, row map[string]string) string {
	var parts []string
	for _, q := range params {
		if v, ok := row[q.Name]; ok {
			parts = append(parts, q.Name+"="+v)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
