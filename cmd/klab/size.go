package main

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// sizeRe is a size as flags take it: a number with an optional unit K, M,
// G or T, optionally followed by "iB" or "B" (any case), as vng's
// --memory takes it.
var sizeRe = regexp.MustCompile(`(?i)^([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([kmgt])?(i?b)?$`)

// parseMiB parses a memory size into MiB: a plain number is MiB, a number
// with a unit (512M, 2G, 1.5G, 2GiB, 4096KiB) is converted. K, M, G and T
// are powers of 1024. It fails on anything else, and on sizes that are not
// a whole number of MiB or are larger than maxMiB.
func parseMiB(s string) (int, error) {
	m := sizeRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, errors.New("want MiB, or a number with a unit K, M, G or T: 512M, 2G, 1.5G, 2GiB")
	}
	unit := strings.ToUpper(m[2])
	switch {
	case unit == "" && m[3] != "":
		return 0, errors.New("bytes are too fine: give MiB, or a unit K, M, G or T (512M, 2G)")
	case unit == "":
		unit = "M"
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("want MiB, or a number with a unit K, M, G or T: %w", err)
	}
	// Powers of two scale floats exactly: 1.5G is 1536 MiB, and 1000K is
	// not a whole MiB.
	mib := f * map[string]float64{"K": 1.0 / 1024, "M": 1, "G": 1 << 10, "T": 1 << 20}[unit]
	switch {
	case mib > maxMiB:
		return 0, fmt.Errorf("too large: at most %s", fmtMiB(maxMiB))
	case mib != math.Trunc(mib) && m[2] == "":
		return 0, errors.New("a plain number is a whole number of MiB; for fractions give a unit: 1.5G")
	case mib != math.Trunc(mib):
		return 0, errors.New("not a whole number of MiB")
	}
	return int(mib), nil
}

// maxMiB bounds memory sizes: 1 PiB is more than any guest gets.
const maxMiB = 1 << 30

// fmtMiB formats n MiB the way parseMiB reads it back: "2GiB", "1536MiB",
// or "0".
func fmtMiB(n int) string {
	switch {
	case n == 0:
		return "0"
	case n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "TiB"
	case n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "GiB"
	}
	return strconv.Itoa(n) + "MiB"
}

// mibValue is a pflag.Value for memory sizes kept in MiB (see parseMiB).
type mibValue struct {
	p *int
}

// newMiBValue sets *p to def and returns a flag value that parses into it.
func newMiBValue(def int, p *int) *mibValue {
	*p = def
	return &mibValue{p: p}
}

var _ pflag.Value = (*mibValue)(nil)

// Set parses s; pflag's error names the flag and the value before ours.
func (v *mibValue) Set(s string) error {
	n, err := parseMiB(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func (v *mibValue) String() string { return fmtMiB(*v.p) }

// Type is the value's name in --help.
func (v *mibValue) Type() string { return "size" }
