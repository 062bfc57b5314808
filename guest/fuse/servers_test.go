package fuse

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/devfuse"
	"klab/guest/fuse/match"
	"klab/guest/fuse/stuck"
	"klab/images"
	"klab/internal/testenv"
)

// TestStuckDelay checks that a delay rule slows exactly the requests it
// selects.
func TestStuckDelay(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Server = ServerStuck
	cfg.AttrTimeout, cfg.EntryTimeout = 0, 0
	cfg.Stuck = []stuck.Rule{{Select: match.Selector{Op: abi.OpLookup, Name: "slow"}, Action: stuck.Delay, Delay: 300 * time.Millisecond}}
	s := mount(t, cfg)
	for _, n := range []string{"slow", "fast"} {
		if err := os.WriteFile(filepath.Join(s.Config().Backing, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The delay's timer never fires early, so the slow LOOKUP takes at
	// least its 300 ms; that the fast one was not held shows in the
	// server's events below, which hold the slow one only.
	for _, c := range []struct {
		name string
		min  time.Duration
	}{{"slow", 300 * time.Millisecond}, {"fast", 0}} {
		start := time.Now()
		_, err := os.Stat(filepath.Join(s.Mountpoint(), c.name))
		if el := time.Since(start); err != nil || el < c.min {
			t.Errorf("stat %s: %v after %v, want success after at least %v", c.name, err, el, c.min)
		}
	}
	// The server records the reply right after writing it (wait for
	// that for up to a minute: only a lost event takes that long).
	var ev []stuck.Event
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ev = s.Stuck().Events(); len(ev) == 1 && !ev[0].Replied.IsZero() {
			break
		}
	}
	if len(ev) != 1 || ev[0].Name != "slow" || ev[0].Replied.IsZero() || ev[0].ReplyErr != "" {
		t.Errorf("events %+v", ev)
	}
}

// TestTeardownWithStuckRequest tears down a mount while a client waits on
// a request the server never answers: the normal unmount fails (busy), so
// the session aborts, and the client gets ECONNABORTED.
func TestTeardownWithStuckRequest(t *testing.T) {
	requireFUSE(t)
	for _, transport := range []string{TransportDev, TransportURing} {
		t.Run(transport, func(t *testing.T) {
			if transport == TransportURing {
				requireURing(t)
			}
			dir := t.TempDir()
			cfg := DefaultConfig()
			cfg.Server = ServerStuck
			cfg.Transport = transport
			if transport == TransportURing {
				// One entry per queue: the held requests fill their
				// queues, and the others wait in the kernel.
				cfg.QueueDepth, cfg.Threads = 1, 1
			}
			cfg.Mountpoint, cfg.Backing = filepath.Join(dir, "m"), filepath.Join(dir, "b")
			cfg.Stuck = []stuck.Rule{{Select: match.Selector{Op: abi.OpLookup, Name: "stuck*"}, Action: stuck.Never}}
			s, err := Start(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			held := s.Stuck().Held()
			const clients = 4
			res := make(chan error, clients)
			for i := range clients {
				go func() {
					var st unix.Stat_t
					res <- unix.Stat(filepath.Join(cfg.Mountpoint, fmt.Sprintf("stuck%d", i)), &st)
				}()
			}
			<-held
			time.Sleep(100 * time.Millisecond) // let the other clients block too
			start := time.Now()
			if err := s.Close(); err != nil {
				t.Errorf("teardown: %v", err)
			}
			for range clients {
				select {
				case err := <-res:
					if !errors.Is(err, syscall.ECONNABORTED) && !errors.Is(err, syscall.ENOTCONN) {
						t.Errorf("stuck client got %v, want ECONNABORTED (or ENOTCONN if it came after the abort)", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("stuck client still blocked after teardown")
				}
			}
			// Close aborts the connection as soon as the unmount fails
			// (busy), and the clients end with the abort: only a
			// teardown that waited for the held requests, which are
			// never answered, would take 10 s.
			if el := time.Since(start); el > 10*time.Second {
				t.Errorf("teardown took %v", el)
			}
			select {
			case <-s.Done():
			default:
				t.Error("the server still runs after teardown")
			}
			if _, err := devfuse.FindMount(cfg.Mountpoint); err == nil {
				t.Error("still mounted after teardown")
			}
			t.Logf("teardown with %d held requests over %s: %v; %+v", clients, transport, time.Since(start).Round(time.Millisecond), s.Stats().Ring)
		})
	}
}

// TestRequestTimeoutNegotiated checks the INIT reply of a server asked to
// send a request timeout.
func TestRequestTimeoutNegotiated(t *testing.T) {
	cfg := DefaultConfig()
	cfg.RequestTimeout = 42
	s := mount(t, cfg)
	in, err := s.Conn().Negotiated()
	if err != nil {
		t.Fatal(err)
	}
	if in.Offered&abi.InitRequestTimeout == 0 {
		testenv.Missing(t, "the kernel does not offer FUSE_REQUEST_TIMEOUT (Linux 6.14 or later)")
	}
	if in.Granted()&abi.InitRequestTimeout == 0 || in.Out.RequestTimeout != 42 {
		t.Errorf("INIT reply flags %s, request_timeout %d", in.Granted(), in.Out.RequestTimeout)
	}
}

// TestLibfusePassthroughLL serves a mount with libfuse's passthrough_ll,
// built from the host's libfuse3-dev examples, through the same Session.
func TestLibfusePassthroughLL(t *testing.T) {
	requireFUSE(t)
	testenv.RequiresCommand(t, "gcc")
	bin, err := images.BuildPassthroughLL(context.Background(), t.TempDir(), nil)
	if err != nil {
		testenv.Missingf(t, "cannot build passthrough_ll: %v", err)
	}
	cfg := DefaultConfig()
	cfg.Server, cfg.LibfusePath, cfg.Threads = ServerLibfusePassthroughLL, bin, 4
	s := mount(t, cfg)
	p := filepath.Join(s.Mountpoint(), "f")
	if err := os.WriteFile(p, []byte("via libfuse"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(s.Config().Backing, "f")); err != nil || string(b) != "via libfuse" {
		t.Errorf("backing: %q, %v", b, err)
	}
	if m, err := devfuse.FindMount(s.Mountpoint()); err != nil || m.FSType != "fuse.passthrough_ll" {
		t.Errorf("mount %+v, %v", m, err)
	}
}

// TestKernelPassthrough checks that files are opened with FUSE_PASSTHROUGH
// backing files when the kernel offers it (registering one needs
// CAP_SYS_ADMIN; the server falls back to serving reads and writes), and
// that data goes through them correctly.
func TestKernelPassthrough(t *testing.T) {
	cfg := DefaultConfig()
	cfg.KernelPassthrough = true
	s := mount(t, cfg)
	in, _ := s.Conn().Negotiated()
	if in.Offered&abi.InitPassthrough == 0 {
		testenv.Missing(t, "the kernel does not offer FUSE_PASSTHROUGH (CONFIG_FUSE_PASSTHROUGH, Linux 6.9 or later)")
	}
	p := filepath.Join(s.Mountpoint(), "f")
	for i := 0; i < 3; i++ {
		if err := os.WriteFile(p, []byte("through the backing file"), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "through the backing file" {
			t.Fatalf("read back %q, %v", b, err)
		}
	}
	if !s.FS().Passthrough() {
		t.Fatal("passthrough was turned off: registering a backing file failed (CAP_SYS_ADMIN?)")
	}
}
