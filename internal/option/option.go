// Package option owns the error of an option of a klab library call that
// cannot be used (an experiment run's rounds, a matrix's shard): it names
// the option, so that a command can name the flag that set it, and the
// library never names a command's flags.
package option

import "fmt"

// Error is a value of the option Name that cannot be used.
type Error struct {
	// Name is the option as the library names it, in lower case:
	// "rounds", "shard".
	Name string
	// Err says what is wrong, starting with the value when it shows it.
	Err error
}

func (e *Error) Error() string { return e.Name + " " + e.Err.Error() }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of the option name whose Err is formatted as
// fmt.Errorf formats it.
func Errorf(name, format string, args ...any) error {
	return &Error{Name: name, Err: fmt.Errorf(format, args...)}
}
