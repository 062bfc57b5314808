package agent

import (
	"fmt"
	"strings"
)

// Mode is what the agent does after Setup, chosen by klab.mode= on the kernel
// command line.
type Mode string

// Agent modes.
const (
	// ModeRun opens the agent channel and serves the host's steps.
	ModeRun Mode = "run"
	// ModeShell gives the user an interactive shell on the console.
	ModeShell Mode = "shell"
)

// ModeParam is the kernel command line parameter that selects the Mode.
const ModeParam = "klab.mode"

// Param is one kernel command line parameter.
type Param struct {
	// Name is the part before the first '='.
	Name string
	// Value is the part after it, without surrounding quotes.
	Value string
}

// CmdlineParams splits a kernel command line into parameters the way the
// kernel's next_arg does: whitespace separates parameters except inside
// double quotes, and quotes around a value (or the whole parameter) are
// removed. A parameter without '=' has the value "". Later parameters come
// later in the result.
func CmdlineParams(cmdline string) []Param {
	var out []Param
	i := 0
	for {
		for i < len(cmdline) && isSpace(cmdline[i]) {
			i++
		}
		if i >= len(cmdline) {
			return out
		}
		j, inQuote := i, false
		for j < len(cmdline) && (inQuote || !isSpace(cmdline[j])) {
			if cmdline[j] == '"' {
				inQuote = !inQuote
			}
			j++
		}
		tok := cmdline[i:j]
		i = j
		quoted := strings.HasPrefix(tok, `"`)
		if quoted {
			tok = tok[1:]
		}
		name, val, hasEq := strings.Cut(tok, "=")
		if hasEq && strings.HasPrefix(val, `"`) {
			val = strings.TrimSuffix(val[1:], `"`)
		} else if quoted {
			if hasEq {
				val = strings.TrimSuffix(val, `"`)
			} else {
				name = strings.TrimSuffix(name, `"`)
			}
		}
		out = append(out, Param{Name: name, Value: val})
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// CmdlineParam returns the value of the last parameter called name on the
// kernel command line, and whether it is there at all.
func CmdlineParam(cmdline, name string) (value string, ok bool) {
	for _, p := range CmdlineParams(cmdline) {
		if p.Name == name {
			value, ok = p.Value, true
		}
	}
	return value, ok
}

// ParseMode returns the Mode named by klab.mode= on the kernel command line.
// found is false when the parameter is missing: then this is no klab guest.
// An empty value means ModeRun; an unknown one is an error.
func ParseMode(cmdline string) (mode Mode, found bool, err error) {
	v, ok := CmdlineParam(cmdline, ModeParam)
	if !ok {
		return "", false, nil
	}
	switch Mode(v) {
	case "", ModeRun:
		return ModeRun, true, nil
	case ModeShell:
		return ModeShell, true, nil
	}
	return "", true, fmt.Errorf("%s=%q: unknown mode (want %q or %q)", ModeParam, v, ModeRun, ModeShell)
}
