package build

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Fragment is a config fragment: lines "CONFIG_X=value" and
// "# CONFIG_X is not set".
type Fragment struct {
	// Name is the fragment as given: "lab", "debug" or a path.
	Name string
	// Data is its content.
	Data []byte
}

// Request is one option a fragment asks for.
type Request struct {
	// Name is the symbol without "CONFIG_".
	Name string `json:"name"`
	// Value is "y", "m", "n" (for "is not set") or the literal value of a
	// string, int or hex option (strings keep their quotes).
	Value string `json:"value"`
	// Where is "fragment:line" of the request that wins.
	Where string `json:"where"`
}

var (
	fragSetRe   = regexp.MustCompile(`^CONFIG_([A-Za-z0-9_]+)=(.*)$`)
	fragUnsetRe = regexp.MustCompile(`^# CONFIG_([A-Za-z0-9_]+) is not set\s*$`)
)

// MergeRequests reads fragments in order and returns what they ask for,
// later fragments overriding earlier ones as merge_config.sh does, sorted
// by name. Lines that are neither an option, a comment nor empty are
// errors naming fragment:line and what is allowed; all are reported.
func MergeRequests(frags []Fragment) ([]Request, error) {
	byName := map[string]Request{}
	var errs []error
	for _, f := range frags {
		sc := bufio.NewScanner(bytes.NewReader(f.Data))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			where := fmt.Sprintf("%s:%d", f.Name, n)
			switch {
			case fragUnsetRe.MatchString(line):
				name := fragUnsetRe.FindStringSubmatch(line)[1]
				byName[name] = Request{Name: name, Value: "n", Where: where}
			case line == "" || line[0] == '#':
			case fragSetRe.MatchString(line):
				m := fragSetRe.FindStringSubmatch(line)
				v := strings.TrimSpace(m[2])
				if v == "" {
					errs = append(errs, fmt.Errorf("%s: CONFIG_%s has no value: want y, m, a number or a \"string\"", where, m[1]))
					continue
				}
				byName[m[1]] = Request{Name: m[1], Value: v, Where: where}
			default:
				hint := ""
				if regexp.MustCompile(`^[A-Z0-9_]+=`).MatchString(line) {
					hint = " (options start with CONFIG_)"
				}
				errs = append(errs, fmt.Errorf("%s: %q: want CONFIG_NAME=value, \"# CONFIG_NAME is not set\", a comment or an empty line%s", where, line, hint))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	reqs := make([]Request, 0, len(byName))
	for _, r := range byName {
		reqs = append(reqs, r)
	}
	sort.Slice(reqs, func(i, j int) bool { return reqs[i].Name < reqs[j].Name })
	return reqs, nil
}

// ReadDotConfig parses a .config into symbol → value ("y", "m", "n" for
// "is not set", or the literal value).
func ReadDotConfig(data []byte) map[string]string {
	vals := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if m := fragSetRe.FindStringSubmatch(line); m != nil {
			vals[m[1]] = m[2]
		} else if m := fragUnsetRe.FindStringSubmatch(line); m != nil {
			vals[m[1]] = "n"
		}
	}
	return vals
}

// Dropped is a requested option that did not land in the final .config.
type Dropped struct {
	Request
	// Got is the value in the final .config ("n" when not set).
	Got string `json:"got"`
	// Why explains it: the unmet dependency, when it can be found.
	Why string `json:"why,omitempty"`
}

// String renders the request, where it came from, what landed and why.
func (d Dropped) String() string {
	got := "CONFIG_" + d.Name + "=" + d.Got
	if d.Got == "n" {
		got = "not set"
	}
	want := "CONFIG_" + d.Name + "=" + d.Value
	if d.Value == "n" {
		want = "# CONFIG_" + d.Name + " is not set"
	}
	s := fmt.Sprintf("%s (%s): got %s", want, d.Where, got)
	if d.Why != "" {
		s += ": " + d.Why
	}
	return s
}

// DroppedError reports the requested options that Kconfig dropped (a
// build with Options.AllowDropped goes on without them).
type DroppedError struct {
	// Dropped are the options, sorted by name.
	Dropped []Dropped
}

// Error lists every dropped option.
func (e *DroppedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d requested config option(s) did not land after olddefconfig:", len(e.Dropped))
	for _, d := range e.Dropped {
		b.WriteString("\n  ")
		b.WriteString(d.String())
	}
	return b.String()
}

// CheckConfig compares what the fragments requested with the final
// .config (vals) and explains every option that did not land, using kc
// (nil when the tree's Kconfig could not be read). A requested "m" that
// became "y" because modules are off is not a drop.
func CheckConfig(reqs []Request, vals map[string]string, kc *Kconfig) []Dropped {
	var out []Dropped
	for _, r := range reqs {
		got, ok := vals[r.Name]
		if !ok {
			got = "n"
		}
		if sameValue(r.Value, got) || (r.Value == "m" && got == "y" && vals["MODULES"] != "y") {
			continue
		}
		d := Dropped{Request: r, Got: got}
		if kc != nil {
			d.Why = kc.Explain(r.Name, r.Value, vals)
		}
		out = append(out, d)
	}
	return out
}

func sameValue(want, got string) bool {
	if want == got {
		return true
	}
	// Kconfig writes hex in lower case; "0x10" and "0X10" are the same.
	return strings.EqualFold(want, got) && strings.HasPrefix(strings.ToLower(want), "0x")
}

// Kconfig is what klab knows about a tree's Kconfig symbols: enough to
// say why an option could not be set.
type Kconfig struct {
	syms map[string]*kSym
	// selectors maps a symbol to the "Y if cond" entries that select it.
	selectors map[string][]string
}

// kSym is one symbol's definitions (a symbol may be defined in several
// places; any one of them may make it settable).
type kSym struct {
	defs []kDef
}

type kDef struct {
	where   string   // file:line
	conds   []string // enclosing if / menu depends on, and depends on
	prompt  bool     // has a prompt
	visible string   // the prompt's "if" condition, "" when none
	choice  []string // the other members when in a choice
}

var (
	kEntryRe   = regexp.MustCompile(`^(?:menu)?config\s+([A-Za-z0-9_]+)\s*$`)
	kDependsRe = regexp.MustCompile(`^depends\s+on\s+(.+)$`)
	kPromptRe  = regexp.MustCompile(`^(?:bool|tristate|string|int|hex|prompt)\s+"(?:[^"\\]|\\.)*"(?:\s+if\s+(.+))?$`)
	kSelectRe  = regexp.MustCompile(`^(?:select|imply)\s+([A-Za-z0-9_]+)(?:\s+if\s+(.+))?$`)
	kSourceRe  = regexp.MustCompile(`^(o?r?source)\s+"([^"]+)"`)
	kIfRe      = regexp.MustCompile(`^if\s+(.+)$`)
	kVisibleRe = regexp.MustCompile(`^visible\s+if\s+(.+)$`)
)

// ReadKconfig reads the Kconfig files of the tree at src, starting at its
// top-level Kconfig and following "source" lines, for arch (x86).
func ReadKconfig(src, srcarch string) (*Kconfig, error) {
	kc := &Kconfig{syms: map[string]*kSym{}, selectors: map[string][]string{}}
	r := &kReader{kc: kc, src: src, vars: map[string]string{"SRCARCH": srcarch, "ARCH": srcarch, "HEADER_ARCH": srcarch}, seen: map[string]bool{}}
	if err := r.file(filepath.Join(src, "Kconfig"), nil, false); err != nil {
		return nil, err
	}
	return kc, nil
}

type kReader struct {
	kc   *Kconfig
	src  string
	vars map[string]string
	seen map[string]bool
}

// file reads one Kconfig file; conds are the conditions inherited from the
// "if" blocks and menus around the source line that named it.
func (r *kReader) file(path string, conds []string, optional bool) error {
	if r.seen[path] {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if optional {
			return nil
		}
		return fmt.Errorf("reading Kconfig: %w", err)
	}
	r.seen[path] = true
	rel, _ := filepath.Rel(r.src, path)

	type block struct {
		kind string // "if", "menu", "choice"
		cond string
	}
	var stack []block
	var cur *kDef
	var curName string
	type member struct {
		name string
		idx  int
	}
	var choiceMembers []member
	var choiceNames []string
	inHelp, helpIndent := false, -1
	curConds := func() []string {
		cs := append([]string{}, conds...)
		for _, b := range stack {
			if b.cond != "" {
				cs = append(cs, b.cond)
			}
		}
		return cs
	}
	finish := func() {
		if cur != nil {
			s := r.kc.syms[curName]
			if s == nil {
				s = &kSym{}
				r.kc.syms[curName] = s
			}
			s.defs = append(s.defs, *cur)
			if len(stack) > 0 && stack[len(stack)-1].kind == "choice" {
				choiceNames = append(choiceNames, curName)
				choiceMembers = append(choiceMembers, member{curName, len(s.defs) - 1})
			}
		}
		cur = nil
	}
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		raw := lines[i]
		for strings.HasSuffix(raw, "\\") && i+1 < len(lines) {
			i++
			raw = strings.TrimSuffix(raw, "\\") + " " + lines[i]
		}
		line := strings.TrimSpace(raw)
		if inHelp {
			ind := len(raw) - len(strings.TrimLeft(raw, " \t"))
			if line == "" {
				continue
			}
			if helpIndent < 0 {
				helpIndent = ind
			}
			if ind >= helpIndent && ind > 0 {
				continue
			}
			inHelp = false
		}
		if j := strings.Index(line, " #"); j >= 0 && !strings.Contains(line[:j], `"`) {
			line = strings.TrimSpace(line[:j])
		}
		if line == "" || line[0] == '#' {
			continue
		}
		where := fmt.Sprintf("%s:%d", rel, i+1)
		switch {
		case line == "help" || line == "---help---":
			inHelp, helpIndent = true, -1
		case kEntryRe.MatchString(line):
			finish()
			curName = kEntryRe.FindStringSubmatch(line)[1]
			cur = &kDef{where: where, conds: curConds()}
		case line == "choice" || strings.HasPrefix(line, "choice "):
			finish()
			stack = append(stack, block{kind: "choice"})
			choiceMembers, choiceNames = nil, nil
		case line == "endchoice":
			finish()
			for _, m := range choiceMembers {
				r.kc.syms[m.name].defs[m.idx].choice = choiceNames
			}
			choiceMembers, choiceNames = nil, nil
			stack = popBlock(stack, "choice")
		case strings.HasPrefix(line, "menu ") || line == "menu":
			finish()
			stack = append(stack, block{kind: "menu"})
		case line == "endmenu":
			finish()
			stack = popBlock(stack, "menu")
		case kIfRe.MatchString(line):
			finish()
			stack = append(stack, block{kind: "if", cond: kIfRe.FindStringSubmatch(line)[1]})
		case line == "endif":
			finish()
			stack = popBlock(stack, "if")
		case strings.HasPrefix(line, "comment ") || strings.HasPrefix(line, "mainmenu "):
			finish()
		case kSourceRe.MatchString(line):
			finish()
			m := kSourceRe.FindStringSubmatch(line)
			p, ok := r.expand(m[2])
			if !ok {
				continue
			}
			if m[1] == "rsource" || m[1] == "orsource" {
				p = filepath.Join(filepath.Dir(path), p)
			} else {
				p = filepath.Join(r.src, p)
			}
			matches, _ := filepath.Glob(p)
			if len(matches) == 0 && !strings.ContainsAny(p, "*?[") {
				matches = []string{p}
			}
			for _, mp := range matches {
				if err := r.file(mp, curConds(), strings.HasPrefix(m[1], "o")); err != nil {
					return err
				}
			}
		case kDependsRe.MatchString(line):
			c := kDependsRe.FindStringSubmatch(line)[1]
			switch {
			case cur != nil:
				cur.conds = append(cur.conds, c)
			case len(stack) > 0 && stack[len(stack)-1].kind != "if" && stack[len(stack)-1].cond == "":
				// A menu's or choice's own dependency.
				stack[len(stack)-1].cond = c
			}
		case kVisibleRe.MatchString(line):
			if len(stack) > 0 && stack[len(stack)-1].kind == "menu" && cur == nil {
				// A menu's "visible if" hides prompts, like a prompt
				// condition; treat it as one.
				stack[len(stack)-1].cond = joinCond(stack[len(stack)-1].cond, kVisibleRe.FindStringSubmatch(line)[1])
			}
		case kPromptRe.MatchString(line) && cur != nil:
			cur.prompt = true
			if v := kPromptRe.FindStringSubmatch(line)[1]; v != "" {
				cur.visible = strings.TrimSpace(v)
			}
		case kSelectRe.MatchString(line) && cur != nil:
			m := kSelectRe.FindStringSubmatch(line)
			sel := curName
			if m[2] != "" {
				sel += " if " + strings.TrimSpace(m[2])
			}
			r.kc.selectors[m[1]] = append(r.kc.selectors[m[1]], sel)
		}
	}
	finish()
	return nil
}

func joinCond(a, b string) string {
	if a == "" {
		return b
	}
	return "(" + a + ") && (" + b + ")"
}

func popBlock[T any](stack []T, _ string) []T {
	if len(stack) == 0 {
		return stack
	}
	return stack[:len(stack)-1]
}

var kVarRe = regexp.MustCompile(`\$\(([A-Za-z_]+)\)`)

// expand substitutes $(SRCARCH) and friends; ok is false when the path
// uses a variable klab does not know.
func (r *kReader) expand(p string) (string, bool) {
	ok := true
	out := kVarRe.ReplaceAllStringFunc(p, func(v string) string {
		name := kVarRe.FindStringSubmatch(v)[1]
		if val, found := r.vars[name]; found {
			return val
		}
		ok = false
		return v
	})
	return out, ok
}

// Known reports whether the tree defines symbol name.
func (kc *Kconfig) Known(name string) bool { return kc.syms[name] != nil }

// Explain says why symbol name could not be given value want, given the
// final .config values: an unknown symbol, unmet dependencies (with the
// values that fail them), a hidden prompt, selects that force it, or the
// choice it belongs to.
func (kc *Kconfig) Explain(name, want string, vals map[string]string) string {
	s := kc.syms[name]
	if s == nil {
		return "no such option in this tree's Kconfig (renamed or removed?)"
	}
	var reasons []string
	if want == "n" {
		var on []string
		for _, sel := range kc.selectors[name] {
			who, cond, _ := strings.Cut(sel, " if ")
			if tri(vals[who]) > 0 && (cond == "" || evalKexpr(cond, vals) > 0) {
				on = append(on, who+"="+vals[who])
			}
		}
		if len(on) > 0 {
			return "it is selected by " + strings.Join(on, ", ")
		}
	}
	need := 2
	if want == "m" {
		need = 1
	}
	for _, d := range s.defs {
		var unmet []string
		for _, c := range d.conds {
			for _, part := range splitTopAnd(c) {
				if want != "n" && evalKexpr(part, vals) < need {
					unmet = append(unmet, describeCond(part, vals))
				}
			}
		}
		switch {
		case len(unmet) > 0:
			reasons = append(reasons, "unmet dependency "+strings.Join(unmet, " and ")+" ("+d.where+")")
		case !d.prompt && want == "n":
			reasons = append(reasons, "it has no prompt, so a fragment cannot unset it; its default or a select sets it ("+d.where+")")
		case !d.prompt:
			sels := kc.selectors[name]
			if len(sels) == 0 {
				reasons = append(reasons, "it has no prompt and nothing selects it; it cannot be set ("+d.where+")")
			} else {
				if len(sels) > 6 {
					sels = append(sels[:6:6], "...")
				}
				reasons = append(reasons, "it has no prompt, so a fragment cannot set it; it is selected by "+strings.Join(sels, ", ")+" ("+d.where+")")
			}
		case d.visible != "" && evalKexpr(d.visible, vals) == 0:
			reasons = append(reasons, "its prompt is hidden: it is only settable if "+describeCond(d.visible, vals)+" ("+d.where+")")
		case len(d.choice) > 0:
			var set []string
			for _, c := range d.choice {
				if vals[c] == "y" {
					set = append(set, c)
				}
			}
			if len(set) > 0 {
				reasons = append(reasons, "it is one choice of "+strings.Join(d.choice, ", ")+" and "+strings.Join(set, ", ")+" won; unset the other one in the fragment ("+d.where+")")
			}
		}
	}
	if len(reasons) == 0 {
		if want == "m" && vals["MODULES"] != "y" {
			return "modules are off (CONFIG_MODULES is not set)"
		}
		return "its dependencies look met; check it with make menuconfig (" + s.defs[0].where + ")"
	}
	return strings.Join(dedup(reasons), "; ")
}

func dedup(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// describeCond renders a condition with the values of its symbols:
// "ACPI || OF (ACPI=n, OF=n)".
func describeCond(c string, vals map[string]string) string {
	var parts []string
	seen := map[string]bool{}
	for _, t := range tokenizeKexpr(c) {
		if !isSymbolTok(t) || seen[t] {
			continue
		}
		seen[t] = true
		v, ok := vals[t]
		if !ok {
			v = "n"
		}
		parts = append(parts, t+"="+v)
	}
	c = strings.Join(strings.Fields(c), " ")
	if len(parts) == 0 {
		return c
	}
	return c + " (" + strings.Join(parts, ", ") + ")"
}

// splitTopAnd splits an expression at its top-level "&&".
func splitTopAnd(e string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(e); i++ {
		switch e[i] {
		case '(':
			depth++
		case ')':
			depth--
		case '&':
			if depth == 0 && i+1 < len(e) && e[i+1] == '&' {
				parts = append(parts, strings.TrimSpace(e[start:i]))
				start = i + 2
				i++
			}
		}
	}
	parts = append(parts, strings.TrimSpace(e[start:]))
	// Unwrap a fully parenthesised single part.
	if len(parts) == 1 {
		p := parts[0]
		if strings.HasPrefix(p, "(") && strings.HasSuffix(p, ")") && balanced(p[1:len(p)-1]) {
			return splitTopAnd(p[1 : len(p)-1])
		}
	}
	return parts
}

func balanced(s string) bool {
	d := 0
	for _, c := range s {
		switch c {
		case '(':
			d++
		case ')':
			d--
			if d < 0 {
				return false
			}
		}
	}
	return d == 0
}

func isSymbolTok(t string) bool {
	if t == "" || t == "y" || t == "m" || t == "n" {
		return false
	}
	for _, c := range t {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return !(t[0] >= '0' && t[0] <= '9')
}

func tokenizeKexpr(e string) []string {
	var toks []string
	for i := 0; i < len(e); {
		c := e[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case strings.HasPrefix(e[i:], "&&"), strings.HasPrefix(e[i:], "||"), strings.HasPrefix(e[i:], "!="),
			strings.HasPrefix(e[i:], "<="), strings.HasPrefix(e[i:], ">="):
			toks = append(toks, e[i:i+2])
			i += 2
		case strings.ContainsRune("()!=<>", rune(c)):
			toks = append(toks, string(c))
			i++
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(e) && e[j] != c {
				if e[j] == '\\' {
					j++
				}
				j++
			}
			if j < len(e) {
				j++
			}
			toks = append(toks, e[i:j])
			i = j
		default:
			j := i
			for j < len(e) && !strings.ContainsRune(" \t()!=<>&|\"'", rune(e[j])) {
				j++
			}
			if j == i {
				j++
			}
			toks = append(toks, e[i:j])
			i = j
		}
	}
	return toks
}

// tri is a tristate value: n=0, m=1, y=2.
func tri(v string) int {
	switch v {
	case "y":
		return 2
	case "m":
		return 1
	}
	return 0
}

// evalKexpr evaluates a Kconfig expression with the .config values, as a
// tristate (0, 1, 2). Unknown or non-boolean symbols count as n, as
// Kconfig does; a malformed expression gives 2 so that it is not blamed.
func evalKexpr(e string, vals map[string]string) int {
	p := &kParser{toks: tokenizeKexpr(e), vals: vals}
	v := p.or()
	if p.bad || p.pos != len(p.toks) {
		return 2
	}
	return v
}

type kParser struct {
	toks []string
	pos  int
	vals map[string]string
	bad  bool
}

func (p *kParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *kParser) or() int {
	v := p.and()
	for p.peek() == "||" {
		p.pos++
		v = max(v, p.and())
	}
	return v
}

func (p *kParser) and() int {
	v := p.not()
	for p.peek() == "&&" {
		p.pos++
		v = min(v, p.not())
	}
	return v
}

func (p *kParser) not() int {
	if p.peek() == "!" {
		p.pos++
		return 2 - p.not()
	}
	return p.cmp()
}

func (p *kParser) cmp() int {
	if p.peek() == "(" {
		p.pos++
		v := p.or()
		if p.peek() != ")" {
			p.bad = true
			return 2
		}
		p.pos++
		return v
	}
	left := p.atom()
	switch op := p.peek(); op {
	case "=", "!=", "<", ">", "<=", ">=":
		p.pos++
		right := p.atom()
		l, r := p.value(left), p.value(right)
		var ok bool
		switch op {
		case "=":
			ok = l == r
		case "!=":
			ok = l != r
		default:
			ok = compareKvals(l, r, op)
		}
		if ok {
			return 2
		}
		return 0
	}
	switch left {
	case "y":
		return 2
	case "m":
		return 1
	case "n", "":
		return 0
	}
	return tri(p.vals[left])
}

func (p *kParser) atom() string {
	t := p.peek()
	if t == "" || strings.ContainsAny(t[:1], "()!=<>&|") {
		p.bad = true
		return ""
	}
	p.pos++
	return t
}

// value is the value of a symbol or literal in a comparison.
func (p *kParser) value(t string) string {
	if len(t) >= 2 && (t[0] == '"' || t[0] == '\'') {
		return t[1 : len(t)-1]
	}
	if isSymbolTok(t) {
		if v, ok := p.vals[t]; ok {
			return strings.Trim(v, `"`)
		}
		if p.vals != nil {
			return "n"
		}
	}
	return t
}

func compareKvals(l, r, op string) bool {
	var a, b int64
	if _, err := fmt.Sscan(l, &a); err != nil {
		return false
	}
	if _, err := fmt.Sscan(r, &b); err != nil {
		return false
	}
	switch op {
	case "<":
		return a < b
	case ">":
		return a > b
	case "<=":
		return a <= b
	}
	return a >= b
}
