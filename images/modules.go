package images

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Module is a loadable kernel module file.
type Module struct {
	// Name is the module name with '-' normalised to '_', e.g. "virtio_console".
	Name string
	// Path is the module's file on the host; it may be compressed
	// (.ko.xz, .ko.zst, .ko.gz). ReadModule returns the plain .ko bytes.
	Path string
	// Deps are the modules in the same closure that must be loaded first.
	Deps []string
}

// normModName normalises a module name: modprobe treats '-' and '_' alike.
func normModName(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "-", "_") }

// moduleFileName returns the normalised module name of a module file name,
// or "" when name is not a module file.
func moduleFileName(name string) string {
	for _, suf := range [...]string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if base, ok := strings.CutSuffix(name, suf); ok && base != "" {
			return normModName(base)
		}
	}
	return ""
}

// ModuleClosure returns the modules in want plus everything they depend on
// (the "depends=" and "softdep=pre:" fields of their .modinfo sections), in
// load order: every module comes after its dependencies. Modules built into
// the kernel (named in modulesDir/modules.builtin) are left out. Debian's
// packages ship no modules.dep, so the files are found by walking
// modulesDir (kernel/**, updates/**, ...) for <name>.ko, .ko.xz, .ko.zst
// and .ko.gz. A wanted module or hard dependency that is neither built in
// nor found is an error; a missing soft dependency is skipped.
func ModuleClosure(modulesDir string, want []string) ([]Module, error) {
	if modulesDir == "" {
		if len(want) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("kernel modules %s wanted, but the kernel comes without a modules directory", strings.Join(want, ", "))
	}
	builtin, err := readBuiltin(modulesDir)
	if err != nil {
		return nil, err
	}
	files, err := indexModules(modulesDir)
	if err != nil {
		return nil, err
	}
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var out []Module
	var visit func(name, parent string, soft bool) error
	visit = func(name, parent string, soft bool) error {
		name = normModName(name)
		if name == "" || state[name] != 0 || builtin[name] {
			// Already placed, or on the current path (a dependency
			// cycle: the kernel refuses such modules anyway, so just
			// stop), or built in.
			return nil
		}
		path, ok := files[name]
		if !ok {
			if soft {
				return nil
			}
			if parent == "" {
				return fmt.Errorf("kernel module %q is neither built in nor found in %s", name, modulesDir)
			}
			return fmt.Errorf("kernel module %q (needed by %s) is neither built in nor found in %s", name, parent, modulesDir)
		}
		state[name] = visiting
		hard, pre, err := moduleDeps(path)
		if err != nil {
			return err
		}
		for _, d := range hard {
			if err := visit(d, name, false); err != nil {
				return err
			}
		}
		for _, d := range pre {
			if err := visit(d, name, true); err != nil {
				return err
			}
		}
		state[name] = done
		var deps []string
		for _, d := range append(append([]string(nil), hard...), pre...) {
			d = normModName(d)
			if _, ok := files[d]; ok && !builtin[d] && d != name && !slices.Contains(deps, d) {
				deps = append(deps, d)
			}
		}
		out = append(out, Module{Name: name, Path: path, Deps: deps})
		return nil
	}
	for _, w := range want {
		if err := visit(w, "", false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readBuiltin reads modulesDir/modules.builtin ("kernel/fs/fuse/fuse.ko"
// per line) into a set of normalised names. A missing file means no
// module is known to be built in.
func readBuiltin(modulesDir string) (map[string]bool, error) {
	set := map[string]bool{}
	f, err := os.Open(filepath.Join(modulesDir, "modules.builtin"))
	if errors.Is(err, fs.ErrNotExist) {
		return set, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading built-in modules: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n := moduleFileName(filepath.Base(strings.TrimSpace(sc.Text()))); n != "" {
			set[n] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading built-in modules: %w", err)
	}
	return set, nil
}

// indexModules maps normalised module names to their files under dir. When
// a name occurs twice, a file under updates/ wins (as with depmod), else
// the first in walk order.
func indexModules(dir string) (map[string]string, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("kernel modules: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("kernel modules: %s is not a directory", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "kernel")); err != nil {
		if files, ok := treeModules(dir); ok {
			return files, nil
		}
	}
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		n := moduleFileName(d.Name())
		if n == "" {
			return nil
		}
		old, dup := files[n]
		if !dup || (!inUpdates(dir, old) && inUpdates(dir, p)) {
			files[n] = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kernel modules: %w", err)
	}
	return files, nil
}

// treeModules indexes the modules a kernel tree (or make O= directory)
// built, from its modules.order ("fs/fuse/fuse.o" or ".ko" per line), so
// that a whole source tree is not walked. ok is false when dir has no
// modules.order.
func treeModules(dir string) (files map[string]string, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, "modules.order"))
	if err != nil {
		return nil, false
	}
	files = map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "kernel/")
		if l == "" || strings.Contains(l, "..") || filepath.IsAbs(l) {
			continue
		}
		ko := strings.TrimSuffix(strings.TrimSuffix(l, ".o"), ".ko") + ".ko"
		p := filepath.Join(dir, ko)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			files[moduleFileName(filepath.Base(ko))] = p
		}
	}
	return files, true
}

func inUpdates(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && strings.HasPrefix(rel, "updates"+string(filepath.Separator))
}

// moduleDeps reads a module's .modinfo and returns its hard dependencies
// (depends=) and pre soft dependencies (softdep=pre: ...).
func moduleDeps(path string) (hard, pre []string, err error) {
	info, err := readModinfo(path)
	if err != nil {
		return nil, nil, err
	}
	for _, kv := range info {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "depends":
			for _, d := range strings.Split(v, ",") {
				if d = strings.TrimSpace(d); d != "" {
					hard = append(hard, d)
				}
			}
		case "softdep":
			pre = append(pre, parseSoftdepPre(v)...)
		}
	}
	return hard, pre, nil
}

// parseSoftdepPre returns the "pre:" modules of a softdep value such as
// "pre: crc32c post: foo".
func parseSoftdepPre(v string) []string {
	var pre []string
	inPre := false
	for _, w := range strings.Fields(v) {
		switch {
		case strings.HasSuffix(w, ":"):
			inPre = w == "pre:"
		case inPre:
			pre = append(pre, w)
		}
	}
	return pre
}

// moduleAliases returns the "alias=" fields of a module's .modinfo
// (fs-fuse, char-major-10-229, devname:fuse), without any holding a
// space or a comma (the spare file's separators).
func moduleAliases(path string) ([]string, error) {
	info, err := readModinfo(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, kv := range info {
		if a, ok := strings.CutPrefix(kv, "alias="); ok && a != "" && !strings.ContainsAny(a, " \t\n,") {
			out = append(out, a)
		}
	}
	return out, nil
}

// readModinfo returns the NUL-separated key=value strings of a module's
// .modinfo ELF section.
func readModinfo(path string) ([]string, error) {
	b, err := ReadModule(path)
	if err != nil {
		return nil, err
	}
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: %w", path, err)
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: .modinfo: %w", path, err)
	}
	var out []string
	for _, s := range bytes.Split(data, []byte{0}) {
		if len(s) > 0 {
			out = append(out, string(s))
		}
	}
	return out, nil
}

// ReadModule returns the contents of a kernel module file, decompressed
// according to its suffix (.ko.xz, .ko.zst, .ko.gz; .ko is read as is).
func ReadModule(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("kernel module: %w", err)
	}
	defer f.Close()
	var r io.Reader
	switch {
	case strings.HasSuffix(path, ".xz"):
		xr, err := xz.NewReader(bufio.NewReader(f))
		if err != nil {
			return nil, fmt.Errorf("kernel module %s: xz: %w", path, err)
		}
		r = xr
	case strings.HasSuffix(path, ".zst"):
		zr, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("kernel module %s: zstd: %w", path, err)
		}
		defer zr.Close()
		r = zr
	case strings.HasSuffix(path, ".gz"):
		gr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("kernel module %s: gzip: %w", path, err)
		}
		defer gr.Close()
		r = gr
	default:
		r = f
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("kernel module %s: %w", path, err)
	}
	return b, nil
}
