package splat

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// PolicyConfig is how an experiment says which splats fail a run. The zero
// value is the default policy.
type PolicyConfig struct {
	// Fail lists the types that fail a run. Empty means DefaultFail.
	Fail []Type `json:"fail,omitempty" yaml:"fail,omitempty"`
	// Allow lists WARNINGs that do not fail a run: each is a substring
	// of the title, or a regular expression between slashes
	// ("/^WARNING in fuse_.*_cmd$/"). Allow rules excuse only reports of
	// type warning, and never a fatal one (a WARNING with panic_on_warn):
	// a BUG, a sanitizer or lockdep report, a hang or a panic fails a run
	// whenever its type is in Fail.
	Allow []string `json:"allow,omitempty" yaml:"allow,omitempty"`
}

// DefaultFail is the types that fail a run by default: every type, so any
// BUG, sanitizer report, lockdep report, hang or panic fails it, and so
// does a WARNING that no Allow rule matches.
func DefaultFail() []Type { return Types() }

// Policy decides whether a run's reports fail it. Build one with
// NewPolicy; it is immutable and safe for concurrent use.
type Policy struct {
	fail  map[Type]bool
	allow []allowRule
}

// allowRule is one compiled PolicyConfig.Allow entry.
type allowRule struct {
	text string         // as written
	re   *regexp.Regexp // for "/re/" rules
}

func (a allowRule) match(title string) bool {
	if a.re != nil {
		return a.re.MatchString(title)
	}
	return strings.Contains(title, a.text)
}

// NewPolicy checks and compiles c. Its error lists every problem.
func NewPolicy(c PolicyConfig) (*Policy, error) {
	p := &Policy{fail: map[Type]bool{}}
	var errs []error
	fail := c.Fail
	if len(fail) == 0 {
		fail = DefaultFail()
	}
	for i, t := range fail {
		if _, err := ParseType(string(t)); err != nil {
			errs = append(errs, fmt.Errorf("fail[%d]: %w", i, err))
			continue
		}
		p.fail[t] = true
	}
	for i, a := range c.Allow {
		switch {
		case a == "":
			errs = append(errs, fmt.Errorf("allow[%d]: empty, want a title substring or /regexp/", i))
		case len(a) >= 2 && a[0] == '/' && a[len(a)-1] == '/':
			re, err := regexp.Compile(a[1 : len(a)-1])
			if err != nil {
				errs = append(errs, fmt.Errorf("allow[%d]: %q is not a valid regexp: %w", i, a, err))
				continue
			}
			p.allow = append(p.allow, allowRule{text: a, re: re})
		default:
			p.allow = append(p.allow, allowRule{text: a})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("splat policy: %w", err)
	}
	return p, nil
}

// DefaultPolicy returns the policy of the zero PolicyConfig: every splat
// fails a run.
func DefaultPolicy() *Policy {
	p, err := NewPolicy(PolicyConfig{})
	if err != nil {
		panic(err) // the default is valid
	}
	return p
}

// Verdict is what a Policy says about a run's reports.
type Verdict struct {
	// Failed is true when any report fails the run.
	Failed bool `json:"failed"`
	// Failures are the reports that fail the run.
	Failures []Finding `json:"failures"`
	// Allowed are the WARNINGs that an Allow rule excused.
	Allowed []Finding `json:"allowed"`
	// Ignored are the reports whose type is not in Fail.
	Ignored []Finding `json:"ignored"`
}

// Finding is one report and why a Policy put it where it did.
type Finding struct {
	// Title, Type, Line and Fatal are the report's.
	Title string `json:"title"`
	Type  Type   `json:"type"`
	Line  int    `json:"line"`
	Fatal bool   `json:"fatal,omitempty"`
	// Reason says which rule decided.
	Reason string `json:"reason"`
}

// Evaluate sorts reports into failures, allowed and ignored. It is a pure
// function of the policy and the reports; the slices of the result are
// empty, not nil.
func (p *Policy) Evaluate(reports []Report) Verdict {
	v := Verdict{Failures: []Finding{}, Allowed: []Finding{}, Ignored: []Finding{}}
	for _, r := range reports {
		f := Finding{Title: r.Title, Type: r.Type, Line: r.Line, Fatal: r.Fatal}
		switch {
		case r.Fatal:
			f.Reason = "fatal"
			v.Failures = append(v.Failures, f)
		case !p.fail[r.Type]:
			f.Reason = fmt.Sprintf("type %s does not fail runs", r.Type)
			v.Ignored = append(v.Ignored, f)
		default:
			if a, ok := p.allowed(r.Title); ok && r.Type == TypeWarning {
				f.Reason = "allowed by " + a
				v.Allowed = append(v.Allowed, f)
				continue
			}
			f.Reason = fmt.Sprintf("type %s fails runs", r.Type)
			v.Failures = append(v.Failures, f)
		}
	}
	v.Failed = len(v.Failures) > 0
	return v
}

// allowed returns the first Allow rule that matches title.
func (p *Policy) allowed(title string) (string, bool) {
	for _, a := range p.allow {
		if a.match(title) {
			return a.text, true
		}
	}
	return "", false
}
