package report

import (
	"encoding/json"
	"strings"
	"testing"

	"klab/results/stats"
)

// weighReport has a row of each kind TestWeigh tells apart: not
// significant with an MDC, not significant and unable to be (3+3), not
// significant with unequal sides, significant, and one side without
// samples.
func weighReport() *Report {
	row := func(name string, a, b []float64) Row {
		r := Row{Name: name, Metric: "ops_per_sec", Unit: "ops/s", Direction: 1, A: stats.Summarize(a), B: stats.Summarize(b)}
		r.Change = stats.Compare(r.A, r.B, 1)
		return r
	}
	return &Report{
		Experiment: "weigh", Rounds: 5, A: Side{Label: "dev"}, B: Side{Label: "uring"},
		Rows: []Row{
			row("create", []float64{100, 110, 90, 105, 95}, []float64{102, 108, 92, 104, 97}),
			row("mkdir", []float64{100, 101, 102}, []float64{200, 201, 202}),
			row("read", []float64{100, 110, 90, 105, 95}, []float64{101, 109, 91, 104}),
			row("write", []float64{100, 101, 102, 103, 104}, []float64{200, 201, 202, 203, 204}),
			row("stat", []float64{100, 101, 102, 103, 104}, nil),
		},
	}
}

// TestWeigh: every format gives each row's samples per side and its
// minimum detectable change, and says for each row without a
// significant change what change it could have seen.
func TestWeigh(t *testing.T) {
	r := weighReport()
	if c := r.Rows[0].Change; c.Significant || c.MDCPct == nil {
		t.Fatalf("test data: create's change %+v", c)
	}
	want := []string{
		"create: n.s.: a change below 13% cannot be seen with 5 rounds here",
		"mkdir: n.s.: cannot be significant with n=3 per side (the smallest p it can give is 0.100)",
		"read: n.s.: a change below 15% cannot be seen with 5+4 samples here",
	}
	if got := weighLines(r); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("weighLines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	text := renderAs(t, "text", r)
	t.Logf("\n%s", text)
	checkText(t, text)
	lines := strings.Split(text, "\n")
	for _, w := range append([]string{
		"name            A          B    B/A  change  CI  p          n   MDC  verdict",
		"create  100 ops/s  102 ops/s  1.02x       ~      p=1.000    5   13%  n.s.",
		"mkdir   101 ops/s  201 ops/s  1.99x       ~      p=0.100    3     -  n.s.",
		"read    100 ops/s  102 ops/s  1.02x       ~      p=0.905  5/4   15%  n.s.",
		"write   102 ops/s  202 ops/s  1.98x  +98.0%      p=0.008    5  2.2%  better",
		"stat    102 ops/s          -      -       -  -   -          -     -  -",
		"n: samples per side (A/B if unequal); MDC: minimum detectable change at this noise (80% power)",
	}, want...) {
		if !containsLine(lines, w) {
			t.Errorf("text: no line %q", w)
		}
	}

	md := renderAs(t, "md", r)
	for _, w := range []string{
		"| create | 100 ops/s | 102 ops/s | 1.02x | ~ |  | p=1.000 | 5 | 13% | no significant change |\n",
		"| read | 100 ops/s | 102 ops/s | 1.02x | ~ |  | p=0.905 | 5/4 | 15% | no significant change |\n",
		"\n### Not significant\n\n- create: n.s.: a change below 13% cannot be seen with 5 rounds here\n",
		"- mkdir: n.s.: cannot be significant with n=3 per side (the smallest p it can give is 0.100)\n",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("md: no %q in\n%s", w, md)
		}
	}

	page := renderAs(t, "html", r)
	checkTags(t, page)
	for _, w := range []string{
		`<td>p=0.905</td><td class="right">5/4</td><td class="right">15%</td><td>no significant change</td>`,
		"<li>create: n.s.: a change below 13% cannot be seen with 5 rounds here</li>",
		"MDC: minimum detectable change at this noise (80% power).</p>",
	} {
		if !strings.Contains(page, w) {
			t.Errorf("html: no %q", w)
		}
	}

	junit := renderAs(t, "junit", r)
	if w := "p=0.905, n 5/4, MDC 15%, no significant change"; !strings.Contains(junit, w) {
		t.Errorf("junit: no %q in\n%s", w, junit)
	}

	var back struct {
		Rows []struct {
			A      struct{ N int }
			B      struct{ N int }
			Change map[string]any
		}
	}
	if err := json.Unmarshal([]byte(renderAs(t, "json", r)), &back); err != nil {
		t.Fatal(err)
	}
	create, mkdir := back.Rows[0], back.Rows[1]
	if mdc, ok := create.Change["mdc_pct"].(float64); !ok || mdc < 12.5 || mdc > 13.5 || create.A.N != 5 || create.B.N != 5 {
		t.Errorf("json: create's mdc_pct %v, n %d/%d; want about 13, 5/5", create.Change["mdc_pct"], create.A.N, create.B.N)
	}
	if v, ok := mkdir.Change["mdc_pct"]; !ok || v != nil || mkdir.Change["min_p"] != 0.1 {
		t.Errorf("json: mkdir's mdc_pct %v (present %v), min_p %v; want null, 0.1", v, ok, mkdir.Change["min_p"])
	}
}

// TestRoundsAuto: a run with --rounds auto says in every format how many
// rounds it ran and which rows did not reach the target.
func TestRoundsAuto(t *testing.T) {
	r := weighReport()
	r.Rounds = 12
	r.AutoRounds = &AutoRounds{CITargetPct: 10, MaxRounds: 12, Wide: []string{"create (±14.2%)", "mkdir (no CI)\x1b[2J"}}
	want := "rounds auto: 12 rounds (bound 12); change CI still wider than ±10%: create (±14.2%), mkdir (no CI)[2J"
	if got := roundsLine(r); got != want {
		t.Errorf("roundsLine = %q, want %q", got, want)
	}
	text := renderAs(t, "text", r)
	checkText(t, text)
	if w := "rounds auto: 12 rounds (bound 12); change CI still wider than +-10%:\n    create (+-14.2%), mkdir (no CI)[2J\n"; !strings.Contains(text, w) {
		t.Errorf("text: no %q in\n%s", w, text)
	}
	for format, w := range map[string]string{
		"md":    "rounds auto: 12 rounds (bound 12); change CI still wider than ±10%: create (±14.2%), mkdir (no CI)[2J\n",
		"html":  "<br>rounds auto: 12 rounds (bound 12); change CI still wider than ±10%: create (±14.2%), mkdir (no CI)[2J</p>",
		"junit": `<property name="rounds_auto" value="rounds auto: 12 rounds`,
		"json":  `"auto_rounds": {`,
	} {
		if out := renderAs(t, format, r); !strings.Contains(out, w) {
			t.Errorf("%s: no %q in\n%s", format, w, out)
		}
	}
	r.Rounds, r.AutoRounds = 9, &AutoRounds{CITargetPct: 10, MaxRounds: 12, Reached: true}
	if got, want := roundsLine(r), "rounds auto: every row's change CI within ±10% after 9 rounds (bound 12)"; got != want {
		t.Errorf("roundsLine = %q, want %q", got, want)
	}
	r.AutoRounds = nil
	for _, f := range []string{"text", "md", "html", "junit", "json"} {
		if strings.Contains(renderAs(t, f, r), "rounds auto") || strings.Contains(renderAs(t, f, r), "auto_rounds") {
			t.Errorf("%s: a run with fixed rounds talks of rounds auto", f)
		}
	}
}
