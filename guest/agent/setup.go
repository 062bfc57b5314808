package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
	"klab/internal/procfs"
)

// ModulesDir is where the initramfs keeps the kernel modules to load, with
// their load order in ModulesDir/order.
const ModulesDir = "/lib/klab/modules"

// Mount is one filesystem Setup mounts.
type Mount struct {
	// Source, Target, FSType, Flags and Data are mount(2)'s arguments.
	Source string
	Target string
	FSType string
	Flags  uintptr
	Data   string
	// Optional mounts are skipped when Target does not exist, instead of
	// creating it (debugfs on a kernel without it has no /sys/kernel/debug).
	Optional bool
}

// DefaultMounts returns the mounts a klab guest needs, in order.
func DefaultMounts() []Mount {
	return []Mount{
		{Source: "proc", Target: "/proc", FSType: "proc", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{Source: "sysfs", Target: "/sys", FSType: "sysfs", Flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
		{Source: "devtmpfs", Target: "/dev", FSType: "devtmpfs", Flags: unix.MS_NOSUID, Data: "mode=0755"},
		{Source: "tmpfs", Target: "/tmp", FSType: "tmpfs", Flags: unix.MS_NOSUID | unix.MS_NODEV, Data: "mode=1777"},
		{Source: "debugfs", Target: "/sys/kernel/debug", FSType: "debugfs", Optional: true},
	}
}

// Setup prepares the guest: it mounts DefaultMounts that are not mounted yet,
// loads the modules listed in ModulesDir/order and makes the agent the
// kernel's modprobe for spare modules with a device node (setupModprobe).
// Failures do not stop it; they are
// returned joined, and each module's result is in the returned list (for
// Hello.Modules).
func Setup() ([]proto.ModuleLoad, error) {
	merr := MountAll(DefaultMounts())
	// Let every sysrq through, so that the host can ask a hung guest for
	// task dumps from the keyboard (QMP send-key) as well.
	_ = WriteSysctl(DefaultProcSys, "kernel.sysrq", "1")
	mods, lerr := LoadModules(ModulesDir, nil)
	perr := setupModprobe(ModulesDir, DefaultProcSys)
	return mods, errors.Join(merr, lerr, perr)
}

// MountAll mounts each of mounts that is not mounted yet, in order. A target
// that /proc/self/mountinfo already lists, or whose mount fails with EBUSY,
// counts as mounted. Missing targets are created unless the mount is
// Optional. All failures are returned joined.
func MountAll(mounts []Mount) error {
	var errs []error
	mounted := mountPoints() // read once: each reading costs a millisecond or more under TCG
	for _, m := range mounts {
		if mounted[filepath.Clean(m.Target)] {
			continue
		}
		if _, err := os.Stat(m.Target); err != nil {
			if m.Optional {
				continue
			}
			if err := os.MkdirAll(m.Target, 0o755); err != nil {
				errs = append(errs, fmt.Errorf("mount %s: %w", m.Target, err))
				continue
			}
		}
		err := unix.Mount(m.Source, m.Target, m.FSType, m.Flags, m.Data)
		if err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("mount %s on %s: %w", m.FSType, m.Target, err))
			continue
		}
		mounted[filepath.Clean(m.Target)] = true
	}
	return errors.Join(errs...)
}

// mountPoints returns the mount points /proc/self/mountinfo lists; without
// /proc, none.
func mountPoints() map[string]bool {
	set := map[string]bool{}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return set
	}
	defer f.Close()
	points, _ := ParseMountinfo(f)
	for _, p := range points {
		set[p] = true
	}
	return set
}

// ParseMountinfo returns the mount points (the fifth field, unescaped) of a
// /proc/self/mountinfo stream.
func ParseMountinfo(r io.Reader) ([]string, error) {
	var points []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		points = append(points, procfs.UnescapeMountinfo(f[4]))
	}
	if err := sc.Err(); err != nil {
		return points, fmt.Errorf("mountinfo: %w", err)
	}
	return points, nil
}

// ModuleSpec is one line of the module order file: a module name and its
// file name relative to the modules directory.
type ModuleSpec struct {
	// Name is the module's name, as Hello.Modules reports it.
	Name string
	// File is the .ko file in the modules directory.
	File string
	// Deps are the modules of the same file that must be loaded first.
	Deps []string
}

// ParseModuleOrder parses a module order file: one module per line,
// "name filename.ko [deps]", dependencies first, where deps is a
// comma-separated list of earlier names or "-". Blank lines and lines
// starting with '#' are skipped.
func ParseModuleOrder(r io.Reader) ([]ModuleSpec, error) {
	var specs []ModuleSpec
	err := moduleLines(r, "module order", `"name file.ko [dep,dep|-]"`, 2, 3, func(f []string) {
		spec := ModuleSpec{Name: f[0], File: f[1]}
		if len(f) == 3 {
			spec.Deps = commaList(f[2])
		}
		specs = append(specs, spec)
	})
	return specs, err
}

// moduleLines calls line with the fields of each line of a module list
// (order, spare) that has from lo to hi fields. Blank lines and lines
// starting with '#' are skipped; another count of fields is an error
// naming the line and the form wanted.
func moduleLines(r io.Reader, what, form string, lo, hi int, line func([]string)) error {
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Fields(text)
		if len(f) < lo || len(f) > hi {
			return fmt.Errorf("%s line %d: %q: want %s", what, n, text, form)
		}
		line(f)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// commaList splits a comma-separated field; "-" is the empty list.
func commaList(s string) []string {
	if s == "-" {
		return nil
	}
	return strings.Split(s, ",")
}

// LoadModules loads the modules listed in dir/order, one after the other
// in the file's order (dependencies first), with load (nil means
// LoadModule) and returns each result. A failing module does not stop the
// others. A missing order file means there is nothing to load. The error
// is about the order file only; module failures are in the results.
//
// One at a time because under TCG the vCPUs share one host thread: loads
// in parallel goroutines were no faster there, and starting a thread for
// each blocked load cost 40 ms in six loads (debian:6.1's channel).
func LoadModules(dir string, load func(path string) error) ([]proto.ModuleLoad, error) {
	if load == nil {
		load = LoadModule
	}
	f, err := os.Open(filepath.Join(dir, "order"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("modules: %w", err)
	}
	specs, perr := ParseModuleOrder(f)
	f.Close()
	res := make([]proto.ModuleLoad, len(specs))
	for i, s := range specs {
		res[i] = proto.ModuleLoad{Name: s.Name}
		if strings.Contains(s.File, "/") || s.File == ".." || s.File == "." {
			res[i].Error = fmt.Sprintf("bad module file name %q", s.File)
		} else if err := load(filepath.Join(dir, s.File)); err != nil {
			res[i].Error = err.Error()
		}
	}
	if perr != nil {
		return res, fmt.Errorf("modules: %w", perr)
	}
	return res, nil
}

// LoadModule loads one uncompressed kernel module with finit_module(2),
// falling back to init_module(2) with the file's bytes when that fails. A
// module that is already loaded (EEXIST) counts as loaded.
func LoadModule(path string) error { return LoadModuleParams(path, "") }

// LoadModuleParams is LoadModule with module parameters
// ("rd_nr=1 rd_size=1024").
func LoadModuleParams(path, params string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("load module: %w", err)
	}
	defer f.Close()
	ferr := unix.FinitModule(int(f.Fd()), params, 0)
	if ferr == nil || errors.Is(ferr, unix.EEXIST) {
		return nil
	}
	image, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("finit_module %s: %w (and reading it: %w)", path, ferr, err)
	}
	ierr := unix.InitModule(image, params)
	if ierr == nil || errors.Is(ierr, unix.EEXIST) {
		return nil
	}
	if errors.Is(ierr, ferr) {
		return fmt.Errorf("load module %s: %w", path, ierr)
	}
	return fmt.Errorf("load module %s: finit_module: %w; init_module: %w", path, ferr, ierr)
}
