package build

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"klab/internal/proc"
)

// CompileError is one compiler or linker error from a build log.
type CompileError struct {
	// File is the source file, relative to the tree when it is in it;
	// empty for a linker error without a location.
	File string
	// Line and Col locate the error; 0 when unknown.
	Line, Col int
	// Msg is the error message.
	Msg string
	// Context holds the lines the compiler printed after the message:
	// the source line, the caret, notes.
	Context []string
}

// String renders the error as the compiler did: "file:line:col: msg" and
// the lines under it.
func (e CompileError) String() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0 && e.Col > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Col)
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	}
	b.WriteString(e.Msg)
	for _, c := range e.Context {
		b.WriteString("\n    ")
		b.WriteString(c)
	}
	return b.String()
}

// BuildError is a failed make: the first errors from its log.
type BuildError struct {
	// Target is what make was building ("bzImage", "olddefconfig", ...).
	Target string
	// Errors are the first compiler or linker errors, in log order.
	Errors []CompileError
	// Log is the path of the full log.
	Log string
	// Err is the make failure itself.
	Err error
}

// Error shows the first compiler errors and where the full log is.
func (e *BuildError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "make %s failed", e.Target)
	if len(e.Errors) == 0 {
		fmt.Fprintf(&b, ": %v", e.Err)
	} else {
		b.WriteString("; first errors:")
		for _, ce := range e.Errors {
			b.WriteString("\n  ")
			b.WriteString(strings.ReplaceAll(ce.String(), "\n", "\n  "))
		}
	}
	if e.Log != "" {
		fmt.Fprintf(&b, "\nfull log: %s", e.Log)
	}
	return b.String()
}

// Unwrap returns the make failure.
func (e *BuildError) Unwrap() error { return e.Err }

// Patterns of compiler and linker errors in a make log.
var (
	// gcc and clang: "file:line:col: error: msg" (also "fatal error").
	ccErrRe = regexp.MustCompile(`^(\S[^:]*):(\d+):(?:(\d+):)? (?:fatal )?error: (.*)$`)
	// ld: "file.o: in function `f':" lines are context; the errors are
	// "ld: file.o:(...): undefined reference to `x'" and the like.
	ldErrRe = regexp.MustCompile(`^(?:\S*ld(?:\.bfd|\.lld|\.gold)?|ld): (.*(?:undefined reference|multiple definition|cannot find|error).*)$`)
	// Kbuild tools: "ERROR: modpost: ...", objtool, and make's own.
	toolErrRe = regexp.MustCompile(`^(?:ERROR: (.*)|(\S+: error: objtool: .*)|.*\*\*\* No rule to make target (.*))$`)
	makeErrRe = regexp.MustCompile(`^make(?:\[\d+\])?: \*\*\* .*Error \d+`)
)

// FirstErrors returns up to n compiler, linker and tool errors from a build
// log, in order, each with the lines the compiler printed under it. Paths
// inside src (absolute, or relative to the build directory out) become
// relative to src. When the log holds none, the first make "*** Error"
// line is returned.
func FirstErrors(log []byte, src, out string, n int) []CompileError {
	var errs []CompileError
	lines := strings.Split(string(log), "\n")
	for i := 0; i < len(lines) && len(errs) < n; i++ {
		line := strings.TrimRight(lines[i], "\r")
		var ce CompileError
		switch {
		case ccErrRe.MatchString(line):
			m := ccErrRe.FindStringSubmatch(line)
			ce.File = relToTree(m[1], src, out)
			ce.Line, _ = strconv.Atoi(m[2])
			ce.Col, _ = strconv.Atoi(m[3])
			ce.Msg = "error: " + m[4]
			// The source excerpt and caret follow, indented or starting
			// with a line number and '|'.
			for j := i + 1; j < len(lines) && len(ce.Context) < 6; j++ {
				c := strings.TrimRight(lines[j], "\r")
				if !isContextLine(c) {
					break
				}
				ce.Context = append(ce.Context, c)
				i = j
			}
		case ldErrRe.MatchString(line):
			ce.Msg = "ld: " + ldErrRe.FindStringSubmatch(line)[1]
		case toolErrRe.MatchString(line):
			m := toolErrRe.FindStringSubmatch(line)
			switch {
			case m[1] != "":
				ce.Msg = "ERROR: " + m[1]
			case m[2] != "":
				ce.Msg = m[2]
			default:
				ce.Msg = "no rule to make target " + m[3]
			}
		default:
			continue
		}
		if !containsErr(errs, ce) {
			errs = append(errs, ce)
		}
	}
	if len(errs) == 0 {
		for _, line := range lines {
			if makeErrRe.MatchString(line) {
				return []CompileError{{Msg: strings.TrimSpace(line)}}
			}
		}
	}
	return errs
}

func containsErr(errs []CompileError, e CompileError) bool {
	for _, x := range errs {
		if x.File == e.File && x.Line == e.Line && x.Col == e.Col && x.Msg == e.Msg {
			return true
		}
	}
	return false
}

// ccContextRe matches gcc's source excerpt lines: " 2105 |  foo = 1;" and
// "      |  ^~~".
var ccContextRe = regexp.MustCompile(`^\s*\d*\s*\|`)

func isContextLine(l string) bool {
	return ccContextRe.MatchString(l) || strings.Contains(l, ": note: ")
}

// relToTree makes p relative to src when it names a file inside it.
func relToTree(p, src, out string) string {
	abs := p
	if !filepath.IsAbs(p) {
		if out == "" {
			return p
		}
		abs = filepath.Join(out, p)
	}
	if src != "" {
		if rel, err := filepath.Rel(src, abs); err == nil && !strings.HasPrefix(rel, "..") {
			return rel
		}
	}
	if filepath.IsAbs(p) {
		return p
	}
	if out != "" {
		if rel, err := filepath.Rel(out, abs); err == nil && !strings.HasPrefix(rel, "..") {
			return rel // a generated file in the build directory
		}
	}
	return p
}

// stepRe matches kbuild's short command lines: "  CC      fs/fuse/dev.o".
var stepRe = regexp.MustCompile(`^  ([A-Z][A-Z0-9_-]*(?: \[M\])?) +(\S.*)$`)

// makeRun is one make invocation with its log and progress.
type makeRun struct {
	src, out string
	arch     string
	jobs     int
	ccache   bool
	// ccacheDir is where ccache keeps its objects when CCACHE_DIR is
	// not set: in klab's cache, so that they are kept, moved and
	// removed with the builds they speed up.
	ccacheDir string
	log       io.Writer
	prog      *progress
	// steps and compiled count the last run's kbuild steps and, among
	// them, its compilations of C and assembly files.
	steps, compiled int
}

// argv returns the make command for targets.
func (m *makeRun) argv(targets ...string) []string {
	argv := []string{"make", "-C", m.src, "O=" + m.out, "ARCH=" + m.arch, "-j" + strconv.Itoa(m.jobs)}
	if m.ccache {
		argv = append(argv, "CC=ccache gcc")
		if os.Getenv("CCACHE_BASEDIR") == "" {
			// ccache hands gcc the sources as ../src/... (see run);
			// kbuild's own -fmacro-prefix-map names the absolute
			// tree, so this one keeps __FILE__, and with it the file
			// names in WARN and BUG reports, as fs/fuse/dev.c.
			argv = append(argv, "KCPPFLAGS=-fmacro-prefix-map=../src/=")
		}
	}
	return append(argv, targets...)
}

// run runs make for targets, writing everything to the log and feeding
// kbuild's step lines to the progress display.
func (m *makeRun) run(ctx context.Context, logPath string, targets ...string) error {
	argv := m.argv(targets...)
	fmt.Fprintf(m.log, "$ %s\n", strings.Join(argv, " "))
	sink := &lineSink{log: m.log, prog: m.prog}
	env := append(os.Environ(), "LC_ALL=C")
	if m.ccache && os.Getenv("CCACHE_BASEDIR") == "" {
		// kbuild names sources by absolute paths (-I SLOT/src/include)
		// when O= is outside the tree; relative to make's directory
		// (SLOT/out) they read ../src in every work tree, so that work
		// trees of the same source share ccache's results.
		env = append(env, "CCACHE_BASEDIR="+filepath.Dir(filepath.Dir(m.out)))
	}
	if m.ccache && m.ccacheDir != "" && os.Getenv("CCACHE_DIR") == "" {
		env = append(env, "CCACHE_DIR="+m.ccacheDir)
	}
	_, err := proc.Run(ctx, proc.Opts{
		Env:    env,
		Stdout: sink.writer(),
		Stderr: sink.writer(),
	}, argv...)
	sink.flush()
	m.steps, m.compiled = sink.steps, sink.compiled
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		data, _ := os.ReadFile(logPath)
		return &BuildError{Target: strings.Join(targets, " "), Errors: FirstErrors(data, m.src, m.out, 3), Log: logPath, Err: err}
	}
	return nil
}

// lineSink collects the output of make's stdout and stderr line by line.
type lineSink struct {
	mu   sync.Mutex // guards the fields below and each writer's pending line
	log  io.Writer
	prog *progress
	ws   []*lineWriter
	// steps counts kbuild's step lines, compiled those of CC and AS.
	steps, compiled int
}

type lineWriter struct {
	s    *lineSink
	part []byte
}

func (s *lineSink) writer() io.Writer {
	w := &lineWriter{s: s}
	s.ws = append(s.ws, w)
	return w
}

// Write splits p into lines and hands the complete ones to the sink.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		w.s.line(string(w.part[:i]))
		w.part = w.part[i+1:]
	}
	return len(p), nil
}

// line handles one complete line; the caller holds mu.
func (s *lineSink) line(l string) {
	_, _ = io.WriteString(s.log, l+"\n")
	m := stepRe.FindStringSubmatch(l)
	if m == nil {
		return
	}
	s.steps++
	if kind := strings.TrimSuffix(m[1], " [M]"); kind == "CC" || kind == "AS" {
		s.compiled++
	}
	s.prog.step(m[1], m[2])
}

func (s *lineSink) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.ws {
		if len(w.part) > 0 {
			s.line(string(w.part))
			w.part = nil
		}
	}
}

// progress shows how far a build is: a redrawn bar on a terminal, a plain
// line every 10% (or every 30 s when the total is unknown) otherwise.
type progress struct {
	mu      sync.Mutex // guards the fields below
	w       io.Writer
	tty     bool
	label   string
	total   int // estimated steps; 0 when unknown
	done    int
	last    string
	start   time.Time
	drawn   time.Time
	lastPct int
	active  bool
}

// newProgress returns a display writing to w; tty says whether w is a
// terminal.
func newProgress(w io.Writer, tty bool) *progress {
	return &progress{w: w, tty: tty}
}

// begin starts a new phase with an estimated number of steps (0: unknown).
func (p *progress) begin(label string, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.total, p.done, p.last = label, total, 0, ""
	p.start, p.drawn, p.lastPct, p.active = time.Now(), time.Time{}, 0, true
}

// step counts one kbuild step.
func (p *progress) step(kind, what string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.active {
		return
	}
	p.done++
	p.last = kind + " " + what
	now := time.Now()
	if p.tty {
		if now.Sub(p.drawn) >= 100*time.Millisecond {
			p.drawn = now
			p.draw(now)
		}
		return
	}
	if p.total > 0 {
		pct := min(99, p.done*100/p.total)
		if pct/10 > p.lastPct/10 {
			p.lastPct = pct
			fmt.Fprintf(p.w, "%s: %d%% (%d/~%d steps), %s\n", p.label, pct, p.done, p.total, fmtDur(now.Sub(p.start)))
		}
	} else if now.Sub(p.drawn) >= 30*time.Second {
		p.drawn = now
		fmt.Fprintf(p.w, "%s: %d steps, %s\n", p.label, p.done, fmtDur(now.Sub(p.start)))
	}
}

// draw redraws the terminal line; the caller holds mu.
func (p *progress) draw(now time.Time) {
	width := termWidth(p.w)
	el := fmtDur(now.Sub(p.start))
	var head string
	if p.total > 0 {
		pct := min(99, p.done*100/p.total)
		const barW = 24
		fill := pct * barW / 100
		head = fmt.Sprintf("%s [%s%s] %3d%% %s ", p.label, strings.Repeat("=", fill), strings.Repeat(" ", barW-fill), pct, el)
	} else {
		head = fmt.Sprintf("%s: %d steps %s ", p.label, p.done, el)
	}
	line := head + p.last
	if len(line) > width-1 {
		line = line[:max(0, width-1)]
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", line)
}

// end finishes the phase: it clears the bar and prints a summary line.
func (p *progress) end(summary string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.active {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
	p.active = false
	if summary != "" {
		fmt.Fprintln(p.w, summary)
	}
}

// steps is the number of steps counted in the current phase.
func (p *progress) steps() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// termWidth is the width of the terminal behind w, 80 when unknown.
func termWidth(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	return 80
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func fmtDur(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Minute {
		return fmt.Sprintf("%ds", int(d.Seconds()))
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// readLines returns the lines of a file, nil when it cannot be read.
func readLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ls []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ls = append(ls, sc.Text())
	}
	return ls
}
