// Package fuse starts and stops klab's FUSE servers: it turns a Config (or
// a proto.FUSEStep) into a mounted Session — a server kind (passthrough,
// stuck, interrupt, or libfuse's passthrough_ll or passthrough_hp as an
// external process) over a transport (/dev/fuse or FUSE-over-io_uring) —
// and tears it down so that a broken server never leaves a hung mount
// behind.
//
// The agent's fuse step, `klab fuse serve` on the host and
// `klab-agent fuse serve` in the guest all go through Start.
//
// The pieces live in sub-packages: abi (wire format), dispatch (the
// transport-neutral core that owns INIT and INTERRUPT), devfuse (the
// /dev/fuse transport and mount plumbing), ringfuse (the io_uring
// transport), fs (per-opcode interfaces),
// passthrough, stuck and intr (the servers), check (client-side checks of
// kernel behaviour) and cli (the command lines).
package fuse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/fuse/devfuse"
	"klab/guest/fuse/dispatch"
	"klab/guest/fuse/fs"
	"klab/guest/fuse/intr"
	"klab/guest/fuse/passthrough"
	"klab/guest/fuse/ringfuse"
	"klab/guest/fuse/stuck"
	"klab/guest/proto"
	"klab/internal/stwguard"
)

// Server kinds (the values of proto.FUSEStep.Server).
const (
	ServerPassthrough          = proto.FUSEPassthrough
	ServerStuck                = proto.FUSEStuck
	ServerInterrupt            = proto.FUSEInterrupt
	ServerLibfusePassthroughLL = proto.FUSELibfusePassthroughLL
	ServerLibfusePassthroughHP = proto.FUSELibfusePassthroughHP
)

// Transports.
const (
	TransportDev   = proto.FUSETransportDev
	TransportURing = proto.FUSETransportURing
)

// Config says which server to start and how.
type Config struct {
	// Server is the server kind; empty means passthrough.
	Server string
	// Transport is dev (the default) or uring (FUSE-over-io_uring; Start
	// sets the fuse module's enable_uring when it is off).
	Transport string
	// Mountpoint and Backing are created when missing.
	Mountpoint, Backing string
	// Threads is the number of server threads: /dev/fuse workers over
	// dev (0 means 1), ring threads over uring (0 means one per queue,
	// that is per possible CPU), libfuse's max_threads for passthrough_ll
	// and passthrough_hp (0 means libfuse's default; passthrough_hp over
	// uring runs one ring thread per queue besides them).
	Threads int
	// QueueDepth is the number of io_uring entries per queue over uring;
	// 0 means ringfuse.DefaultDepth (for passthrough_hp too).
	QueueDepth int
	// ZeroCopy makes the io_uring queues zero-copy (passthrough over
	// uring, Linux 7.3+, as root): READs of files opened read-only are
	// read from the backing file straight into the client's pages (see
	// ringfuse.Options.ZeroCopy).
	ZeroCopy bool
	// MountOptions are FUSE mount options (see devfuse.MountOptions).
	MountOptions []string
	// AttrTimeout and EntryTimeout are the kernel's cache times.
	// passthrough_hp has two settings only: 0 for both (--nocache), or
	// its own caching for any other value (a day, keep_cache, and the
	// writeback cache when not in kernel passthrough).
	AttrTimeout, EntryTimeout time.Duration
	// Writeback turns the writeback cache on. passthrough_hp decides for
	// itself (see AttrTimeout).
	Writeback bool
	// KernelPassthrough uses FUSE_PASSTHROUGH backing files.
	KernelPassthrough bool
	// Xattr serves extended attributes (off by default, as in
	// passthrough_ll: see passthrough.Options.Xattr). passthrough_hp
	// always serves them.
	Xattr bool
	// RequestTimeout, when non-zero, is sent in the INIT reply, in
	// seconds.
	RequestTimeout uint16
	// MaxWrite is the largest WRITE in bytes; 0 means 1 MiB.
	MaxWrite int
	// Splice sends READ replies over /dev/fuse spliced from the backing
	// files (one copy less, as libfuse does) rather than read into the
	// server's memory. Spliced bytes do not show in the server's rchar
	// (/proc/PID/io); Stats.Dev counts them. passthrough_hp always runs
	// with --nosplice, so that its rchar counts what it served.
	Splice bool
	// Stuck are the stuck server's rules.
	Stuck []stuck.Rule
	// Interrupts is the INTERRUPT policy of klab's servers.
	Interrupts dispatch.InterruptPolicy
	// Hold are the interrupt server's hold rules.
	Hold []intr.Hold
	// OnInterrupt, when set, sees every INTERRUPT (see dispatch.Config).
	OnInterrupt func(dispatch.InterruptEvent)
	// InitTimeout bounds how long Start waits for the mount to be served;
	// 0 means 10 s.
	InitTimeout time.Duration
	// LibfusePath is the libfuse server's binary; empty means
	// proto.LibfusePassthroughLLPath or proto.LibfusePassthroughHPPath.
	LibfusePath string
	// LibfuseLoader, when set, is the command that runs the libfuse
	// server: LibfusePath and its arguments follow it (a dynamic loader
	// with --library-path, for a server whose libraries are not the
	// system's).
	LibfuseLoader []string
	// Log receives the servers' messages; nil discards them.
	Log *slog.Logger
}

// DefaultConfig returns a passthrough server over /dev/fuse with one
// worker and passthrough_ll's 1 s caching.
func DefaultConfig() Config {
	return Config{
		Server:       ServerPassthrough,
		Transport:    TransportDev,
		Threads:      1,
		AttrTimeout:  passthrough.DefaultTimeout,
		EntryTimeout: passthrough.DefaultTimeout,
		Splice:       true,
	}
}

// ConfigFromStep converts a fuse step. Every problem is reported at once.
func ConfigFromStep(s *proto.FUSEStep) (Config, error) {
	c := DefaultConfig()
	if s == nil {
		return c, errors.New("fuse step without its fuse field")
	}
	var errs []error
	if s.Server != "" {
		c.Server = s.Server
	}
	if s.Transport != "" {
		c.Transport = s.Transport
	}
	c.Mountpoint, c.Backing = s.Mountpoint, s.Backing
	c.Threads = s.Threads
	c.QueueDepth = s.QueueDepth
	c.ZeroCopy = s.ZeroCopy
	c.Splice = !s.NoSplice
	c.MountOptions = s.MountOptions
	if p := s.Passthrough.AttrTimeoutMs; p != nil {
		c.AttrTimeout = time.Duration(*p) * time.Millisecond
	}
	if p := s.Passthrough.EntryTimeoutMs; p != nil {
		c.EntryTimeout = time.Duration(*p) * time.Millisecond
	}
	c.Writeback = s.Passthrough.Writeback
	c.KernelPassthrough = s.Passthrough.KernelPassthrough
	c.Xattr = s.Passthrough.Xattr
	if s.RequestTimeoutSec < 0 || s.RequestTimeoutSec > 65535 {
		errs = append(errs, fmt.Errorf("request_timeout_s: %d is out of range, want 0..65535", s.RequestTimeoutSec))
	} else {
		c.RequestTimeout = uint16(s.RequestTimeoutSec)
	}
	c.MaxWrite = s.MaxWrite
	for _, r := range s.Stuck {
		rule, err := stuck.ParseRule(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("stuck: %w", err))
			continue
		}
		c.Stuck = append(c.Stuck, rule)
	}
	if in := s.Interrupt; in != nil {
		p, err := dispatch.ParseInterruptPolicy(in.Policy)
		if err != nil {
			errs = append(errs, fmt.Errorf("interrupt.policy: %w", err))
		}
		c.Interrupts = p
		for _, h := range in.Hold {
			hold, err := intr.ParseHold(h)
			if err != nil {
				errs = append(errs, fmt.Errorf("interrupt.hold: %w", err))
				continue
			}
			c.Hold = append(c.Hold, hold)
		}
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// Validate checks c and reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	switch c.Server {
	case "", ServerPassthrough, ServerStuck, ServerInterrupt, ServerLibfusePassthroughLL, ServerLibfusePassthroughHP:
	default:
		errs = append(errs, fmt.Errorf("server %q: want passthrough, stuck, interrupt, libfuse-passthrough_ll or libfuse-passthrough_hp", c.Server))
	}
	switch c.Transport {
	case "", TransportDev:
		if c.QueueDepth != 0 {
			errs = append(errs, errors.New("queue depth is for transport uring only"))
		}
		if c.ZeroCopy {
			errs = append(errs, errors.New("zero-copy is for transport uring only"))
		}
	case TransportURing:
		if c.Server == ServerLibfusePassthroughLL {
			errs = append(errs, errors.New("transport uring: libfuse-passthrough_ll serves /dev/fuse only (libfuse's io_uring is server libfuse-passthrough_hp)"))
		}
		if c.ZeroCopy && c.Server != "" && c.Server != ServerPassthrough {
			errs = append(errs, fmt.Errorf("zero-copy: for server passthrough only, not %s", c.Server))
		}
		if c.QueueDepth < 0 || c.QueueDepth > ringfuse.MaxDepth {
			errs = append(errs, fmt.Errorf("queue depth: %d is out of range, want 1..%d (0: %d)", c.QueueDepth, ringfuse.MaxDepth, ringfuse.DefaultDepth))
		}
	default:
		errs = append(errs, fmt.Errorf("transport %q: want dev or uring", c.Transport))
	}
	if c.Mountpoint == "" {
		errs = append(errs, errors.New("mountpoint: missing"))
	}
	if c.Backing == "" {
		errs = append(errs, errors.New("backing: missing (the directory the server mirrors)"))
	}
	if c.Threads < 0 || c.Threads > 1024 {
		errs = append(errs, fmt.Errorf("threads: %d is out of range, want 1..1024 (0: the transport's default)", c.Threads))
	}
	if c.MaxWrite != 0 && (c.MaxWrite < 4096 || c.MaxWrite > 16<<20) {
		errs = append(errs, fmt.Errorf("max_write: %d is out of range, want 4096..16777216", c.MaxWrite))
	}
	if c.AttrTimeout < 0 || c.EntryTimeout < 0 {
		errs = append(errs, errors.New("attr and entry timeouts must not be negative"))
	}
	if c.Writeback && c.KernelPassthrough {
		errs = append(errs, errors.New("writeback and kernel passthrough exclude each other"))
	}
	if len(c.Stuck) > 0 && c.Server != ServerStuck {
		errs = append(errs, fmt.Errorf("stuck rules given for server %q; they need server stuck", c.Server))
	}
	if c.Server == ServerStuck && len(c.Stuck) == 0 {
		errs = append(errs, errors.New("server stuck needs at least one rule, e.g. lookup:stuck=never"))
	}
	if len(c.Hold) > 0 && c.Server != ServerInterrupt {
		errs = append(errs, fmt.Errorf("hold rules given for server %q; they need server interrupt", c.Server))
	}
	if c.Server == ServerLibfusePassthroughLL {
		if c.RequestTimeout != 0 {
			errs = append(errs, errors.New("libfuse-passthrough_ll cannot send a request timeout in INIT; set fs.fuse.default_request_timeout instead"))
		}
		if c.KernelPassthrough {
			errs = append(errs, errors.New("libfuse-passthrough_ll has no kernel passthrough (that is passthrough_hp)"))
		}
		if c.AttrTimeout != c.EntryTimeout {
			errs = append(errs, errors.New("libfuse-passthrough_ll has one timeout for attributes and entries; give both the same value"))
		}
		if c.MaxWrite != 0 {
			errs = append(errs, errors.New("libfuse-passthrough_ll takes no max_write here"))
		}
	}
	if c.Server == ServerLibfusePassthroughHP {
		errs = append(errs, c.validateHP()...)
	}
	return errors.Join(errs...)
}

// Session is a mounted server.
type Session struct {
	cfg   Config
	log   *slog.Logger
	mount devfuse.MountInfo

	// klab's servers
	conn *dispatch.Conn
	dev  *devfuse.Device
	ring *ringfuse.Transport // over uring
	// uringEnabled says Start set enable_uring.
	uringEnabled bool
	pfs          *passthrough.FS
	stuck        *stuck.Server
	intr         *intr.Server
	releaseGuard func() // ends the session's stwguard hold

	// passthrough_ll, passthrough_hp
	cmd *exec.Cmd

	done     chan struct{}
	err      error // set before done is closed
	tearOnce sync.Once
	tearErr  error
}

// onRingTimeout, when set (tests), runs when the rings did not register in
// time, before the teardown: a goroutine dump there shows where they are.
var onRingTimeout func()

// Start mounts the server cfg describes and returns once the kernel's
// INIT was answered (for passthrough_ll: once the mount appeared; for
// passthrough_hp over uring: once it also holds its rings).
func Start(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.Server == "" {
		cfg.Server = ServerPassthrough
	}
	if cfg.Transport == "" {
		cfg.Transport = TransportDev
	}
	if cfg.Threads == 0 && !cfg.external() && cfg.Transport == TransportDev {
		cfg.Threads = 1
	}
	if cfg.InitTimeout <= 0 {
		cfg.InitTimeout = 10 * time.Second
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, d := range []string{cfg.Mountpoint, cfg.Backing} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("fuse: %w", err)
		}
	}
	s := &Session{cfg: cfg, log: cfg.Log, done: make(chan struct{})}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := raiseFileLimit(); err != nil {
		s.log.Debug("fuse: cannot raise the open file limit", "err", err)
	}
	if cfg.Transport == TransportURing {
		changed, err := ringfuse.EnableURing()
		if err != nil {
			return nil, fmt.Errorf("fuse: transport uring: %w", err)
		}
		if changed {
			s.uringEnabled = true
			s.log.Info("fuse: set " + ringfuse.EnableURingPath + " to Y")
		}
	}
	switch cfg.Server {
	case ServerLibfusePassthroughLL:
		return s, s.startLibfuse(ctx)
	case ServerLibfusePassthroughHP:
		return s, s.startPassthroughHP(ctx)
	}
	return s, s.start(ctx)
}

func (s *Session) start(ctx context.Context) error {
	cfg := s.cfg
	pfs, err := passthrough.New(passthrough.Options{
		Root: cfg.Backing, AttrTimeout: cfg.AttrTimeout, EntryTimeout: cfg.EntryTimeout,
		Writeback: cfg.Writeback, KernelPassthrough: cfg.KernelPassthrough, Xattr: cfg.Xattr, Log: s.log,
		ZeroCopyReads: cfg.ZeroCopy,
	})
	if err != nil {
		return err
	}
	s.pfs = pfs
	fsh := fs.New(pfs)
	var h dispatch.Handler = fsh
	switch cfg.Server {
	case ServerStuck:
		s.stuck = stuck.New(fsh, fsh, cfg.Stuck)
		h = s.stuck
	case ServerInterrupt:
		s.intr = intr.New(fsh, fsh, cfg.Hold)
		h = s.intr
	}
	s.conn = dispatch.New(dispatch.Config{
		Handler: pollHack{h}, MaxWrite: cfg.MaxWrite, RequestTimeout: cfg.RequestTimeout,
		Interrupts: cfg.Interrupts, OnInterrupt: cfg.OnInterrupt, Log: s.log,
	})
	dev, err := devfuse.Open()
	if err != nil {
		pfs.Close()
		return err
	}
	dev.SetSplice(cfg.Splice)
	s.dev = dev
	t, err := s.transportFor(dev)
	if err != nil {
		dev.Close()
		pfs.Close()
		return err
	}
	mo := devfuse.MountOptions{FSName: "klab", Subtype: "klab-" + cfg.Server, Options: cfg.MountOptions}
	if err := devfuse.Mount(dev, cfg.Mountpoint, mo); err != nil {
		dev.Close()
		pfs.Close()
		return err
	}
	if s.mount, err = devfuse.FindMount(cfg.Mountpoint); err != nil {
		s.log.Warn("fuse: cannot find the new mount in mountinfo", "err", err)
	}
	// The server's goroutines block in system calls: keep Go's
	// stop-the-world pauses short while it runs (see stwguard).
	s.releaseGuard = stwguard.Hold()
	go s.serve(t)

	timer := time.NewTimer(cfg.InitTimeout)
	defer timer.Stop()
	select {
	case <-s.conn.Ready():
		if _, err := s.conn.Negotiated(); err != nil {
			_ = s.Teardown(context.Background(), true)
			return err
		}
		if s.ring != nil {
			// Requests block until every queue has an entry; a ring that
			// cannot register must fail the start, not hang the mount.
			if err := s.awaitRings(timer.C, cfg.InitTimeout); err != nil {
				return err
			}
		}
		if err := triggerPollHack(cfg.Mountpoint, 10*time.Second); err != nil {
			s.log.Warn("fuse: could not turn FUSE_POLL off; Go code in this process that opens files on the mount may deadlock with the server", "err", err)
		}
		return nil
	case <-s.done:
		return fmt.Errorf("fuse: server ended before INIT: %w", s.err)
	case <-timer.C:
		_ = s.Teardown(context.Background(), true)
		return fmt.Errorf("fuse: no INIT within %v", cfg.InitTimeout)
	case <-ctx.Done():
		_ = s.Teardown(context.Background(), true)
		return ctx.Err()
	}
}

// awaitRings waits until every ring thread registered its entries, or
// deadline fires. A start still waiting after a second is logged with
// the rings' phases, so that a slow start shows before it fails.
func (s *Session) awaitRings(deadline <-chan time.Time, limit time.Duration) error {
	warn := time.NewTimer(time.Second)
	defer warn.Stop()
	for {
		select {
		case <-s.ring.Ready():
			if err := s.ring.ReadyErr(); err != nil {
				_ = s.Teardown(context.Background(), true)
				return fmt.Errorf("fuse: transport uring: %w", err)
			}
			return nil
		case <-warn.C:
			s.log.Warn("fuse: the io_uring rings are slow to register", "progress", s.ring.Progress())
		case <-deadline:
			progress := s.ring.Progress()
			if onRingTimeout != nil {
				onRingTimeout()
			}
			_ = s.Teardown(context.Background(), true)
			return fmt.Errorf("fuse: transport uring: the rings did not register within %v (%s)", limit, progress)
		}
	}
}

// transportFor returns the transport the session's config asks for over
// dev. Transports implement dispatch.Transport (and dispatch.InitHook to
// add FUSE_OVER_IO_URING to INIT); the servers do not change.
func (s *Session) transportFor(dev *devfuse.Device) (dispatch.Transport, error) {
	cfg := s.cfg
	switch cfg.Transport {
	case TransportDev, "":
		return devfuse.NewTransport(dev, cfg.Threads), nil
	case TransportURing:
		t, err := ringfuse.New(dev, ringfuse.Options{
			Depth: cfg.QueueDepth, Threads: cfg.Threads, ZeroCopy: cfg.ZeroCopy, Log: s.log,
			// A ring that cannot serve would leave every request blocked:
			// end the connection instead.
			OnFatal: func(error) { go s.Abort() },
		})
		if err != nil {
			return nil, fmt.Errorf("fuse: transport uring: %w", err)
		}
		s.ring = t
		return t, nil
	default:
		return nil, fmt.Errorf("fuse: transport %q: want dev or uring", cfg.Transport)
	}
}

// serve runs the transport and cleans up after it.
func (s *Session) serve(t dispatch.Transport) {
	err := s.conn.Serve(t)
	// Let held requests that still reply do so before the device closes,
	// so that they see the kernel's answer rather than our ENODEV.
	if s.stuck != nil {
		s.stuck.WaitLate(time.Second)
	}
	if s.intr != nil {
		s.intr.WaitLate(time.Second)
	}
	s.dev.Close()
	s.pfs.Close()
	s.err = err
	s.releaseGuard()
	close(s.done)
}

func (s *Session) startLibfuse(ctx context.Context) error {
	cfg := s.cfg
	path := cfg.libfusePath()
	opts := []string{"source=" + cfg.Backing}
	var flags []string
	switch {
	case cfg.Threads == 1:
		// Single-threaded loop: libfuse 3.14's example ignores
		// max_threads (its loop config predates it) and runs up to 10.
		flags = append(flags, "-s")
	case cfg.Threads > 1:
		opts = append(opts, "max_threads="+strconv.Itoa(cfg.Threads))
	}
	if cfg.Writeback {
		opts = append(opts, "writeback")
	} else {
		opts = append(opts, "no_writeback")
	}
	if cfg.Xattr {
		opts = append(opts, "xattr")
	}
	opts = append(opts, "timeout="+strconv.FormatFloat(cfg.AttrTimeout.Seconds(), 'f', -1, 64))
	opts = append(opts, cfg.MountOptions...)
	args := append(append([]string{"-f"}, flags...), "-o", strings.Join(opts, ","), cfg.Mountpoint)
	return s.runExternal(ctx, path, args, nil)
}

// runExternal starts a libfuse server, path with args (env, when not nil,
// is its environment), and returns once its mount appeared.
func (s *Session) runExternal(ctx context.Context, path string, args, env []string) error {
	cfg := s.cfg
	argv := append(append(slices.Clone(cfg.LibfuseLoader), path), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("fuse: start %s: %w", path, err)
	}
	s.cmd = cmd
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	mounted := func() bool {
		m, err := devfuse.FindMount(cfg.Mountpoint)
		if err == nil && strings.HasPrefix(m.FSType, "fuse") {
			s.mount = m
			return true
		}
		return false
	}
	return s.waitExternal(ctx, mounted, func() error {
		return fmt.Errorf("fuse: %s %s exited before mounting: %v", path, strings.Join(args, " "), s.err)
	}, func() error {
		return fmt.Errorf("fuse: %s did not mount %s within %v", path, cfg.Mountpoint, cfg.InitTimeout)
	})
}

// waitExternal polls ready every 10 ms until it holds, and returns nil.
// When the libfuse process exits first it returns exited(); when ctx ends
// or Config.InitTimeout passes it tears the session down and returns
// ctx.Err() or timedOut().
func (s *Session) waitExternal(ctx context.Context, ready func() bool, exited, timedOut func() error) error {
	deadline := time.Now().Add(s.cfg.InitTimeout)
	for !ready() {
		select {
		case <-s.done:
			return exited()
		case <-ctx.Done():
			_ = s.Teardown(context.Background(), true)
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.Teardown(context.Background(), true)
			return timedOut()
		}
	}
	return nil
}

// Config returns the session's configuration.
func (s *Session) Config() Config { return s.cfg }

// Conn returns the dispatcher of klab's servers (nil for libfuse's).
func (s *Session) Conn() *dispatch.Conn { return s.conn }

// Stuck returns the stuck server, or nil.
func (s *Session) Stuck() *stuck.Server { return s.stuck }

// Interrupt returns the interrupt server, or nil.
func (s *Session) Interrupt() *intr.Server { return s.intr }

// FS returns the passthrough file system of klab's servers, or nil.
func (s *Session) FS() *passthrough.FS { return s.pfs }

// ConnID returns the connection's number under /sys/fs/fuse/connections.
func (s *Session) ConnID() uint32 { return s.mount.ConnID() }

// Mountpoint returns where the server is mounted.
func (s *Session) Mountpoint() string { return s.cfg.Mountpoint }

// Done is closed when the server stopped: after unmount or abort, or when
// the libfuse server exited.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns why the server stopped, once Done is closed: the
// transport's error (ENODEV for an unmount, an abort or a request timeout)
// or the libfuse server's exit status.
func (s *Session) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Abort aborts the connection through fusectl: requests in flight fail
// with ECONNABORTED, later ones with ENOTCONN, and the server stops.
func (s *Session) Abort() error {
	if s.mount.Mountpoint == "" {
		m, err := devfuse.FindMount(s.cfg.Mountpoint)
		if err != nil {
			return err
		}
		s.mount = m
	}
	return devfuse.Abort(s.mount.ConnID())
}

// Mounted reports whether the session's connection is still the topmost
// mount at its mountpoint: false once someone else unmounted it (or
// mounted something over it).
func (s *Session) Mounted() bool {
	m, err := devfuse.FindMount(s.cfg.Mountpoint)
	if err != nil {
		return false
	}
	if s.mount.Mountpoint == "" {
		// Not seen mounted yet (a libfuse server that was still
		// starting): a FUSE mount there now is taken to be its.
		if !strings.HasPrefix(m.FSType, "fuse") {
			return false
		}
		s.mount = m
	}
	return m.ConnID() == s.mount.ConnID() && m.FSType == s.mount.FSType
}

// Close unmounts normally, falling back to an abort and a lazy unmount.
func (s *Session) Close() error { return s.Teardown(context.Background(), false) }

// Teardown stops the server and removes the mount. Unless failed, it
// tries a normal unmount first (bounded: an unmount that waits on a stuck
// server is cut short by an abort). When failed, when the server already
// stopped on its own, or when the normal unmount does not work, it aborts
// the connection and unmounts lazily. It then waits for the server to
// stop, killing a libfuse server if it lingers. Only the first call acts;
// later ones return its result.
func (s *Session) Teardown(ctx context.Context, failed bool) error {
	s.tearOnce.Do(func() { s.tearErr = s.teardown(ctx, failed) })
	return s.tearErr
}

func (s *Session) teardown(ctx context.Context, failed bool) error {
	stopped := false
	select {
	case <-s.done:
		stopped = true // the server is gone; the mount is dead
	default:
	}
	// Someone else may have unmounted it (perhaps lazily, with files
	// still open and the connection alive): then the mountpoint is no
	// longer the session's, and whatever is there now is left alone.
	mounted := s.Mounted()
	failed = failed || stopped || !mounted
	var errs []error
	clean := false
	if !failed {
		if err := s.unmountBounded(ctx, 5*time.Second); err == nil {
			clean = true
		} else {
			s.log.Warn("fuse: unmount failed; aborting the connection", "mountpoint", s.cfg.Mountpoint, "err", err)
		}
	}
	if !clean {
		// Abort by connection number only while the number is surely
		// the session's: its mount is still there, or its server still
		// serves it. A connection that ended gives its number back, and
		// the next FUSE mount may get it.
		if mounted || !stopped {
			if err := s.Abort(); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		if mounted {
			if err := devfuse.Unmount(s.cfg.Mountpoint, true); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, err)
			}
		}
	}
	if s.cmd != nil {
		select {
		case <-s.done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		errs = append(errs, fmt.Errorf("fuse: server on %s did not stop", s.cfg.Mountpoint))
	}
	return errors.Join(errs...)
}

// unmountBounded unmounts; if that does not return within d (it waits for
// dirty pages a stuck server never takes), it aborts the connection, which
// lets it finish.
func (s *Session) unmountBounded(ctx context.Context, d time.Duration) error {
	res := make(chan error, 1)
	go func() { res <- devfuse.Unmount(s.cfg.Mountpoint, false) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-res:
		return err
	case <-t.C:
	case <-ctx.Done():
	}
	_ = s.Abort()
	return <-res
}

// Stats are a session's counters, for logs and reports.
type Stats struct {
	// Server and Transport name what ran.
	Server    string `json:"server"`
	Transport string `json:"transport"`
	// ConnID is the fusectl connection number.
	ConnID uint32 `json:"conn_id"`
	// Init describes the negotiated INIT (klab's servers).
	InitFlags      string `json:"init_flags,omitempty"`
	RequestTimeout uint16 `json:"request_timeout,omitempty"`
	// Conn are the dispatcher's counters (klab's servers).
	Conn *dispatch.Stats `json:"conn,omitempty"`
	// Ring are the io_uring transport's counters.
	Ring *ringfuse.Stats `json:"ring,omitempty"`
	// Dev are the /dev/fuse device's counters (klab's servers).
	Dev *devfuse.Stats `json:"dev,omitempty"`
	// ServedBytes and WrittenBytes are the file data klab's server served
	// in READ replies (from memory and spliced: dispatch.Stats.ReadBytes)
	// and wrote from WRITE requests; -1 for libfuse's servers, whose
	// process's rchar and wchar count them.
	ServedBytes  int64 `json:"served_bytes"`
	WrittenBytes int64 `json:"written_bytes"`
	// URingEnabled says the session set fuse's enable_uring.
	URingEnabled bool `json:"uring_enabled,omitempty"`
	// Stuck are the stuck server's holds.
	Stuck []stuck.Event `json:"stuck,omitempty"`
	// Interrupt are the interrupt server's held requests.
	Interrupt []intr.Outcome `json:"interrupt,omitempty"`
}

// ServerPID is the process that serves the mount: libfuse's for an
// external server, else the caller's own (klab's servers run in it).
func (s *Session) ServerPID() int {
	if s.cmd != nil && s.cmd.Process != nil {
		return s.cmd.Process.Pid
	}
	return os.Getpid()
}

// Stats returns the session's counters.
func (s *Session) Stats() Stats {
	st := Stats{Server: s.cfg.Server, Transport: s.cfg.Transport, ConnID: s.ConnID(), ServedBytes: -1, WrittenBytes: -1}
	if s.conn != nil {
		cs := s.conn.Stats()
		st.Conn = &cs
		st.ServedBytes = int64(cs.ReadBytes)
		if in, _ := s.conn.Negotiated(); in != nil {
			st.InitFlags = in.Granted().String()
			st.RequestTimeout = in.Out.RequestTimeout
		}
	}
	if s.ring != nil {
		rs := s.ring.Stats()
		st.Ring = &rs
	}
	if s.dev != nil {
		ds := s.dev.Stats()
		st.Dev = &ds
	}
	if s.pfs != nil {
		st.WrittenBytes = int64(s.pfs.WrittenBytes())
	}
	st.URingEnabled = s.uringEnabled
	if s.stuck != nil {
		st.Stuck = s.stuck.Events()
	}
	if s.intr != nil {
		st.Interrupt = s.intr.Outcomes()
	}
	return st
}

// raiseFileLimit lifts RLIMIT_NOFILE as far as allowed: the passthrough
// server holds one O_PATH descriptor per inode the kernel remembers (as
// passthrough_ll and passthrough_hp do), so a workload that creates many
// files needs many descriptors. As root the hard limit goes up to
// fs.nr_open (at most 2^20); otherwise the soft limit goes up to the hard
// one. Child processes inherit the new limit.
func raiseFileLimit() error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return err
	}
	want := lim.Max
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > want {
			want = min(n, 1<<20)
		}
	}
	if lim.Cur >= want {
		return nil
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: want, Max: max(want, lim.Max)}); err != nil {
		if lim.Cur < lim.Max {
			return unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: lim.Max, Max: lim.Max})
		}
		return err
	}
	return nil
}
