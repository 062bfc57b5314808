package fuse

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"klab/guest/fuse/devfuse"
	"klab/guest/fuse/stuck"
	"klab/guest/proto"
	"klab/images"
	"klab/images/debian"
	"klab/internal/paths"
	"klab/internal/testenv"
)

func hpConfig() Config {
	c := DefaultConfig()
	c.Server, c.Mountpoint, c.Backing = ServerLibfusePassthroughHP, "/m", "/b"
	c.Threads = 0
	return c
}

func TestValidatePassthroughHP(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string // substrings of the error; none: valid
	}{
		{"dev", func(c *Config) {}, nil},
		{"uring", func(c *Config) { c.Transport, c.QueueDepth, c.Threads = TransportURing, 16, 4 }, nil},
		{"threads over dev", func(c *Config) { c.Threads = 4 }, nil},
		{"kernel passthrough", func(c *Config) { c.KernelPassthrough = true }, nil},
		{"nocache", func(c *Config) { c.AttrTimeout, c.EntryTimeout = 0, 0 }, nil},
		{"writeback with caching", func(c *Config) { c.Writeback = true }, nil},
		{"queue depth over dev", func(c *Config) { c.QueueDepth = 8 }, []string{"queue depth is for transport uring only"}},
		{"queue depth too deep", func(c *Config) { c.Transport, c.QueueDepth = TransportURing, 5000 }, []string{"queue depth: 5000 is out of range"}},
		{"request timeout", func(c *Config) { c.RequestTimeout = 30 }, []string{"libfuse-passthrough_hp cannot send a request timeout", "fs.fuse.default_request_timeout"}},
		{"max_write", func(c *Config) { c.MaxWrite = 1 << 20 }, []string{"libfuse-passthrough_hp takes no max_write"}},
		{"one timeout zero", func(c *Config) { c.AttrTimeout = 0 }, []string{"give both 0 or both non-zero"}},
		{"writeback without caching", func(c *Config) { c.Writeback, c.AttrTimeout, c.EntryTimeout = true, 0, 0 }, []string{"writeback cache only with its caching"}},
		{"stuck rules", func(c *Config) { c.Stuck = []stuck.Rule{{}} }, []string{`stuck rules given for server "libfuse-passthrough_hp"`}},
		{"everything at once", func(c *Config) { c.RequestTimeout, c.MaxWrite = 30, 1<<20 }, []string{"request timeout", "max_write"}},
	} {
		c := hpConfig()
		tc.edit(&c)
		err := c.Validate()
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error, want %q", tc.name, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to say %q", tc.name, err, w)
			}
		}
	}
	// passthrough_ll still refuses io_uring, and says where it is.
	c := hpConfig()
	c.Server, c.Transport = ServerLibfusePassthroughLL, TransportURing
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "libfuse-passthrough_hp") {
		t.Errorf("passthrough_ll over uring: %v", err)
	}
}

func TestConfigFromStepPassthroughHP(t *testing.T) {
	c, err := ConfigFromStep(&proto.FUSEStep{Server: proto.FUSELibfusePassthroughHP, Transport: proto.FUSETransportURing,
		Threads: 2, QueueDepth: 8, Mountpoint: "/m", Backing: "/b", MountOptions: []string{"allow_other"}})
	if err != nil {
		t.Fatal(err)
	}
	if !c.external() || c.libfusePath() != proto.LibfusePassthroughHPPath {
		t.Errorf("external %v, path %s", c.external(), c.libfusePath())
	}
	want := []string{"--foreground", "--nosplice", "--nopassthrough", "--num-threads", "2",
		"-o", "io_uring", "-o", "io_uring_q_depth=8", "-o", "allow_other", "/b", "/m"}
	if got := passthroughHPArgs(c); !slices.Equal(got, want) {
		t.Errorf("args %q\nwant %q", got, want)
	}
	_, err = ConfigFromStep(&proto.FUSEStep{Server: proto.FUSELibfusePassthroughHP, Mountpoint: "/m", Backing: "/b", RequestTimeoutSec: 20, MaxWrite: 65536})
	if err == nil || !strings.Contains(err.Error(), "request timeout") || !strings.Contains(err.Error(), "max_write") {
		t.Errorf("step with a request timeout and max_write: %v", err)
	}
}

func TestPassthroughHPArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"dev, libfuse's threads", func(c *Config) {}, "--foreground --nosplice --nopassthrough /b /m"},
		{"dev, 4 threads", func(c *Config) { c.Threads = 4 }, "--foreground --nosplice --nopassthrough --num-threads 4 /b /m"},
		{"uring, default depth", func(c *Config) { c.Transport = TransportURing },
			"--foreground --nosplice --nopassthrough -o io_uring -o io_uring_q_depth=8 /b /m"},
		{"kernel passthrough, no cache", func(c *Config) { c.KernelPassthrough, c.AttrTimeout, c.EntryTimeout = true, 0, 0 },
			"--foreground --nosplice --nocache /b /m"},
	} {
		c := hpConfig()
		tc.edit(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if got := strings.Join(passthroughHPArgs(c), " "); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	c := hpConfig()
	c.LibfusePath = "/opt/hp"
	if c.libfusePath() != "/opt/hp" {
		t.Errorf("LibfusePath not used: %s", c.libfusePath())
	}
	c.Server, c.LibfusePath = ServerLibfusePassthroughLL, ""
	if c.libfusePath() != proto.LibfusePassthroughLLPath {
		t.Errorf("passthrough_ll's path: %s", c.libfusePath())
	}
}

func TestHPEnv(t *testing.T) {
	got := hpEnv([]string{"PATH=/bin", "FUSE_URING_ENABLE=1", "FUSE_URING_QUEUE_DEPTH=4", "HOME=/"})
	if !slices.Equal(got, []string{"PATH=/bin", "HOME=/"}) {
		t.Errorf("hpEnv = %q", got)
	}
}

// TestLibfusePassthroughHP mounts libfuse's passthrough_hp (libfuse 3.18,
// from the cache that images.BuildPassthroughHP fills) over both
// transports through a Session, and checks that its rchar counts the bytes
// it served (--nosplice), as the agent's min_served check needs.
func TestLibfusePassthroughHP(t *testing.T) {
	testenv.OptIn(t, "KLAB_LIBFUSE_HP", "mounts libfuse's passthrough_hp (built from Debian sid's fuse3 source on first use)")
	requireFUSE(t)
	cache := os.Getenv("KLAB_LIBFUSE_HP_CACHE")
	if cache == "" {
		cache = paths.CacheDir()
	}
	bin, _, err := images.BuildPassthroughHP(context.Background(), images.PassthroughHPOptions{DebianOptions: debian.Options{CacheDir: cache}})
	if err != nil {
		testenv.Missingf(t, "cannot build passthrough_hp: %v", err)
	}
	for _, tr := range []string{TransportDev, TransportURing} {
		t.Run(tr, func(t *testing.T) {
			if tr == TransportURing {
				requireURing(t)
			}
			dir := t.TempDir()
			cfg := DefaultConfig()
			cfg.Server, cfg.Transport, cfg.LibfusePath, cfg.Threads = ServerLibfusePassthroughHP, tr, bin, 2
			cfg.Mountpoint, cfg.Backing = filepath.Join(dir, "m"), filepath.Join(dir, "b")
			if err := os.MkdirAll(cfg.Backing, 0o755); err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte("klab"), 1<<20) // 4 MiB
			if err := os.WriteFile(filepath.Join(cfg.Backing, "big"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Start(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := s.Close(); err != nil {
					t.Errorf("teardown: %v", err)
				}
				select {
				case <-s.Done():
				case <-time.After(5 * time.Second):
					t.Error("passthrough_hp still running after teardown")
				}
			}()
			if m, err := devfuse.FindMount(s.Mountpoint()); err != nil || !strings.HasPrefix(m.FSType, "fuse") {
				t.Fatalf("mount %+v, %v", m, err)
			}
			if tr == TransportURing {
				if n, err := countURingFDs(s.ServerPID()); err != nil || n == 0 {
					t.Errorf("passthrough_hp holds %d io_uring instances (%v)", n, err)
				}
			}
			before := rchar(t, s.ServerPID())
			got, err := os.ReadFile(filepath.Join(s.Mountpoint(), "big"))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read through the mount: %d bytes, %v", len(got), err)
			}
			if d := rchar(t, s.ServerPID()) - before; d < int64(len(data)) {
				t.Errorf("the server's rchar grew by %d while it served %d bytes", d, len(data))
			}
			if err := os.WriteFile(filepath.Join(s.Mountpoint(), "new"), []byte("via passthrough_hp"), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// rchar is process pid's rchar.
func rchar(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		testenv.Missingf(t, "no /proc/PID/io: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatalf("no rchar in %s", b)
	return 0
}

func TestCQTail(t *testing.T) {
	info := "pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t1057\nSqMask:\t7\nSqHead:\t12\nSqTail:\t12\nCachedSqHead:\t12\nCqMask:\t15\nCqHead:\t11\nCqTail:\t11\nCachedCqTail:\t11\n"
	if got := cqTail(info); got != 11 {
		t.Errorf("cqTail = %d, want 11", got)
	}
	if got := cqTail("pos:\t0\n"); got != 0 {
		t.Errorf("cqTail without the field = %d, want 0", got)
	}
}
