package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/u-root/gobusybox/src/pkg/golang"
	"github.com/u-root/mkuimage/cpio"
	"github.com/u-root/mkuimage/uimage"
	"github.com/u-root/uio/llog"

	"klab/images/embedded"
	"klab/images/keyed"
	"klab/internal/fileio"
	"klab/internal/proc"
	"klab/results"
)

// BaseCommands are the u-root commands in every klab initramfs: init, the
// gosh shell, and the usual tools for looking around in `klab shell` and for
// scripts that `klab boot` runs.
var BaseCommands = corePackages(
	"init", "gosh", "ls", "cat", "dmesg", "mount", "umount", "uname", "echo", "sleep", "mkdir", "rm", "cp", "mv", "ln", "sync", "ps", "kill", "grep", "df", "free", "insmod", "lsmod", "rmmod", "dd", "find", "chmod", "uptime", "true", "false", "wc", "head", "tail", "poweroff", "printenv", "tee", "touch", "truncate", "sort", "seq", "timeout", "hexdump", "readlink",
)

func corePackages(names ...string) []string {
	var pkgs []string
	for _, n := range names {
		pkgs = append(pkgs, "github.com/u-root/u-root/cmds/core/"+n)
	}
	return pkgs
}

// AgentModules are the kernel modules the agent loads at boot: those of
// its channel to the host. Those built into the kernel are skipped; the
// rest go into the initramfs with their dependencies.
var AgentModules = []string{"virtio_pci", "virtio_console"}

// SpareModules go into the initramfs (ModulesDir/NAME.ko, listed with
// their aliases in ModulesDir/spare) without being loaded at boot: a load
// costs 10-40 ms under TCG, and a run that does not need one should not
// wait for it. The agent loads fuse before a fuse step, and the kernel
// asks for it when a program opens /dev/fuse or mounts a fuse file system
// (the agent is the guest's modprobe); steps load brd with their own
// parameters (rd_nr, rd_size).
var SpareModules = []string{"fuse", "brd"}

// ModulesDir is where modules sit in the initramfs, with an "order" file
// listing "name file deps" lines (deps comma-separated, "-" for none),
// dependencies first. It is not /lib/modules, so
// that u-root's init leaves them to the agent.
const ModulesDir = "lib/klab/modules"

// InitramfsOptions says what goes into an initramfs.
type InitramfsOptions struct {
	// CacheDir is klab's cache directory.
	CacheDir string
	// SourceDir is the klab source tree (holding go.mod) that the agent and
	// u-root commands are built from. Empty means FindSource.
	SourceDir string
	// Kernel supplies the modules; nil means no modules.
	Kernel *results.Kernel
	// Modules are the wanted module names; nil means AgentModules.
	Modules []string
	// ExtraModules are more modules to load (klab boot --module), with
	// their dependencies.
	ExtraModules []string
	// Extra are host files added to the overlay (a host program and its
	// shared libraries: see HostProgram). Their content is part of the
	// cache key.
	Extra []ExtraFile
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Initramfs is a built initramfs.
type Initramfs struct {
	// Path is the cpio file to pass to -initrd.
	Path string `json:"path"`
	// SHA256 is the hash of everything that went in; it names the file.
	SHA256 string `json:"sha256"`
	// AgentVersion is the version stamped into the agent.
	AgentVersion string `json:"agent_version"`
	// Modules are the module files included, in load order.
	Modules []string `json:"modules,omitempty"`
	// Cached is true when nothing had to be built.
	Cached bool `json:"cached"`
}

// FindSource locates the klab source tree: $KLAB_SOURCE, else the first
// directory holding a go.mod for module klab, walking up from the working
// directory and then from the executable.
func FindSource() (string, error) {
	if d := os.Getenv("KLAB_SOURCE"); d != "" {
		if isKlabModule(d) {
			return d, nil
		}
		return "", fmt.Errorf("KLAB_SOURCE=%s: no go.mod for module klab there", d)
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, s := range starts {
		for d := s; ; d = filepath.Dir(d) {
			if isKlabModule(d) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("cannot find the klab source tree to build the guest agent from: run klab inside its checkout or set KLAB_SOURCE")
}

func isKlabModule(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "module klab" {
			return true
		}
	}
	return false
}

func (o *InitramfsOptions) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// BuildInitramfs returns an initramfs for o, building what is not cached.
//
// It is assembled from three cached parts: the u-root base (init and core
// commands, keyed by the Go version and go.sum), the static agent (keyed by
// the guest sources), and the kernel's modules (keyed by their bytes). The
// result is the base cpio followed by an overlay cpio; the kernel unpacks
// concatenated archives in order.
func BuildInitramfs(ctx context.Context, o InitramfsOptions) (*Initramfs, error) {
	if o.Modules == nil {
		o.Modules = AgentModules
	}
	dir := filepath.Join(o.CacheDir, "initramfs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p, err := o.guestParts(ctx)
	if err != nil {
		return nil, err
	}
	mods, err := o.modules()
	if err != nil {
		return nil, err
	}
	spare := o.spareModules(mods)
	modParts := []string{"final/v4", p.BaseKey, p.AgentKey}
	for _, m := range mods {
		modParts = append(modParts, m.Name, strings.Join(m.Deps, ","), fileHash(m.Path))
	}
	for _, m := range spare {
		modParts = append(modParts, "spare", m.Name, fileHash(m.Path))
	}
	for _, e := range o.Extra {
		modParts = append(modParts, "extra", e.Dest, fmt.Sprint(e.Mode), fileHash(e.Source))
	}
	finalKey, err := hashParts(modParts...)
	if err != nil {
		return nil, err
	}
	out := &Initramfs{
		Path:         filepath.Join(dir, "klab-"+finalKey[:24]+".cpio"),
		SHA256:       finalKey,
		AgentVersion: agentVersion(p.AgentKey),
	}
	for _, m := range mods {
		out.Modules = append(out.Modules, m.Name)
	}
	if _, err := os.Stat(out.Path); err == nil {
		out.Cached = true
		keyed.Touch(out.Path)
		return out, nil
	}
	if err := assemble(out.Path, p.BasePath, p.AgentPath, mods, spare, o.Extra); err != nil {
		return nil, err
	}
	return out, nil
}

// modules returns the modules to load, in order. A kernel tree built by
// its user may leave out what only some steps need (fuse, brd): those
// are skipped with a note, and the step that needs one says so.
func (o *InitramfsOptions) modules() ([]Module, error) {
	k := o.Kernel
	if k == nil || (len(o.Modules) == 0 && len(o.ExtraModules) == 0) {
		return nil, nil
	}
	if k.Modules == "" {
		if len(o.ExtraModules) > 0 {
			return nil, fmt.Errorf("kernel %s: no modules to load %s from (they are built in, or not built)", k.Name, strings.Join(o.ExtraModules, ", "))
		}
		return nil, nil
	}
	want := append(append([]string(nil), o.Modules...), o.ExtraModules...)
	if k.Source != "tree" {
		mods, err := ModuleClosure(k.Modules, want)
		if err != nil {
			return nil, fmt.Errorf("kernel %s: %w", k.Name, err)
		}
		return mods, nil
	}
	var keep []string
	for _, m := range want {
		if _, err := ModuleClosure(k.Modules, []string{m}); err != nil {
			if slices.Contains(optionalTreeModules, m) {
				o.logf("note: kernel %s has no %s module (neither built in nor built): steps that need it will fail", k.Name, m)
				continue
			}
			return nil, fmt.Errorf("kernel %s: %w (build it with make modules, or build it in)", k.Name, err)
		}
		keep = append(keep, m)
	}
	mods, err := ModuleClosure(k.Modules, keep)
	if err != nil {
		return nil, fmt.Errorf("kernel %s: %w", k.Name, err)
	}
	return mods, nil
}

// spareModules returns the SpareModules the kernel has as modules and that
// are not loaded anyway, without their dependencies (they have none).
func (o *InitramfsOptions) spareModules(loaded []Module) []Module {
	k := o.Kernel
	if k == nil || k.Modules == "" {
		return nil
	}
	var out []Module
	for _, name := range SpareModules {
		if slices.ContainsFunc(loaded, func(m Module) bool { return m.Name == name }) {
			continue
		}
		ms, err := ModuleClosure(k.Modules, []string{name})
		switch {
		case err == nil && len(ms) == 1:
			out = append(out, ms[0])
		case err != nil && k.Source == "tree" && slices.Contains(optionalTreeModules, name):
			o.logf("note: kernel %s has no %s module (neither built in nor built): steps that need it will fail", k.Name, name)
		}
	}
	return out
}

// optionalTreeModules are agent modules a kernel tree may lack.
var optionalTreeModules = []string{"fuse", "brd"}

// GuestParts are the cached parts every initramfs starts from.
type GuestParts struct {
	// BasePath is the u-root base cpio, keyed by BaseKey.
	BasePath string `json:"base_path"`
	BaseKey  string `json:"base_key"`
	// AgentPath is the static agent, keyed by AgentKey (its sources).
	AgentPath string `json:"agent_path"`
	AgentKey  string `json:"agent_key"`
	// GoVersion is the toolchain they were built with.
	GoVersion string `json:"go_version"`
	// From says where they came from: "source DIR" or "embedded".
	From string `json:"from"`
}

// guestParts returns the u-root base and the agent: built from the klab
// source tree when klab runs from its checkout (or KLAB_SOURCE names one),
// else the parts built into this binary.
func (o *InitramfsOptions) guestParts(ctx context.Context) (*GuestParts, error) {
	if o.SourceDir == "" {
		d, err := FindSource()
		if err != nil {
			if e := embedded.Get(); e != nil {
				return o.embeddedParts(e)
			}
			return nil, fmt.Errorf("%w; this klab binary carries no guest parts either (a plain `go build`): build it with `make build` or install it with `make install`", err)
		}
		if _, err := exec.LookPath("go"); err != nil {
			if e := embedded.Get(); e != nil {
				return o.embeddedParts(e) // a checkout, but no Go to build from it
			}
		}
		o.SourceDir = d
	}
	return o.sourceParts(ctx)
}

// GuestPartsOrigin says, without building anything, where the guest parts
// would come from: the source tree (which then needs Go) or the binary.
// needGo is true when Go is needed at run time.
func GuestPartsOrigin() (origin string, needGo bool, err error) {
	e := embedded.Get()
	d, ferr := FindSource()
	_, gerr := exec.LookPath("go")
	switch {
	case ferr == nil && gerr == nil:
		return "built from the source tree " + d + " (Go needed; a `make install`ed klab needs neither)", true, nil
	case e != nil:
		return fmt.Sprintf("built into klab (agent %s, %s): no Go toolchain or source tree needed", agentVersion(e.AgentKey), e.GoVersion), false, nil
	case ferr == nil:
		return "", true, fmt.Errorf("the source tree %s needs Go 1.26 to build the guest agent, and go is not in PATH; or build klab with `make build`, which puts the guest parts into the binary", d)
	}
	return "", true, fmt.Errorf("%v; this klab binary carries no guest parts either: build it with `make build` or install it with `make install`", ferr)
}

// GuestPartsFor returns the guest parts o would use, building what is not
// cached (klab doctor and `make build` use it).
func GuestPartsFor(ctx context.Context, o InitramfsOptions) (*GuestParts, error) {
	return o.guestParts(ctx)
}

// pinned holds the parts each source tree and cache gave this process:
// one klab run boots every guest with the same agent, even if the source
// tree is edited while it runs.
var pinned struct {
	sync.Mutex
	m map[string]*GuestParts
}

// sourceParts builds (or finds cached) the parts from o.SourceDir, once
// per process.
func (o *InitramfsOptions) sourceParts(ctx context.Context) (*GuestParts, error) {
	key := o.CacheDir + "\x00" + o.SourceDir
	pinned.Lock()
	defer pinned.Unlock()
	if p := pinned.m[key]; p != nil {
		if _, err := os.Stat(p.BasePath); err == nil {
			if _, err := os.Stat(p.AgentPath); err == nil {
				return p, nil
			}
		}
	}
	p, err := o.buildSourceParts(ctx)
	if err != nil {
		return nil, err
	}
	if pinned.m == nil {
		pinned.m = map[string]*GuestParts{}
	}
	pinned.m[key] = p
	return p, nil
}

// buildSourceParts builds (or finds cached) the parts from o.SourceDir.
func (o *InitramfsOptions) buildSourceParts(ctx context.Context) (*GuestParts, error) {
	goVersion, err := goVersion(ctx, o.SourceDir)
	if err != nil {
		return nil, err
	}
	// go.mod counts with go.sum: a replace directive changes the code
	// the base is built from without changing go.sum.
	baseKey, err := hashParts("base/v1", goVersion, strings.Join(BaseCommands, ","), fileHash(filepath.Join(o.SourceDir, "go.sum")), fileHash(filepath.Join(o.SourceDir, "go.mod")))
	if err != nil {
		return nil, err
	}
	agentKey, err := guestSourceHash(o.SourceDir, goVersion)
	if err != nil {
		return nil, err
	}
	p := o.partPaths(baseKey, agentKey)
	p.GoVersion, p.From = goVersion, "source "+o.SourceDir
	if _, err := os.Stat(p.BasePath); err != nil {
		o.logf("building the u-root base initramfs (%d commands; first time only, about 30 s)...", len(BaseCommands))
		t := time.Now()
		if err := buildBase(ctx, o.SourceDir, p.BasePath); err != nil {
			return nil, err
		}
		o.logf("built u-root base in %.1fs", time.Since(t).Seconds())
	}
	keyed.Touch(p.BasePath)
	if _, err := os.Stat(p.AgentPath); err != nil {
		o.logf("building klab-agent %s...", agentVersion(agentKey))
		t := time.Now()
		if err := buildAgent(ctx, o.SourceDir, p.AgentPath, agentVersion(agentKey)); err != nil {
			return nil, err
		}
		o.logf("built klab-agent in %.1fs", time.Since(t).Seconds())
	}
	keyed.Touch(p.AgentPath)
	return p, nil
}

// embeddedParts writes the binary's own parts into the cache (once) and
// returns them: no Go toolchain and no source tree needed.
func (o *InitramfsOptions) embeddedParts(e *embedded.Parts) (*GuestParts, error) {
	p := o.partPaths(e.BaseKey, e.AgentKey)
	p.GoVersion, p.From = e.GoVersion, "embedded"
	for _, f := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{{p.BasePath, e.Base, 0o644}, {p.AgentPath, e.Agent, 0o755}} {
		if fi, err := os.Stat(f.path); err == nil && fi.Size() == int64(len(f.data)) {
			keyed.Touch(f.path)
			continue
		}
		if err := writePart(f.path, f.data, f.mode); err != nil {
			return nil, fmt.Errorf("guest parts: %w", err)
		}
	}
	return p, nil
}

func (o *InitramfsOptions) partPaths(baseKey, agentKey string) *GuestParts {
	return &GuestParts{
		BasePath:  filepath.Join(o.CacheDir, "initramfs", "base-"+baseKey[:24]+".cpio"),
		BaseKey:   baseKey,
		AgentPath: filepath.Join(o.CacheDir, "agent", "klab-agent-"+agentKey[:24]),
		AgentKey:  agentKey,
	}
}

// ExportGuestParts builds the guest parts from the source tree and writes
// them into dir in the layout package embedded embeds (`make build`).
func ExportGuestParts(ctx context.Context, o InitramfsOptions, dir string) (*GuestParts, error) {
	if o.SourceDir == "" {
		d, err := FindSource()
		if err != nil {
			return nil, err
		}
		o.SourceDir = d
	}
	p, err := o.sourceParts(ctx)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct{ from, to string }{{p.BasePath, "base.cpio"}, {p.AgentPath, "klab-agent"}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			return nil, err
		}
		if err := fileio.WriteAtomic(filepath.Join(dir, f.to), b, 0o644); err != nil {
			return nil, err
		}
	}
	desc, err := json.MarshalIndent(embedded.Parts{AgentKey: p.AgentKey, BaseKey: p.BaseKey, GoVersion: p.GoVersion}, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := fileio.WriteAtomic(filepath.Join(dir, embedded.PartsFile), append(desc, '\n'), 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// writePart writes a cached part atomically, creating its directory.
func writePart(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return fileio.WriteAtomic(path, data, mode)
}

func shortNames(pkgs []string) []string {
	var s []string
	for _, p := range pkgs {
		s = append(s, filepath.Base(p))
	}
	return s
}

// agentVersion is the version stamped into the agent: its source hash.
func agentVersion(key string) string { return "src-" + key[:12] }

func goVersion(ctx context.Context, src string) (string, error) {
	out, err := proc.Run(ctx, proc.Opts{Dir: src, Timeout: time.Minute}, "go", "env", "GOVERSION")
	if err != nil {
		var e *proc.Error
		if errors.As(err, &e) && errors.Is(e.Err, exec.ErrNotFound) {
			return "", errors.New("the Go toolchain is needed to build the guest agent: install Go 1.26 (see README)")
		}
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func hashParts(parts ...string) (string, error) {
	h := sha256.New()
	for _, p := range parts {
		if strings.HasPrefix(p, "error:") {
			return "", errors.New(strings.TrimPrefix(p, "error:"))
		}
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fileHash returns the hex sha256 of a file, or "error:..." so that
// hashParts reports the failure.
func fileHash(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "error:" + err.Error()
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "error:" + err.Error()
	}
	return hex.EncodeToString(h.Sum(nil))
}

// guestSourceHash hashes everything the agent is built from: the Go
// version, go.mod, go.sum and every .go file under guest/ and internal/.
func guestSourceHash(src, goVersion string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "agent/v1 %s\n", goVersion)
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	var files []string
	for _, d := range []string{"guest", "internal"} {
		err := filepath.WalkDir(filepath.Join(src, d), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !e.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		rel, _ := filepath.Rel(src, f)
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// buildBase builds u-root's busybox with BaseCommands into a cpio at path.
func buildBase(ctx context.Context, src, path string) error {
	// A fresh cache has no initramfs directory yet (`make build` is the
	// first thing a new checkout runs).
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".base-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var logBuf bytes.Buffer
	l := llog.New(slog.LevelWarn, func(format string, v ...any) { fmt.Fprintf(&logBuf, format+"\n", v...) })
	opts := []golang.Opt{golang.DisableCGO(), golang.WithGOOS("linux"), golang.WithGOARCH("amd64"), golang.WithWorkingDir(src)}
	if golang.Default().GOROOT == "" {
		// A klab built with -trimpath knows no GOROOT of its own (nor
		// from $GOROOT): u-root would then look for bin/go. Ask the go
		// command in PATH, which builds the agent too.
		root, err := goRoot(ctx)
		if err != nil {
			return err
		}
		opts = append(opts, golang.WithGOROOT(root))
	}
	env := golang.Default(opts...)
	part := filepath.Join(tmp, "base.cpio")
	err = uimage.Create(l,
		uimage.WithReplaceEnv(env),
		uimage.WithTempDir(tmp),
		uimage.WithBusyboxCommands(BaseCommands...),
		uimage.WithInit("init"),
		uimage.WithShell("gosh"),
		uimage.WithCPIOOutput(part),
	)
	if err != nil {
		return fmt.Errorf("build u-root base initramfs: %w\n%s", err, logBuf.String())
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return os.Rename(part, path)
}

// goRoot is the GOROOT of the go command in PATH.
func goRoot(ctx context.Context) (string, error) {
	out, err := proc.Run(ctx, proc.Opts{Timeout: time.Minute}, "go", "env", "GOROOT")
	if err != nil {
		return "", fmt.Errorf("find the Go toolchain for the u-root base: %w", err)
	}
	root := strings.TrimSpace(string(out))
	if root == "" {
		return "", errors.New("find the Go toolchain for the u-root base: go env GOROOT printed nothing")
	}
	return root, nil
}

// buildAgent builds the static guest agent.
func buildAgent(ctx context.Context, src, path, version string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// A unique temporary name, renamed into place when whole: two first
	// runs at once each build their own and the last rename wins, so a
	// half-written agent is never cached.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	_, err = proc.Run(ctx, proc.Opts{Dir: src, Env: env, Timeout: 10 * time.Minute},
		"go", "build", "-trimpath", "-ldflags", "-s -w -X klab/guest/agent.Version="+version,
		"-o", tmp, "./guest/cmd/klab-agent")
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("build klab-agent: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// assemble writes base + overlay to out atomically.
func assemble(out, basePath, agentPath string, mods, spare []Module, extra []ExtraFile) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), ".klab-*.cpio")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	base, err := os.Open(basePath)
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, base)
	base.Close()
	if err != nil {
		return err
	}
	agent, err := os.ReadFile(agentPath)
	if err != nil {
		return err
	}
	recs := []cpio.Record{
		cpio.Directory("bin", 0o755),
		cpio.StaticFile("bin/klab-agent", string(agent), 0o755),
		cpio.Symlink("bin/uinit", "klab-agent"),
		// The agent is the guest's init (u-root's init stays at
		// /bbin/init, and runs the agent as uinit if asked to:
		// rdinit=/bbin/init).
		cpio.Symlink("init", "bin/klab-agent"),
		cpio.Directory("lib", 0o755),
		cpio.Directory("lib/klab", 0o755),
		cpio.Directory(ModulesDir, 0o755),
	}
	var order strings.Builder
	for _, m := range mods {
		b, err := ReadModule(m.Path)
		if err != nil {
			return fmt.Errorf("module %s: %w", m.Name, err)
		}
		name := m.Name + ".ko"
		recs = append(recs, cpio.StaticFile(ModulesDir+"/"+name, string(b), 0o644))
		deps := "-"
		if len(m.Deps) > 0 {
			deps = strings.Join(m.Deps, ",")
		}
		fmt.Fprintf(&order, "%s %s %s\n", m.Name, name, deps)
	}
	recs = append(recs, cpio.StaticFile(ModulesDir+"/order", order.String(), 0o644))
	var spares strings.Builder
	for _, m := range spare {
		b, err := ReadModule(m.Path)
		if err != nil {
			return fmt.Errorf("module %s: %w", m.Name, err)
		}
		recs = append(recs, cpio.StaticFile(ModulesDir+"/"+m.Name+".ko", string(b), 0o644))
		aliases, err := moduleAliases(m.Path)
		if err != nil {
			return err
		}
		list := "-"
		if len(aliases) > 0 {
			list = strings.Join(aliases, ",")
		}
		fmt.Fprintf(&spares, "%s %s.ko %s\n", m.Name, m.Name, list)
	}
	recs = append(recs, cpio.StaticFile(ModulesDir+"/spare", spares.String(), 0o644))
	extraRecs, err := extraRecords(extra)
	if err != nil {
		return err
	}
	recs = append(recs, extraRecs...)
	w := cpio.Newc.Writer(tmp)
	if err := cpio.WriteRecordsAndDirs(w, recs); err != nil {
		return fmt.Errorf("write initramfs overlay: %w", err)
	}
	if err := cpio.WriteTrailer(w); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
