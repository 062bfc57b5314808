package experiments

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"

	"klab/internal/option"
	"klab/results/report"
	"klab/results/stats"
)

// MinAutoRounds is the fewest rounds --rounds auto starts from: a
// median's 95% confidence interval needs 6 samples (benchmath), and
// without one on both sides a change has no interval to narrow.
const MinAutoRounds = 6

// The defaults of --ci-target and --max-rounds.
const (
	DefaultCITargetPct = 10
	DefaultMaxRounds   = 12
)

// AutoRounds is --rounds auto: the run adds rounds, one at a time in the
// plan's order (ABBA or the seed's), until every row's change has a
// confidence interval no wider than ±CITargetPct, or MaxRounds rounds
// have run.
type AutoRounds struct {
	// CITargetPct is the half-width a row's change CI must reach
	// ((PctHi - PctLo) / 2, in percentage points).
	CITargetPct float64 `json:"ci_target_pct"`
	// MaxRounds bounds the rounds run.
	MaxRounds int `json:"max_rounds"`
}

// check says what is wrong with a's bounds, naming the flags.
func (a *AutoRounds) check() error {
	if !(a.CITargetPct > 0 && a.CITargetPct <= 1000) {
		return option.Errorf("ci-target", "%g is out of range, want a half-width in percent above 0, at most 1000", a.CITargetPct)
	}
	if a.MaxRounds < MinAutoRounds || a.MaxRounds > 1000 {
		return option.Errorf("max-rounds", "%d is out of range, want %d..1000: --rounds auto starts from %d rounds, the fewest with a confidence interval",
			a.MaxRounds, MinAutoRounds, MinAutoRounds)
	}
	return nil
}

// startRounds is the rounds an auto run starts with: the spec's (3 when
// it says none), at least MinAutoRounds, at most MaxRounds.
func (a *AutoRounds) startRounds(spec int) int {
	if spec == 0 {
		spec = 3
	}
	return min(max(spec, MinAutoRounds), a.MaxRounds)
}

// ciHalfWidth is the half-width of a change's confidence interval, in
// percentage points; false when it has none (too few samples, a median
// interval that reaches 0).
func ciHalfWidth(c stats.Change) (float64, bool) {
	if c.PctLo == nil || c.PctHi == nil {
		return 0, false
	}
	hw := (*c.PctHi - *c.PctLo) / 2
	if math.IsNaN(hw) || math.IsInf(hw, 0) {
		return 0, false
	}
	return hw, true
}

// Next is the policy of --rounds auto: after rounds rounds, with the
// rows measured so far, it says whether to run one more. It returns
// more while a row is wider than the target and rounds < MaxRounds;
// wide lists the rows whose change CI is wider than ±CITargetPct or
// unknown ("create (±14.2%)", "mkdir (no CI)"), in order. A row with no
// sample on a side is listed but does not ask for more rounds: more
// rounds of the same cells would not give it one.
func (a *AutoRounds) Next(rounds int, rows []report.Row) (more bool, wide []string) {
	for _, row := range rows {
		hw, ok := ciHalfWidth(row.Change)
		switch {
		case ok && hw <= a.CITargetPct:
			continue
		case ok:
			wide = append(wide, fmt.Sprintf("%s (±%.1f%%)", row.Name, hw))
		default:
			wide = append(wide, row.Name+" (no CI)")
		}
		if row.A.N > 0 && row.B.N > 0 {
			more = true
		}
	}
	return more && rounds < a.MaxRounds, wide
}

// reportAutoRounds is what the report says of an auto run: its target,
// its bound and the rows that did not reach the target.
func reportAutoRounds(a *AutoRounds, rows []report.Row) *report.AutoRounds {
	if a == nil {
		return nil
	}
	_, wide := a.Next(0, rows)
	return &report.AutoRounds{CITargetPct: a.CITargetPct, MaxRounds: a.MaxRounds, Reached: len(wide) == 0, Wide: wide}
}

// autoText is a progress line's account of the rows still too wide.
func autoText(wide []string) string {
	const show = 3
	s := strings.Join(wide[:min(len(wide), show)], ", ")
	if len(wide) > show {
		s += fmt.Sprintf(" and %d more", len(wide)-show)
	}
	return s
}

// autoPlanProblem says why plan p cannot add rounds one by one: a run
// of one side has no change to narrow, and reuse: guest runs every round
// in one boot.
func autoPlanProblem(a *AutoRounds, p *Plan) error {
	switch {
	case a == nil:
		return nil
	case p.Single:
		return option.Errorf("rounds", "auto: a run of one kernel measures no change whose interval could narrow")
	case p.Reuse == "guest":
		return option.Errorf("rounds", "auto: the spec's reuse: guest runs every round in one boot, and auto adds rounds as boots of their own; want reuse: fresh")
	}
	return nil
}

// addRound is --rounds auto once the plan's guests have run: when the
// policy (AutoRounds.Next) asks for another round, it adds that round's
// guests to the plan as MakePlan lays out one round more (the rounds
// before it are unchanged: ABBA and the seeded order are laid out round
// by round), records the rounds in man and returns the units added;
// 0 ends the run.
func (r *runner) addRound(ctx context.Context, o RunOptions, man *Manifest, skipped []string) (int, error) {
	a := o.Auto
	if a == nil || ctx.Err() != nil {
		return 0, nil
	}
	saved := &Saved{Dir: r.dir, Manifest: man, Plan: r.plan, Samples: r.samples, File: r.f}
	more, wide := a.Next(r.plan.Rounds, saved.Report().Rows)
	switch {
	case !more && len(wide) == 0:
		r.disp.printf("rounds auto: every row's change CI is within ±%g%% after %d rounds", a.CITargetPct, r.plan.Rounds)
		return 0, nil
	case !more && r.plan.Rounds < a.MaxRounds:
		r.disp.printf("rounds auto: stopping after %d rounds: a side of every row still wider than ±%g%% has no samples, which more rounds would not change: %s",
			r.plan.Rounds, a.CITargetPct, autoText(wide))
		return 0, nil
	case !more:
		r.disp.printf("rounds auto: stopping after %d rounds (bound %d); change CI still wider than ±%g%%: %s",
			r.plan.Rounds, a.MaxRounds, a.CITargetPct, autoText(wide))
		return 0, nil
	}
	po := o.PlanOptions
	po.Rounds = r.plan.Rounds + 1
	np, err := MakePlan(r.f, po)
	if err != nil {
		return 0, fmt.Errorf("rounds auto: planning round %d: %w", po.Rounds, err)
	}
	n := len(r.plan.Guests)
	if len(np.Guests) <= n || !reflect.DeepEqual(np.Guests[:n], r.plan.Guests) {
		return 0, fmt.Errorf("rounds auto: round %d would change the rounds before it", po.Rounds)
	}
	units := 0
	for _, g := range np.Guests[n:] {
		if skipped[g.Kernel] == "" {
			units += len(g.Units)
		}
	}
	if units == 0 {
		return 0, nil
	}
	r.disp.printf("rounds auto: change CI wider than ±%g%% after %d rounds: %s; running round %d (bound %d)",
		a.CITargetPct, r.plan.Rounds, autoText(wide), po.Rounds, a.MaxRounds)
	r.plan.Guests, r.plan.Rounds = np.Guests, np.Rounds
	man.Rounds = np.Rounds
	return units, nil
}
