// Package cli is the command line of klab's FUSE servers and checks,
// shared by `klab fuse ...` on the host (cobra) and `klab-agent fuse ...`
// in the guest (Main): the flag sets bind to ServeOptions and CheckOptions,
// and Serve and Check do the work.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"klab/guest/fuse"
	"klab/guest/fuse/check"
	"klab/guest/fuse/devfuse"
	"klab/guest/fuse/dispatch"
	"klab/guest/fuse/intr"
	"klab/guest/fuse/stuck"
	"klab/guest/proto"
)

// ErrFailed is returned by Check when a check ran and failed.
var ErrFailed = errors.New("check failed")

// ServeOptions are the flags of `fuse serve`; AddFlags says what each
// means. They map onto fuse.Config.
type ServeOptions struct {
	Server            string        // --server
	Transport         string        // --transport
	Threads           int           // --threads
	QueueDepth        int           // --queue-depth
	ZeroCopy          bool          // --zero-copy
	Backing           string        // --backing
	Options           []string      // --option/-o, mount options
	AttrTimeout       time.Duration // --attr-timeout
	EntryTimeout      time.Duration // --entry-timeout
	Writeback         bool          // --writeback
	KernelPassthrough bool          // --kernel-passthrough
	Xattr             bool          // --xattr
	RequestTimeout    int           // --request-timeout, seconds
	MaxWrite          int           // --max-write, bytes
	NoSplice          bool          // --no-splice
	Rules             []string      // --rule, stuck rules
	Policy            string        // --interrupt-policy
	Holds             []string      // --hold, interrupt server rules
	Libfuse           string        // --libfuse, the libfuse server's path
	Stats             bool          // --stats
	CPUProfile        string        // --cpuprofile, pprof file
	MemProfile        string        // --memprofile, pprof file
	Verbose           bool          // --verbose, bound by the caller
}

// AddFlags binds o to f, except Verbose (callers bind their own).
func (o *ServeOptions) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&o.Server, "server", fuse.ServerPassthrough, "server: passthrough, stuck, interrupt, libfuse-passthrough_ll or libfuse-passthrough_hp")
	f.StringVar(&o.Transport, "transport", fuse.TransportDev, "transport: dev (/dev/fuse) or uring (FUSE-over-io_uring; sets fuse's enable_uring when off)")
	f.IntVar(&o.Threads, "threads", 0, "server threads: /dev/fuse workers (dev; 0 = 1), ring threads (uring; 0 = one per possible CPU), max_threads (passthrough_ll, passthrough_hp; 0 = libfuse's default)")
	f.IntVar(&o.QueueDepth, "queue-depth", 0, "io_uring entries per queue with --transport uring (0 = 8)")
	f.BoolVar(&o.ZeroCopy, "zero-copy", false, "with --transport uring: zero-copy queues, READs of read-only files go from the backing file into the client's pages (passthrough; Linux 7.3+, root)")
	f.StringVar(&o.Backing, "backing", "", "backing directory the server mirrors (required)")
	f.StringArrayVarP(&o.Options, "option", "o", nil, "mount option, e.g. allow_other, default_permissions, ro (repeatable, comma lists)")
	f.DurationVar(&o.AttrTimeout, "attr-timeout", time.Second, "attribute cache time")
	f.DurationVar(&o.EntryTimeout, "entry-timeout", time.Second, "name cache time")
	f.BoolVar(&o.Writeback, "writeback", false, "use the kernel's writeback cache")
	f.BoolVar(&o.KernelPassthrough, "kernel-passthrough", false, "register backing files with the kernel (FUSE_PASSTHROUGH, needs CAP_SYS_ADMIN)")
	f.BoolVar(&o.Xattr, "xattr", false, "serve extended attributes (as passthrough_ll -o xattr; costs a GETXATTR per write)")
	f.IntVar(&o.RequestTimeout, "request-timeout", 0, "request timeout in seconds sent in the INIT reply (0: none; the kernel uses at least 15)")
	f.IntVar(&o.MaxWrite, "max-write", 0, "largest WRITE in bytes (0: 1 MiB)")
	f.BoolVar(&o.NoSplice, "no-splice", false, "over /dev/fuse, read READ data into the server and write them back instead of splicing them from the backing file")
	f.StringArrayVar(&o.Rules, "rule", nil, "stuck rule OP[:NAME]=never|after-abort|delay:DURATION, e.g. lookup:stuck=never (repeatable)")
	f.StringVar(&o.Policy, "interrupt-policy", "cancel", "interrupt policy: cancel, ignore, enosys, eagain or eagain:N")
	f.StringArrayVar(&o.Holds, "hold", nil, "interrupt server hold rule OP[:NAME]=DURATION, e.g. lookup:held*=2s (repeatable)")
	f.StringVar(&o.Libfuse, "libfuse", "", "libfuse server binary for --server libfuse-passthrough_ll or libfuse-passthrough_hp (default "+proto.LibfusePassthroughLLPath+" or "+proto.LibfusePassthroughHPPath+")")
	f.BoolVar(&o.Stats, "stats", false, "print the server's counters as JSON when it stops")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a pprof CPU profile of the server to `FILE` when it stops (unmount or exit); klab's servers only")
	f.StringVar(&o.MemProfile, "memprofile", "", "write a pprof allocation profile of the server to `FILE` when it stops (go tool pprof -sample_index=alloc_objects); klab's servers only")
}

// Config returns the server configuration for mountpoint; every problem is
// reported at once.
func (o *ServeOptions) Config(mountpoint string) (fuse.Config, error) {
	c := fuse.DefaultConfig()
	var errs []error
	c.Server, c.Transport, c.Threads, c.QueueDepth = o.Server, o.Transport, o.Threads, o.QueueDepth
	c.ZeroCopy = o.ZeroCopy
	c.Mountpoint, c.Backing = mountpoint, o.Backing
	c.MountOptions = o.Options
	c.AttrTimeout, c.EntryTimeout = o.AttrTimeout, o.EntryTimeout
	c.Writeback, c.KernelPassthrough, c.Xattr = o.Writeback, o.KernelPassthrough, o.Xattr
	if o.RequestTimeout < 0 || o.RequestTimeout > 65535 {
		errs = append(errs, fmt.Errorf("--request-timeout %d: want 0..65535", o.RequestTimeout))
	} else {
		c.RequestTimeout = uint16(o.RequestTimeout)
	}
	c.MaxWrite = o.MaxWrite
	c.Splice = !o.NoSplice
	c.LibfusePath = o.Libfuse
	for _, r := range o.Rules {
		rule, err := stuck.ParseRule(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("--rule: %w", err))
			continue
		}
		c.Stuck = append(c.Stuck, rule)
	}
	p, err := dispatch.ParseInterruptPolicy(o.Policy)
	if err != nil {
		errs = append(errs, fmt.Errorf("--interrupt-policy: %w", err))
	}
	c.Interrupts = p
	for _, h := range o.Holds {
		hold, err := intr.ParseHold(h)
		if err != nil {
			errs = append(errs, fmt.Errorf("--hold: %w", err))
			continue
		}
		c.Hold = append(c.Hold, hold)
	}
	if (c.Server == fuse.ServerLibfusePassthroughLL || c.Server == fuse.ServerLibfusePassthroughHP) && (o.CPUProfile != "" || o.MemProfile != "") {
		errs = append(errs, fmt.Errorf("--cpuprofile and --memprofile profile klab's own servers; %s runs in its own process (use perf there)", c.Server))
	}
	if o.CPUProfile != "" && o.CPUProfile == o.MemProfile {
		errs = append(errs, fmt.Errorf("--cpuprofile and --memprofile name the same file %s", o.CPUProfile))
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// profiles are the pprof files a serve writes when it stops.
type profiles struct {
	cpu, mem *os.File
}

// startProfiles creates the profile files o names (so that a bad path
// fails before anything is mounted) and starts the CPU profile.
func startProfiles(o *ServeOptions) (*profiles, error) {
	p := &profiles{}
	var err error
	if o.CPUProfile != "" {
		if p.cpu, err = os.Create(o.CPUProfile); err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(p.cpu); err != nil {
			p.cpu.Close()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	if o.MemProfile != "" {
		if p.mem, err = os.Create(o.MemProfile); err != nil {
			p.stop()
			return nil, fmt.Errorf("--memprofile: %w", err)
		}
	}
	return p, nil
}

// stop ends the CPU profile and writes the allocation profile, then
// closes both files.
func (p *profiles) stop() error {
	var errs []error
	if p.cpu != nil {
		pprof.StopCPUProfile()
		if err := p.cpu.Close(); err != nil {
			errs = append(errs, fmt.Errorf("--cpuprofile: %w", err))
		}
		p.cpu = nil
	}
	if p.mem != nil {
		// The allocs profile counts every sampled allocation since the
		// start; a GC first makes its in-use numbers current.
		runtime.GC()
		err := pprof.Lookup("allocs").WriteTo(p.mem, 0)
		if cerr := p.mem.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--memprofile: %w", err))
		}
		p.mem = nil
	}
	return errors.Join(errs...)
}

func logger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// Serve mounts a server at mountpoint and serves it in the foreground
// until ctx is done (Ctrl-C) or the connection ends, then unmounts. The
// profiles o asks for are written once the server stopped.
func Serve(ctx context.Context, o *ServeOptions, mountpoint string, stdout, stderr io.Writer) (err error) {
	cfg, err := o.Config(mountpoint)
	if err != nil {
		return err
	}
	cfg.Log = logger(stderr, o.Verbose)
	prof, err := startProfiles(o)
	if err != nil {
		return err
	}
	defer func() {
		if perr := prof.stop(); perr != nil {
			err = errors.Join(err, perr)
		} else if o.CPUProfile != "" || o.MemProfile != "" {
			fmt.Fprintf(stderr, "fuse: profiles written:%s%s\n", profileNote(" CPU ", o.CPUProfile), profileNote(" allocations ", o.MemProfile))
		}
	}()
	s, err := fuse.Start(ctx, cfg)
	if err != nil {
		return err
	}
	desc := fmt.Sprintf("%s server over %s with %d thread(s)", cfg.Server, cfg.Transport, s.Config().Threads)
	if st := s.Stats(); st.Ring != nil {
		desc = fmt.Sprintf("%s server over io_uring (%d queues x %d entries, %d ring thread(s))", cfg.Server, st.Ring.Queues, st.Ring.Depth, st.Ring.Threads)
	}
	if cfg.Server == fuse.ServerLibfusePassthroughLL || cfg.Server == fuse.ServerLibfusePassthroughHP {
		path := cfg.LibfusePath
		if path == "" {
			path = proto.LibfusePassthroughLLPath
			if cfg.Server == fuse.ServerLibfusePassthroughHP {
				path = proto.LibfusePassthroughHPPath
			}
		}
		desc = fmt.Sprintf("%s over %s (%s, pid %d)", cfg.Server, cfg.Transport, path, s.ServerPID())
	}
	fmt.Fprintf(stderr, "fuse: %s mounted on %s (backing %s, connection %d); Ctrl-C to unmount\n", desc, mountpoint, cfg.Backing, s.ConnID())
	var serr error
	select {
	case <-ctx.Done():
		serr = s.Teardown(context.Background(), false)
		fmt.Fprintf(stderr, "fuse: unmounted %s\n", mountpoint)
	case <-s.Done():
		if !s.Mounted() && devfuse.IsGone(s.Err()) {
			// Unmounted from outside (umount MOUNTPOINT): a clean end.
			fmt.Fprintf(stderr, "fuse: %s was unmounted\n", mountpoint)
			serr = s.Teardown(context.Background(), true)
			break
		}
		fmt.Fprintf(stderr, "fuse: the connection ended: %v\n", s.Err())
		serr = s.Teardown(context.Background(), true)
		if serr == nil && s.Err() != nil {
			serr = fmt.Errorf("fuse: server on %s stopped: %w", mountpoint, s.Err())
		}
	}
	if o.Stats {
		b, _ := json.MarshalIndent(s.Stats(), "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return serr
}

func profileNote(what, path string) string {
	if path == "" {
		return ""
	}
	return what + path
}

// CheckOptions are the flags of `fuse check`; AddFlags says what each
// means.
type CheckOptions struct {
	JSON      bool   // --json
	Dir       string // --dir
	Transport string // --transport
	Verbose   bool   // --verbose, bound by the caller

	Timeout int           // timeout: --timeout, seconds
	Via     string        // timeout: --via
	Slack   time.Duration // timeout: --slack

	Policy string        // interrupt: --policy
	Hold   time.Duration // interrupt: --hold

	Stuck   int           // kill: --stuck
	Writers int           // kill: --writers
	Bound   time.Duration // kill: --bound
}

// Checks returns the names Check accepts.
func Checks() []string { return []string{"timeout", "interrupt", "kill"} }

// AddFlags binds o to f for check what (timeout, interrupt or kill),
// except Verbose (callers bind their own).
func (o *CheckOptions) AddFlags(f *pflag.FlagSet, what string) {
	f.BoolVar(&o.JSON, "json", false, "print results as JSON")
	f.StringVar(&o.Dir, "dir", "", "scratch directory for mounts (default: a new temporary directory)")
	f.StringVar(&o.Transport, "transport", fuse.TransportDev, "server transport: dev (/dev/fuse) or uring (FUSE-over-io_uring)")
	switch what {
	case "timeout":
		f.IntVar(&o.Timeout, "timeout", 1, "request timeout in seconds (the kernel uses at least 15)")
		f.StringVar(&o.Via, "via", "all", "how to set it: init (INIT reply), default or max (sysctl before mounting), or all")
		f.DurationVar(&o.Slack, "slack", 5*time.Second, "extra time allowed beyond timeout+15s")
	case "interrupt":
		f.StringVar(&o.Policy, "policy", "all", "server policy: cancel, ignore, enosys, eagain, eagain:N, or all")
		f.DurationVar(&o.Hold, "hold", 2*time.Second, "how long the server holds each request")
	case "kill":
		f.IntVar(&o.Stuck, "stuck", 4, "client threads blocked in requests the server never answers")
		f.IntVar(&o.Writers, "writers", 2, "client threads writing in a loop")
		f.DurationVar(&o.Bound, "bound", 10*time.Second, "how long clients may take to return after the kill")
	}
}

// Validate returns every problem of o's flags for check what, before
// anything is mounted: an unknown check, transport, --via or --policy,
// and numbers out of their range.
func (o *CheckOptions) Validate(what string) error {
	var errs []error
	switch o.Transport {
	case "", fuse.TransportDev, fuse.TransportURing:
	default:
		errs = append(errs, fmt.Errorf("--transport %q: want %s or %s", o.Transport, fuse.TransportDev, fuse.TransportURing))
	}
	switch what {
	case "timeout":
		if o.Timeout < 1 || o.Timeout > 65535 {
			errs = append(errs, fmt.Errorf("--timeout %d: want 1..65535 seconds", o.Timeout))
		}
		switch o.Via {
		case "all", check.ViaInit, check.ViaDefault, check.ViaMax:
		default:
			errs = append(errs, fmt.Errorf("--via %q: want %s, %s, %s or all", o.Via, check.ViaInit, check.ViaDefault, check.ViaMax))
		}
		if o.Slack < 0 {
			errs = append(errs, fmt.Errorf("--slack %v: want 0 or more", o.Slack))
		}
	case "interrupt":
		if o.Policy != "all" {
			if _, err := dispatch.ParseInterruptPolicy(o.Policy); err != nil {
				errs = append(errs, fmt.Errorf("--policy: %w, or all", err))
			}
		}
		if o.Hold < 0 {
			errs = append(errs, fmt.Errorf("--hold %v: want 0 or more (0: 2s)", o.Hold))
		}
	case "kill":
		if o.Stuck < 0 || o.Writers < 0 || o.Bound < 0 {
			errs = append(errs, fmt.Errorf("--stuck %d, --writers %d, --bound %v: want 0 or more (0: the default)", o.Stuck, o.Writers, o.Bound))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown check %q: want %s", what, strings.Join(Checks(), ", ")))
	}
	return errors.Join(errs...)
}

// Check runs check what and prints the results to stdout. It returns
// ErrFailed when a check failed, and other errors when one could not run;
// flags that Validate refuses are refused before anything runs.
func Check(ctx context.Context, what string, o *CheckOptions, stdout, stderr io.Writer) error {
	if err := o.Validate(what); err != nil {
		return err
	}
	log := logger(stderr, o.Verbose)
	if !o.Verbose {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	var rs []*check.Result
	var err error
	switch what {
	case "timeout":
		to := check.TimeoutOptions{Timeout: o.Timeout, Via: o.Via, Dir: o.Dir, Slack: o.Slack, Transport: o.Transport, Log: log}
		if o.Via == "all" {
			rs, err = check.TimeoutAll(ctx, to)
		} else {
			var r *check.Result
			if r, err = check.Timeout(ctx, to); r != nil {
				rs = append(rs, r)
			}
		}
	case "interrupt":
		iopt := check.InterruptOptions{Policy: o.Policy, Hold: o.Hold, Dir: o.Dir, Transport: o.Transport, Log: log}
		if o.Policy == "all" {
			rs, err = check.InterruptAll(ctx, iopt)
		} else {
			var r *check.Result
			if r, err = check.Interrupt(ctx, iopt); r != nil {
				rs = append(rs, r)
			}
		}
	case "kill":
		var r *check.Result
		if r, err = check.Kill(ctx, check.KillOptions{Stuck: o.Stuck, Writers: o.Writers, Bound: o.Bound, Dir: o.Dir, Transport: o.Transport, Log: log}); r != nil {
			rs = append(rs, r)
		}
	default:
		return fmt.Errorf("unknown check %q: want %s", what, strings.Join(Checks(), ", "))
	}
	rs = compact(rs)
	if o.JSON {
		b, jerr := json.MarshalIndent(rs, "", "  ")
		if jerr != nil {
			return jerr
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		for _, r := range rs {
			fmt.Fprintln(stdout, r)
		}
	}
	if err != nil {
		return err
	}
	for _, r := range rs {
		if !r.Pass {
			return ErrFailed
		}
	}
	return nil
}

func compact(rs []*check.Result) []*check.Result {
	out := rs[:0]
	for _, r := range rs {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}

const usage = `usage:
  %[1]s fuse serve [flags] --backing DIR MOUNTPOINT
  %[1]s fuse check timeout|interrupt|kill [flags]

serve runs a FUSE server in the foreground until Ctrl-C, then unmounts.
check runs a kernel behaviour check and exits 1 when it fails.
Run "%[1]s fuse serve --help" or "%[1]s fuse check timeout --help" for flags.
`

// Main runs `PROG fuse ARGS...` (args excludes "fuse") and returns the
// exit status: 0 on success, 1 when a check or the server failed, 2 for
// bad usage (flags and values refused before anything runs).
func Main(prog string, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, usage, prog)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "serve":
		var o ServeOptions
		f := pflag.NewFlagSet(prog+" fuse serve", pflag.ContinueOnError)
		f.SetOutput(stderr)
		o.AddFlags(f)
		f.BoolVarP(&o.Verbose, "verbose", "v", false, "log protocol details")
		if err := f.Parse(args[1:]); err != nil {
			if errors.Is(err, pflag.ErrHelp) {
				return 0
			}
			return 2
		}
		if f.NArg() != 1 {
			fmt.Fprintf(stderr, "%s fuse serve: want exactly one MOUNTPOINT argument, got %d\n", prog, f.NArg())
			return 2
		}
		if _, err := o.Config(f.Arg(0)); err != nil {
			fmt.Fprintf(stderr, "%s fuse serve: %v\n", prog, err)
			return 2
		}
		if err := Serve(ctx, &o, f.Arg(0), stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "%s fuse serve: %v\n", prog, err)
			return 1
		}
		return 0
	case "check":
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			fmt.Fprintf(stderr, "%s fuse check: want one of %s\n", prog, strings.Join(Checks(), ", "))
			return 2
		}
		what := args[1]
		var o CheckOptions
		f := pflag.NewFlagSet(prog+" fuse check "+what, pflag.ContinueOnError)
		f.SetOutput(stderr)
		o.AddFlags(f, what)
		f.BoolVarP(&o.Verbose, "verbose", "v", false, "log progress")
		if err := f.Parse(args[2:]); err != nil {
			if errors.Is(err, pflag.ErrHelp) {
				return 0
			}
			return 2
		}
		if err := o.Validate(what); err != nil {
			fmt.Fprintf(stderr, "%s fuse check %s: %v\n", prog, what, err)
			return 2
		}
		err := Check(ctx, what, &o, stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, ErrFailed):
			return 1
		default:
			fmt.Fprintf(stderr, "%s fuse check %s: %v\n", prog, what, err)
			return 1
		}
	default:
		fmt.Fprintf(stderr, "%s fuse: unknown command %q\n", prog, args[0])
		fmt.Fprintf(stderr, usage, prog)
		return 2
	}
}
