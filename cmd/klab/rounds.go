package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// roundsValue is the pflag.Value of klab run's --rounds: a number of
// rounds, or "auto" (rounds added until the change CIs are narrow).
type roundsValue struct {
	n    *int
	auto *bool
}

var _ pflag.Value = roundsValue{}

// Set parses s; pflag's error names the flag and the value before ours.
func (v roundsValue) Set(s string) error {
	if s == "auto" {
		*v.n, *v.auto = 0, true
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("want a number of rounds or auto")
	}
	*v.n, *v.auto = n, false
	return nil
}

func (v roundsValue) String() string {
	switch {
	case *v.auto:
		return "auto"
	case *v.n == 0:
		return ""
	}
	return strconv.Itoa(*v.n)
}

// Type is the value's name in --help.
func (v roundsValue) Type() string { return "N|auto" }
