// Package reference owns what klab holds a run against: the expectations
// a spec states from its experiment's reference (a seed's figures, as
// data), the mode a run ran in (accelerator, icount, multi-threaded TCG,
// vCPUs), whether a row can show its expectation in that mode, the
// verdict of a measured row or check against its expectation, and the
// note on what a run under emulation cannot show. It is pure: no I/O, no
// VMs, nothing of the spec format beyond the field names.
package reference

import (
	"fmt"
	"math"
	"strings"

	"klab/results/stats"
)

// Direction is what the reference found for B against A, in the good
// direction of the row's metric.
type Direction string

// Directions.
const (
	// Better: B was better than A (higher throughput, lower latency).
	Better Direction = "better"
	// Worse: B was worse than A.
	Worse Direction = "worse"
	// NoChange: B was no different from A.
	NoChange Direction = "no-change"
)

// Directions lists the directions in the order they are documented.
var Directions = []Direction{Better, Worse, NoChange}

// NoChangeTolerance is how far from 1 the reference's B/A may be for an
// expectation of no change: within 10%.
const NoChangeTolerance = 0.10

// Expectation is what a workload's reference found for one metric of
// its rows, optionally only for rows with some parameter values.
type Expectation struct {
	// Direction is better, worse or no-change: B against A in the
	// metric's good direction. Unset, it follows from Ratio or Range.
	Direction Direction `yaml:"direction"`
	// Ratio is the reference's B/A (2.57); Range its bounds [lo, hi]
	// when it gives a spread. At most one of them.
	Ratio float64   `yaml:"ratio"`
	Range []float64 `yaml:"range"`
	// Metric is the row's metric (ops_per_sec, ...); unset, the
	// workload's primary metric.
	Metric string `yaml:"metric"`
	// Params picks the rows with these parameter values ({jobs: 1});
	// unset, every row of the workload and metric.
	Params map[string]string `yaml:"params"`
	// MeasuredOn is the machine the reference measured on.
	MeasuredOn MeasuredOn `yaml:"measured_on"`
	// Source says where the figure comes from ("seed 003, creates/s
	// table"); required.
	Source string `yaml:"source"`
	// Needs is the run mode a row needs to be comparable.
	Needs Needs `yaml:"needs"`
	// Strict makes a contradicted row fail the run.
	Strict bool `yaml:"strict"`
}

// CheckExpectation is what a check's reference found: that the check
// passed (or failed) there.
type CheckExpectation struct {
	// Outcome is pass (the default) or fail.
	Outcome Outcome `yaml:"outcome"`
	// Source says where the outcome comes from; required.
	Source string `yaml:"source"`
	// Needs is the run mode the check needs to be comparable.
	Needs Needs `yaml:"needs"`
	// Strict makes a contradicted check fail the run.
	Strict bool `yaml:"strict"`
}

// Outcome is a check's expected outcome.
type Outcome string

// Outcomes.
const (
	// Pass: every round passed.
	Pass Outcome = "pass"
	// Fail: every round failed.
	Fail Outcome = "fail"
)

// Want is the expected outcome: Pass when unset.
func (c CheckExpectation) Want() Outcome {
	if c.Outcome == "" {
		return Pass
	}
	return c.Outcome
}

// MeasuredOn is the machine a reference measured on.
type MeasuredOn struct {
	// CPUs is its number of CPUs (0: not stated).
	CPUs int `yaml:"cpus" json:"cpus,omitempty"`
	// Accel is kvm, tcg or native (bare metal); "" when not stated.
	Accel string `yaml:"accel" json:"accel,omitempty"`
	// Note is free text ("Xeon E5-2650, HT on").
	Note string `yaml:"note" json:"note,omitempty"`
}

// Accels are the values of MeasuredOn.Accel.
var Accels = []string{"kvm", "tcg", "native"}

// String describes the machine: "32 CPUs, native, Xeon E5-2650"; ""
// when nothing is stated.
func (m MeasuredOn) String() string {
	var parts []string
	if m.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", m.CPUs))
	}
	if m.Accel != "" {
		parts = append(parts, m.Accel)
	}
	if m.Note != "" {
		parts = append(parts, m.Note)
	}
	return strings.Join(parts, ", ")
}

// Needs is the least a run must have for a row to be comparable with
// its reference. KVM, or the host itself, meets every need but MinCPUs:
// it is what references are measured on.
type Needs struct {
	// Accel is kvm: hardware virtualisation (or the host itself).
	Accel string `yaml:"accel"`
	// Icount: instruction-counted guest time under TCG.
	Icount bool `yaml:"icount"`
	// TCGMultithread: vCPUs on host threads of their own under TCG.
	TCGMultithread bool `yaml:"tcg_multithread"`
	// MinCPUs is the least number of vCPUs (0: any).
	MinCPUs int `yaml:"min_cpus"`
}

// NeedAccels are the values of Needs.Accel.
var NeedAccels = []string{"kvm"}

// Mode is how a run ran: what decides which effects it can show.
type Mode struct {
	// Accel is kvm, tcg, or host (no VM: the host's own kernel); ""
	// when unknown.
	Accel string
	// Icount is QEMU's -icount options ("shift=0,sleep=off", or "on"),
	// "" when guest time was real time.
	Icount string
	// TCGMultithread is set when each vCPU had a host thread of its own
	// under TCG.
	TCGMultithread bool
	// CPUs is the guest's number of vCPUs.
	CPUs int
}

// hardware reports whether the run ran on the CPU itself (KVM or the
// host), not in an emulator.
func (m Mode) hardware() bool { return m.Accel == "kvm" || m.Accel == "host" }

// String names the mode: "KVM", "TCG with icount", "multi-threaded
// TCG", "single-threaded TCG in real time", "the host itself".
func (m Mode) String() string {
	switch {
	case m.Accel == "kvm":
		return "KVM"
	case m.Accel == "host":
		return "the host itself"
	case m.Accel == "tcg" && m.Icount != "":
		return "TCG with icount"
	case m.Accel == "tcg" && m.TCGMultithread:
		return "multi-threaded TCG"
	case m.Accel == "tcg":
		return "single-threaded TCG in real time"
	}
	return "an unknown accelerator"
}

// Met reports whether a run in mode m meets the needs; when not, reason
// names what the run lacked: "needs accel kvm; this run used TCG with
// icount".
func (n Needs) Met(m Mode) (ok bool, reason string) {
	var unmet []string
	if n.Accel == "kvm" && !m.hardware() {
		unmet = append(unmet, "accel kvm")
	}
	if n.Icount && !m.hardware() && (m.Accel != "tcg" || m.Icount == "") {
		unmet = append(unmet, "icount")
	}
	if n.TCGMultithread && !m.hardware() && (m.Accel != "tcg" || !m.TCGMultithread) {
		unmet = append(unmet, "multi-threaded TCG")
	}
	cpus := n.MinCPUs > 0 && m.CPUs < n.MinCPUs
	if cpus {
		unmet = append(unmet, fmt.Sprintf("%d vCPUs", n.MinCPUs))
	}
	if len(unmet) == 0 {
		return true, ""
	}
	used := "used " + m.String()
	switch {
	case cpus && len(unmet) == 1:
		used = fmt.Sprintf("had %d", m.CPUs)
	case cpus:
		used += fmt.Sprintf(" with %d vCPUs", m.CPUs)
	}
	return false, "needs " + strings.Join(unmet, " and ") + "; this run " + used
}

// String lists the needs: "accel kvm, 8 vCPUs"; "" for none.
func (n Needs) String() string {
	var parts []string
	if n.Accel != "" {
		parts = append(parts, "accel "+n.Accel)
	}
	if n.Icount {
		parts = append(parts, "icount")
	}
	if n.TCGMultithread {
		parts = append(parts, "multi-threaded TCG")
	}
	if n.MinCPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d vCPUs", n.MinCPUs))
	}
	return strings.Join(parts, ", ")
}

// Comparable reports whether a row measured in mode m can be held
// against exp; when not, reason names what the run lacked.
func Comparable(exp Expectation, m Mode) (ok bool, reason string) {
	return exp.Needs.Met(m)
}

// side is +1 when ratio r is on the good side of 1 for a metric of
// direction dir (+1: higher is better, -1: lower is), -1 on the bad
// side, 0 at 1 or for a metric with no good direction.
func side(r float64, dir int) int {
	switch {
	case r > 1:
		return dir
	case r < 1:
		return -dir
	}
	return 0
}

// Expected is the direction exp expects for a metric of direction dir:
// its Direction, else the one its Ratio or Range says; "" when it says
// none (no figure, or a metric with no good direction).
func (e Expectation) Expected(dir int) Direction {
	if e.Direction != "" {
		return e.Direction
	}
	var s int
	switch {
	case e.Ratio > 0:
		s = side(e.Ratio, dir)
		if e.Ratio == 1 {
			return NoChange
		}
	case len(e.Range) == 2:
		lo, hi := side(e.Range[0], dir), side(e.Range[1], dir)
		if e.Range[0] <= 1 && e.Range[1] >= 1 {
			return NoChange
		}
		s = lo + hi
	}
	switch {
	case s > 0:
		return Better
	case s < 0:
		return Worse
	}
	return ""
}

// Agrees checks that exp's Direction, when given with a Ratio or a
// Range, says what they say for a metric of direction dir; the error
// says what would agree.
func (e Expectation) Agrees(dir int) error {
	if e.Direction == "" || (e.Ratio <= 0 && len(e.Range) != 2) {
		return nil
	}
	fig, lo, hi := fmt.Sprintf("ratio %g", e.Ratio), e.Ratio, e.Ratio
	if e.Ratio <= 0 {
		lo, hi = e.Range[0], e.Range[1]
		fig = fmt.Sprintf("range [%g, %g]", lo, hi)
	}
	switch e.Direction {
	case Better, Worse:
		want := 1
		if e.Direction == Worse {
			want = -1
		}
		if dir == 0 {
			return fmt.Errorf("%s: the metric has no good direction; give no-change or leave direction out", e.Direction)
		}
		if side(lo, dir) == -want || side(hi, dir) == -want || (side(lo, dir) != want && side(hi, dir) != want) {
			good, above := "higher", "above"
			if dir < 0 {
				good = "lower"
			}
			if dir*want < 0 {
				above = "below"
			}
			return fmt.Errorf("%s does not agree with %s: where %s is better, %s is a B/A %s 1", fig, e.Direction, good, e.Direction, above)
		}
	case NoChange:
		if lo > 1+NoChangeTolerance || hi < 1-NoChangeTolerance || (e.Ratio <= 0 && (lo > 1 || hi < 1)) {
			if e.Ratio > 0 {
				return fmt.Errorf("%s does not agree with no-change: want a ratio within %.0f%% of 1", fig, 100*NoChangeTolerance)
			}
			return fmt.Errorf("%s does not agree with no-change: want a range that holds 1", fig)
		}
	}
	return nil
}

// Verdict is a row's or a check's verdict against its expectation.
type Verdict string

// Verdicts.
const (
	// Reproduced: the same direction as the reference, significant (for
	// no-change: no significant change); a check had the expected
	// outcome in every round.
	Reproduced Verdict = "reproduced"
	// SameNotSignificant: B/A on the reference's side of 1, not
	// significant.
	SameNotSignificant Verdict = "same direction, not significant"
	// OppositeNotSignificant: B/A not on the reference's side of 1 (the
	// other side, or 1 itself), not significant.
	OppositeNotSignificant Verdict = "opposite direction, not significant"
	// Contradicted: significant, and not in the reference's direction
	// (for no-change: any significant change); a check had another
	// outcome in some round.
	Contradicted Verdict = "contradicted"
	// NotComparable: the run's mode cannot show the effect (the
	// expectation's needs are unmet).
	NotComparable Verdict = "not comparable here"
	// NotMeasured: nothing to compare (a side without samples, A's
	// median 0, a check that never ran).
	NotMeasured Verdict = "not measured"
)

// RowVerdict is the verdict of a row whose B against A is c, for a
// metric of direction dir (+1 higher is better, -1 lower is), measured
// in mode m, against exp. reason says why a row is not comparable or
// not measured, "" otherwise. A Change with Ratio 0 (A's median 0, or a
// side without samples) is not measured.
func RowVerdict(exp Expectation, c stats.Change, dir int, m Mode) (v Verdict, reason string) {
	if ok, why := Comparable(exp, m); !ok {
		return NotComparable, why
	}
	if c.Ratio == 0 || math.IsNaN(c.Ratio) || math.IsInf(c.Ratio, 0) {
		return NotMeasured, "no B/A: a side has no samples or A's median is 0"
	}
	want := exp.Expected(dir)
	switch want {
	case NoChange:
		switch {
		case c.Significant:
			return Contradicted, ""
		case c.MDCPct == nil:
			// No change could have been significant: the absence of one
			// shows nothing.
			return SameNotSignificant, "no significant change, but none could be significant with these samples"
		case *c.MDCPct > 100*NoChangeTolerance:
			return SameNotSignificant, fmt.Sprintf("no significant change, but only a change above %.0f%% could be seen here (the reference's is within %.0f%%)", *c.MDCPct, 100*NoChangeTolerance)
		}
		return Reproduced, ""
	case Better, Worse:
		w := 1
		if want == Worse {
			w = -1
		}
		same := side(c.Ratio, dir) == w
		switch {
		case c.Significant && same:
			return Reproduced, ""
		case c.Significant:
			return Contradicted, ""
		case same:
			return SameNotSignificant, ""
		}
		return OppositeNotSignificant, ""
	}
	return NotMeasured, "the expectation gives no direction for this metric"
}

// CheckVerdict is the verdict of a check that passed in passed of its
// total rounds, in mode m, against exp; reason says how many rounds had
// the expected outcome, or why there is no verdict.
func CheckVerdict(exp CheckExpectation, passed, total int, m Mode) (v Verdict, reason string) {
	if ok, why := exp.Needs.Met(m); !ok {
		return NotComparable, why
	}
	if total <= 0 {
		return NotMeasured, "the check did not run"
	}
	as, word := passed, "passed"
	if exp.Want() == Fail {
		as, word = total-passed, "failed"
	}
	reason = fmt.Sprintf("%d of %d round(s) %s", as, total, word)
	if as == total {
		return Reproduced, reason
	}
	return Contradicted, reason
}

// EmulationNote says, in a line or two, which effects a run in mode m
// can and cannot show; "" under KVM and on the host itself, where
// nothing is emulated.
func EmulationNote(m Mode) string {
	if m.Accel != "tcg" {
		return ""
	}
	switch {
	case m.Icount != "":
		return "TCG with icount: emulator numbers; guest time counts instructions, so per-operation instruction cost carries, but not parallelism or wake-ups across vCPUs"
	case m.TCGMultithread:
		return "multi-threaded TCG: emulator numbers; vCPUs run in parallel but at emulator speed, and wall time on a loaded host is still noisy"
	}
	return "single-threaded TCG in real time: parallelism and wake-up costs across vCPUs do not carry, nor lock contention with fewer vCPUs than the reference had, nor wall time on a loaded host"
}
