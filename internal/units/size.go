package units

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// sizeRe is a size as klab reads it everywhere (flags, experiment and
// matrix files): a decimal number, an optional unit K, M, G or T, and
// an optional "iB" or "B", in any case ("20G", "1.5GiB", "512mb",
// ".5G", "2 G", "4096").
var sizeRe = regexp.MustCompile(`(?i)^([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([kmgt])?(i?b)?$`)

// unitShift is each unit's power of 1024, as a shift.
var unitShift = map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}

// size is a size as written: the number, its unit (upper case, empty
// for none) and whether "B" or "iB" followed.
type size struct {
	whole, frac string
	unit        string
	suffix      bool
}

func scanSize(s string) (size, bool) {
	m := sizeRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return size{}, false
	}
	whole, frac, _ := strings.Cut(m[1], ".")
	return size{whole: whole, frac: frac, unit: strings.ToUpper(m[2]), suffix: m[3] != ""}, true
}

// errTooLarge is a size beyond int64 bytes.
var errTooLarge = errors.New("too large")

// bytes returns the size in bytes with unit as its unit, and whether
// that is exact (a fraction may give part of a byte, which is dropped).
func (z size) bytes(unit string) (n int64, exact bool, err error) {
	sh := unitShift[unit]
	if z.whole != "" {
		w, err := strconv.ParseInt(z.whole, 10, 64)
		if err != nil || w > math.MaxInt64>>sh {
			return 0, false, errTooLarge
		}
		n = w << sh
	}
	exact = true
	if z.frac != "" {
		f, err := strconv.ParseFloat("0."+z.frac, 64)
		if err != nil {
			return 0, false, err
		}
		part := f * float64(int64(1)<<sh)
		exact = part == math.Trunc(part)
		if n > math.MaxInt64-int64(part) {
			return 0, false, errTooLarge
		}
		n += int64(part)
	}
	return n, exact, nil
}

// ParseSize parses a size in bytes: a number with an optional unit K, M,
// G or T (powers of 1024), optionally followed by "iB" or "B", in any
// case: "20G", "500M", "1.5T", "64KiB", "2gb" or "1048576". A plain
// number is bytes; a fraction of a byte is dropped.
func ParseSize(s string) (int64, error) {
	z, ok := scanSize(s)
	if !ok {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional K, M, G or T suffix, e.g. 20G", s)
	}
	n, _, err := z.bytes(z.unit)
	if errors.Is(err, errTooLarge) {
		return 0, fmt.Errorf("size %q: too large, want at most %d bytes", s, int64(math.MaxInt64))
	}
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	return n, nil
}

// MaxMiB bounds sizes ParseMiB reads: 1 PiB is more than any guest gets.
const MaxMiB = 1 << 30

// ParseMiB parses a memory size into MiB, with the syntax of ParseSize
// but a plain number in MiB: "1024", "512M", "2G", "1.5G", "2GiB",
// "4096KiB". It fails on anything else, and on sizes that are not a
// whole number of MiB or are larger than MaxMiB. Its errors say what is
// allowed but not the value, which the caller names (a flag's parser
// does).
func ParseMiB(s string) (int, error) {
	z, ok := scanSize(s)
	if !ok {
		return 0, errors.New("want MiB, or a number with a unit K, M, G or T: 512M, 2G, 1.5G, 2GiB")
	}
	plain := z.unit == ""
	switch {
	case plain && z.suffix:
		return 0, errors.New("bytes are too fine: give MiB, or a unit K, M, G or T (512M, 2G)")
	case plain:
		z.unit = "M"
	}
	n, exact, err := z.bytes(z.unit)
	switch {
	case errors.Is(err, errTooLarge) || err == nil && n > MaxMiB<<20:
		return 0, fmt.Errorf("too large: at most %s", FormatMiB(MaxMiB))
	case err != nil:
		return 0, fmt.Errorf("want MiB, or a number with a unit K, M, G or T: %w", err)
	case (!exact || n%(1<<20) != 0) && plain:
		return 0, errors.New("a plain number is a whole number of MiB; for fractions give a unit: 1.5G")
	case !exact || n%(1<<20) != 0:
		return 0, errors.New("not a whole number of MiB")
	}
	return int(n >> 20), nil
}

// FormatMiB formats n MiB the way ParseMiB reads it back: "2GiB",
// "1536MiB", or "0".
func FormatMiB(n int) string {
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
