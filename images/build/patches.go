package build

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Patch is one patch of a series: a whole file, or one message of an mbox.
type Patch struct {
	// Path names the patch for people: the file as given, with "#n" for
	// the n-th message of an mbox that holds several patches.
	Path string
	// File is the file the patch came from.
	File string
	// Subject is the mail subject ("[PATCH 2/3] fuse: ..."), or for a
	// plain diff its first line of description, else the file name.
	Subject string
	// Data is the patch: one mail message, or a plain diff.
	Data []byte
	// SHA256 is the hex SHA-256 of Data.
	SHA256 string
	// Mail is true when Data has mail headers, so git am can take it.
	Mail bool
	// Files are the tree-relative paths the patch touches (old and new
	// names), sorted.
	Files []string
	// Hunks are the patch's hunks, in order.
	Hunks []Hunk
}

// Hunk is one "@@ -a,b +c,d @@" section of a diff.
type Hunk struct {
	// File is the tree-relative path the hunk changes (the old name).
	File string
	// N is the hunk's number within its file, from 1, as patch(1) counts.
	N int
	// OldStart is the first line of the hunk in the original file.
	OldStart int
	// Header is the "@@ ... @@ context" line.
	Header string
}

// Series is a loaded patch series.
type Series struct {
	// Patches are the patches to apply, in order.
	Patches []Patch
	// Skipped lists messages that hold no diff (cover letters, replies),
	// as "file#n: subject".
	Skipped []string
}

// patchExts are the file name endings read from a directory of patches.
var patchExts = []string{".patch", ".diff", ".mbox", ".mbx", ".eml"}

// LoadPatches reads the patches that paths name, in order. Each path is a
// patch file (git format-patch output or a plain diff), an mbox holding a
// series (as b4 writes it; messages without a diff, such as the cover
// letter, are skipped), or a directory: its quilt "series" file when it
// has one, else its *.patch, *.diff, *.mbox, *.mbx and *.eml files in name
// order. Every problem is reported, not just the first.
func LoadPatches(paths []string) (*Series, error) {
	s := &Series{}
	var errs []error
	for _, p := range paths {
		files, err := expandPatchPath(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			if err := s.addFile(f); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// expandPatchPath turns a path into the patch files it names.
func expandPatchPath(p string) ([]string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", p, err)
	}
	if !fi.IsDir() {
		return []string{p}, nil
	}
	if data, err := os.ReadFile(filepath.Join(p, "series")); err == nil {
		var files []string
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' {
				continue
			}
			name := strings.Fields(line)[0] // options such as -p1 may follow
			if filepath.IsAbs(name) || strings.HasPrefix(filepath.Clean(name), "..") {
				return nil, fmt.Errorf("%s:%d: %q: want a file name inside %s", filepath.Join(p, "series"), i+1, name, p)
			}
			files = append(files, filepath.Join(p, name))
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s names no patches", filepath.Join(p, "series"))
		}
		return files, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("patch directory %s: %w", p, err)
	}
	des, err := os.ReadDir(p)
	if err != nil {
		return nil, fmt.Errorf("patch directory %s: %w", p, err)
	}
	var files []string
	for _, de := range des {
		if de.Type().IsRegular() && hasPatchExt(de.Name()) {
			files = append(files, filepath.Join(p, de.Name()))
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("patch directory %s holds no patches: want %s files or a quilt series file",
			p, strings.Join(patchExts, ", "))
	}
	return files, nil
}

func hasPatchExt(name string) bool {
	for _, e := range patchExts {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}

// addFile reads one patch file or mbox into s.
func (s *Series) addFile(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("patch %s: %w", file, err)
	}
	msgs := SplitMbox(data)
	var patches []Patch
	for i, m := range msgs {
		p := newPatch(file, m)
		if len(msgs) > 1 {
			p.Path = fmt.Sprintf("%s#%d", file, i+1)
		}
		if !hasDiff(m) {
			s.Skipped = append(s.Skipped, p.Path+": "+p.Subject)
			continue
		}
		patches = append(patches, p)
	}
	if len(patches) == 0 {
		if len(msgs) > 1 {
			return fmt.Errorf("patch %s: none of its %d messages holds a diff", file, len(msgs))
		}
		return fmt.Errorf("patch %s holds no diff: want git format-patch output, an mbox of patches or a unified diff", file)
	}
	sortBySeriesNumber(patches)
	s.Patches = append(s.Patches, patches...)
	return nil
}

func newPatch(file string, data []byte) Patch {
	sum := sha256.Sum256(data)
	p := Patch{Path: file, File: file, Data: data, SHA256: hex.EncodeToString(sum[:])}
	hdr := parseHeaders(data)
	if subj, ok := hdr["subject"]; ok {
		p.Mail = hdr["from"] != ""
		p.Subject = subj
	}
	if p.Subject == "" {
		p.Subject = plainSubject(data)
	}
	if p.Subject == "" {
		p.Subject = filepath.Base(file)
	}
	p.Files, p.Hunks = ParseDiff(data)
	return p
}

// mboxFromRe matches the "From " line that starts each message of an mbox:
// "From <sender or commit> <asctime date>", as git format-patch, b4 and
// mail clients write it.
var mboxFromRe = regexp.MustCompile(`^From \S+ +(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} \d{1,2}:\d\d(:\d\d)? .*\d{4}\s*$`)

// SplitMbox splits data into its mail messages at mbox "From " lines that
// start the data or follow an empty line. Data that is not an mbox comes
// back as one message. The "From " lines are kept.
func SplitMbox(data []byte) [][]byte {
	var msgs [][]byte
	start := 0
	prevEmpty := true
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			next = off + end + 1
		}
		line := strings.TrimRight(string(data[off:next]), "\r\n")
		if prevEmpty && off > start && mboxFromRe.MatchString(line) {
			msgs = append(msgs, data[start:off])
			start = off
		}
		prevEmpty = line == ""
		off = next
	}
	return append(msgs, data[start:])
}

// parseHeaders reads the mail headers at the start of a message (after an
// optional mbox "From " line) and returns them by lower-case name, with
// folded lines joined. A message that does not start with headers gives
// an empty map.
func parseHeaders(msg []byte) map[string]string {
	h := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(msg))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	first, last := true, ""
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if first && strings.HasPrefix(line, "From ") {
			first = false
			continue
		}
		first = false
		if line == "" {
			break
		}
		if (line[0] == ' ' || line[0] == '\t') && last != "" {
			h[last] += " " + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.ContainsAny(k, " \t") {
			return map[string]string{} // not a header block
		}
		last = strings.ToLower(k)
		if _, seen := h[last]; !seen {
			h[last] = strings.TrimSpace(v)
		}
	}
	return h
}

// plainSubject is the first line of a plain diff's description, if it
// has one before the diff.
func plainSubject(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "diff "), strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "Index: "),
			strings.HasPrefix(line, "==="):
			return ""
		}
		return line
	}
	return ""
}

// hasDiff reports whether a message holds a diff.
func hasDiff(msg []byte) bool {
	files, hunks := ParseDiff(msg)
	return len(files) > 0 && (len(hunks) > 0 || bytes.Contains(msg, []byte("\ndiff --git ")))
}

// seriesNumRe matches "[PATCH v2 3/7]", "[RFC PATCH 03/10]" and the like.
var seriesNumRe = regexp.MustCompile(`\[[^\]]*?\b0*(\d+)/(\d+)\s*\]`)

// sortBySeriesNumber orders the patches of one mbox by their n/m number
// when every one has a number with the same m; otherwise it keeps the
// file's order.
func sortBySeriesNumber(ps []Patch) {
	nums := make([]int, len(ps))
	total := ""
	for i, p := range ps {
		m := seriesNumRe.FindStringSubmatch(p.Subject)
		if m == nil || (total != "" && m[2] != total) {
			return
		}
		total = m[2]
		nums[i], _ = strconv.Atoi(m[1])
	}
	idx := make([]int, len(ps))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return nums[idx[a]] < nums[idx[b]] })
	sorted := make([]Patch, len(ps))
	for i, j := range idx {
		sorted[i] = ps[j]
	}
	copy(ps, sorted)
}

// hunkRe matches a unified diff hunk header.
var hunkRe = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// ParseDiff returns the tree-relative files a diff touches (old and new
// names of every file, without the a/ and b/ prefixes, /dev/null left
// out) and its hunks. Hunk bodies are skipped by their line counts, so
// lines inside them are never taken for headers.
func ParseDiff(data []byte) (files []string, hunks []Hunk) {
	seen := map[string]bool{}
	add := func(f string) {
		if f != "" && f != "/dev/null" && !seen[f] {
			seen[f] = true
			files = append(files, f)
		}
	}
	lines := strings.Split(string(data), "\n")
	cur := "" // the old name of the file being patched
	perFile := map[string]int{}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\r")
		switch {
		case strings.HasPrefix(line, "diff --git "):
			a, b := splitGitDiffNames(line[len("diff --git "):])
			add(a)
			add(b)
			cur = a
		case strings.HasPrefix(line, "rename from "), strings.HasPrefix(line, "copy from "):
			_, f, _ := strings.Cut(line, " from ")
			add(unquote(f))
		case strings.HasPrefix(line, "rename to "), strings.HasPrefix(line, "copy to "):
			_, f, _ := strings.Cut(line, " to ")
			add(unquote(f))
		case strings.HasPrefix(line, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ "):
			old := stripPrefix(diffName(line[4:]))
			nw := stripPrefix(diffName(strings.TrimRight(lines[i+1], "\r")[4:]))
			add(old)
			add(nw)
			cur = old
			if cur == "/dev/null" {
				cur = nw
			}
			i++
		case hunkRe.MatchString(line):
			m := hunkRe.FindStringSubmatch(line)
			oldStart, _ := strconv.Atoi(m[1])
			oldN, newN := 1, 1
			if m[2] != "" {
				oldN, _ = strconv.Atoi(m[2])
			}
			if m[4] != "" {
				newN, _ = strconv.Atoi(m[4])
			}
			perFile[cur]++
			hunks = append(hunks, Hunk{File: cur, N: perFile[cur], OldStart: oldStart, Header: line})
			// Skip the body: context and removed lines count against
			// the old side, context and added lines against the new.
			for i+1 < len(lines) && (oldN > 0 || newN > 0) {
				body := lines[i+1]
				if body == "" || body == "\r" {
					body = " " // an empty context line whose space was lost
				}
				switch body[0] {
				case ' ':
					oldN--
					newN--
				case '-':
					oldN--
				case '+':
					newN--
				case '\\': // "\ No newline at end of file"
				default:
					oldN, newN = 0, 0
					continue
				}
				i++
			}
		}
	}
	sort.Strings(files)
	return files, hunks
}

// splitGitDiffNames splits the "a/x b/y" part of a "diff --git" line.
func splitGitDiffNames(s string) (string, string) {
	s = strings.TrimRight(s, "\r")
	if strings.HasPrefix(s, `"`) {
		if end := closingQuote(s); end > 0 {
			a := unquote(s[:end+1])
			return stripPrefix(a), stripPrefix(unquote(strings.TrimSpace(s[end+1:])))
		}
	}
	// Unquoted names hold no spaces in practice; when they do, both halves
	// are the same path, so split in the middle at " b/".
	if i := strings.Index(s, " b/"); i >= 0 {
		return stripPrefix(s[:i]), stripPrefix(s[i+1:])
	}
	if a, b, ok := strings.Cut(s, " "); ok {
		return stripPrefix(a), stripPrefix(unquote(b))
	}
	return stripPrefix(s), ""
}

func closingQuote(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// diffName is the path of a ---/+++ line, without the timestamp that
// diff(1) appends after a tab.
func diffName(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	return unquote(strings.TrimSpace(s))
}

// unquote undoes git's C-style quoting of unusual paths.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// stripPrefix removes the first path component (patch -p1): "a/fs/x.c"
// becomes "fs/x.c". /dev/null stays.
func stripPrefix(p string) string {
	if p == "/dev/null" || p == "" {
		return p
	}
	if _, rest, ok := strings.Cut(p, "/"); ok {
		return rest
	}
	return p
}
