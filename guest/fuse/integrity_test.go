package fuse

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// integrityVariants are the configurations the data-integrity checks run
// against.
func integrityVariants() map[string]func(*Config) {
	return map[string]func(*Config){
		"default":           func(*Config) {},
		"threads4":          func(c *Config) { c.Threads = 4 },
		"writeback":         func(c *Config) { c.Writeback = true; c.Threads = 2 },
		"kernelpassthrough": func(c *Config) { c.KernelPassthrough = true },
		"maxwrite64k":       func(c *Config) { c.MaxWrite = 64 << 10 },
		// The same checks over FUSE-over-io_uring.
		"uring":                   func(c *Config) { c.Transport = TransportURing },
		"uring-depth1-thread1":    func(c *Config) { c.Transport, c.QueueDepth, c.Threads = TransportURing, 1, 1 },
		"uring-writeback":         func(c *Config) { c.Transport, c.Writeback, c.Threads = TransportURing, true, 2 },
		"uring-kernelpassthrough": func(c *Config) { c.Transport, c.KernelPassthrough = TransportURing, true },
		"uring-maxwrite64k":       func(c *Config) { c.Transport, c.MaxWrite = TransportURing, 64<<10 },
		// Zero-copy queues (Linux 7.3+): read-only opens are read into
		// the client's pages, the rest goes through the pool buffers.
		"uring-zerocopy": func(c *Config) { c.Transport, c.ZeroCopy, c.Threads = TransportURing, true, 2 },
	}
}

func forEachVariant(t *testing.T, fn func(t *testing.T, s *Session)) {
	requireFUSE(t)
	for name, vary := range integrityVariants() {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			vary(&cfg)
			if cfg.Transport == TransportURing {
				requireURing(t)
			}
			fn(t, mount(t, cfg))
		})
	}
}

// TestDataIntegrity writes random data of many sizes, sequentially and at
// random offsets, and reads it back through the mount and from the
// backing directory.
func TestDataIntegrity(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *Session) {
		if s.Config().ZeroCopy {
			t.Cleanup(func() {
				if st := s.Stats(); st.Ring == nil || st.Ring.ZeroCopyReads == 0 {
					t.Errorf("no READ was served zero-copy: %+v", st.Ring)
				} else {
					t.Logf("%d READs served zero-copy", st.Ring.ZeroCopyReads)
				}
			})
		}
		rng := rand.New(rand.NewPCG(1, 2))
		sizes := []int{0, 1, 511, 4095, 4096, 4097, 65536, 128<<10 + 1, 1<<20 + 3, 5<<20 + 4099}
		for _, size := range sizes {
			want := make([]byte, size)
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			name := fmt.Sprintf("rand-%d", size)
			mp, bp := filepath.Join(s.Mountpoint(), name), filepath.Join(s.Config().Backing, name)
			if err := os.WriteFile(mp, want, 0o644); err != nil {
				t.Fatalf("write %d bytes: %v", size, err)
			}
			for _, p := range []string{mp, bp} {
				got, err := os.ReadFile(p)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s: %d bytes back (%v), want %d identical bytes", p, len(got), err, size)
				}
			}
			// Overwrite random ranges with pwrite and check with pread.
			if size < 2 {
				continue
			}
			f, err := os.OpenFile(mp, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < 20; k++ {
				off := rng.IntN(size)
				n := 1 + rng.IntN(min(size-off, 200000))
				chunk := make([]byte, n)
				for i := range chunk {
					chunk[i] = byte(rng.Uint32())
				}
				if _, err := f.WriteAt(chunk, int64(off)); err != nil {
					t.Fatal(err)
				}
				copy(want[off:], chunk)
				got := make([]byte, n)
				if _, err := f.ReadAt(got, int64(off)); err != nil || !bytes.Equal(got, chunk) {
					t.Fatalf("pread after pwrite at %d+%d: %v", off, n, err)
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(bp)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("backing %s after random writes differs (%v)", bp, err)
			}
		}
	})
}

// TestNamespaceOps covers rename, unlink while open, truncate, hard links
// and symlinks.
func TestNamespaceOps(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *Session) {
		m := s.Mountpoint()
		p := func(n string) string { return filepath.Join(m, n) }
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		// rename: plain, over an existing file, a directory, and
		// RENAME_NOREPLACE / RENAME_EXCHANGE through renameat2.
		must(os.WriteFile(p("a"), []byte("A"), 0o644))
		must(os.WriteFile(p("b"), []byte("B"), 0o644))
		must(os.Rename(p("a"), p("c")))
		if _, err := os.Stat(p("a")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a still exists after rename: %v", err)
		}
		must(os.Rename(p("c"), p("b")))
		if got, _ := os.ReadFile(p("b")); string(got) != "A" {
			t.Errorf("rename over b: b = %q, want A", got)
		}
		must(os.WriteFile(p("x"), []byte("X"), 0o644))
		if err := unix.Renameat2(unix.AT_FDCWD, p("x"), unix.AT_FDCWD, p("b"), unix.RENAME_NOREPLACE); !errors.Is(err, syscall.EEXIST) {
			t.Errorf("RENAME_NOREPLACE over b: %v, want EEXIST", err)
		}
		must(unix.Renameat2(unix.AT_FDCWD, p("x"), unix.AT_FDCWD, p("b"), unix.RENAME_EXCHANGE))
		if gx, _ := os.ReadFile(p("x")); string(gx) != "A" {
			t.Errorf("RENAME_EXCHANGE: x = %q, want A", gx)
		}
		must(os.MkdirAll(p("d1/sub"), 0o755))
		must(os.WriteFile(p("d1/sub/f"), []byte("deep"), 0o644))
		must(os.Rename(p("d1"), p("d2")))
		if got, err := os.ReadFile(p("d2/sub/f")); err != nil || string(got) != "deep" {
			t.Errorf("after directory rename: %q, %v", got, err)
		}

		// unlink while open: the data stays readable and writable.
		f, err := os.OpenFile(p("open"), os.O_CREATE|os.O_RDWR, 0o644)
		must(err)
		_, err = f.WriteString("before")
		must(err)
		must(os.Remove(p("open")))
		_, err = f.WriteAt([]byte("AFTER"), 6)
		must(err)
		buf := make([]byte, 11)
		if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "beforeAFTER" {
			t.Errorf("read of an unlinked open file: %q, %v", buf, err)
		}
		var st unix.Stat_t
		must(unix.Fstat(int(f.Fd()), &st))
		if st.Nlink != 0 {
			t.Errorf("nlink of an unlinked open file = %d, want 0", st.Nlink)
		}
		must(f.Close())
		if _, err := os.Stat(p("open")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("unlinked file visible: %v", err)
		}

		// truncate: shrink and extend, by path and by descriptor.
		must(os.WriteFile(p("t"), bytes.Repeat([]byte("0123456789"), 1000), 0o644))
		must(os.Truncate(p("t"), 15))
		if got, _ := os.ReadFile(p("t")); string(got) != "012345678901234" {
			t.Errorf("truncate to 15: %q", got)
		}
		tf, err := os.OpenFile(p("t"), os.O_RDWR, 0)
		must(err)
		must(tf.Truncate(20000))
		got, _ := os.ReadFile(p("t"))
		if len(got) != 20000 || !bytes.Equal(got[15:], make([]byte, 20000-15)) {
			t.Errorf("extend to 20000: len %d, tail not zero", len(got))
		}
		must(tf.Close())
		tf, err = os.OpenFile(p("t"), os.O_RDWR|os.O_TRUNC, 0)
		must(err)
		must(tf.Close())
		if fi, _ := os.Stat(p("t")); fi.Size() != 0 {
			t.Errorf("O_TRUNC: size %d", fi.Size())
		}

		// hard links: same inode, shared data, link counts.
		must(os.WriteFile(p("h1"), []byte("shared"), 0o644))
		must(os.Link(p("h1"), p("h2")))
		var s1, s2 unix.Stat_t
		must(unix.Stat(p("h1"), &s1))
		must(unix.Stat(p("h2"), &s2))
		if s1.Ino != s2.Ino || s1.Nlink != 2 {
			t.Errorf("hard link: ino %d vs %d, nlink %d", s1.Ino, s2.Ino, s1.Nlink)
		}
		must(os.WriteFile(p("h2"), []byte("changed"), 0o644))
		if got, _ := os.ReadFile(p("h1")); string(got) != "changed" {
			t.Errorf("write through a link: h1 = %q", got)
		}
		must(os.Remove(p("h1")))
		must(unix.Stat(p("h2"), &s2))
		if s2.Nlink != 1 {
			t.Errorf("nlink after removing one link = %d", s2.Nlink)
		}

		// symlinks: relative, absolute, dangling, and to a directory.
		must(os.Symlink("h2", p("sl")))
		if tgt, err := os.Readlink(p("sl")); err != nil || tgt != "h2" {
			t.Errorf("readlink: %q, %v", tgt, err)
		}
		if got, _ := os.ReadFile(p("sl")); string(got) != "changed" {
			t.Errorf("read through a symlink: %q", got)
		}
		must(os.Symlink(p("d2"), p("sldir")))
		if got, err := os.ReadFile(p("sldir/sub/f")); err != nil || string(got) != "deep" {
			t.Errorf("through a directory symlink: %q, %v", got, err)
		}
		must(os.Symlink("nowhere", p("dangling")))
		if _, err := os.Stat(p("dangling")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat of a dangling symlink: %v", err)
		}
		if fi, err := os.Lstat(p("dangling")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("lstat of a dangling symlink: %v, %v", fi, err)
		}
		if bt, err := os.Readlink(filepath.Join(s.Config().Backing, "sl")); err != nil || bt != "h2" {
			t.Errorf("backing symlink: %q, %v", bt, err)
		}
	})
}

// TestReaddirMany lists a directory of thousands of entries, created
// through the mount and behind its back, with and without READDIRPLUS.
func TestReaddirMany(t *testing.T) {
	forEachVariant(t, func(t *testing.T, s *Session) {
		const n = 3000
		want := map[string]bool{}
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("x", i%40))
			dir := s.Mountpoint()
			if i%2 == 1 {
				dir = s.Config().Backing // created behind the server's back
			}
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			want[name] = true
		}
		for pass := 0; pass < 2; pass++ {
			ents, err := os.ReadDir(s.Mountpoint())
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, e := range ents {
				seen[e.Name()]++
				if seen[e.Name()] > 1 {
					t.Fatalf("pass %d: %s listed twice", pass, e.Name())
				}
				if !want[e.Name()] {
					t.Fatalf("pass %d: unexpected entry %q", pass, e.Name())
				}
				if !e.Type().IsRegular() {
					t.Fatalf("pass %d: %s has type %v", pass, e.Name(), e.Type())
				}
			}
			if len(seen) != n {
				t.Fatalf("pass %d: %d entries, want %d", pass, len(seen), n)
			}
		}
		// Small getdents buffers exercise the offsets.
		fd, err := unix.Open(s.Mountpoint(), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		count := 0
		buf := make([]byte, 512)
		for {
			k, err := unix.Getdents(fd, buf)
			if err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				break
			}
			var names []string
			_, _, names = unix.ParseDirent(buf[:k], -1, names)
			count += len(names)
		}
		if count != n {
			t.Errorf("getdents with a 512-byte buffer: %d entries, want %d", count, n)
		}
	})
}

// permEnv makes the test binary a helper that tries one access as another
// user: "OP PATH" with OP read, write, create or mkdir.
const permEnv = "KLAB_FUSE_TEST_ACCESS"

func permHelper(spec string) int {
	op, path, _ := strings.Cut(spec, " ")
	var err error
	switch op {
	case "read":
		_, err = os.ReadFile(path)
	case "write":
		var f *os.File
		if f, err = os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	case "create":
		err = os.WriteFile(path, []byte("by "+strconv.Itoa(os.Getuid())), 0o600)
	case "mkdir":
		err = os.Mkdir(path, 0o700)
	case "chmod":
		err = os.Chmod(path, 0o777)
	}
	var e syscall.Errno
	switch {
	case err == nil:
		fmt.Print("ok")
	case errors.As(err, &e):
		fmt.Print(unix.ErrnoName(e))
	default:
		fmt.Print(err)
	}
	return 0
}

// TestDefaultPermissions mounts with allow_other,default_permissions and
// checks that the kernel enforces modes and ownership for another user,
// and that what that user creates is owned by it.
func TestDefaultPermissions(t *testing.T) {
	requireFUSE(t)
	cfg := DefaultConfig()
	cfg.MountOptions = []string{"allow_other,default_permissions"}
	s := mount(t, cfg)
	m, b := s.Mountpoint(), s.Config().Backing
	const uid, gid = 65534, 65534
	// t.TempDir's parents are 0700 for root only: the helper must reach
	// the mount point.
	for d := filepath.Dir(m); d != "/" && d != filepath.Dir(os.TempDir()); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The test binary lives under a 0700 build directory: copy it where
	// the helper user can run it.
	exe, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(filepath.Dir(m), "helper")
	if err := os.WriteFile(helper, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, mode os.FileMode, owner int) {
		p := filepath.Join(b, name)
		if err := os.WriteFile(p, []byte("secret"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chown(p, owner, owner)
	}
	write("root600", 0o600, 0)
	write("root644", 0o644, 0)
	write("nobody600", 0o600, uid)
	os.Mkdir(filepath.Join(b, "rootdir"), 0o755)
	os.Mkdir(filepath.Join(b, "opendir"), 0o777)
	os.Chmod(filepath.Join(b, "opendir"), 0o777)
	try := func(op, name string) string {
		cmd := exec.Command(helper)
		cmd.Env = append(os.Environ(), permEnv+"="+op+" "+filepath.Join(m, name))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper as uid %d: %v", uid, err)
		}
		return string(out)
	}
	for _, c := range []struct{ op, name, want string }{
		{"read", "root600", "EACCES"},
		{"read", "root644", "ok"},
		{"write", "root644", "EACCES"},
		{"read", "nobody600", "ok"},
		{"write", "nobody600", "ok"},
		{"chmod", "root644", "EPERM"},
		{"create", "rootdir/f", "EACCES"},
		{"mkdir", "rootdir/d", "EACCES"},
		{"create", "opendir/mine", "ok"},
		{"mkdir", "opendir/minedir", "ok"},
		{"read", "opendir/mine", "ok"},
	} {
		if got := try(c.op, c.name); got != c.want {
			t.Errorf("uid %d %s %s: %s, want %s", uid, c.op, c.name, got, c.want)
		}
	}
	for _, n := range []string{"opendir/mine", "opendir/minedir"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(b, n), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("%s created by uid %d is owned by %d:%d in the backing directory", n, uid, st.Uid, st.Gid)
		}
		if st.Mode&0o777 != 0o600 && st.Mode&0o777 != 0o700 {
			t.Errorf("%s has mode %o", n, st.Mode&0o777)
		}
	}
	var names []string
	ents, _ := os.ReadDir(filepath.Join(m, "opendir"))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "mine,minedir" {
		t.Errorf("opendir lists %v", names)
	}
}
