// Package profile holds CPU profiles as folded call stacks with sample
// counts, tells the CPUs' idle loops from their work (IsIdle), compares
// the share of time spent in functions between two profiles, and draws
// profiles as icicle charts.
//
// A folded stack is the process name followed by the frames from the
// outermost caller to the leaf, joined by ";": "comm;outer;...;leaf". The
// profiles come from guests and are not trusted: the readers bound their
// input and the writers sanitize what they write.
package profile

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Profile is a set of folded call stacks with sample counts.
type Profile struct {
	// Stacks maps a folded stack, "comm;outer;...;leaf", to its number of
	// samples. Counts are positive.
	Stacks map[string]int64
}

// New returns an empty profile.
func New() *Profile {
	return &Profile{Stacks: make(map[string]int64)}
}

// Add adds count samples of stack. It ignores a count of zero or less and
// an empty stack. Control characters and invalid UTF-8 in stack are
// replaced by "_", so that every stack fits on one line of the folded
// format. Counts saturate at the largest int64 rather than overflow.
func (p *Profile) Add(stack string, count int64) {
	if count <= 0 || stack == "" {
		return
	}
	stack = sanitize(stack)
	if p.Stacks == nil {
		p.Stacks = make(map[string]int64)
	}
	p.Stacks[stack] = addSat(p.Stacks[stack], count)
}

// Merge adds the samples of o to p. A nil o adds nothing; merging p into
// itself doubles its counts.
func (p *Profile) Merge(o *Profile) {
	if o == nil {
		return
	}
	stacks := o.Stacks
	if o == p {
		stacks = maps.Clone(stacks)
	}
	for s, n := range stacks {
		p.Add(s, n)
	}
}

// Total returns the number of samples of p, saturating at the largest
// int64. A nil profile has none.
func (p *Profile) Total() int64 {
	if p == nil {
		return 0
	}
	var t int64
	for _, n := range p.Stacks {
		if n > 0 {
			t = addSat(t, n)
		}
	}
	return t
}

// ReadFolded reads a profile in the folded text format: one "STACK COUNT"
// line per stack, the count being the decimal number after the last space.
// Empty lines are skipped, a line may end in "\r\n", and a stack seen on
// several lines adds up. A line without a space, with an empty stack or
// with a count that is not a non-negative integer is an error naming the
// line number. ReadFolded reads at most maxBytes bytes of r and fails when
// r holds more; zero or a negative maxBytes means no limit. Stacks are
// added with Profile.Add.
func ReadFolded(r io.Reader, maxBytes int64) (*Profile, error) {
	if maxBytes > 0 && maxBytes < math.MaxInt64 {
		r = io.LimitReader(r, maxBytes+1) // one byte more tells whether r goes on
	}
	br := bufio.NewReader(r)
	p := New()
	var read int64
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		read += int64(len(line))
		if maxBytes > 0 && read > maxBytes {
			return nil, fmt.Errorf("profile: folded stacks exceed the limit of %d bytes", maxBytes)
		}
		if len(line) > 0 {
			if perr := p.addLine(line); perr != nil {
				return nil, fmt.Errorf("profile: line %d: %w", n, perr)
			}
		}
		if err == io.EOF {
			return p, nil
		}
		if err != nil {
			return nil, fmt.Errorf("profile: reading folded stacks: %w", err)
		}
	}
}

// addLine adds one line of the folded format, with its line end if any.
func (p *Profile) addLine(line string) error {
	line = strings.TrimSuffix(line, "\n")
	line = strings.TrimSuffix(line, "\r")
	if strings.TrimSpace(line) == "" {
		return nil
	}
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return fmt.Errorf("no count in %q", clip(line))
	}
	stack, num := line[:i], line[i+1:]
	if stack == "" {
		return fmt.Errorf("empty stack in %q", clip(line))
	}
	count, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return fmt.Errorf("bad count %q: %w", clip(num), err)
	}
	if count < 0 {
		return fmt.Errorf("negative count %d", count)
	}
	p.Add(stack, count)
	return nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const n = 60
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// WriteFolded writes p in the folded text format, one "STACK COUNT" line
// per stack, sorted by stack. It writes nothing for an empty profile.
func (p *Profile) WriteFolded(w io.Writer) error {
	if p == nil {
		return nil
	}
	bw := bufio.NewWriter(w)
	var num []byte
	for _, s := range slices.Sorted(maps.Keys(p.Stacks)) {
		n := p.Stacks[s]
		if n <= 0 || s == "" {
			continue
		}
		bw.WriteString(s)
		num = append(num[:0], ' ')
		num = strconv.AppendInt(num, n, 10)
		num = append(num, '\n')
		bw.Write(num)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("profile: writing folded stacks: %w", err)
	}
	return nil
}

// Share is a function's share of all samples of a profile, from 0 to 1.
type Share struct {
	// Inclusive is the share of samples whose stack contains the function,
	// each stack counted once however often the function recurs in it.
	Inclusive float64 `json:"inclusive"`
	// Self is the share of samples where the function is the leaf.
	Self float64 `json:"self"`
}

// funcCounts are a function's sample counts while computing shares.
type funcCounts struct {
	incl, self int64
	// last is the number of the last stack counted in incl, plus one.
	last int
}

// Shares returns the share of every function of p, by name. The first
// element of a stack is the process name, not a function, and is left out;
// so are empty names. The shares are relative to Total; an empty profile
// has no functions.
func (p *Profile) Shares() map[string]Share {
	total := p.Total()
	out := make(map[string]Share)
	if total == 0 {
		return out
	}
	index := make(map[string]int)
	var counts []funcCounts
	num := 0
	for stack, n := range p.Stacks {
		if n <= 0 {
			continue
		}
		num++
		_, rest, found := strings.Cut(stack, ";")
		for found {
			var name string
			name, rest, found = strings.Cut(rest, ";")
			if name == "" {
				continue
			}
			i, ok := index[name]
			if !ok {
				i = len(counts)
				index[name] = i
				counts = append(counts, funcCounts{})
			}
			c := &counts[i]
			if c.last != num {
				c.last = num
				c.incl = addSat(c.incl, n)
			}
			if !found {
				c.self = addSat(c.self, n)
			}
		}
	}
	t := float64(total)
	for name, i := range index {
		c := counts[i]
		out[name] = Share{Inclusive: float64(c.incl) / t, Self: float64(c.self) / t}
	}
	return out
}

// Change is a function's share on two sides, A and B, of a comparison.
type Change struct {
	// Func is the function's name.
	Func string `json:"func"`
	// A is the function's share in profile A.
	A Share `json:"a"`
	// B is the function's share in profile B.
	B Share `json:"b"`
}

// Delta returns how much the function's inclusive share grew from A to B,
// B.Inclusive - A.Inclusive; it is negative when it shrank.
func (c Change) Delta() float64 {
	return c.B.Inclusive - c.A.Inclusive
}

// Diff returns the n functions whose inclusive share changed most between
// profiles a and b, largest absolute Delta first, ties (equal to 12
// decimal places) ordered by name.
// Functions whose inclusive share is under minShare in both profiles are
// left out. Zero or a negative n returns all the others. A nil profile has
// no functions.
func Diff(a, b *Profile, n int, minShare float64) []Change {
	sa, sb := a.Shares(), b.Shares()
	var out []Change
	add := func(name string) {
		c := Change{Func: name, A: sa[name], B: sb[name]}
		if c.A.Inclusive < minShare && c.B.Inclusive < minShare {
			return
		}
		out = append(out, c)
	}
	for name := range sa {
		add(name)
	}
	for name := range sb {
		if _, ok := sa[name]; !ok {
			add(name)
		}
	}
	// Round the deltas so that changes equal but for floating-point error
	// tie.
	key := func(c Change) float64 { return math.Round(math.Abs(c.Delta())*1e12) / 1e12 }
	slices.SortFunc(out, func(x, y Change) int {
		if c := cmp.Compare(key(y), key(x)); c != 0 {
			return c
		}
		return cmp.Compare(x.Func, y.Func)
	})
	if n > 0 && len(out) > n {
		out = out[:n:n]
	}
	return out
}

// Lookup returns the shares of the named functions in profiles a and b, in
// the order given; a function absent from a profile has zero shares there.
func Lookup(a, b *Profile, funcs []string) []Change {
	sa, sb := a.Shares(), b.Shares()
	out := make([]Change, len(funcs))
	for i, name := range funcs {
		out[i] = Change{Func: name, A: sa[name], B: sb[name]}
	}
	return out
}

// addSat returns a + b for non-negative a and b, or the largest int64 when
// the sum overflows.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// sanitize returns s with control characters and invalid UTF-8 replaced by
// "_".
func sanitize(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			r = '_'
		}
		b.WriteRune(r)
	}
	return b.String()
}
