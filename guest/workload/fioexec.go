package workload

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// fio runs a job's exec_prerun and exec_postrun commands with system(3),
// as "CMD > JOB.MODE.txt 2>&1" in its working directory, after printing
// "JOB : Saving output of MODE in JOB.MODE.txt". It passes on neither
// command's exit status: a postrun that fails changes nothing, and a
// prerun that exits non-zero ends its job before any I/O, with error 0
// and fio's exit status 0. Only a system(3) that cannot fork is printed
// ("fio: exec of cmd <...> failed"). A shell that cannot run at all (a
// /bin/sh that does not take -c) complains on fio's stderr, and the
// redirection, which that shell would have made, never happens.
//
// execWatch reads fio's text output for these lines, and its problems
// are what can be told afterwards: a command fio could not start, an
// output file the shell never created (the shell did not run), and a
// job with a prerun that did no I/O (the prerun failed).
type execWatch struct {
	mu      sync.Mutex // guards the fields below
	runs    []execRun
	failed  []string
	partial []byte
}

// execRun is one announced exec_prerun or exec_postrun.
type execRun struct {
	job, mode, file string
}

// Bounds on what execWatch keeps of fio's output.
const (
	maxExecRuns   = 256
	maxExecLine   = 4 << 10
	maxExecDetail = 300
)

var (
	execSavingRe = regexp.MustCompile(`^(.*\S) : Saving output of (prerun|postrun) in (\S.*)$`)
	execFailedRe = regexp.MustCompile(`^fio: exec of cmd <(.*)> failed$`)
	execModeRe   = regexp.MustCompile(`\.(prerun|postrun)\.txt( 2>&1)?$`)
)

// Line reads one line of fio's output (without its newline).
func (w *execWatch) Line(line []byte) {
	s := strings.TrimRight(string(line), "\r\n")
	w.mu.Lock()
	defer w.mu.Unlock()
	if m := execSavingRe.FindStringSubmatch(s); m != nil {
		r := execRun{job: m[1], mode: m[2], file: m[3]}
		for _, o := range w.runs {
			if o == r {
				return // numjobs clones share a name and a file
			}
		}
		if len(w.runs) < maxExecRuns {
			w.runs = append(w.runs, r)
		}
		return
	}
	if m := execFailedRe.FindStringSubmatch(s); m != nil && len(w.failed) < maxExecRuns {
		w.failed = append(w.failed, m[1])
	}
}

// Write reads fio's stderr, line by line.
func (w *execWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	buf := append(w.partial, p...)
	w.partial = nil
	w.mu.Unlock()
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		w.Line(buf[:i])
		buf = buf[i+1:]
	}
	w.mu.Lock()
	if len(buf) > maxExecLine {
		buf = buf[len(buf)-maxExecLine:]
	}
	w.partial = append([]byte(nil), buf...)
	w.mu.Unlock()
	return len(p), nil
}

// Problems are the exec commands of fio's run in dir that failed, as far
// as can be told: o is fio's last document (nil when none), stderr the
// tail of its stderr, quoted in the problems when the shell did not run.
func (w *execWatch) Problems(dir string, o *FioOutput, stderr string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, cmd := range w.failed {
		mode := "exec command"
		if m := execModeRe.FindStringSubmatch(cmd); m != nil {
			mode = "exec_" + m[1]
		}
		out = append(out, fmt.Sprintf("fio could not run %s <%s>", mode, bounded(cmd)))
	}
	for _, r := range w.runs {
		p := r.file
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			msg := fmt.Sprintf("exec_%s of job %s did not run: the shell never created its output file %s", r.mode, bounded(r.job), bounded(r.file))
			if s := lastLines(stderr); s != "" {
				msg += " (fio's stderr: " + s + ")"
			}
			out = append(out, msg)
			continue
		}
		if r.mode == "prerun" && o != nil && o.noIO(r.job) {
			msg := fmt.Sprintf("exec_prerun of job %s failed: fio ends a job whose exec_prerun exits non-zero, and the job did no I/O", bounded(r.job))
			if s := fileTail(p); s != "" {
				msg += " (" + bounded(r.file) + ": " + s + ")"
			}
			out = append(out, msg)
		}
	}
	return out
}

// noIO reports whether o has jobs named job and none of them did I/O.
func (o *FioOutput) noIO(job string) bool {
	found := false
	for i := range o.Jobs {
		j := &o.Jobs[i]
		if j.Name != job {
			continue
		}
		found = true
		for _, d := range j.dirs() {
			if d.TotalIOs > 0 || d.IOBytes > 0 {
				return false
			}
		}
	}
	return found
}

// bounded is s cut to maxExecDetail bytes.
func bounded(s string) string {
	if len(s) > maxExecDetail {
		return strings.ToValidUTF8(s[:maxExecDetail], "") + "..."
	}
	return s
}

// lastLines is the end of s, on one line, at most maxExecDetail bytes.
func lastLines(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxExecDetail {
		s = "..." + strings.ToValidUTF8(s[len(s)-maxExecDetail:], "")
	}
	return s
}

// fileTail is the end of file p, on one line ("" when unreadable).
func fileTail(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, maxExecDetail)
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return ""
	}
	off := max(st.Size()-int64(len(buf)), 0)
	n, _ := f.ReadAt(buf, off)
	return lastLines(string(buf[:n]))
}
