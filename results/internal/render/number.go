package render

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"klab/results/stats"
)

// Scale says how to show values of one unit: divided by Div, followed
// by Prefix ("k") and, after a space, Unit.
type Scale struct {
	Div    float64
	Prefix string
	Unit   string
	// Word names Prefix on an axis ("thousand").
	Word string
}

// AxisLabel labels an axis whose values are divided by s.Div:
// "thousand ops/s", "MiB/s".
func (s Scale) AxisLabel() string {
	return strings.TrimSpace(s.Word + " " + s.Unit)
}

// Format formats v (in the unscaled unit) with three significant
// digits; "n/a" for NaN and infinities.
func (s Scale) Format(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	num := Sig(v/s.Div) + s.Prefix
	if s.Unit == "" || s.Unit == "%" {
		return num + s.Unit
	}
	return num + " " + s.Unit
}

// binaryUnits are the byte units, each 1024 times the one before.
var binaryUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}

// timeUnits are the time units with their length in nanoseconds.
var timeUnits = []struct {
	name string
	ns   float64
}{{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}}

// decimalPrefixes scale every other unit.
var decimalPrefixes = []struct {
	div          float64
	prefix, word string
}{{1e12, "T", "trillion"}, {1e9, "G", "billion"}, {1e6, "M", "million"}, {1e3, "k", "thousand"}}

// ScaleFor returns the scale that shows magnitudes around mag in unit
// readably: bytes ("B", "MiB/s") in KiB, MiB, GiB; times ("ns", "ms",
// "ns/op") in ns, us, ms, s; anything else with k, M, G, T.
func ScaleFor(mag float64, unit string) Scale {
	mag = math.Abs(mag)
	base, per, hasPer := strings.Cut(unit, "/")
	if hasPer {
		per = "/" + per
	}
	if base == "µs" || base == "μs" {
		base = "us"
	}
	if mag == 0 || math.IsNaN(mag) || math.IsInf(mag, 0) {
		return Scale{Div: 1, Unit: base + per}
	}
	for i, b := range binaryUnits {
		if b != base {
			continue
		}
		bytes := mag * math.Pow(1024, float64(i))
		k := 0
		for k+1 < len(binaryUnits) && bytes >= math.Pow(1024, float64(k+1)) {
			k++
		}
		return Scale{Div: math.Pow(1024, float64(k-i)), Unit: binaryUnits[k] + per}
	}
	for _, b := range timeUnits {
		if b.name != base {
			continue
		}
		ns := mag * b.ns
		t := timeUnits[0]
		for _, u := range timeUnits {
			if ns >= u.ns {
				t = u
			}
		}
		return Scale{Div: t.ns / b.ns, Unit: t.name + per}
	}
	for _, p := range decimalPrefixes {
		if mag >= p.div {
			return Scale{Div: p.div, Prefix: p.prefix, Unit: unit, Word: p.word}
		}
	}
	return Scale{Div: 1, Unit: unit}
}

// FmtValue formats v of unit readably: "12.3k ops/s", "512 MiB/s",
// "1.25 ms".
func FmtValue(v float64, unit string) string {
	return ScaleFor(v, unit).Format(v)
}

// Sig formats x with about three significant digits.
func Sig(x float64) string {
	switch a := math.Abs(x); {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

// FmtPct formats a relative change in percent: "+12.3%".
func FmtPct(p float64) string {
	return fmt.Sprintf("%+.1f%%", p)
}

// FmtCI formats a change's confidence interval ("[-3.0% +20%]"), ""
// when it is not known.
func FmtCI(c stats.Change) string {
	if c.PctLo == nil || c.PctHi == nil {
		return ""
	}
	short := func(v float64) string {
		if math.Abs(v) >= 10 {
			return fmt.Sprintf("%+.0f%%", v)
		}
		return FmtPct(v)
	}
	return "[" + short(*c.PctLo) + " " + short(*c.PctHi) + "]"
}

// FmtP formats a p-value: "p=0.029", "p<0.001", "" for NaN.
func FmtP(p float64) string {
	switch {
	case math.IsNaN(p):
		return ""
	case p < 0.001:
		return "p<0.001"
	}
	return fmt.Sprintf("p=%.3f", p)
}
