package workload

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"klab/guest/proto"
)

// Parameter bounds. They are wide on purpose: they reject nonsense, not
// unusual experiments.
const (
	// MinBlockSize and MaxBlockSize bound WorkloadStep.BlockSize.
	MinBlockSize = 512
	MaxBlockSize = 64 << 20
	// MaxFileSize bounds WorkloadStep.FileSize.
	MaxFileSize = 1 << 40
	// MaxJobs bounds WorkloadStep.Jobs.
	MaxJobs = 1024
	// MaxFiles bounds WorkloadStep.Files.
	MaxFiles = 10_000_000
	// MaxRampMs bounds WorkloadStep.RampMs (an hour).
	MaxRampMs = 3_600_000
	// MaxRuntimeMs bounds WorkloadStep.RuntimeMs (a day).
	MaxRuntimeMs = 86_400_000
	// MinSampleMs and MaxSampleMs bound the sample interval.
	MinSampleMs = 100
	MaxSampleMs = 60_000
	// DefaultSampleMs is the sample interval when SampleMs is 0.
	DefaultSampleMs = 1000
)

// ParamError is one invalid parameter of a step.
type ParamError struct {
	// Param is the parameter's JSON name ("bs", "jobs", ...).
	Param string
	// Msg says what is wrong and what is allowed.
	Msg string
}

// Error returns "param: msg".
func (e *ParamError) Error() string { return e.Param + ": " + e.Msg }

func outOfRange(param string, v, lo, hi int64, size bool) error {
	f := func(x int64) string { return strconv.FormatInt(x, 10) }
	if size {
		f = FormatSize
	}
	return &ParamError{Param: param, Msg: fmt.Sprintf("%s is out of range, want %s..%s", f(v), f(lo), f(hi))}
}

// FormatSize writes n bytes the way fio options do: the largest binary
// unit (K, M, G, T) that divides n, else plain bytes.
func FormatSize(n int64) string {
	for _, u := range []struct {
		s     string
		shift uint
	}{{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// needsData reports whether the pattern moves data in BlockSize units
// through FileSize-sized files.
func needsData(p proto.Pattern) bool {
	return p != proto.PatternCreate && p != proto.PatternFutimes && p != proto.PatternFstat
}

// isRead reports whether the pattern reads a laid-out file.
func isRead(p proto.Pattern) bool {
	switch p {
	case proto.PatternSeqRead, proto.PatternRandRead, proto.PatternDirectSeqRead,
		proto.PatternDirectRandRead, proto.PatternMmapSeqRead, proto.PatternMmapRandRead:
		return true
	}
	return false
}

// isRandom reports whether the pattern picks random offsets.
func isRandom(p proto.Pattern) bool {
	switch p {
	case proto.PatternRandWrite, proto.PatternFtruncate, proto.PatternRandRead,
		proto.PatternDirectRandRead, proto.PatternMmapRandRead:
		return true
	}
	return false
}

// isDirect reports whether the pattern uses O_DIRECT.
func isDirect(p proto.Pattern) bool {
	return p == proto.PatternDirectSeqRead || p == proto.PatternDirectRandRead
}

// Validate checks every parameter of s and returns all problems joined,
// each a *ParamError, or nil.
func Validate(s *proto.WorkloadStep) error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	known := false
	for _, p := range proto.Patterns() {
		if s.Pattern == p {
			known = true
		}
	}
	if !known {
		var names []string
		for _, p := range proto.Patterns() {
			names = append(names, string(p))
		}
		add(&ParamError{Param: "pattern", Msg: fmt.Sprintf("%q is not a pattern, want one of %s", s.Pattern, strings.Join(names, ", "))})
	}
	if s.Dir == "" {
		add(&ParamError{Param: "dir", Msg: "is empty, want the directory the job files go in"})
	} else if !filepath.IsAbs(s.Dir) {
		add(&ParamError{Param: "dir", Msg: fmt.Sprintf("%q is relative, want an absolute path", s.Dir)})
	}
	if s.Jobs < 1 || s.Jobs > MaxJobs {
		add(outOfRange("jobs", int64(s.Jobs), 1, MaxJobs, false))
	}
	if known && needsData(s.Pattern) {
		bsOK := true
		if s.BlockSize < MinBlockSize || s.BlockSize > MaxBlockSize {
			add(outOfRange("bs", s.BlockSize, MinBlockSize, MaxBlockSize, true))
			bsOK = false
		} else if isDirect(s.Pattern) && s.BlockSize%512 != 0 {
			add(&ParamError{Param: "bs", Msg: fmt.Sprintf("%s is not a multiple of 512, which O_DIRECT needs", FormatSize(s.BlockSize))})
		}
		lo := int64(MinBlockSize)
		if bsOK {
			lo = s.BlockSize
		}
		if s.FileSize < lo || s.FileSize > MaxFileSize {
			add(outOfRange("size", s.FileSize, lo, MaxFileSize, true))
		}
	} else if known {
		if s.BlockSize != 0 {
			add(&ParamError{Param: "bs", Msg: fmt.Sprintf("is set but %s does not use it", s.Pattern)})
		}
		if s.FileSize != 0 {
			add(&ParamError{Param: "size", Msg: fmt.Sprintf("is set but %s does not use it", s.Pattern)})
		}
	}
	if s.Pattern == proto.PatternCreate {
		if s.Files < 1 || s.Files > MaxFiles {
			add(outOfRange("files", int64(s.Files), 1, MaxFiles, false))
		}
		if s.TimeBased {
			add(&ParamError{Param: "time_based", Msg: "is not supported for create, which makes a fixed number of files per job"})
		}
	} else if known && s.Files != 0 {
		add(&ParamError{Param: "files", Msg: fmt.Sprintf("is set but only create uses it, not %s", s.Pattern)})
	}
	switch s.Fallocate {
	case "", proto.FallocateNone, proto.FallocateNative, proto.FallocatePosix, proto.FallocateKeep, proto.FallocateTruncate:
	default:
		add(&ParamError{Param: "fallocate", Msg: fmt.Sprintf("%q is not a mode, want none, native, posix, keep or truncate", s.Fallocate)})
	}
	if s.RampMs < 0 || s.RampMs > MaxRampMs {
		add(outOfRange("ramp_ms", s.RampMs, 0, MaxRampMs, false))
	}
	if s.RuntimeMs < 0 || s.RuntimeMs > MaxRuntimeMs {
		add(outOfRange("runtime_ms", s.RuntimeMs, 0, MaxRuntimeMs, false))
	}
	if s.TimeBased && s.RuntimeMs == 0 {
		add(&ParamError{Param: "runtime_ms", Msg: "is 0 but time_based needs a runtime"})
	}
	if (s.Pattern == proto.PatternFutimes || s.Pattern == proto.PatternFstat) && s.RuntimeMs == 0 {
		add(&ParamError{Param: "runtime_ms", Msg: fmt.Sprintf("is 0 but %s runs until its runtime is over", s.Pattern)})
	}
	if s.SampleMs != 0 && (s.SampleMs < MinSampleMs || s.SampleMs > MaxSampleMs) {
		add(outOfRange("sample_ms", s.SampleMs, MinSampleMs, MaxSampleMs, false))
	}
	if s.FilenameFormat != "" {
		if err := checkFilenameFormat(s.FilenameFormat, s.Pattern, s.Jobs); err != nil {
			add(err)
		}
	}
	if s.Name != "" && strings.ContainsAny(s.Name, "/\x00") {
		add(&ParamError{Param: "name", Msg: fmt.Sprintf("%q has a slash or NUL, want a plain job name", s.Name)})
	}
	return errors.Join(errs...)
}

// checkFilenameFormat rejects formats that escape Dir or that would give
// two jobs the same file.
func checkFilenameFormat(f string, p proto.Pattern, jobs int) error {
	clean := filepath.Clean(f)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return &ParamError{Param: "filename_format", Msg: fmt.Sprintf("%q leaves dir, want a relative path below it", f)}
	}
	if jobs > 1 && !strings.Contains(f, "$jobnum") {
		return &ParamError{Param: "filename_format", Msg: fmt.Sprintf("%q has no $jobnum, so %d jobs would share one file", f, jobs)}
	}
	if p == proto.PatternCreate && !strings.Contains(filepath.Base(f), "$filenum") {
		return &ParamError{Param: "filename_format", Msg: fmt.Sprintf("%q has no $filenum in its file name, want one name per create", f)}
	}
	if p == proto.PatternCreate && strings.Contains(filepath.Dir(f), "$filenum") {
		return &ParamError{Param: "filename_format", Msg: fmt.Sprintf("%q has $filenum in a directory, want it in the file name only", f)}
	}
	return nil
}

// FileName expands a fio filename_format for one file.
func FileName(format, jobname string, jobnum, filenum int) string {
	r := strings.NewReplacer("$jobname", jobname, "$jobnum", strconv.Itoa(jobnum), "$filenum", strconv.Itoa(filenum))
	return r.Replace(format)
}

// normalized is a validated step with its defaults filled in.
type normalized struct {
	proto.WorkloadStep
}

// normalize validates s and fills in the defaults.
func normalize(s *proto.WorkloadStep) (*normalized, error) {
	if err := Validate(s); err != nil {
		return nil, err
	}
	n := &normalized{WorkloadStep: *s}
	if n.Name == "" {
		n.Name = string(n.Pattern)
	}
	if n.Fallocate == "" {
		n.Fallocate = proto.FallocateNone
	}
	if n.SampleMs == 0 {
		n.SampleMs = DefaultSampleMs
	}
	if n.FilenameFormat == "" {
		n.FilenameFormat = defaultFilenameFormat(n.Pattern)
	}
	return n, nil
}

func defaultFilenameFormat(p proto.Pattern) string {
	if p == proto.PatternCreate {
		return "$jobnum/f.$filenum"
	}
	return "$jobname.$jobnum.$filenum"
}
