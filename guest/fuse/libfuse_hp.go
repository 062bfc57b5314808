package fuse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"klab/guest/fuse/ringfuse"
	"klab/guest/proto"
)

// libfuse 3.18's passthrough_hp as a server kind. klab runs it as
//
//	passthrough_hp --foreground --nosplice --nopassthrough [--nocache]
//	    [--num-threads N] [-o io_uring -o io_uring_q_depth=D] [-o OPT]... BACKING MOUNTPOINT
//
//   - --nosplice: spliced READ data never pass through the server's
//     memory and so not through its rchar (/proc/PID/io), which is how the
//     agent measures what a server read (min_served); klab's own server
//     counts its spliced bytes itself, passthrough_hp cannot. Over io_uring
//     neither server splices.
//   - --nopassthrough unless Config.KernelPassthrough: without it reads and
//     writes of open files bypass the server through the kernel.
//   - --nocache when both cache times are 0; otherwise passthrough_hp's own
//     caching (a day, keep_cache, and the writeback cache when not in
//     kernel passthrough): it has no other setting.
//   - --num-threads is libfuse's max_threads of the /dev/fuse loop. Over
//     io_uring libfuse also runs one ring thread per queue, a queue per
//     possible CPU, which no option changes.
//   - io_uring is a mount option in 3.18 (3.17's --uring is gone), and
//     libfuse quietly serves /dev/fuse when the kernel does not offer it:
//     Start sets fuse's enable_uring first and waits for the server to hold
//     io_uring instances before it returns.
//
// passthrough_hp adds default_permissions to the mount and always serves
// extended attributes.

// validateHP returns the problems of a passthrough_hp configuration: the
// knobs it has no option for.
func (c *Config) validateHP() []error {
	var errs []error
	const hp = ServerLibfusePassthroughHP
	if c.RequestTimeout != 0 {
		errs = append(errs, errors.New(hp+" cannot send a request timeout in INIT; set fs.fuse.default_request_timeout instead"))
	}
	if c.MaxWrite != 0 {
		errs = append(errs, errors.New(hp+" takes no max_write (it asks for 4 MiB)"))
	}
	if (c.AttrTimeout == 0) != (c.EntryTimeout == 0) {
		errs = append(errs, errors.New(hp+" caches attributes and entries alike (a day) or not at all (--nocache, both timeouts 0); give both 0 or both non-zero"))
	}
	if c.Writeback && c.AttrTimeout == 0 && c.EntryTimeout == 0 {
		errs = append(errs, errors.New(hp+" has the writeback cache only with its caching; --nocache (timeouts 0) turns it off"))
	}
	return errs
}

// external reports whether the server runs as a libfuse process.
func (c *Config) external() bool {
	return c.Server == ServerLibfusePassthroughLL || c.Server == ServerLibfusePassthroughHP
}

// libfusePath is the libfuse server's binary.
func (c *Config) libfusePath() string {
	switch {
	case c.LibfusePath != "":
		return c.LibfusePath
	case c.Server == ServerLibfusePassthroughHP:
		return proto.LibfusePassthroughHPPath
	default:
		return proto.LibfusePassthroughLLPath
	}
}

// passthroughHPArgs returns passthrough_hp's arguments for cfg (see the
// comment at the top of this file).
func passthroughHPArgs(cfg Config) []string {
	args := []string{"--foreground", "--nosplice"}
	if !cfg.KernelPassthrough {
		args = append(args, "--nopassthrough")
	}
	if cfg.AttrTimeout == 0 && cfg.EntryTimeout == 0 {
		args = append(args, "--nocache")
	}
	if cfg.Threads > 0 {
		args = append(args, "--num-threads", strconv.Itoa(cfg.Threads))
	}
	if cfg.Transport == TransportURing {
		depth := cfg.QueueDepth
		if depth == 0 {
			depth = ringfuse.DefaultDepth
		}
		args = append(args, "-o", "io_uring", "-o", "io_uring_q_depth="+strconv.Itoa(depth))
	}
	for _, o := range cfg.MountOptions {
		args = append(args, "-o", o)
	}
	return append(args, cfg.Backing, cfg.Mountpoint)
}

// hpEnv is the environment passthrough_hp runs with: the agent's, without
// libfuse's FUSE_URING_* overrides, so that the transport is the one
// configured.
func hpEnv(environ []string) []string {
	env := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "FUSE_URING_") {
			env = append(env, kv)
		}
	}
	return env
}

// startPassthroughHP starts passthrough_hp and returns once it is mounted
// and, over uring, holds its rings.
func (s *Session) startPassthroughHP(ctx context.Context) error {
	cfg := s.cfg
	path := cfg.libfusePath()
	args := passthroughHPArgs(cfg)
	if err := s.runExternal(ctx, path, args, hpEnv(os.Environ())); err != nil {
		return err
	}
	if cfg.Transport != TransportURing {
		return nil
	}
	// libfuse sets its rings up while it answers INIT, before its reply;
	// without them it serves /dev/fuse and says nothing.
	var lastErr error
	rings := func() bool {
		n, err := countURingFDs(s.cmd.Process.Pid)
		lastErr = err
		if err == nil && n > 0 {
			s.log.Info("fuse: passthrough_hp serves over io_uring", "io_uring_instances", n)
			return true
		}
		return false
	}
	return s.waitExternal(ctx, rings, func() error {
		return fmt.Errorf("fuse: %s %s exited after mounting: %v", path, strings.Join(args, " "), s.err)
	}, func() error {
		why := "the kernel did not offer FUSE-over-io_uring"
		if lastErr != nil {
			why = lastErr.Error()
		}
		return fmt.Errorf("fuse: transport uring: %s holds no io_uring %v after mounting (%s); it would serve /dev/fuse", path, cfg.InitTimeout, why)
	})
}

// countURingFDs counts the io_uring instances among process pid's open
// files.
func countURingFDs(pid int) (int, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && t == "anon_inode:[io_uring]" {
			n++
		}
	}
	return n, nil
}

// URingCompletions sums the completions posted so far on process pid's
// io_uring instances (CqTail in /proc/PID/fdinfo, which wraps at 2^32).
// A libfuse server over io_uring gets one completion per request the
// rings carry, and one per queue at teardown.
func URingCompletions(pid int) (uint64, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, e := range ents {
		if t, err := os.Readlink(filepath.Join(dir, e.Name())); err != nil || t != "anon_inode:[io_uring]" {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "fdinfo", e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		n += cqTail(string(info))
	}
	return n, nil
}

// cqTail is the CqTail field of an io_uring's fdinfo, 0 when missing.
func cqTail(fdinfo string) uint64 {
	for _, l := range strings.Split(fdinfo, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && k == "CqTail" {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			return n
		}
	}
	return 0
}
