package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"klab/guest/fuse"
	"klab/guest/proto"
)

func TestParseMountHelperArgs(t *testing.T) {
	m, err := parseMountHelperArgs([]string{"source:/mnt/backing/test", "/mnt/test", "-n", "-o", "rw,allow_other,,dev", "-t", "fuse.klab", "-r"})
	if err != nil {
		t.Fatal(err)
	}
	want := mountHelperArgs{source: "source:/mnt/backing/test", mountpoint: "/mnt/test", options: []string{"rw", "allow_other", "dev", "ro"}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got %+v, want %+v", m, want)
	}
	if m, err := parseMountHelperArgs([]string{"s", "/m", "-f", "-oro"}); err != nil || !m.fake || !reflect.DeepEqual(m.options, []string{"ro"}) {
		t.Errorf("-f -oro: %+v %v", m, err)
	}
	for _, bad := range [][]string{{"s"}, {"s", "/m", "-o"}, {"s", "/m", "-N", "ns"}, {"s", "/m", "-x"}, {"a", "b", "c"}} {
		if _, err := parseMountHelperArgs(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if got := serverOptions([]string{"defaults", "rw", "x-systemd.foo", "nofail", "allow_other"}); !reflect.DeepEqual(got, []string{"rw", "allow_other"}) {
		t.Errorf("serverOptions: %q", got)
	}
}

func TestPathInRoot(t *testing.T) {
	if p, err := pathInRoot("/klab/root", "/klab/root/mnt/backing"); err != nil || p != "/mnt/backing" {
		t.Errorf("got %q %v", p, err)
	}
	for _, bad := range []string{"/klab/root", "/klab/rootx/a", "/mnt/backing", "mnt/backing"} {
		if _, err := pathInRoot("/klab/root", bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestParseLoaderList(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f95)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f95)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f95)\n"
	libs, err := parseLoaderList(out)
	if err != nil || !reflect.DeepEqual(libs, []string{"/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libc.so.6"}) {
		t.Errorf("got %q %v", libs, err)
	}
	if _, err := parseLoaderList("\tlibfoo.so.1 => not found\n"); err == nil || !strings.Contains(err.Error(), "libfoo.so.1") {
		t.Errorf("missing library: %v", err)
	}
}

func TestELFInterpreter(t *testing.T) {
	exe, err := os.Executable() // a test binary: static or not, it is ELF
	if err != nil {
		t.Fatal(err)
	}
	if _, err := elfInterpreter(exe); err != nil && !strings.Contains(err.Error(), "not dynamically linked") {
		t.Errorf("%s: %v", exe, err)
	}
	for _, p := range []string{"/bin/sh", "/usr/bin/env"} {
		if interp, err := elfInterpreter(p); err == nil {
			if !filepath.IsAbs(interp) || strings.ContainsRune(interp, 0) {
				t.Errorf("%s: interpreter %q", p, interp)
			}
			return
		}
	}
}

func TestFstestsProof(t *testing.T) {
	dir := t.TempDir()
	put := func(name string, c fuseCounters) {
		data, _ := json.Marshal(c)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("9.json", fuseCounters{Dev: 40, URing: 0})
	proof := fstestsProof(dir, proto.FstestsServerKlab)
	if got := proof(); got != "dev=0 uring=0" {
		t.Errorf("with a server from before: %q", got)
	}
	put("10.json", fuseCounters{Dev: 3, URing: 100})
	put("11.json", fuseCounters{Dev: 0, URing: 5})
	if got := proof(); got != "dev=3 uring=105" {
		t.Errorf("first: %q", got)
	}
	put("10.json", fuseCounters{Dev: 3, URing: 150, Ended: true})
	if got := proof(); got != "dev=0 uring=50" {
		t.Errorf("second: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "10.json")); !os.IsNotExist(err) {
		t.Errorf("an ended server's counters were kept: %v", err)
	}
	if got := proof(); got != "dev=0 uring=0" {
		t.Errorf("third: %q", got)
	}
	hp := fstestsProof(dir, proto.FstestsServerPassthroughHP)
	put("11.json", fuseCounters{Dev: -1, URing: 8})
	if got := hp(); got != "uring=3" {
		t.Errorf("passthrough_hp: %q", got)
	}
	for _, c := range []struct{ transport, proof, want string }{
		{proto.FUSETransportURing, "dev=0 uring=9", ""},
		{proto.FUSETransportURing, "dev=2 uring=9", "over /dev/fuse"},
		{proto.FUSETransportDev, "dev=7 uring=0", ""},
		{proto.FUSETransportDev, "uring=1", "over io_uring"},
		{proto.FUSETransportURing, "uring=0", ""},
	} {
		if got := fstestsProofMismatch(c.transport, c.proof); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s %q: %q, want %q", c.transport, c.proof, got, c.want)
		}
	}
}

func TestFstestsServerConfig(t *testing.T) {
	for _, c := range []struct{ server, transport string }{
		{proto.FstestsServerKlab, proto.FUSETransportDev}, {proto.FstestsServerKlab, proto.FUSETransportURing},
		{proto.FstestsServerPassthroughHP, proto.FUSETransportDev}, {proto.FstestsServerPassthroughHP, proto.FUSETransportURing},
	} {
		req := fuseDaemonRequest{Setup: fstestsFUSESetup{Server: c.server, Transport: c.transport, HP: "/run/klab/hp/passthrough_hp"},
			Server: c.server, Source: "source:/mnt/backing/test", Mountpoint: "/mnt/test", Options: []string{"rw", "allow_other"}}
		cfg := fstestsServerConfig(&req)
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s over %s: %v", c.server, c.transport, err)
		}
		if cfg.Backing != "/mnt/backing/test" || cfg.Transport != c.transport {
			t.Errorf("%s over %s: backing %q transport %q", c.server, c.transport, cfg.Backing, cfg.Transport)
		}
		wantServer := fuse.ServerPassthrough
		if c.server == proto.FstestsServerPassthroughHP {
			wantServer = fuse.ServerLibfusePassthroughHP
		}
		if cfg.Server != wantServer || !strings.Contains(strings.Join(cfg.MountOptions, ","), "fsname=source:/mnt/backing/test") {
			t.Errorf("%s: server %q options %q", c.server, cfg.Server, cfg.MountOptions)
		}
	}
}

func TestPrepareFstestsFUSEBadInput(t *testing.T) {
	root := t.TempDir()
	for _, c := range []*proto.FstestsFUSEConfig{nil, {Server: "x", Transport: "dev"}, {Server: "klab", Transport: "tcp"}} {
		if _, _, err := prepareFstestsFUSE(t.Context(), root, c, filepath.Join(root, "mnt/backing")); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, _, err := prepareFstestsFUSE(t.Context(), root, &proto.FstestsFUSEConfig{Server: "klab", Transport: "dev"}, "/elsewhere"); err == nil || !strings.Contains(err.Error(), "inside the userspace root") {
		t.Errorf("backing outside the root: %v", err)
	}
}
