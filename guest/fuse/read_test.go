package fuse

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
)

// alignedBuf returns n bytes aligned to the page, for O_DIRECT.
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := (4096 - int(uintptr(unsafe.Pointer(&b[0]))%4096)) % 4096
	return b[off : off+n]
}

// TestReadReplies checks READ replies of every size through the data
// path each transport takes for them (spliced from the backing file on
// /dev/fuse from spliceMin up, or read into the server without Splice;
// read into the ring buffer over io_uring):
// a file written straight to the backing directory is read through the
// mount sequentially (readahead), and with O_DIRECT at unaligned offsets
// and across the end of the file.
func TestReadReplies(t *testing.T) {
	for name, vary := range map[string]func(*Config){
		"dev":          func(*Config) {},
		"dev-threads4": func(c *Config) { c.Threads = 4 },
		"dev-nosplice": func(c *Config) { c.Splice = false },
		"uring":        func(c *Config) { c.Transport = TransportURing },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			vary(&cfg)
			if cfg.Transport == TransportURing {
				requireURing(t)
			}
			s := mount(t, cfg)
			rng := rand.New(rand.NewPCG(3, 4))
			const size = 3<<20 + 1234
			want := make([]byte, size)
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			if err := os.WriteFile(filepath.Join(s.Config().Backing, "r"), want, 0o644); err != nil {
				t.Fatal(err)
			}
			mp := filepath.Join(s.Mountpoint(), "r")
			got, err := os.ReadFile(mp)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("sequential read: %d bytes (%v), want %d identical bytes", len(got), err, size)
			}
			fd, err := unix.Open(mp, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			for _, c := range []struct{ off, n int }{
				{0, 4096}, {512, 40 << 10}, {7 * 512, 100<<10 + 512}, {4096, 256 << 10},
				{1 << 20, 1 << 20}, {size - 5000, 64 << 10}, {size - 100, 32 << 10}, {size + 4096, 64 << 10},
			} {
				buf := alignedBuf(c.n)
				n, err := unix.Pread(fd, buf, int64(c.off))
				wantN := max(0, min(c.n, size-c.off))
				if err != nil || n != wantN || !bytes.Equal(buf[:n], want[min(c.off, size):min(c.off, size)+n]) {
					t.Errorf("O_DIRECT read of %d at %d: %d bytes (%v), want %d identical bytes", c.n, c.off, n, err, wantN)
				}
			}
			switch st := s.Stats(); {
			case cfg.Transport == TransportDev && cfg.Splice && (st.Dev == nil || st.Dev.SplicedReplies == 0):
				t.Errorf("no READ reply was spliced: %+v", st.Dev)
			case !cfg.Splice && (st.Dev == nil || st.Dev.SplicedReplies != 0):
				t.Errorf("READ replies were spliced without Splice: %+v", st.Dev)
			default:
				t.Logf("device counters: %+v", st.Dev)
			}
		})
	}
}

// TestSpliceDefaults: servers started by klab fuse serve and by the
// agent's fuse steps splice READ replies (the agent adds the spliced
// bytes to the server's rchar), unless the step says no_splice.
func TestSpliceDefaults(t *testing.T) {
	if !DefaultConfig().Splice {
		t.Error("DefaultConfig does not splice")
	}
	c, _ := ConfigFromStep(&proto.FUSEStep{Mountpoint: "/m", Backing: "/b"})
	if !c.Splice {
		t.Error("a fuse step does not splice")
	}
	c, err := ConfigFromStep(&proto.FUSEStep{Mountpoint: "/m", Backing: "/b", NoSplice: true})
	if err != nil || c.Splice {
		t.Errorf("a fuse step with no_splice: splice %v, %v", c.Splice, err)
	}
}
