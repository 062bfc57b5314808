package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Spare modules are in the initramfs but not loaded at boot (ModulesDir/
// spare lists them): the agent loads one when a step needs it
// (EnsureModule), and the kernel asks for one when a program needs it, by
// running its modprobe helper, which in a klab guest is the agent
// (ModprobeMain) whenever a spare module has a device node (fuse's
// /dev/fuse). A program that opens /dev/fuse thus loads fuse as on any
// distribution, and a run that never uses FUSE does not wait for it.

// ModprobePath is where Setup links the agent as the kernel's modprobe
// helper (the kernel's default path, set in kernel.modprobe as well).
const ModprobePath = "/sbin/modprobe"

// SpareModule is one line of ModulesDir/spare.
type SpareModule struct {
	// Name is the module's name.
	Name string
	// File is its .ko file in the modules directory.
	File string
	// Aliases are its modinfo aliases ("fs-fuse", "char-major-10-229",
	// "devname:fuse"), some of them shell patterns.
	Aliases []string
}

// ParseSpare parses a spare file: one module per line, "name file.ko
// alias,alias|-". Blank lines and lines starting with '#' are skipped.
func ParseSpare(r io.Reader) ([]SpareModule, error) {
	var out []SpareModule
	err := moduleLines(r, "spare modules", `"name file.ko alias,alias|-"`, 3, 3, func(f []string) {
		out = append(out, SpareModule{Name: f[0], File: f[1], Aliases: commaList(f[2])})
	})
	return out, err
}

// ReadSpare reads dir/spare; a missing file means no spare modules.
func ReadSpare(dir string) ([]SpareModule, error) {
	f, err := os.Open(filepath.Join(dir, "spare"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseSpare(f)
}

// FindSpare returns the spare module that name names: by its module name
// ('-' and '_' alike, as modprobe has them) or by one of its aliases.
func FindSpare(spares []SpareModule, name string) (SpareModule, bool) {
	norm := strings.ReplaceAll(name, "-", "_")
	for _, m := range spares {
		if strings.ReplaceAll(m.Name, "-", "_") == norm {
			return m, true
		}
	}
	for _, m := range spares {
		for _, a := range m.Aliases {
			if ok, _ := path.Match(a, name); ok || a == name {
				return m, true
			}
		}
	}
	return SpareModule{}, false
}

// EnsureModule loads the spare module name from dir unless the kernel has
// it already (/sys/module/NAME: built in or loaded). A name that is no
// spare module is left to the kernel: nil, and whatever needs it fails
// with its own error.
func EnsureModule(dir, name string) error {
	if _, err := os.Stat(filepath.Join("/sys/module", name)); err == nil {
		return nil
	}
	spares, err := ReadSpare(dir)
	if err != nil {
		return err
	}
	m, ok := FindSpare(spares, name)
	if !ok {
		return nil
	}
	return loadSpare(dir, m, "")
}

func loadSpare(dir string, m SpareModule, params string) error {
	if strings.Contains(m.File, "/") || m.File == ".." || m.File == "." {
		return fmt.Errorf("bad module file name %q", m.File)
	}
	return LoadModuleParams(filepath.Join(dir, m.File), params)
}

// ModprobeMain is the agent run as modprobe: by the kernel, as
// "modprobe -q -- NAME" where NAME is a module or an alias
// (char-major-10-229 when /dev/fuse is opened), or by a user, as
// "modprobe NAME [PARAM=VALUE...]". It loads spare modules only; it
// returns the exit status.
func ModprobeMain(dir string, args []string, stderr io.Writer) int {
	quiet := false
	var rest []string
	for i, a := range args {
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		switch {
		case a == "-q" || a == "--quiet":
			quiet = true
		case a == "-b" || a == "--use-blacklist":
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "modprobe: %s: not supported (klab's modprobe loads the initramfs's spare modules: modprobe [-q] NAME [PARAM=VALUE...])\n", a)
			return 1
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 {
		fmt.Fprintln(stderr, "modprobe: usage: modprobe [-q] NAME [PARAM=VALUE...]")
		return 1
	}
	name, params := rest[0], strings.Join(rest[1:], " ")
	spares, err := ReadSpare(dir)
	if err != nil {
		fmt.Fprintf(stderr, "modprobe: %v\n", err)
		return 1
	}
	m, ok := FindSpare(spares, name)
	if !ok {
		if !quiet {
			names := make([]string, len(spares))
			for i, s := range spares {
				names[i] = s.Name
			}
			fmt.Fprintf(stderr, "modprobe: %s: no such module in this guest (its spare modules: %s)\n", name, strings.Join(names, ", "))
		}
		return 1
	}
	if err := loadSpare(dir, m, params); err != nil {
		fmt.Fprintf(stderr, "modprobe: %v\n", err)
		return 1
	}
	return 0
}

// setupModprobe creates the device nodes of spare modules that name one
// (modinfo's "devname:NAME" with "char-major-M-N" or "block-major-M-N"),
// as kmod's static-nodes does, and makes the agent the kernel's modprobe
// helper: opening such a node makes the kernel ask for the module. Without
// such a node it does nothing, so that a kernel that asks for modules it
// lacks fails at once rather than starting a Go program for each.
func setupModprobe(dir, procSys string) error {
	spares, err := ReadSpare(dir)
	if err != nil {
		return err
	}
	type staticNode struct {
		module, path      string
		typ, major, minor uint32
	}
	var nodes []staticNode
	for _, m := range spares {
		if _, err := os.Stat(filepath.Join("/sys/module", m.Name)); err == nil {
			continue // built in, or loaded already
		}
		node, typ, major, minor, ok := StaticNode(m.Aliases)
		if !ok {
			continue
		}
		p := filepath.Join("/dev", node)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		nodes = append(nodes, staticNode{m.Name, p, typ, major, minor})
	}
	if len(nodes) == 0 {
		return nil
	}
	var errs []error
	if exe, err := os.Executable(); err != nil {
		errs = append(errs, fmt.Errorf("modprobe: %w", err))
	} else if _, err := os.Lstat(ModprobePath); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(ModprobePath), 0o755); err != nil {
			errs = append(errs, fmt.Errorf("modprobe: %w", err))
		} else if err := os.Symlink(exe, ModprobePath); err != nil {
			errs = append(errs, fmt.Errorf("modprobe: %w", err))
		} else if err := WriteSysctl(procSys, "kernel.modprobe", ModprobePath); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range nodes {
		// 0600, as devtmpfs makes a node of a module that was loaded
		// (fuse's among them).
		_ = os.MkdirAll(filepath.Dir(n.path), 0o755)
		err := unix.Mknod(n.path, n.typ|0o600, int(unix.Mkdev(n.major, n.minor)))
		if err != nil {
			errs = append(errs, fmt.Errorf("static node %s for %s: %w", n.path, n.module, err))
		}
	}
	return errors.Join(errs...)
}

// StaticNode returns the device node that a module's aliases name
// ("devname:fuse" with "char-major-10-229"): its path under /dev, its
// type (S_IFCHR or S_IFBLK) and numbers.
func StaticNode(aliases []string) (node string, typ uint32, major, minor uint32, ok bool) {
	for _, a := range aliases {
		if n, found := strings.CutPrefix(a, "devname:"); found && n != "" && !strings.Contains(n, "..") && !strings.HasPrefix(n, "/") {
			node = n
		}
	}
	if node == "" {
		return "", 0, 0, 0, false
	}
	for _, a := range aliases {
		var rest string
		switch {
		case strings.HasPrefix(a, "char-major-"):
			typ, rest = unix.S_IFCHR, strings.TrimPrefix(a, "char-major-")
		case strings.HasPrefix(a, "block-major-"):
			typ, rest = unix.S_IFBLK, strings.TrimPrefix(a, "block-major-")
		default:
			continue
		}
		ma, mi, found := strings.Cut(rest, "-")
		x, err1 := strconv.ParseUint(ma, 10, 32)
		y, err2 := strconv.ParseUint(mi, 10, 32)
		if found && err1 == nil && err2 == nil {
			return node, typ, uint32(x), uint32(y), true
		}
	}
	return "", 0, 0, 0, false
}
