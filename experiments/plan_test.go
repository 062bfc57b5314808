package experiments

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// planSpec has a two-valued transport, so that it can compare either
// kernels or transports, and a second parameter for two rows.
const planSpec = `
name: plan
params:
  transport: [dev, uring]
  jobs: [1, 2]
server:
  kind: passthrough
  transport: ${transport}
  backing: /tmp/backing
  mountpoint: /mnt/fuse
workloads:
  - name: create
    pattern: create
    dir: /mnt/fuse/c
    jobs: ${jobs}
    files: 10
`

func loadPlanSpec(t *testing.T, extra string) *File {
	t.Helper()
	f, err := Load("plan.yaml", yml(planSpec+extra))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustPlan(t *testing.T, f *File, o PlanOptions) *Plan {
	t.Helper()
	p, err := MakePlan(f, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// unitWords writes a guest's units as "row/side/round" words.
func unitWords(g GuestPlan) string {
	var w []string
	for _, u := range g.Units {
		w = append(w, fmt.Sprintf("%d%s%d", u.Row, u.Side, u.Round))
	}
	return strings.Join(w, " ")
}

func TestPlanKernelAxisFresh(t *testing.T) {
	f := loadPlanSpec(t, "")
	p := mustPlan(t, f, PlanOptions{Kernels: []string{"ka", "kb"}, Rounds: 4})
	if p.Axis != "kernel" || p.A != "ka" || p.B != "kb" || p.AValue != "" || p.Rounds != 4 || p.Order != "abba" || p.Reuse != "fresh" {
		t.Errorf("plan = axis %q, A %q, B %q, AValue %q, rounds %d, order %q, reuse %q", p.Axis, p.A, p.B, p.AValue, p.Rounds, p.Order, p.Reuse)
	}
	// On the kernel axis every parameter point is a row.
	var labels []string
	for _, r := range p.Rows {
		labels = append(labels, r.Label)
	}
	if want := []string{"transport=dev jobs=1", "transport=dev jobs=2", "transport=uring jobs=1", "transport=uring jobs=2"}; !slices.Equal(labels, want) {
		t.Errorf("rows = %q, want %q", labels, want)
	}
	var kernels []int
	var sides []string
	for _, g := range p.Guests {
		kernels = append(kernels, g.Kernel)
		sides = append(sides, unitWords(g))
	}
	if want := []int{0, 1, 1, 0, 0, 1, 1, 0}; !slices.Equal(kernels, want) {
		t.Errorf("guest kernels = %v, want %v (A B B A A B B A)", kernels, want)
	}
	want := []string{
		"0a1 1a1 2a1 3a1", "0b1 1b1 2b1 3b1",
		"0b2 1b2 2b2 3b2", "0a2 1a2 2a2 3a2",
		"0a3 1a3 2a3 3a3", "0b3 1b3 2b3 3b3",
		"0b4 1b4 2b4 3b4", "0a4 1a4 2a4 3a4",
	}
	if !slices.Equal(sides, want) {
		t.Errorf("guest units:\n%s\nwant\n%s", strings.Join(sides, "\n"), strings.Join(want, "\n"))
	}
	if p.Units() != 32 {
		t.Errorf("Units() = %d, want 4 rows x 2 sides x 4 rounds", p.Units())
	}
	// On the kernel axis Point is the row's point alone.
	if pt := p.Point(Unit{Row: 2, Side: SideB}); !reflect.DeepEqual(pt, map[string]string{"transport": "uring", "jobs": "1"}) {
		t.Errorf("Point(row 2, b) = %v", pt)
	}
}

func TestPlanParamAxis(t *testing.T) {
	f := loadPlanSpec(t, "compare: transport\nrounds: 4\n")
	p := mustPlan(t, f, PlanOptions{Kernels: []string{"k"}})
	if p.Axis != "transport" || p.A != "transport=dev" || p.B != "transport=uring" || p.AValue != "dev" || p.BValue != "uring" || p.Rounds != 4 {
		t.Errorf("plan = axis %q, A %q, B %q, values %q %q, rounds %d", p.Axis, p.A, p.B, p.AValue, p.BValue, p.Rounds)
	}
	if len(p.Rows) != 2 || p.Rows[0].Label != "jobs=1" || p.Rows[1].Label != "jobs=2" {
		t.Errorf("rows = %+v, want jobs=1 and jobs=2", p.Rows)
	}
	var got []string
	for _, g := range p.Guests {
		if g.Kernel != 0 {
			t.Errorf("guest on kernel %d, want 0", g.Kernel)
		}
		got = append(got, unitWords(g))
	}
	// One guest per round; ABBA within each guest, and from round to
	// round.
	want := []string{
		"0a1 0b1 1b1 1a1",
		"0b2 0a2 1a2 1b2",
		"0a3 0b3 1b3 1a3",
		"0b4 0a4 1a4 1b4",
	}
	if !slices.Equal(got, want) {
		t.Errorf("guest units:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, tc := range []struct {
		u    Unit
		want map[string]string
	}{
		{Unit{Row: 0, Side: SideA}, map[string]string{"transport": "dev", "jobs": "1"}},
		{Unit{Row: 0, Side: SideB}, map[string]string{"transport": "uring", "jobs": "1"}},
		{Unit{Row: 1, Side: SideB, Round: 3}, map[string]string{"transport": "uring", "jobs": "2"}},
	} {
		if got := p.Point(tc.u); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Point(%+v) = %v, want %v", tc.u, got, tc.want)
		}
	}
	// Point does not change the plan's rows.
	if len(p.Rows[0].Params) != 1 {
		t.Errorf("Point wrote into the row: %v", p.Rows[0].Params)
	}

	// --compare overrides the spec's axis: jobs has two values too.
	p = mustPlan(t, f, PlanOptions{Kernels: []string{"k"}, Compare: "jobs", Rounds: 1})
	if p.A != "jobs=1" || p.B != "jobs=2" || len(p.Rows) != 2 || p.Rows[0].Label != "transport=dev" {
		t.Errorf("--compare jobs: A %q, B %q, rows %+v", p.A, p.B, p.Rows)
	}
}

func TestPlanReuseGuest(t *testing.T) {
	f := loadPlanSpec(t, "reuse: guest\nrounds: 3\n")
	p := mustPlan(t, f, PlanOptions{Kernels: []string{"ka", "kb"}})
	if len(p.Guests) != 2 || p.Guests[0].Kernel != 0 || p.Guests[1].Kernel != 1 || p.Reuse != "guest" {
		t.Fatalf("kernel axis, reuse guest: %+v, want one guest per kernel", p.Guests)
	}
	for gi, g := range p.Guests {
		side := []string{SideA, SideB}[gi]
		if len(g.Units) != 4*3 {
			t.Errorf("guest %d: %d units, want 4 rows x 3 rounds", gi, len(g.Units))
		}
		for i, u := range g.Units {
			if u.Side != side || u.Round != i/4+1 || u.Row != i%4 {
				t.Errorf("guest %d unit %d = %+v, want row %d side %s round %d", gi, i, u, i%4, side, i/4+1)
			}
		}
	}

	p = mustPlan(t, f, PlanOptions{Kernels: []string{"k"}, Compare: "transport"})
	if len(p.Guests) != 1 {
		t.Fatalf("param axis, reuse guest: %d guests, want 1", len(p.Guests))
	}
	want := "0a1 0b1 1b1 1a1 0b2 0a2 1a2 1b2 0a3 0b3 1b3 1a3"
	if got := unitWords(p.Guests[0]); got != want {
		t.Errorf("units = %s, want %s", got, want)
	}
}

func TestPlanRandomOrder(t *testing.T) {
	f := loadPlanSpec(t, "order: random\nseed: 7\nrounds: 16\n")
	kernels := []string{"ka", "kb"}
	a := mustPlan(t, f, PlanOptions{Kernels: kernels})
	b := mustPlan(t, f, PlanOptions{Kernels: kernels})
	if !reflect.DeepEqual(a, b) {
		t.Errorf("the same seed gave two plans")
	}
	if a.Order != "random" || a.Seed != 7 {
		t.Errorf("order %q seed %d", a.Order, a.Seed)
	}
	seed := int64(8)
	c := mustPlan(t, f, PlanOptions{Kernels: kernels, Seed: &seed})
	if c.Seed != 8 {
		t.Errorf("--seed 8: plan seed %d", c.Seed)
	}
	if reflect.DeepEqual(a.Guests, c.Guests) {
		t.Errorf("seeds 7 and 8 gave the same order over 16 rounds")
	}
	for _, p := range []*Plan{a, c} {
		// Each round has one guest per side, on its side's kernel.
		if len(p.Guests) != 32 {
			t.Fatalf("%d guests, want 32", len(p.Guests))
		}
		firstB := 0
		for r := 1; r <= 16; r++ {
			g1, g2 := p.Guests[2*r-2], p.Guests[2*r-1]
			s1, s2 := g1.Units[0].Side, g2.Units[0].Side
			if s1 == s2 || g1.Units[0].Round != r || g2.Units[0].Round != r {
				t.Errorf("seed %d round %d: guests %s and %s", p.Seed, r, unitWords(g1), unitWords(g2))
			}
			for _, g := range []GuestPlan{g1, g2} {
				if want := map[string]int{SideA: 0, SideB: 1}[g.Units[0].Side]; g.Kernel != want {
					t.Errorf("seed %d round %d: a guest on kernel %d runs side %s", p.Seed, r, g.Kernel, g.Units[0].Side)
				}
			}
			if s1 == SideB {
				firstB++
			}
		}
		if firstB == 0 || firstB == 16 {
			t.Errorf("seed %d: B went first in %d of 16 rounds: not random", p.Seed, firstB)
		}
	}

	// The param axis: within each guest, each row once per side.
	pa := mustPlan(t, f, PlanOptions{Kernels: []string{"k"}, Compare: "transport"})
	pb := mustPlan(t, f, PlanOptions{Kernels: []string{"k"}, Compare: "transport"})
	if !reflect.DeepEqual(pa, pb) {
		t.Errorf("param axis: the same seed gave two plans")
	}
	for _, g := range pa.Guests {
		count := map[string]int{}
		for _, u := range g.Units {
			count[fmt.Sprintf("%d%s", u.Row, u.Side)]++
		}
		if len(count) != 4 || len(g.Units) != 4 {
			t.Errorf("param axis guest %s: want each row once per side", unitWords(g))
		}
	}
	// --order overrides the spec's.
	if p := mustPlan(t, f, PlanOptions{Kernels: kernels, Order: "abba"}); p.Order != "abba" || p.Guests[1].Kernel != 1 || p.Guests[2].Kernel != 1 {
		t.Errorf("--order abba: order %q", p.Order)
	}
}

func TestPlanErrors(t *testing.T) {
	f := loadPlanSpec(t, "")
	three, err := Load("three.yaml", yml(`
name: three
params:
  transport: [dev, uring, other]
checks:
  - name: c
    run: echo ${transport}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    *File
		o    PlanOptions
		want string
	}{
		{"no kernel", f, PlanOptions{}, "no kernel: give kernel A (and kernel B to compare kernels)"},
		{"kernel axis, one kernel", f, PlanOptions{Kernels: []string{"k"}},
			"kernel given once: comparing kernels needs exactly two (A and B); or compare a parameter"},
		{"kernel axis, three kernels", f, PlanOptions{Kernels: []string{"a", "b", "c"}},
			"kernel given 3 times: comparing kernels needs exactly two (A and B); or compare a parameter"},
		{"same kernel twice", f, PlanOptions{Kernels: []string{"k", "k"}}, "kernel k is given twice; A and B must differ"},
		{"param axis, two kernels", f, PlanOptions{Kernels: []string{"ka", "kb"}, Compare: "transport"},
			"comparing transport runs on one kernel, got 2; to compare kernels, compare kernel"},
		{"unknown param", f, PlanOptions{Kernels: []string{"k"}, Compare: "colour"},
			`compare "colour" is neither kernel nor a parameter of plan, want kernel, transport, jobs`},
		{"three values", three, PlanOptions{Kernels: []string{"k"}, Compare: "transport"},
			"compare transport: it has 3 values (dev, uring, other), want exactly 2; set it to two, transport=A,B"},
		{"rounds 0 is the default, -1 is not", f, PlanOptions{Kernels: []string{"ka", "kb"}, Rounds: -1}, "rounds -1 is out of range, want 1..1000"},
		{"rounds too many", f, PlanOptions{Kernels: []string{"ka", "kb"}, Rounds: 1001}, "rounds 1001 is out of range, want 1..1000"},
		{"bad order", f, PlanOptions{Kernels: []string{"ka", "kb"}, Order: "zigzag"}, `order "zigzag" is not allowed, want abba or random`},
	} {
		p, err := MakePlan(tc.f, tc.o)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: MakePlan: %v, want %s", tc.name, err, tc.want)
		}
		if p != nil {
			t.Errorf("%s: a plan with the error", tc.name)
		}
	}
	// The default of 3 rounds, and the limit itself.
	if p := mustPlan(t, f, PlanOptions{Kernels: []string{"ka", "kb"}}); p.Rounds != 3 || len(p.Guests) != 6 {
		t.Errorf("default: %d rounds, %d guests, want 3 and 6", p.Rounds, len(p.Guests))
	}
	if p := mustPlan(t, f, PlanOptions{Kernels: []string{"ka", "kb"}, Rounds: 1000}); p.Rounds != 1000 {
		t.Errorf("--rounds 1000: %d", p.Rounds)
	}
}

// TestExclude: exclude drops points of the matrix; it names parameters
// and their values, and never the A/B axis.
func TestExclude(t *testing.T) {
	spec := `
name: excl
rounds: 2
compare: timeout
params:
  timeout: [0, 500]
  server: [passthrough, libfuse-passthrough_ll]
  kp: [false, true]
  jobs: [1, 2]
exclude:
  - {server: libfuse-passthrough_ll, kp: true}
  - {jobs: 2, kp: true}
sysctls:
  fs.fuse.default_request_timeout: ${timeout}
server: {kind: "${server}", kernel_passthrough: "${kp}", backing: /tmp/b, mountpoint: /mnt/f}
workloads:
  - {name: w, pattern: create, dir: /mnt/f/c, jobs: "${jobs}", files: 10}
`
	f, err := Load("excl.yaml", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	// 2*2*2*2 = 16 points; libfuse+kp drops 4, jobs=2+kp drops 4, 2 of
	// them the same: 10 left.
	if n := len(f.Points()); n != 10 {
		t.Errorf("%d points, want 10", n)
	}
	p, err := MakePlan(f, PlanOptions{Kernels: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, r := range p.Rows {
		rows = append(rows, r.Label)
	}
	want := []string{"server=passthrough kp=false jobs=1", "server=passthrough kp=false jobs=2", "server=passthrough kp=true jobs=1",
		"server=libfuse-passthrough_ll kp=false jobs=1", "server=libfuse-passthrough_ll kp=false jobs=2"}
	if !slices.Equal(rows, want) {
		t.Errorf("rows %q, want %q", rows, want)
	}
	for _, c := range []struct{ from, to, want string }{
		{"{jobs: 2, kp: true}", "{jobs: 3}", `excl.yaml:12:12: exclude[1]: jobs: "3" is not one of its values (1, 2)`},
		{"{jobs: 2, kp: true}", "{nope: 1}", `excl.yaml:12:6: exclude[1]: "nope" is not a parameter`},
		{"{jobs: 2, kp: true}", "{timeout: 0}", "exclude names timeout, the A/B axis"},
	} {
		f, err := Load("excl.yaml", []byte(strings.Replace(spec, c.from, c.to, 1)))
		if err == nil {
			_, err = MakePlan(f, PlanOptions{Kernels: []string{"k"}})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.to, err, c.want)
		}
	}
}

// TestCacheTimeoutStep: cache_timeout_s sets both kernel cache times of
// the fuse step; unset, the server keeps its own.
func TestCacheTimeoutStep(t *testing.T) {
	zero, half := 0.0, 0.5
	for _, c := range []struct {
		in   *float64
		want *int64
	}{{nil, nil}, {&zero, new(int64)}, {&half, func() *int64 { v := int64(500); return &v }()}} {
		o := fuseStep(&Server{Kind: "passthrough", CacheTimeoutS: c.in}, nil).Passthrough
		a, e := o.AttrTimeoutMs, o.EntryTimeoutMs
		if (c.want == nil) != (a == nil) || (c.want == nil) != (e == nil) || (c.want != nil && (*a != *c.want || *e != *c.want)) {
			t.Errorf("cache_timeout_s %v: attr %v entry %v, want %v", c.in, a, e, c.want)
		}
	}
}

// TestSpliceStep: splice: false makes klab's servers' fuse steps over
// /dev/fuse say no_splice; unset or true, they splice; libfuse's servers
// and uring steps never carry it.
func TestSpliceStep(t *testing.T) {
	no, yes := false, true
	for _, c := range []struct {
		kind, transport string
		splice          *bool
		want            bool
	}{
		{"passthrough", "dev", &no, true},
		{"passthrough", "", &no, true},
		{"stuck", "dev", &no, true},
		{"passthrough", "dev", nil, false},
		{"passthrough", "dev", &yes, false},
		{"passthrough", "uring", &no, false},
		{"libfuse-passthrough_hp", "dev", &no, false},
		{"libfuse-passthrough_ll", "dev", &no, false},
	} {
		if got := fuseStep(&Server{Kind: c.kind, Transport: c.transport, Splice: c.splice}, nil).NoSplice; got != c.want {
			t.Errorf("%s over %q, splice %v: no_splice %v, want %v", c.kind, c.transport, c.splice, got, c.want)
		}
	}
}
