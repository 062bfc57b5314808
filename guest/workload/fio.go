package workload

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"klab/guest/proto"
)

// MaxFioDoc bounds one fio JSON document (json+ histograms of many jobs
// without group reporting are large, but not this large).
const MaxFioDoc = 64 << 20

// FioOptions tune RunFio.
type FioOptions struct {
	// OnSample receives a sample for each of fio's periodic status
	// reports; nil drops them.
	OnSample func(proto.Sample)
	// Stderr receives fio's stderr, and any text fio prints between its
	// JSON documents; nil discards it.
	Stderr io.Writer
	// Env is fio's environment; nil means the agent's.
	Env []string
}

// FioCommand returns fio's argv for s (program first) and, for a job file,
// the file to write it to (inside tmpDir). It validates s.
func FioCommand(s *proto.FioStep, tmpDir string) (argv []string, jobFile string, err error) {
	set := 0
	for _, b := range []bool{s.JobFile != "", len(s.Args) > 0, s.CommandLine != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		return nil, "", &ParamError{Param: "fio", Msg: fmt.Sprintf("%d of job_file, args and command_line are set, want exactly one", set)}
	}
	if s.SampleMs != 0 && (s.SampleMs < MinSampleMs || s.SampleMs > MaxSampleMs) {
		return nil, "", outOfRange("sample_ms", s.SampleMs, MinSampleMs, MaxSampleMs, false)
	}
	var args []string
	switch {
	case s.CommandLine != "":
		args, err = SplitCommandLine(s.CommandLine)
		if err != nil {
			return nil, "", &ParamError{Param: "command_line", Msg: err.Error()}
		}
		if len(args) > 0 && (args[0] == "fio" || strings.HasSuffix(args[0], "/fio")) {
			args = args[1:]
		}
		if len(args) == 0 {
			return nil, "", &ParamError{Param: "command_line", Msg: "has no fio arguments"}
		}
	case len(s.Args) > 0:
		args = append([]string(nil), s.Args...)
	default:
		jobFile = filepath.Join(tmpDir, "job.fio")
		args = []string{jobFile}
	}
	// The options RunFio sets itself.
	klabOwned := []string{"--output-format", "--output", "--status-interval", "--eta"}
	for _, a := range args {
		for _, own := range klabOwned {
			if a == own || strings.HasPrefix(a, own+"=") {
				return nil, "", &ParamError{Param: "fio", Msg: fmt.Sprintf("%s is set by klab (json+ on stdout, status reports for samples), leave it out", own)}
			}
		}
	}
	ms := s.SampleMs
	if ms == 0 {
		ms = DefaultSampleMs
	}
	bin := s.Binary
	if bin == "" {
		bin = "fio"
	}
	argv = append([]string{bin, "--output-format=json+", "--status-interval=" + strconv.FormatInt(ms, 10) + "ms", "--eta=never"}, args...)
	return argv, jobFile, nil
}

// RunFio runs fio for s, streams a sample per status report, and maps its
// final JSON document into Metrics. A fio that exits non-zero, reports a
// job error, or ran an exec_prerun or exec_postrun that failed as far as
// can be told (see execWatch), returns the metrics it has with an error.
func RunFio(ctx context.Context, s *proto.FioStep, opt FioOptions) (*proto.Metrics, error) {
	tmp, err := os.MkdirTemp("", "klab-fio-")
	if err != nil {
		return nil, fmt.Errorf("fio: %w", err)
	}
	defer os.RemoveAll(tmp)
	argv, jobFile, err := FioCommand(s, tmp)
	if err != nil {
		return nil, err
	}
	if jobFile != "" {
		if err := os.WriteFile(jobFile, []byte(s.JobFile), 0o644); err != nil {
			return nil, fmt.Errorf("fio: write job file: %w", err)
		}
	}
	dir := s.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fio: %w", err)
	}
	for _, d := range s.MakeDirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("fio: make_dirs: %w", err)
		}
	}
	bin, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("fio: %w (boot with fio in the initramfs: a fio step does that, or lab.BootRequest.HostTools)", err)
	}
	stderr := opt.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	var errTail TailBuffer
	stderr = &syncWriter{w: stderr}
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Dir = dir
	cmd.Env = opt.Env
	var ew execWatch
	cmd.Stderr = io.MultiWriter(stderr, &errTail, &ew)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("fio: %w", err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("fio: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	defer stop()

	fs := fioSampler{name: s.Name, start: start, emit: opt.OnSample}
	var last *FioOutput
	var parseErr error
	splitErr := SplitJSONDocs(out, MaxFioDoc, func(doc []byte) {
		o, err := ParseFioOutput(doc)
		if err != nil {
			parseErr = err
			return
		}
		fs.report(o)
		last = o
	}, func(line []byte) {
		_, _ = stderr.Write(append(line, '\n'))
		errTail.Write(append(line, '\n'))
		ew.Line(line)
	})
	if splitErr != nil {
		// Keep draining so that fio does not block on a full pipe.
		_, _ = io.Copy(io.Discard, out)
	}
	waitErr := cmd.Wait()

	var m *proto.Metrics
	if last != nil {
		m = last.Metrics(s.Name)
	}
	switch {
	case ctx.Err() != nil:
		return m, fmt.Errorf("fio: %w", ctx.Err())
	case waitErr != nil:
		return m, fmt.Errorf("fio %s: %w: %s", strings.Join(argv[1:], " "), waitErr, errTail.String())
	case splitErr != nil:
		return m, fmt.Errorf("fio output: %w", splitErr)
	case last == nil && parseErr != nil:
		return nil, parseErr
	case last == nil:
		return nil, fmt.Errorf("fio printed no JSON: %s", errTail.String())
	case m.Errors > 0:
		return m, fmt.Errorf("fio: %d job(s) reported an error: %s", m.Errors, errTail.String())
	}
	if probs := ew.Problems(dir, last, errTail.String()); len(probs) > 0 {
		return m, fmt.Errorf("fio: %s", strings.Join(probs, "; "))
	}
	return m, nil
}

// fioSampler turns fio's cumulative status reports into interval Samples.
type fioSampler struct {
	name  string
	start time.Time
	emit  func(proto.Sample)

	lastNs             int64
	lastOps, lastBytes int64
	lastLat            float64
	seen               bool
}

func (f *fioSampler) report(o *FioOutput) {
	now := int64(time.Since(f.start))
	ops, byt, lat := o.totals()
	if ops < f.lastOps {
		// fio reset its counters when the ramp ended.
		f.lastOps, f.lastBytes, f.lastLat = 0, 0, 0
	}
	dOps, dBytes, dLat, dNs := ops-f.lastOps, byt-f.lastBytes, lat-f.lastLat, now-f.lastNs
	f.lastOps, f.lastBytes, f.lastLat, f.lastNs = ops, byt, lat, now
	if f.emit == nil || dNs <= 0 || (f.seen && dOps == 0 && dNs < int64(10*time.Millisecond)) {
		// The final document follows the last status report at once.
		f.seen = true
		return
	}
	f.seen = true
	name := f.name
	if name == "" && len(o.Jobs) > 0 {
		name = o.Jobs[0].Name
	}
	sec := float64(dNs) / 1e9
	smp := proto.Sample{
		Engine:      proto.EngineFio,
		Name:        name,
		ElapsedMs:   now / int64(time.Millisecond),
		IntervalMs:  dNs / int64(time.Millisecond),
		Ramp:        now <= o.rampNs(),
		Ops:         dOps,
		Bytes:       dBytes,
		OpsPerSec:   float64(dOps) / sec,
		BytesPerSec: float64(dBytes) / sec,
	}
	if dOps > 0 {
		smp.MeanLatNs = int64(dLat / float64(dOps))
	}
	f.emit(smp)
}

// SplitJSONDocs reads r and calls doc for each top-level JSON object that
// starts on a line of its own ("{", as fio prints them), and text for every
// other line. Braces inside JSON strings are handled. A document over max
// bytes is an error.
func SplitJSONDocs(r io.Reader, max int, doc func([]byte), text func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var cur []byte
	depth := 0
	inString, escaped := false, false
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: keep reading it in pieces.
			if depth == 0 {
				rest, err2 := readRestOfLine(br, line)
				if text != nil {
					text(bytes.TrimRight(rest, "\r\n"))
				}
				if err2 != nil {
					return nilIfEOF(err2)
				}
				continue
			}
			err = nil
		}
		if len(line) > 0 {
			if depth == 0 {
				if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '{' {
					cur = cur[:0]
				} else {
					if len(t) > 0 && text != nil {
						text(bytes.TrimRight(line, "\r\n"))
					}
					if err != nil {
						return nilIfEOF(err)
					}
					continue
				}
			}
			for _, c := range line {
				switch {
				case escaped:
					escaped = false
				case inString && c == '\\':
					escaped = true
				case c == '"':
					inString = !inString
				case inString:
				case c == '{':
					depth++
				case c == '}':
					depth--
				}
			}
			cur = append(cur, line...)
			if len(cur) > max {
				return fmt.Errorf("a JSON document is over %d bytes", max)
			}
			if depth <= 0 {
				depth, inString, escaped = 0, false, false
				doc(bytes.Clone(cur))
				cur = cur[:0]
			}
		}
		if err != nil {
			if depth > 0 && errors.Is(err, io.EOF) {
				return fmt.Errorf("output ended inside a JSON document (%d bytes)", len(cur))
			}
			return nilIfEOF(err)
		}
	}
}

func readRestOfLine(br *bufio.Reader, first []byte) ([]byte, error) {
	line := bytes.Clone(first)
	for {
		more, err := br.ReadSlice('\n')
		if len(line) < 64<<10 {
			line = append(line, more...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

func nilIfEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// TailBuffer keeps the last few KiB written to it, for error messages
// about a program (fio, perf). It is safe for concurrent use: a program's
// stderr and its stray stdout lines both land in it.
type TailBuffer struct {
	mu sync.Mutex // guards b
	b  []byte
}

const tailMax = 4 << 10

// Write keeps the tail of p.
func (t *TailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

// String returns the kept tail, trimmed.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// SplitCommandLine splits a command line into words like a POSIX shell,
// without any expansion: single quotes are literal, double quotes allow
// \" \\ \$ and \` escapes, a backslash outside quotes escapes the next
// character, and backslash-newline joins lines.
func SplitCommandLine(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("ends with a backslash")
			}
			i++
			if s[i] == '\n' {
				continue
			}
			w.WriteByte(s[i])
			inWord = true
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
					if s[i] == '\n' {
						continue
					}
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// FioStepFor returns a fio step that runs the same workload as s: FioArgs
// as its arguments, named like s, with s's directory and every job
// directory made first (fio makes job directories itself, except for
// filecreate jobs).
func FioStepFor(s *proto.WorkloadStep) (*proto.FioStep, error) {
	args, err := FioArgs(s)
	if err != nil {
		return nil, err
	}
	n, err := normalize(s)
	if err != nil {
		return nil, err
	}
	f := &proto.FioStep{Name: n.Name, Args: args, Dir: n.Dir, SampleMs: s.SampleMs}
	seen := map[string]bool{}
	for j := 0; j < n.Jobs; j++ {
		d := filepath.Dir(filepath.Join(n.Dir, FileName(n.FilenameFormat, n.Name, j, 0)))
		if !seen[d] {
			seen[d] = true
			f.MakeDirs = append(f.MakeDirs, d)
		}
	}
	return f, nil
}

// FioArgs returns fio arguments (without the program name) that run the
// same workload as s, so that the Go engine can be cross-checked against
// fio: the same job name and files, fio's threads rather than processes
// (the Go jobs are threads), group reporting, norandommap, and explicit
// fallocate, invalidate and fadvise settings. futimes has no fio
// equivalent.
func FioArgs(s *proto.WorkloadStep) ([]string, error) {
	n, err := normalize(s)
	if err != nil {
		return nil, err
	}
	a := []string{
		"--name=" + n.Name,
		"--directory=" + n.Dir,
		"--numjobs=" + strconv.Itoa(n.Jobs),
		"--thread",
		"--group_reporting=1",
		"--filename_format=" + n.FilenameFormat,
	}
	ms := func(v int64) string { return strconv.FormatInt(v, 10) + "ms" }
	if n.RampMs > 0 {
		a = append(a, "--ramp_time="+ms(n.RampMs))
	}
	if n.RuntimeMs > 0 {
		a = append(a, "--runtime="+ms(n.RuntimeMs))
	}
	if n.TimeBased {
		a = append(a, "--time_based=1")
	}
	if needsData(n.Pattern) {
		a = append(a, "--bs="+strconv.FormatInt(n.BlockSize, 10), "--size="+strconv.FormatInt(n.FileSize, 10),
			"--fallocate="+n.Fallocate, "--norandommap=1", "--randrepeat=0")
		if isRead(n.Pattern) && n.NoInvalidate {
			a = append(a, "--invalidate=0")
		}
		if n.OSync {
			a = append(a, "--sync=1")
		}
	}
	switch n.Pattern {
	case proto.PatternSeqWrite:
		a = append(a, "--rw=write", "--ioengine=sync")
	case proto.PatternRandWrite:
		a = append(a, "--rw=randwrite", "--ioengine=psync")
	case proto.PatternFtruncate:
		a = append(a, "--rw=randwrite", "--ioengine=ftruncate")
	case proto.PatternSeqRead:
		a = append(a, "--rw=read", "--ioengine=sync")
	case proto.PatternRandRead:
		a = append(a, "--rw=randread", "--ioengine=psync")
	case proto.PatternDirectSeqRead:
		a = append(a, "--rw=read", "--ioengine=psync", "--direct=1")
	case proto.PatternDirectRandRead:
		a = append(a, "--rw=randread", "--ioengine=psync", "--direct=1")
	case proto.PatternMmapSeqRead:
		a = append(a, "--rw=read", "--ioengine=mmap")
	case proto.PatternMmapRandRead:
		a = append(a, "--rw=randread", "--ioengine=mmap")
	case proto.PatternCreate:
		// One fake 4k I/O per file; the open is the create. No per-file
		// invalidate or fadvise, which the Go engine does not do either.
		// Sequential file service: fio's default round robin scans its
		// file list on every I/O, which makes creates O(files).
		a = append(a, "--rw=write", "--ioengine=filecreate", "--create_on_open=1", "--openfiles=1",
			"--nrfiles="+strconv.Itoa(n.Files), "--filesize=4k", "--bs=4k", "--fallocate=none",
			"--invalidate=0", "--fadvise_hint=0", "--file_service_type=sequential")
	default:
		return nil, &ParamError{Param: "pattern", Msg: fmt.Sprintf("%s has no fio equivalent", n.Pattern)}
	}
	return a, nil
}
