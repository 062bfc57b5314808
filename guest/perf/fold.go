// Package perf folds the text output of "perf script" into call stacks with
// sample counts, the input of flame graphs and of per-function profiles.
//
// The expected input is the default output of perf script (perf 6.x) for a
// recording made with call graphs (perf record -g): each sample is a header
// line naming the process, its pid, cpu, time, period and event, followed by
// one line per frame, leaf first, and a blank line:
//
//	swapper     0 [000] 10700.597929:   10101010 cpu-clock:
//		ffffffff821f2c2b pv_native_safe_halt+0xb ([kernel.kallsyms])
//		ffffffff821f4735 default_idle+0x5 ([kernel.kallsyms])
//
// Fold turns each sample into one folded stack, "comm;outer;...;leaf", and
// counts how many samples share it.
package perf

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Defaults for the zero fields of Limits.
const (
	// DefaultMaxFrames is the default of Limits.MaxFrames.
	DefaultMaxFrames = 128
	// DefaultMaxStacks is the default of Limits.MaxStacks.
	DefaultMaxStacks = 4000
	// DefaultMaxBytes is the default of Limits.MaxBytes.
	DefaultMaxBytes = 512 << 10
	// DefaultMaxInput is the default of Limits.MaxInput.
	DefaultMaxInput = 256 << 20
)

const (
	// maxLine is the longest input line, without its newline, that is
	// parsed; longer lines are skipped.
	maxLine = 64 << 10
	// maxName is the most bytes kept of one frame or process name; longer
	// names are cut and end in "..".
	maxName = 1024
	// unknown is the name of a frame whose symbol perf could not resolve.
	unknown = "[unknown]"
)

// Limits bound what Fold keeps. A zero or negative field takes its default.
type Limits struct {
	// MaxFrames is the number of frames kept per stack, not counting the
	// process name. The outermost frames of deeper stacks are cut; the leaf
	// is always kept. Zero means DefaultMaxFrames (128).
	MaxFrames int
	// MaxStacks is the number of distinct stacks kept; the most frequent
	// are kept. Zero means DefaultMaxStacks (4000).
	MaxStacks int
	// MaxBytes bounds the total length in bytes of the kept stack strings.
	// Zero means DefaultMaxBytes (512 KiB).
	MaxBytes int
	// MaxInput is the most bytes of input read; the rest is left unread.
	// Zero means DefaultMaxInput (256 MiB).
	MaxInput int64
}

// withDefaults returns l with its zero and negative fields set to their
// defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxFrames <= 0 {
		l.MaxFrames = DefaultMaxFrames
	}
	if l.MaxStacks <= 0 {
		l.MaxStacks = DefaultMaxStacks
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxInput <= 0 {
		l.MaxInput = DefaultMaxInput
	}
	return l
}

// Stack is one folded call stack and the number of samples that had it.
type Stack struct {
	// Stack is the process name followed by the frames from the outermost
	// caller to the leaf, joined by ";": "comm;outer;...;leaf". No name
	// holds ";", white space or control characters. A sample without frames
	// is the process name alone.
	Stack string `json:"stack"`
	// Count is the number of samples with this stack.
	Count int64 `json:"count"`
}

// Folded is the result of Fold.
type Folded struct {
	// Samples is the number of samples read, kept or not.
	Samples int64 `json:"samples"`
	// Dropped is the number of samples whose stacks were left out because
	// of Limits.MaxStacks or Limits.MaxBytes. Samples - Dropped is the sum
	// of the counts in Stacks.
	Dropped int64 `json:"dropped,omitempty"`
	// Skipped is the number of input lines that were neither a sample
	// header, a frame of a sample nor blank, or were longer than 64 KiB.
	Skipped int64 `json:"skipped,omitempty"`
	// Truncated is true when the input was longer than Limits.MaxInput and
	// only its beginning was read.
	Truncated bool `json:"truncated,omitempty"`
	// Stacks are the kept stacks, most frequent first, ties ordered by
	// stack string.
	Stacks []Stack `json:"stacks"`
}

// Fold reads the text output of perf script from r and folds its samples
// into call stacks, each counted once per sample (the sample period is
// ignored).
//
// A sample starts with a header line: the process name (which may hold
// spaces), the pid or pid/tid, the cpu in brackets (optional), the time
// followed by ":", an optional period and the event name followed by ":".
// Frame lines follow, leaf first, each an address in hex, a symbol with an
// optional "+0x" offset and the object in parentheses; a blank line or the
// next header ends the sample. A sample may have no frames. When the header
// itself ends in a frame (perf script without call graphs), that frame is
// the sample's only one.
//
// Frame names are the symbols without their offsets. A frame perf could not
// resolve is "[unknown]", or "[base]" after the base name of its object when
// that is a known user-space object ("[dash]" for /usr/bin/dash); kernel
// frames from [kernel.kallsyms] stay "[unknown]". Consecutive identical
// unresolved frames are folded into one. In names and in the process name,
// ";", white space, control characters and invalid UTF-8 become "_"; names
// longer than 1 KiB are cut and end in "..".
//
// Fold never fails on malformed input: lines it cannot parse are skipped and
// counted in Folded.Skipped, and so are lines longer than 64 KiB. A line
// that starts without white space and is not a header also ends the current
// sample, and the frame lines after it are skipped up to the next header.
// The error is that of r, other than io.EOF.
func Fold(r io.Reader, l Limits) (*Folded, error) {
	l = l.withDefaults()
	f := newFolder(l)
	limit := l.MaxInput
	if limit < math.MaxInt64 {
		limit++ // one byte more tells whether the input goes on
	}
	br := bufio.NewReaderSize(io.LimitReader(r, limit), maxLine+1)
	var read int64
	for {
		line, err := br.ReadSlice('\n')
		read += int64(len(line))
		if errors.Is(err, bufio.ErrBufferFull) {
			indented := isBlank(line[0])
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				read += int64(len(line))
			}
			if read > l.MaxInput {
				f.truncated = true
				break
			}
			f.skip(indented)
		} else {
			if read > l.MaxInput {
				// The line runs past the limit: it may be cut.
				f.truncated = true
				break
			}
			if len(line) > 0 {
				f.line(line)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("perf: reading perf script output: %w", err)
		}
	}
	f.flush()
	return f.result(), nil
}

// entry is one distinct stack being counted.
type entry struct {
	key   string
	count int64
}

// folder holds the state of one Fold.
type folder struct {
	l Limits

	// index maps a stack to its entry in entries.
	index   map[string]int
	entries []entry
	// keyBytes is the total length of the keys in entries.
	keyBytes int
	// pruneStacks and pruneBytes bound entries and keyBytes while folding;
	// beyond them the least frequent stacks are dropped.
	pruneStacks int
	pruneBytes  int

	samples   int64
	dropped   int64
	skipped   int64
	truncated bool

	// inSample is true between a header and the end of its sample.
	inSample bool
	// comm is the current sample's process name, sanitized.
	comm []byte
	// names holds the current sample's frame names, leaf first; ends[i] is
	// the end of the i-th name in names.
	names []byte
	ends  []int
	// lastUnknown is true when the last name in names is an unresolved
	// frame.
	lastUnknown bool
	// key is scratch space for building stack strings.
	key []byte
}

// newFolder returns a folder for the limits l, which have their defaults.
func newFolder(l Limits) *folder {
	return &folder{
		l:           l,
		index:       make(map[string]int),
		pruneStacks: max(64*l.MaxStacks, 1<<16),
		pruneBytes:  max(64*l.MaxBytes, 32<<20),
	}
}

// line handles one input line, with its newline if any.
func (f *folder) line(b []byte) {
	for len(b) > 0 && (isBlank(b[len(b)-1]) || b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		f.flush()
		return
	}
	// perf indents frames with a tab; headers never start with one.
	if b[0] != '\t' {
		comm, rest, ok := parseHeader(b)
		if ok {
			f.flush()
			f.start(comm)
			if len(rest) > 0 {
				if sym, dso, ok := parseFrame(rest); ok {
					f.frame(sym, dso)
				}
			}
			return
		}
	}
	if !isBlank(b[0]) {
		f.skip(false)
		return
	}
	if !f.inSample {
		f.skipped++
		return
	}
	for isBlank(b[0]) {
		b = b[1:] // b ends in a non-blank byte
	}
	sym, dso, ok := parseFrame(b)
	if !ok {
		f.skipped++
		return
	}
	f.frame(sym, dso)
}

// skip counts a line that was not understood. A line that is not indented
// ends the current sample, and the frames after it are skipped.
func (f *folder) skip(indented bool) {
	f.skipped++
	if !indented {
		f.flush()
	}
}

// start begins a sample of the process comm.
func (f *folder) start(comm []byte) {
	f.inSample = true
	f.comm = appendName(f.comm[:0], comm)
	if len(f.comm) == 0 {
		f.comm = append(f.comm, unknown...)
	}
	f.names = f.names[:0]
	f.ends = f.ends[:0]
	f.lastUnknown = false
}

// frame adds the next outer frame of the current sample.
func (f *folder) frame(sym, dso []byte) {
	if len(f.ends) >= f.l.MaxFrames {
		return // keep the leaf side, cut the outermost frames
	}
	sym = stripOffset(sym)
	isUnknown := len(sym) == 0 || string(sym) == unknown
	start := len(f.names)
	switch {
	case !isUnknown:
		f.names = appendName(f.names, sym)
	case isKernel(dso):
		f.names = append(f.names, unknown...)
	default:
		base := baseName(dso)
		if len(base) == 0 || string(base) == "unknown" {
			f.names = append(f.names, unknown...)
		} else {
			f.names = append(f.names, '[')
			f.names = appendName(f.names, base)
			f.names = append(f.names, ']')
		}
	}
	if isUnknown && f.lastUnknown && len(f.ends) > 0 {
		prev := f.names[f.nameStart(len(f.ends)-1):start]
		if bytes.Equal(prev, f.names[start:]) {
			f.names = f.names[:start]
			return
		}
	}
	f.ends = append(f.ends, len(f.names))
	f.lastUnknown = isUnknown
}

// nameStart returns where the i-th frame name starts in f.names.
func (f *folder) nameStart(i int) int {
	if i == 0 {
		return 0
	}
	return f.ends[i-1]
}

// flush ends the current sample, if any, and counts its stack.
func (f *folder) flush() {
	if !f.inSample {
		return
	}
	f.inSample = false
	f.samples++
	key := append(f.key[:0], f.comm...)
	for i := len(f.ends) - 1; i >= 0; i-- {
		key = append(key, ';')
		key = append(key, f.names[f.nameStart(i):f.ends[i]]...)
	}
	f.key = key
	if i, ok := f.index[string(key)]; ok {
		f.entries[i].count++
		return
	}
	if len(key) > f.l.MaxBytes {
		f.dropped++ // could never be kept
		return
	}
	s := string(key)
	f.index[s] = len(f.entries)
	f.entries = append(f.entries, entry{key: s, count: 1})
	f.keyBytes += len(s)
	if len(f.entries) > f.pruneStacks || f.keyBytes > f.pruneBytes {
		f.prune()
	}
}

// prune bounds the memory of pathological inputs with very many distinct
// stacks: it drops the stacks counted less often than the median (or, when
// that leaves none, as often as the median), counting their samples as
// dropped.
func (f *folder) prune() {
	counts := make([]int64, len(f.entries))
	for i, e := range f.entries {
		counts[i] = e.count
	}
	slices.Sort(counts)
	median := counts[len(counts)/2]
	threshold := median
	if counts[0] == median {
		threshold = median + 1
	}
	kept := f.entries[:0]
	f.keyBytes = 0
	clear(f.index)
	for _, e := range f.entries {
		if e.count < threshold {
			f.dropped += e.count
			continue
		}
		f.index[e.key] = len(kept)
		kept = append(kept, e)
		f.keyBytes += len(e.key)
	}
	clear(f.entries[len(kept):])
	f.entries = kept
}

// result returns the most frequent stacks within the limits.
func (f *folder) result() *Folded {
	slices.SortFunc(f.entries, func(a, b entry) int {
		if c := cmp.Compare(b.count, a.count); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	out := &Folded{
		Samples:   f.samples,
		Dropped:   f.dropped,
		Skipped:   f.skipped,
		Truncated: f.truncated,
		Stacks:    []Stack{},
	}
	size := 0
	for _, e := range f.entries {
		if len(out.Stacks) >= f.l.MaxStacks || size+len(e.key) > f.l.MaxBytes {
			out.Dropped += e.count
			continue
		}
		out.Stacks = append(out.Stacks, Stack{Stack: e.key, Count: e.count})
		size += len(e.key)
	}
	return out
}

// parseHeader parses a sample header line without its newline:
//
//	comm pid[/tid] [[cpu]] secs.frac: [period] [event:] [frame]
//
// It returns the process name and what follows the event, and whether b is
// a sample header.
func parseHeader(b []byte) (comm, rest []byte, ok bool) {
	pos := 0
	for k := 0; ; k++ {
		s, e := nextField(b, pos)
		if s == e {
			return nil, nil, false
		}
		pos = e
		if k == 0 || !isPID(b[s:e]) {
			continue
		}
		s2, e2 := nextField(b, e)
		if isCPU(b[s2:e2]) {
			s2, e2 = nextField(b, e2)
		}
		if !isTime(b[s2:e2]) {
			continue
		}
		comm = bytes.TrimSpace(b[:s])
		after := e2
		// An optional period, then the event name.
		if s3, e3 := nextField(b, after); s3 < e3 && isDigits(b[s3:e3]) {
			after = e3
		}
		if s3, e3 := nextField(b, after); s3 < e3 && b[e3-1] == ':' {
			if bytes.HasPrefix(b[s3:e3], []byte("PERF_RECORD_")) {
				return nil, nil, false // a side-band event, not a sample
			}
			after = e3
		}
		return comm, bytes.TrimSpace(b[after:]), true
	}
}

// parseFrame parses a frame without its leading white space:
//
//	address symbol[+0xoffset] (object)
//
// The symbol may hold spaces and parentheses; the object is the last
// balanced parenthesized group after a space. Both may be empty.
func parseFrame(b []byte) (sym, dso []byte, ok bool) {
	i := 0
	for i < len(b) && isHex(b[i]) {
		i++
	}
	if i == 0 || (i < len(b) && !isBlank(b[i])) {
		return nil, nil, false
	}
	rest := bytes.TrimSpace(b[i:])
	if n := len(rest); n > 0 && rest[n-1] == ')' {
		depth := 0
		for j := n - 1; j >= 0; j-- {
			switch rest[j] {
			case ')':
				depth++
			case '(':
				depth--
			}
			if depth == 0 {
				if j == 0 || isBlank(rest[j-1]) {
					return bytes.TrimSpace(rest[:j]), rest[j+1 : n-1], true
				}
				break
			}
		}
	}
	return rest, nil, true
}

// nextField returns the bounds of the first space-separated field of b at
// or after pos; s == e when there is none.
func nextField(b []byte, pos int) (s, e int) {
	for pos < len(b) && isBlank(b[pos]) {
		pos++
	}
	s = pos
	for pos < len(b) && !isBlank(b[pos]) {
		pos++
	}
	return s, pos
}

// isPID reports whether b is a pid or pid/tid, either possibly -1.
func isPID(b []byte) bool {
	pid, tid, found := bytes.Cut(b, []byte("/"))
	return isID(pid) && (!found || isID(tid))
}

// isID reports whether b is a decimal number, optionally negative.
func isID(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	return isDigits(b)
}

// isCPU reports whether b is a cpu number in brackets.
func isCPU(b []byte) bool {
	return len(b) >= 3 && b[0] == '[' && b[len(b)-1] == ']' && isDigits(b[1:len(b)-1])
}

// isTime reports whether b is a time stamp, "secs.frac:" or "secs:".
func isTime(b []byte) bool {
	if len(b) < 2 || b[len(b)-1] != ':' {
		return false
	}
	secs, frac, found := bytes.Cut(b[:len(b)-1], []byte("."))
	return isDigits(secs) && (!found || isDigits(frac))
}

// isDigits reports whether b is a non-empty run of decimal digits.
func isDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isHex reports whether c is a hexadecimal digit.
func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// isBlank reports whether c is a space or a tab.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// stripOffset removes a trailing "+0x..." offset from a symbol.
func stripOffset(sym []byte) []byte {
	i := bytes.LastIndex(sym, []byte("+0x"))
	if i < 0 || i+3 == len(sym) {
		return sym
	}
	for _, c := range sym[i+3:] {
		if !isHex(c) {
			return sym
		}
	}
	return sym[:i]
}

// isKernel reports whether dso names the kernel image.
func isKernel(dso []byte) bool {
	return bytes.Contains(dso, []byte("kernel.kallsyms"))
}

// baseName returns the last path element of an object name, without the
// brackets of names such as "[vdso]" or "[unknown]".
func baseName(dso []byte) []byte {
	if i := bytes.LastIndexByte(dso, '/'); i >= 0 {
		dso = dso[i+1:]
	}
	if len(dso) >= 2 && dso[0] == '[' && dso[len(dso)-1] == ']' {
		dso = dso[1 : len(dso)-1]
	}
	return dso
}

// appendName appends name to dst with ";", white space, control characters
// and invalid UTF-8 replaced by "_", cut after maxName bytes with "..".
func appendName(dst, name []byte) []byte {
	start := len(dst)
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			i++
			if c == ';' || c <= ' ' || c == 0x7f {
				c = '_'
			}
			if len(dst)-start+1 > maxName {
				return append(dst, ".."...)
			}
			dst = append(dst, c)
			continue
		}
		r, size := utf8.DecodeRune(name[i:])
		if len(dst)-start+size > maxName {
			return append(dst, ".."...)
		}
		if r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) {
			dst = append(dst, '_')
		} else {
			dst = append(dst, name[i:i+size]...)
		}
		i += size
	}
	return dst
}
