package images

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/u-root/mkuimage/cpio"
)

// ExtraFile is a host file copied into the initramfs overlay.
type ExtraFile struct {
	// Source is the file on the host. Symlinks are followed: the guest
	// gets the content.
	Source string `json:"source"`
	// Dest is where it goes in the guest, absolute or relative to the
	// root ("/usr/bin/fio").
	Dest string `json:"dest"`
	// Mode is the guest file's permission bits; 0 means the source's.
	Mode os.FileMode `json:"mode,omitempty"`
}

// cpioName returns Dest as a clean archive path without a leading slash.
func (e ExtraFile) cpioName() (string, error) {
	p := strings.TrimPrefix(filepath.Clean("/"+e.Dest), "/")
	if p == "" || p == "." {
		return "", fmt.Errorf("extra file %s: empty destination", e.Source)
	}
	return p, nil
}

// LibSearch says where HostProgram looks for shared libraries, after the
// object's own DT_RPATH/DT_RUNPATH. The zero value means the host's
// dynamic loader defaults: the directories of /etc/ld.so.conf, then
// DefaultLibDirs().
type LibSearch struct {
	// Dirs replaces the search path when not empty.
	Dirs []string
	// Root, when set, is prefixed to every path looked at (a sysroot).
	Root string
}

// DefaultLibDirs returns the x86-64 Debian loader's built-in directories.
func DefaultLibDirs() []string {
	return []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
}

// HostProgram returns the files a dynamically linked host program needs in
// the guest: the program itself (at /usr/bin/<name>), its ELF interpreter,
// and the closure of its DT_NEEDED libraries, resolved as ld.so resolves
// them (DT_RPATH, DT_RUNPATH with $ORIGIN, then s's directories), each at
// the path where it was found, so that the guest's loader finds it there
// too. name is a command in PATH (or /usr/sbin, /sbin) or a path. A
// static program gives just itself. The result is sorted by Dest.
func HostProgram(name string, s LibSearch) ([]ExtraFile, error) {
	path, err := lookHostProgram(name)
	if err != nil {
		return nil, fmt.Errorf("host program %s: %w", name, err)
	}
	path, err = filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("host program %s: %w", name, err)
	}
	dirs := s.Dirs
	if len(dirs) == 0 {
		dirs = append(ldSoConfDirs(s.Root, "/etc/ld.so.conf"), DefaultLibDirs()...)
	}
	c := closure{root: s.Root, dirs: dirs, seen: map[string]bool{}}
	files := []ExtraFile{{Source: path, Dest: "/usr/bin/" + filepath.Base(path)}}
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("host program %s: %w", path, err)
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("host program %s: %s %s, want an x86-64 binary", path, f.Class, f.Machine)
	}
	interp, err := interpreter(f)
	if err != nil {
		return nil, fmt.Errorf("host program %s: %w", path, err)
	}
	if interp == "" {
		return files, nil // static
	}
	files = append(files, ExtraFile{Source: c.host(interp), Dest: interp})
	c.seen[interp] = true
	if err := c.walk(f, path); err != nil {
		return nil, fmt.Errorf("host program %s: %w", path, err)
	}
	files = append(files, c.files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Dest < files[j].Dest })
	return files, nil
}

// lookHostProgram finds name in PATH, then in the sbin directories that a
// user's PATH often lacks (mke2fs is /usr/sbin/mke2fs).
func lookHostProgram(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err == nil || strings.Contains(name, "/") {
		return p, err
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		if p, err2 := exec.LookPath(filepath.Join(d, name)); err2 == nil {
			return p, nil
		}
	}
	return "", err
}

// closure collects the libraries an ELF object needs.
type closure struct {
	root  string
	dirs  []string
	seen  map[string]bool // guest paths already added
	files []ExtraFile
}

// host maps a guest path to the host file, under root.
func (c *closure) host(p string) string {
	if c.root == "" {
		return p
	}
	return filepath.Join(c.root, p)
}

// walk adds the libraries f (found at path) needs, and theirs.
func (c *closure) walk(f *elf.File, path string) error {
	needed, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: DT_NEEDED: %w", path, err)
	}
	runpath, _ := f.DynString(elf.DT_RUNPATH)
	rpath, _ := f.DynString(elf.DT_RPATH)
	var own []string
	if len(runpath) == 0 {
		own = append(own, splitPath(rpath, path)...)
	}
	own = append(own, splitPath(runpath, path)...)
	var missing []string
	for _, lib := range needed {
		p, lf := c.find(lib, own)
		if p == "" {
			missing = append(missing, lib)
			continue
		}
		if c.seen[p] {
			lf.Close()
			continue
		}
		c.seen[p] = true
		c.files = append(c.files, ExtraFile{Source: c.host(p), Dest: p})
		err := c.walk(lf, p)
		lf.Close()
		if err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s needs %s, not found in %s", path, strings.Join(missing, ", "), strings.Join(append(own, c.dirs...), ":"))
	}
	return nil
}

// find looks for lib in the object's own directories, then c.dirs, and
// returns the first x86-64 ELF shared object with its opened file.
func (c *closure) find(lib string, own []string) (string, *elf.File) {
	if strings.Contains(lib, "/") {
		if f, err := elf.Open(c.host(lib)); err == nil {
			return lib, f
		}
		return "", nil
	}
	for _, d := range append(append([]string(nil), own...), c.dirs...) {
		p := filepath.Join(d, lib)
		f, err := elf.Open(c.host(p))
		if err != nil {
			continue
		}
		if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 {
			f.Close()
			continue
		}
		return p, f
	}
	return "", nil
}

// splitPath splits a DT_RPATH/DT_RUNPATH value, expanding $ORIGIN to the
// object's directory.
func splitPath(vals []string, object string) []string {
	var out []string
	origin := filepath.Dir(object)
	for _, v := range vals {
		for _, d := range strings.Split(v, ":") {
			if d == "" {
				continue
			}
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
			out = append(out, d)
		}
	}
	return out
}

// interpreter returns the PT_INTERP path of f, empty for a static binary.
func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("PT_INTERP: %w", err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", nil
}

// ldSoConfDirs returns the directories an ld.so.conf file lists, following
// its include lines. Missing files give nothing.
func ldSoConfDirs(root, conf string) []string {
	var dirs []string
	var read func(p string, depth int)
	read = func(p string, depth int) {
		if depth > 8 {
			return
		}
		fh, err := os.Open(filepath.Join(root, p))
		if err != nil {
			return
		}
		defer fh.Close()
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			if inc, ok := strings.CutPrefix(line, "include"); ok && (strings.HasPrefix(inc, " ") || strings.HasPrefix(inc, "\t")) {
				pat := strings.TrimSpace(inc)
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(filepath.Dir(p), pat)
				}
				matches, _ := filepath.Glob(filepath.Join(root, pat))
				sort.Strings(matches)
				for _, m := range matches {
					rel, _ := filepath.Rel(filepath.Join(root, "/"), m)
					read("/"+rel, depth+1)
				}
				continue
			}
			dirs = append(dirs, line)
		}
	}
	read(conf, 0)
	return dirs
}

// HostPrograms returns HostProgram's files for each name, merged and
// without duplicates.
func HostPrograms(names []string, s LibSearch) ([]ExtraFile, error) {
	var all []ExtraFile
	seen := map[string]bool{}
	var errs []error
	for _, n := range names {
		files, err := HostProgram(n, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, f := range files {
			if !seen[f.Dest] {
				seen[f.Dest] = true
				all = append(all, f)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Dest < all[j].Dest })
	return all, nil
}

// extraRecords reads the extra files into cpio records.
func extraRecords(extra []ExtraFile) ([]cpio.Record, error) {
	var recs []cpio.Record
	for _, e := range extra {
		name, err := e.cpioName()
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(e.Source)
		if err != nil {
			return nil, fmt.Errorf("extra file: %w", err)
		}
		mode := e.Mode.Perm()
		if mode == 0 {
			fi, err := os.Stat(e.Source)
			if err != nil {
				return nil, fmt.Errorf("extra file: %w", err)
			}
			mode = fi.Mode().Perm()
		}
		recs = append(recs, cpio.StaticFile(name, string(b), uint64(mode)))
	}
	return recs, nil
}
