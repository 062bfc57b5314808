package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"klab/guest/fuse"
	"klab/guest/fuse/ringfuse"
	"klab/internal/testenv"
)

func TestServeConfigErrors(t *testing.T) {
	var o ServeOptions
	f := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(f)
	if err := f.Parse([]string{"--server", "stuck", "--rule", "lookup=forever", "--interrupt-policy", "sometimes", "--threads", "0", "--request-timeout", "70000", "--hold", "x", "--writeback", "--kernel-passthrough"}); err != nil {
		t.Fatal(err)
	}
	_, err := o.Config("")
	if err == nil {
		t.Fatal("bad flags accepted")
	}
	for _, want := range []string{"--rule", "--interrupt-policy", "--request-timeout", "--hold", "mountpoint: missing", "backing: missing", "writeback and kernel passthrough"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	o = ServeOptions{}
	f = pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(f)
	_ = f.Parse([]string{"--backing", "/b", "--threads", "4", "-o", "allow_other", "--rule", "lookup:x=never", "--server", "stuck"})
	c, err := o.Config("/m")
	if err != nil || c.Threads != 4 || c.Mountpoint != "/m" || len(c.Stuck) != 1 || c.MountOptions[0] != "allow_other" {
		t.Errorf("Config = %+v, %v", c, err)
	}
}

func TestMainUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main("prog", nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "prog fuse serve") {
		t.Errorf("no args: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := Main("prog", []string{"serve", "--backing", "/x"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "MOUNTPOINT") {
		t.Errorf("serve without mount point: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := Main("prog", []string{"check"}, &out, &errb); code != 2 {
		t.Errorf("check without a name: %d", code)
	}
	errb.Reset()
	if code := Main("prog", []string{"check", "nosuch"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "unknown check") {
		t.Errorf("unknown check: %d %q", code, errb.String())
	}
	// Values refused before anything is mounted are bad usage too.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--server", "nope", "--backing", "/x", "/m"}, `server "nope"`},
		{[]string{"check", "timeout", "--transport", "nope"}, `--transport "nope": want dev or uring`},
		{[]string{"check", "timeout", "--via", "sideways"}, `--via "sideways"`},
		{[]string{"check", "timeout", "--timeout", "0"}, "--timeout 0: want 1..65535"},
		{[]string{"check", "interrupt", "--policy", "nope"}, `--policy: interrupt policy "nope"`},
		{[]string{"check", "kill", "--stuck", "-1"}, "--stuck -1"},
	} {
		errb.Reset()
		if code := Main("prog", c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%q: %d %q, want 2 and one line with %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestCheckValidate: every check's defaults are valid, and each problem
// is reported at once.
func TestCheckValidate(t *testing.T) {
	for _, what := range Checks() {
		var o CheckOptions
		f := pflag.NewFlagSet(what, pflag.ContinueOnError)
		o.AddFlags(f, what)
		if err := o.Validate(what); err != nil {
			t.Errorf("%s: the defaults are refused: %v", what, err)
		}
	}
	o := CheckOptions{Transport: "nope", Timeout: 0, Via: "x"}
	err := o.Validate("timeout")
	for _, want := range []string{"--transport", "--timeout", "--via"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %s in it", err, want)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader in two
// goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// gunzip returns the decompressed content of a gzip file (pprof's format).
func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s is not a pprof file: %v", path, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

func TestServeProfiles(t *testing.T) {
	testenv.RequiresFUSE(t)
	// At the default rate (one sample per 512 KiB) a worker's request
	// buffer is sampled with a probability well below one, so the check
	// on the profile's functions below could fail by chance. Sample every
	// allocation for this test.
	rate := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = rate }()
	for _, transport := range []string{fuse.TransportDev, fuse.TransportURing} {
		t.Run(transport, func(t *testing.T) {
			if transport == fuse.TransportURing {
				if _, err := ringfuse.EnableURing(); err != nil {
					testenv.Missingf(t, "the kernel has no FUSE-over-io_uring: %v", err)
				}
			}
			dir := t.TempDir()
			mnt, cpu, mem := filepath.Join(dir, "mnt"), filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res, stderr := serveMounted(ctx, t, mnt, "--backing", filepath.Join(dir, "b"), "--transport", transport, "--cpuprofile", cpu, "--memprofile", mem)
			// Some work for the profiles: writes and reads of 64 KiB.
			data := bytes.Repeat([]byte("klab"), 16<<10)
			for i := 0; i < 200; i++ {
				p := filepath.Join(mnt, "f"+strconv.Itoa(i%10))
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := os.ReadFile(p); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Stat(cpu); err != nil {
				t.Errorf("the CPU profile file was not created at start: %v", err)
			}
			cancel()
			select {
			case err := <-res:
				if err != nil {
					t.Fatalf("serve: %v\n%s", err, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("serve did not stop:\n%s", stderr.String())
			}
			if !strings.Contains(stderr.String(), "profiles written") {
				t.Errorf("no note of the profiles:\n%s", stderr.String())
			}
			// pprof files are gzipped protocol buffers whose string table
			// names the sample types and the functions.
			if b := gunzip(t, cpu); !bytes.Contains(b, []byte("nanoseconds")) {
				t.Errorf("%s has no CPU sample type", cpu)
			}
			b := gunzip(t, mem)
			if !bytes.Contains(b, []byte("alloc_space")) {
				t.Errorf("%s has no allocation sample type", mem)
			}
			// Every allocation is sampled: the workers' request buffers are there.
			want := "klab/guest/fuse/devfuse"
			if transport == fuse.TransportURing {
				want = "klab/guest/fuse/ringfuse"
			}
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s names no function of %s", mem, want)
			}
		})
	}
}

func TestServeProfileErrors(t *testing.T) {
	o := ServeOptions{}
	f := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(f)
	_ = f.Parse([]string{"--backing", "/b", "--server", "libfuse-passthrough_ll", "--cpuprofile", "x", "--memprofile", "x"})
	_, err := o.Config("/m")
	for _, want := range []string{"klab's own servers", "the same file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	// A profile that cannot be written fails before anything is mounted.
	o = ServeOptions{}
	f = pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(f)
	dir := t.TempDir()
	_ = f.Parse([]string{"--backing", filepath.Join(dir, "b"), "--cpuprofile", filepath.Join(dir, "no", "such", "dir", "cpu.pprof")})
	var out, errb bytes.Buffer
	err = Serve(context.Background(), &o, filepath.Join(dir, "m"), &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Errorf("serve with an unwritable profile: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "m")); serr == nil {
		t.Errorf("the mount point was made before the profile failed")
	}
}

func TestServePassthroughHPConfig(t *testing.T) {
	parse := func(args ...string) error {
		o := ServeOptions{}
		f := pflag.NewFlagSet("t", pflag.ContinueOnError)
		o.AddFlags(f)
		if err := f.Parse(append([]string{"--backing", "/b", "--server", "libfuse-passthrough_hp"}, args...)); err != nil {
			t.Fatal(err)
		}
		_, err := o.Config("/m")
		return err
	}
	if err := parse("--transport", "uring", "--queue-depth", "16", "--threads", "2"); err != nil {
		t.Errorf("passthrough_hp over uring: %v", err)
	}
	err := parse("--request-timeout", "20", "--cpuprofile", "x")
	for _, want := range []string{"libfuse-passthrough_hp cannot send a request timeout", "libfuse-passthrough_hp runs in its own process"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// TestServeEndings stops `fuse serve` from outside: an umount of its
// mountpoint is a clean end (exit 0) that leaves alone the file system it
// was mounted over, and an abort of its connection is an error whose
// dead mount serve detaches, again without touching what lies beneath.
func TestServeEndings(t *testing.T) {
	testenv.RequiresFUSE(t)
	for _, c := range []struct {
		name    string
		end     func(t *testing.T, mnt, stderr string) error
		wantErr bool
		say     string
	}{
		{name: "umount", end: func(t *testing.T, mnt, _ string) error { return unix.Unmount(mnt, 0) }, say: "was unmounted"},
		{name: "abort", end: func(t *testing.T, mnt, stderr string) error {
			_, rest, _ := strings.Cut(stderr, "connection ")
			id, _, _ := strings.Cut(rest, ")")
			return os.WriteFile("/sys/fs/fuse/connections/"+id+"/abort", []byte("1"), 0o200)
		}, wantErr: true, say: "the connection ended"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mnt := filepath.Join(dir, "mnt")
			if err := os.Mkdir(mnt, 0o755); err != nil {
				t.Fatal(err)
			}
			// The user's own file system at the mountpoint, under klab's.
			if err := unix.Mount("klab-test", mnt, "tmpfs", 0, "size=1m"); err != nil {
				testenv.Missingf(t, "cannot mount a tmpfs: %v", err)
			}
			t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
			keep := filepath.Join(mnt, "keep")
			if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			res, stderr := serveMounted(ctx, t, mnt, "--backing", filepath.Join(dir, "b"))
			if _, err := os.Stat(keep); err == nil {
				t.Fatalf("%s is visible: the FUSE mount is not on top", keep)
			}
			if err := c.end(t, mnt, stderr.String()); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-res:
			case <-time.After(30 * time.Second):
				t.Fatalf("serve did not stop:\n%s", stderr.String())
			}
			if (err != nil) != c.wantErr {
				t.Errorf("serve returned %v, want an error: %v\n%s", err, c.wantErr, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.say) {
				t.Errorf("serve did not say %q:\n%s", c.say, stderr.String())
			}
			if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
				t.Errorf("the file system under the mount is gone: %q, %v", b, err)
			}
		})
	}
}

// serveMounted runs Serve with args until ctx ends, in the background, and
// returns once it mounted mnt: its result channel and its stderr.
func serveMounted(ctx context.Context, t *testing.T, mnt string, args ...string) (<-chan error, *lockedBuffer) {
	t.Helper()
	o := ServeOptions{}
	f := pflag.NewFlagSet("t", pflag.ContinueOnError)
	o.AddFlags(f)
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr lockedBuffer
	res := make(chan error, 1)
	go func() { res <- Serve(ctx, &o, mnt, &stdout, &stderr) }()
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), "mounted on"); {
		select {
		case err := <-res:
			t.Fatalf("serve ended before mounting: %v\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not mounted after 20 s:\n%s", stderr.String())
		}
	}
	return res, &stderr
}
