package main

import (
	"github.com/spf13/pflag"

	"klab/internal/units"
)

// mibValue is a pflag.Value for memory sizes kept in MiB (see
// units.ParseMiB).
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
	n, err := units.ParseMiB(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func (v *mibValue) String() string { return units.FormatMiB(*v.p) }

// Type is the value's name in --help.
func (v *mibValue) Type() string { return "size" }
