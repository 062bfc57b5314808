package agent

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/fuse"
	"klab/guest/fuse/ringfuse"
	"klab/guest/proto"
	"klab/internal/fileio"
)

// fstests' FUSE configurations. fstests mounts with
// `mount -t fuse.NAME SOURCE MNT -o OPTS`, and mount(8) runs
// /sbin/mount.fuse.NAME, which the userspace image links to
// proto.FstestsHelperDir/mount.fuse.NAME. prepareFstestsFUSE puts there,
// inside the userspace root:
//
//	klab-agent                   this executable (bind-mounted)
//	mount.fuse.klab              -> klab-agent
//	mount.fuse.passthrough_hp    -> klab-agent
//	hp/                          passthrough_hp, its libraries and loader
//	fstests-fuse.json            the server and transport to mount
//	fuse/PID.json, fuse/PID.log  each server's counters and log
//
// The agent's executable run as mount.fuse.NAME (FUSEMountHelperMain)
// starts a daemon, itself again with FUSEDaemonArg (FUSEDaemonMain), in a
// session of its own, and returns once the daemon says the mount is
// served, as mount(8) wants. The daemon serves the mount (klab's
// passthrough server) or runs passthrough_hp and watches it, writes its
// counters every fstestsCountersEvery, and ends when the mount goes away.

const (
	// FUSEDaemonArg is the hidden first argument with which the agent's
	// executable serves one fstests FUSE mount (FUSEDaemonMain).
	FUSEDaemonArg = "__klab-fuse-daemon"

	fstestsAgentName   = "klab-agent"
	fstestsSetupName   = "fstests-fuse.json"
	fstestsServersDir  = "fuse"
	fstestsHPDir       = "hp"
	fstestsSourceTag   = "source:"
	fstestsTestDir     = "/mnt/test"
	fstestsScratchMnt  = "/mnt/scratch"
	fstestsMountOpts   = "allow_other,default_permissions,dev"
	fstestsDevThreads  = 4
	fstestsInitTimeout = 60 * time.Second
	// fstestsCountersEvery is how often a daemon writes its counters.
	fstestsCountersEvery = 100 * time.Millisecond
)

// fstestsFUSESetup is fstests-fuse.json: what the helpers mount. Paths are
// inside the root.
type fstestsFUSESetup struct {
	Server    string `json:"server"`
	Transport string `json:"transport"`
	// Loader runs passthrough_hp: the dynamic loader and its
	// --library-path; HP is the binary.
	Loader []string `json:"loader,omitempty"`
	HP     string   `json:"hp,omitempty"`
}

// fuseCounters is a daemon's counter file, fuse/PID.json.
type fuseCounters struct {
	Server     string `json:"server"`
	Transport  string `json:"transport"`
	Source     string `json:"source"`
	Mountpoint string `json:"mountpoint"`
	// Dev counts requests served over /dev/fuse other than INIT, FORGET
	// and INTERRUPT (klab's server; -1 for passthrough_hp, which cannot
	// say).
	Dev int64 `json:"dev"`
	// URing counts requests served over io_uring (for passthrough_hp: the
	// completions on its rings).
	URing uint64 `json:"uring"`
	// Ended is set once the mount went away and the server stopped.
	Ended bool `json:"ended,omitempty"`
}

// prepareFstestsFUSE makes `mount -t fuse.NAME` work inside root for the
// server and transport c names, over backing: a directory inside root
// (an ext4 on a ram disk mounted there), where the TEST and SCRATCH
// mounts keep their files (backing/test, backing/scratch). It returns
// fstests' local.config lines for the configuration and proof, which
// says which transports served requests since its last call.
func prepareFstestsFUSE(ctx context.Context, root string, c *proto.FstestsFUSEConfig, backing string) (localConfig []string, proof func() string, err error) {
	if c == nil {
		return nil, nil, errors.New("fstests fuse: no fuse configuration")
	}
	switch c.Server {
	case proto.FstestsServerKlab, proto.FstestsServerPassthroughHP:
	default:
		return nil, nil, fmt.Errorf("fstests fuse: server %q: want %s or %s", c.Server, proto.FstestsServerKlab, proto.FstestsServerPassthroughHP)
	}
	switch c.Transport {
	case proto.FUSETransportDev, proto.FUSETransportURing:
	default:
		return nil, nil, fmt.Errorf("fstests fuse: transport %q: want %s or %s", c.Transport, proto.FUSETransportDev, proto.FUSETransportURing)
	}
	inner, err := pathInRoot(root, backing)
	if err != nil {
		return nil, nil, fmt.Errorf("fstests fuse: backing: %w", err)
	}
	if err := EnsureModule(ModulesDir, "fuse"); err != nil {
		return nil, nil, fmt.Errorf("fstests fuse: %w", err)
	}
	if c.Transport == proto.FUSETransportURing {
		if _, err := ringfuse.EnableURing(); err != nil {
			return nil, nil, fmt.Errorf("fstests fuse: transport uring: %w", err)
		}
	}
	hd := filepath.Join(root, proto.FstestsHelperDir)
	for _, d := range []string{filepath.Join(hd, fstestsServersDir), filepath.Join(backing, "test"), filepath.Join(backing, "scratch"),
		filepath.Join(root, fstestsTestDir), filepath.Join(root, fstestsScratchMnt)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, nil, fmt.Errorf("fstests fuse: %w", err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("fstests fuse: %w", err)
	}
	if err := bindFile(exe, filepath.Join(hd, fstestsAgentName)); err != nil {
		return nil, nil, fmt.Errorf("fstests fuse: the agent as mount helper: %w", err)
	}
	for _, s := range proto.FstestsFUSEServers() {
		link := filepath.Join(hd, proto.FstestsMountHelper(s))
		_ = os.Remove(link)
		if err := os.Symlink(fstestsAgentName, link); err != nil {
			return nil, nil, fmt.Errorf("fstests fuse: %w", err)
		}
	}
	setup := fstestsFUSESetup{Server: c.Server, Transport: c.Transport}
	if c.Server == proto.FstestsServerPassthroughHP {
		if setup.Loader, setup.HP, err = placeProgram(ctx, proto.LibfusePassthroughHPPath, root, path.Join(proto.FstestsHelperDir, fstestsHPDir)); err != nil {
			return nil, nil, fmt.Errorf("fstests fuse: passthrough_hp (the host puts it into the initramfs for this configuration): %w", err)
		}
	}
	data, err := json.Marshal(setup)
	if err != nil {
		return nil, nil, err
	}
	if err := fileio.WriteAtomic(filepath.Join(hd, fstestsSetupName), data, 0o644); err != nil {
		return nil, nil, fmt.Errorf("fstests fuse: %w", err)
	}
	localConfig = []string{
		"export FSTYP=fuse",
		"export FUSE_SUBTYP=." + c.Server,
		"export TEST_DEV=" + fstestsSourceTag + path.Join(inner, "test"),
		"export TEST_DIR=" + fstestsTestDir,
		"export SCRATCH_DEV=" + fstestsSourceTag + path.Join(inner, "scratch"),
		"export SCRATCH_MNT=" + fstestsScratchMnt,
		`export FUSE_MOUNT_OPTIONS="-o ` + fstestsMountOpts + `"`,
	}
	return localConfig, fstestsProof(filepath.Join(hd, fstestsServersDir), c.Server), nil
}

// pathInRoot returns p, a path inside root, as seen chrooted in root.
func pathInRoot(root, p string) (string, error) {
	if !filepath.IsAbs(p) || !filepath.IsAbs(root) {
		return "", fmt.Errorf("%q: want an absolute path inside %s", p, root)
	}
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s is not a directory inside the userspace root %s", p, root)
	}
	return "/" + filepath.ToSlash(rel), nil
}

// bindFile makes target show file src: a bind mount over an empty file,
// replacing an earlier one.
func bindFile(src, target string) error {
	_ = unix.Unmount(target, unix.MNT_DETACH)
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	f.Close()
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, target, err)
	}
	return nil
}

// placeProgram puts the dynamically linked program bin, its libraries and
// its loader, as the loader resolves them here, into dir inside root,
// and returns how to run it there: the loader with --library-path, and
// the program's path (both inside root). The userspace's own libraries
// are never used: its C library need not be the one bin was built for.
func placeProgram(ctx context.Context, bin, root, dir string) (loader []string, prog string, err error) {
	interp, err := elfInterpreter(bin)
	if err != nil {
		return nil, "", err
	}
	out, err := exec.CommandContext(ctx, interp, "--list", bin).Output()
	if err != nil {
		return nil, "", fmt.Errorf("%s --list %s: %w", interp, bin, err)
	}
	libs, err := parseLoaderList(string(out))
	if err != nil {
		return nil, "", fmt.Errorf("%s --list %s: %w", interp, bin, err)
	}
	host := filepath.Join(root, dir)
	if err := os.MkdirAll(host, 0o755); err != nil {
		return nil, "", err
	}
	for _, f := range append([]string{bin, interp}, libs...) {
		if err := bindFile(f, filepath.Join(host, filepath.Base(f))); err != nil {
			return nil, "", err
		}
	}
	return []string{path.Join(dir, filepath.Base(interp)), "--library-path", dir}, path.Join(dir, filepath.Base(bin)), nil
}

// elfInterpreter is the ELF interpreter (PT_INTERP) of bin.
func elfInterpreter(bin string) (string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return "", fmt.Errorf("%s: PT_INTERP: %w", bin, err)
		}
		return strings.TrimRight(string(b), "\x00"), nil
	}
	return "", fmt.Errorf("%s is not dynamically linked", bin)
}

// parseLoaderList returns the libraries of `ld.so --list` output (as ldd
// prints them): the paths after "=>". A library not found is an error.
func parseLoaderList(out string) ([]string, error) {
	var libs, missing []string
	for _, l := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), "=>")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 || f[0] == "not" || !filepath.IsAbs(f[0]) {
			missing = append(missing, strings.TrimSpace(name))
			continue
		}
		libs = append(libs, f[0])
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("libraries not found: %s", strings.Join(missing, ", "))
	}
	return libs, nil
}

// fstestsProof returns the proof function of prepareFstestsFUSE: the
// requests the servers whose counter files are in dir served since its
// last call (the first call counts from when fstestsProof was called),
// "dev=N uring=M" (for passthrough_hp, which cannot count its
// /dev/fuse requests, "uring=M"). Files of ended servers are removed once
// counted.
func fstestsProof(dir, server string) func() string {
	seen := map[string]fuseCounters{}
	proof := func() string {
		var dev int64
		var uring uint64
		names, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, n := range names {
			data, err := os.ReadFile(n)
			if err != nil {
				continue
			}
			var c fuseCounters
			if json.Unmarshal(data, &c) != nil {
				continue
			}
			last := seen[n]
			if c.Dev > last.Dev {
				dev += c.Dev - last.Dev
			}
			if c.URing > last.URing {
				uring += c.URing - last.URing
			}
			seen[n] = c
			if c.Ended {
				_ = os.Remove(n)
				delete(seen, n)
			}
		}
		if server == proto.FstestsServerPassthroughHP {
			return fmt.Sprintf("uring=%d", uring)
		}
		return fmt.Sprintf("dev=%d uring=%d", dev, uring)
	}
	proof() // what servers already running served is not counted
	return proof
}

// fstestsProofMismatch says why proof (prepareFstestsFUSE's) contradicts
// transport: requests served over the other one. Empty when it does not.
func fstestsProofMismatch(transport, proof string) string {
	counts := map[string]int64{}
	for _, f := range strings.Fields(proof) {
		k, v, ok := strings.Cut(f, "=")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			counts[k] = n
		}
	}
	switch {
	case transport == proto.FUSETransportURing && counts["dev"] > 0:
		return fmt.Sprintf("transport uring, but %d requests were served over /dev/fuse (%s)", counts["dev"], proof)
	case transport == proto.FUSETransportDev && counts["uring"] > 0:
		return fmt.Sprintf("transport dev, but %d requests were served over io_uring (%s)", counts["uring"], proof)
	}
	return ""
}

// mountHelperArgs are mount(8)'s arguments to a mount helper:
// SOURCE MNT [-sfnvrw] [-N NS] [-o OPTS] [-t TYPE].
type mountHelperArgs struct {
	source, mountpoint string
	options            []string
	fake               bool
}

// parseMountHelperArgs parses args (without the program's name).
func parseMountHelperArgs(args []string) (mountHelperArgs, error) {
	var m mountHelperArgs
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o" || a == "-t" || a == "-N":
			if i+1 >= len(args) {
				return m, fmt.Errorf("%s without its value", a)
			}
			i++
			if a == "-o" {
				m.options = append(m.options, splitOptions(args[i])...)
			} else if a == "-N" {
				return m, errors.New("-N: mounting in another namespace is not supported")
			}
		case strings.HasPrefix(a, "-o"):
			m.options = append(m.options, splitOptions(a[2:])...)
		case strings.HasPrefix(a, "-t"):
		case len(a) > 1 && a[0] == '-':
			for _, f := range a[1:] {
				switch f {
				case 'f':
					m.fake = true
				case 's', 'n', 'v', 'w':
				case 'r':
					m.options = append(m.options, "ro")
				default:
					return m, fmt.Errorf("unknown flag -%c", f)
				}
			}
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		return m, fmt.Errorf("want SOURCE MOUNTPOINT, got %q", pos)
	}
	m.source, m.mountpoint = pos[0], pos[1]
	return m, nil
}

// splitOptions splits a comma-separated option list.
func splitOptions(s string) []string {
	var out []string
	for _, o := range strings.Split(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// serverOptions are the options of a mount that go to the FUSE server:
// those mount(8) alone interprets are left out.
func serverOptions(opts []string) []string {
	var out []string
	for _, o := range opts {
		switch {
		case o == "defaults", o == "auto", o == "noauto", o == "nofail", o == "_netdev",
			strings.HasPrefix(o, "x-"), strings.HasPrefix(o, "comment="):
		default:
			out = append(out, o)
		}
	}
	return out
}

// fuseDaemonRequest is what the helper sends the daemon on stdin.
type fuseDaemonRequest struct {
	Setup      fstestsFUSESetup `json:"setup"`
	Server     string           `json:"server"`
	Source     string           `json:"source"`
	Mountpoint string           `json:"mountpoint"`
	Options    []string         `json:"options,omitempty"`
}

// FUSEMountHelperMain is the agent's executable run by mount(8) as
// mount.fuse.NAME inside a userspace (args are its os.Args): it mounts
// the server NAME over the backing directory SOURCE names
// (source:/DIR, or /DIR) with the transport of fstests-fuse.json, and
// returns once the mount is served; the server runs on in a daemon of
// its own until the mount goes away. A remount is left to mount(8)
// itself (mount -i).
func FUSEMountHelperMain(args []string, stderr io.Writer) int {
	name := filepath.Base(args[0])
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "%s: %s\n", name, fmt.Sprintf(format, a...))
		return 32 // mount(8)'s "mount failure"
	}
	m, err := parseMountHelperArgs(args[1:])
	if err != nil {
		return fail("%v", err)
	}
	if slices.Contains(m.options, "remount") {
		mount, err := exec.LookPath("mount")
		if err != nil {
			// mount(8) may run its helpers without a PATH.
			mount = "/usr/bin/mount"
		}
		return fail("remount: %v", syscall.Exec(mount, append([]string{"mount", "-i"}, args[1:]...), os.Environ()))
	}
	if m.fake {
		return 0
	}
	server := strings.TrimPrefix(name, "mount.fuse.")
	data, err := os.ReadFile(path.Join(proto.FstestsHelperDir, fstestsSetupName))
	if err != nil {
		return fail("no FUSE configuration (the agent writes it before fstests runs): %v", err)
	}
	var req fuseDaemonRequest
	if err := json.Unmarshal(data, &req.Setup); err != nil {
		return fail("%s: %v", fstestsSetupName, err)
	}
	if server == proto.FstestsServerPassthroughHP && req.Setup.HP == "" {
		return fail("passthrough_hp was not prepared (the configuration's server is %s)", req.Setup.Server)
	}
	req.Server, req.Source, req.Mountpoint, req.Options = server, m.source, m.mountpoint, serverOptions(m.options)
	if dir := strings.TrimPrefix(m.source, fstestsSourceTag); !filepath.IsAbs(dir) {
		return fail("source %q: want %s/DIR, the backing directory", m.source, fstestsSourceTag)
	}
	spec, err := json.Marshal(req)
	if err != nil {
		return fail("%v", err)
	}
	cmd := exec.Command("/proc/self/exe", FUSEDaemonArg)
	cmd.Stdin = strings.NewReader(string(spec))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fail("%v", err)
	}
	if err := cmd.Start(); err != nil {
		return fail("start the server: %v", err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	line = strings.TrimSpace(line)
	if line == "ok" {
		return 0 // the daemon serves on; it is not waited for
	}
	werr := cmd.Wait()
	if line == "" {
		line = fmt.Sprintf("the server ended before mounting (%v); see %s", werr, path.Join(proto.FstestsHelperDir, fstestsServersDir))
	}
	return fail("%s", line)
}

// FUSEDaemonMain serves one fstests FUSE mount (FUSEDaemonArg): it reads
// the helper's request on stdin, mounts, says "ok" (or the error) on
// stdout and closes it, then serves (or watches passthrough_hp) until the
// mount goes away or SIGTERM comes, writing its counters to
// fuse/PID.json and its log to fuse/PID.log.
func FUSEDaemonMain(stdin io.Reader, stdout *os.File) int {
	say := func(msg string) {
		fmt.Fprintln(stdout, msg)
		if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			_ = unix.Dup2(int(null.Fd()), int(stdout.Fd()))
			null.Close()
		}
	}
	var req fuseDaemonRequest
	if err := json.NewDecoder(io.LimitReader(stdin, 1<<20)).Decode(&req); err != nil {
		say("bad request: " + err.Error())
		return 2
	}
	dir := path.Join(proto.FstestsHelperDir, fstestsServersDir)
	base := path.Join(dir, strconv.Itoa(os.Getpid()))
	if lf, err := os.OpenFile(base+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		_ = unix.Dup2(int(lf.Fd()), 2)
		lf.Close()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := fstestsServerConfig(&req)
	cfg.Log = log
	log.Info("fstests fuse: mounting", "server", req.Server, "transport", cfg.Transport, "source", req.Source, "mountpoint", req.Mountpoint, "options", strings.Join(cfg.MountOptions, ","))
	sess, err := fuse.Start(context.Background(), cfg)
	if err != nil {
		log.Error("fstests fuse: mount failed", "err", err)
		say(err.Error())
		return 1
	}
	c := fuseCounters{Server: req.Server, Transport: cfg.Transport, Source: req.Source, Mountpoint: req.Mountpoint}
	var written *fuseCounters
	write := func() {
		if req.Server == proto.FstestsServerPassthroughHP {
			c.Dev = -1
			if n, err := fuse.URingCompletions(sess.ServerPID()); err == nil && n > c.URing {
				c.URing = n
			}
		} else {
			st := sess.Stats()
			if st.Dev != nil {
				c.Dev = int64(st.Dev.Requests)
			}
			if st.Ring != nil {
				c.URing = st.Ring.Requests
			}
		}
		if written != nil && *written == c {
			return
		}
		if data, err := json.Marshal(c); err == nil && fileio.WriteAtomic(base+".json", data, 0o644) == nil {
			w := c
			written = &w
		}
	}
	write()
	say("ok")
	log.Info("fstests fuse: serving", "conn", sess.ConnID())

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(fstestsCountersEvery)
	defer tick.Stop()
serve:
	for {
		select {
		case <-tick.C:
			write()
		case s := <-sigs:
			log.Info("fstests fuse: unmounting", "signal", s)
			break serve
		case <-sess.Done():
			break serve
		}
	}
	terr := sess.Teardown(context.Background(), false)
	write()
	c.Ended = true
	write()
	log.Info("fstests fuse: stopped", "dev", c.Dev, "uring", c.URing, "server_err", sess.Err(), "teardown_err", terr)
	if terr != nil {
		return 1
	}
	return 0
}

// fstestsServerConfig is the server configuration of a helper's request.
// klab's passthrough server serves extended attributes (fstests has
// tests of them) with its default 1 s caching; passthrough_hp runs with
// its own caching, as libfuse's fstests recipe runs it. Both mount as
// type "fuse" (no subtype: fstests checks that the type is $FSTYP) with
// the source as fstests named it.
func fstestsServerConfig(req *fuseDaemonRequest) fuse.Config {
	cfg := fuse.DefaultConfig()
	cfg.Transport = req.Setup.Transport
	cfg.Mountpoint = req.Mountpoint
	cfg.Backing = strings.TrimPrefix(req.Source, fstestsSourceTag)
	cfg.InitTimeout = fstestsInitTimeout
	cfg.MountOptions = append(slices.Clone(req.Options), "fsname="+req.Source)
	switch req.Server {
	case proto.FstestsServerPassthroughHP:
		cfg.Server = fuse.ServerLibfusePassthroughHP
		cfg.LibfusePath, cfg.LibfuseLoader = req.Setup.HP, req.Setup.Loader
		cfg.Threads = 0
		cfg.Splice = false
	default:
		cfg.Server = fuse.ServerPassthrough
		cfg.Xattr = true
		cfg.MountOptions = append(cfg.MountOptions, "subtype=")
		cfg.Threads = fstestsDevThreads
		if cfg.Transport == fuse.TransportURing {
			cfg.Threads = 0
		}
	}
	return cfg
}
