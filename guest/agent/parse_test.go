package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"klab/guest/proto"
	"klab/internal/testenv"
)

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		cmdline string
		mode    Mode
		found   bool
		err     bool
	}{
		{"console=ttyS0 panic=-1 klab.mode=run quiet", ModeRun, true, false},
		{"console=ttyS0 klab.mode=shell\n", ModeShell, true, false},
		{"klab.mode", ModeRun, true, false},
		{"klab.mode=", ModeRun, true, false},
		{`klab.mode="shell"`, ModeShell, true, false},
		{`"klab.mode=shell"`, ModeShell, true, false},
		{"klab.mode=run klab.mode=shell", ModeShell, true, false},
		{"BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro", "", false, false},
		{"", "", false, false},
		{`foo="a klab.mode=shell b"`, "", false, false},
		{"xklab.mode=shell", "", false, false},
		{"klab.mode=bogus", "", true, true},
	} {
		mode, found, err := ParseMode(tc.cmdline)
		if mode != tc.mode || found != tc.found || (err != nil) != tc.err {
			t.Errorf("ParseMode(%q) = %q, %v, %v; want %q, %v, err %v", tc.cmdline, mode, found, err, tc.mode, tc.found, tc.err)
		}
	}
}

func TestCmdlineParams(t *testing.T) {
	got := CmdlineParams(` a=1  b "c=x y" d="p q" e -- f=2` + "\n")
	want := []Param{{"a", "1"}, {"b", ""}, {"c", "x y"}, {"d", "p q"}, {"e", ""}, {"--", ""}, {"f", "2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CmdlineParams = %q, want %q", got, want)
	}
	if v, ok := CmdlineParam("a=1 a=2", "a"); !ok || v != "2" {
		t.Errorf("CmdlineParam last wins: %q %v", v, ok)
	}
}

func TestSysctlPath(t *testing.T) {
	for _, tc := range []struct{ key, want, err string }{
		{"fs.fuse.max_pages_limit", "/r/fs/fuse/max_pages_limit", ""},
		{"fs/fuse/max_pages_limit", "/r/fs/fuse/max_pages_limit", ""},
		{"net/ipv4/conf/eth0.100/forwarding", "/r/net/ipv4/conf/eth0.100/forwarding", ""},
		{"vm.dirty_ratio", "/r/vm/dirty_ratio", ""},
		{"", "", "empty key"},
		{"/etc/passwd", "", "absolute key"},
		{"fs..x", "", "empty segment"},
		{".fs", "", "empty segment"},
		{"fs.", "", "empty segment"},
		{"fs//x", "", "empty segment"},
		{"fs/x/", "", "empty segment"},
		{"../etc", "", `".." segment`},
		{"fs/../../etc", "", `".." segment`},
		{"fs/./x", "", `"." segment`},
		{"fs.x\x00y", "", "NUL"},
	} {
		got, err := SysctlPath("/r", tc.key)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "sysctl") {
				t.Errorf("SysctlPath(%q) = %q, %v; want error %q", tc.key, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("SysctlPath(%q) = %q, %v; want %q", tc.key, got, err, tc.want)
		}
	}
}

func TestWriteSysctlDirectory(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "fs"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteSysctl(root, "fs", "1")
	if err == nil || !strings.Contains(err.Error(), `sysctl "fs"`) {
		t.Errorf("WriteSysctl on a directory = %v, want an error naming the key", err)
	}
}

// fakeSys builds a fake sysfs and /dev under a temp dir. ports maps a
// virtio port directory to its name ("" = no name file yet); nodes are the
// device nodes that exist.
func fakeSys(t *testing.T, ports map[string]string, nodes ...string) (sys, dev string) {
	t.Helper()
	root := t.TempDir()
	sys, dev = filepath.Join(root, "sys"), filepath.Join(root, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if ports != nil {
		if err := os.MkdirAll(filepath.Join(sys, "class", "virtio-ports"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for dir, name := range ports {
		p := filepath.Join(sys, "class", "virtio-ports", dir)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if name != "" {
			if err := os.WriteFile(filepath.Join(p, "name"), []byte(name+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range nodes {
		if err := os.WriteFile(filepath.Join(dev, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return sys, dev
}

func TestFindChannel(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ports map[string]string
		nodes []string
		want  string // relative to dev; "" for none
		ready bool
	}{
		{"virtio", map[string]string{"vport0p1": "org.qemu.guest_agent.0", "vport1p1": PortName}, []string{"vport0p1", "vport1p1"}, "vport1p1", true},
		{"virtio without node yet", map[string]string{"vport1p1": PortName}, nil, "vport1p1", false},
		{"port without name yet", map[string]string{"vport1p1": ""}, []string{"vport1p1"}, "", false},
		{"other ports only", map[string]string{"vport0p1": "org.qemu.guest_agent.0"}, []string{"vport0p1"}, FallbackTTY, true},
		{"no virtio console", nil, nil, FallbackTTY, true},
		{"empty class", map[string]string{}, nil, FallbackTTY, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys, dev := fakeSys(t, tc.ports, tc.nodes...)
			got, ready := FindChannel(sys, dev)
			want := ""
			if tc.want != "" {
				want = filepath.Join(dev, tc.want)
			}
			if got != want || ready != tc.ready {
				t.Errorf("FindChannel = %q, %v; want %q, %v", got, ready, want, tc.ready)
			}
		})
	}
}

func TestWaitChannel(t *testing.T) {
	// The port gets its name and then its device node while WaitChannel
	// waits (for up to 5 minutes: only a port that never appears takes
	// that long).
	sys, dev := fakeSys(t, map[string]string{"vport2p1": ""})
	go func() {
		time.Sleep(150 * time.Millisecond)
		_ = os.WriteFile(filepath.Join(sys, "class", "virtio-ports", "vport2p1", "name"), []byte(PortName+"\n"), 0o644)
		time.Sleep(150 * time.Millisecond)
		_ = os.WriteFile(filepath.Join(dev, "vport2p1"), nil, 0o644)
	}()
	if got, want := WaitChannel(context.Background(), sys, dev, 5*time.Minute), filepath.Join(dev, "vport2p1"); got != want {
		t.Errorf("WaitChannel = %q, want %q", got, want)
	}

	// No klab port: the serial fallback, never before the wait is over.
	sys, dev = fakeSys(t, map[string]string{"vport1p1": ""})
	start := time.Now()
	if got, want := WaitChannel(context.Background(), sys, dev, 200*time.Millisecond), filepath.Join(dev, FallbackTTY); got != want {
		t.Errorf("WaitChannel after timeout = %q, want %q", got, want)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Errorf("WaitChannel gave up after %v, before its 200ms", el)
	}
	// A cancelled context ends the wait at once: with an hour to wait,
	// only the context can have ended it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, want := WaitChannel(ctx, sys, dev, time.Hour), filepath.Join(dev, FallbackTTY); got != want {
		t.Errorf("WaitChannel with a cancelled context = %q, want %q", got, want)
	}
}

func TestOpenChannelPipe(t *testing.T) {
	// A FIFO is no terminal: it must open without raw mode.
	p := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		testenv.Missingf(t, "mkfifo: %v", err)
	}
	f, err := OpenChannel(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2)
	if _, err := f.Read(b); err != nil || string(b) != "x\n" {
		t.Errorf("read back %q, %v", b, err)
	}
	if _, err := OpenChannel(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("OpenChannel of a missing device succeeded")
	}
}

func TestMakeRawPty(t *testing.T) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testenv.Missingf(t, "no /dev/ptmx: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		testenv.Missingf(t, "unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		testenv.Missingf(t, "ptsname: %v", err)
	}
	f, err := OpenChannel("/dev/pts/" + strconv.Itoa(int(n)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tio, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&(unix.ECHO|unix.ICANON|unix.ISIG) != 0 || tio.Oflag&(unix.OPOST|unix.ONLCR) != 0 || tio.Iflag&unix.ICRNL != 0 || tio.Cflag&unix.CSIZE != unix.CS8 || tio.Cc[unix.VMIN] != 1 {
		t.Errorf("termios not raw: %+v", tio)
	}
	if tio.Cflag&unix.CBAUD != unix.B115200 {
		t.Errorf("baud bits = %#x, want B115200", tio.Cflag&unix.CBAUD)
	}
}

func TestParseCPUList(t *testing.T) {
	for s, want := range map[string]int{"0\n": 1, "0-3": 4, "0-3,6,8-9\n": 7, "1,3": 2} {
		if got, err := ParseCPUList(s); err != nil || got != want {
			t.Errorf("ParseCPUList(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "x", "3-1", "0-", "-1"} {
		if _, err := ParseCPUList(s); err == nil {
			t.Errorf("ParseCPUList(%q) succeeded", s)
		}
	}
}

func TestParseMemTotal(t *testing.T) {
	n, err := ParseMemTotal(strings.NewReader("MemFree: 1 kB\nMemTotal:        2030412 kB\n"))
	if err != nil || n != 2030412 {
		t.Errorf("ParseMemTotal = %d, %v", n, err)
	}
	if _, err := ParseMemTotal(strings.NewReader("MemFree: 1 kB\n")); err == nil {
		t.Error("ParseMemTotal without MemTotal succeeded")
	}
}

func TestParseMountinfo(t *testing.T) {
	in := `22 1 0:21 / /proc rw,nosuid - proc proc rw
23 1 0:22 / /sys rw - sysfs sysfs rw
30 23 0:7 / /sys/kernel/debug rw - debugfs debugfs rw
31 1 0:30 / /mnt/with\040space rw - tmpfs tmpfs rw
short line
`
	got, err := ParseMountinfo(strings.NewReader(in))
	want := []string{"/proc", "/sys", "/sys/kernel/debug", "/mnt/with space"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseMountinfo = %q, %v; want %q", got, err, want)
	}
}

func TestLoadModules(t *testing.T) {
	dir := t.TempDir()
	order := "# generated\nfuse fuse.ko\n\nvirtio_console virtio_console.ko\nbroken broken.ko\nevil ../evil.ko\n"
	if err := os.WriteFile(filepath.Join(dir, "order"), []byte(order), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var loaded []string
	load := func(path string) error {
		mu.Lock()
		loaded = append(loaded, filepath.Base(path))
		mu.Unlock()
		if filepath.Dir(path) != dir {
			t.Errorf("load(%q) outside %s", path, dir)
		}
		switch filepath.Base(path) {
		case "broken.ko":
			return errors.New("init_module: unknown symbol")
		}
		return nil
	}
	got, err := LoadModules(dir, load)
	if err != nil {
		t.Fatal(err)
	}
	want := []proto.ModuleLoad{
		{Name: "fuse"}, {Name: "virtio_console"},
		{Name: "broken", Error: "init_module: unknown symbol"},
		{Name: "evil", Error: `bad module file name "../evil.ko"`},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadModules = %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(loaded, []string{"fuse.ko", "virtio_console.ko", "broken.ko"}) { // the file's order
		t.Errorf("loaded %q", loaded)
	}

	// No order file: nothing to do.
	if got, err := LoadModules(t.TempDir(), load); err != nil || got != nil {
		t.Errorf("LoadModules without order = %v, %v", got, err)
	}
	// A malformed line is reported, the lines before it still load.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "order"), []byte("a a.ko\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = LoadModules(bad, func(string) error { return nil })
	if err == nil || len(got) != 1 || got[0].Name != "a" {
		t.Errorf("LoadModules with a bad line = %v, %v", got, err)
	}
}

func TestLoadModuleMissingFile(t *testing.T) {
	err := LoadModule(filepath.Join(t.TempDir(), "nope.ko"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadModule(missing) = %v, want ErrNotExist", err)
	}
}

func TestMountAllSkipsMissingOptional(t *testing.T) {
	// Only the optional mount with a missing target: nothing is attempted.
	err := MountAll([]Mount{{Source: "debugfs", Target: filepath.Join(t.TempDir(), "nope"), FSType: "debugfs", Optional: true}})
	if err != nil {
		t.Errorf("MountAll = %v", err)
	}
	// An already mounted target (per mountinfo) is skipped, also unprivileged.
	if _, err := os.Stat("/proc/self/mountinfo"); err == nil {
		if err := MountAll([]Mount{{Source: "proc", Target: "/proc", FSType: "proc"}}); err != nil {
			t.Errorf("MountAll(/proc) = %v, want skipped", err)
		}
	}
}

// A module loads only after the modules it depends on, however the
// goroutines are scheduled; a dependency on a later line is not waited for.
func TestLoadModulesDependencies(t *testing.T) {
	dir := t.TempDir()
	order := "virtio_ring virtio_ring.ko -\nvirtio virtio.ko -\nvirtio_pci virtio_pci.ko virtio,virtio_ring\n" +
		"virtio_console virtio_console.ko virtio,virtio_ring,virtio_pci\nfuse fuse.ko -\nloop loop.ko later\nlater later.ko loop\n"
	if err := os.WriteFile(filepath.Join(dir, "order"), []byte(order), 0o644); err != nil {
		t.Fatal(err)
	}
	var seq []string
	load := func(path string) error {
		seq = append(seq, strings.TrimSuffix(filepath.Base(path), ".ko"))
		return nil
	}
	got, err := LoadModules(dir, load)
	if err != nil || len(got) != 7 || got[2].Name != "virtio_pci" {
		t.Fatalf("LoadModules = %+v, %v", got, err)
	}
	// The file's order, dependencies first; a cycle (loop, later) does
	// not hang the load.
	if want := "virtio_ring virtio virtio_pci virtio_console fuse loop later"; strings.Join(seq, " ") != want {
		t.Errorf("loaded %v, want %s", seq, want)
	}
}
