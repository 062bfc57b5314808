package results

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"klab/internal/testenv"
)

// testManifest returns a manifest with every field set.
func testManifest() *Manifest {
	return &Manifest{
		Schema:  SchemaVersion,
		RunID:   "20261130-073512-boot-a1b2c3",
		Command: []string{"klab", "run", "experiments/fuse-uring.yaml", "--kernel", "debian:7.3"},
		Kernel: Kernel{
			Name:           "debian:7.3",
			ID:             "k-0123456789abcdef",
			Version:        "7.3.4+deb13-cloud-amd64",
			Source:         "debian",
			Package:        "linux-image-7.3.4+deb13-cloud-amd64",
			PackageVersion: "7.3.4-1~bpo13+1",
			Suite:          "trixie-backports",
			Image:          "/cache/kernels/k-0123456789abcdef/vmlinuz",
			Config:         "/cache/kernels/k-0123456789abcdef/config",
			Build: &KernelBuild{
				Tree:         "/src/linux",
				BaseCommit:   "0123456789abcdef0123456789abcdef01234567",
				Patches:      []FileHash{{Path: "patches/0001-fuse-fix.patch", SHA256: strings.Repeat("ab", 32)}},
				Fragments:    []FileHash{{Path: "experiments/fuse.config", SHA256: strings.Repeat("cd", 32)}},
				ConfigSHA256: strings.Repeat("ef", 32),
			},
		},
		Initramfs:     Initramfs{Path: "/cache/initramfs/i-1.cpio", SHA256: strings.Repeat("01", 32)},
		AgentVersion:  "klab-agent v0.1.0 (abc123)",
		QEMU:          QEMU{Binary: "/usr/bin/qemu-system-x86_64", Version: "QEMU emulator version 7.2.15", Argv: []string{"/usr/bin/qemu-system-x86_64", "-accel", "tcg", "-m", "2048"}},
		Accel:         AccelTCG,
		AccelReason:   "kvm probe: no agent hello within 20s",
		TimeoutFactor: 8,
		Host:          Host{KernelRelease: "6.18.44", CPUModel: "AMD EPYC 7B13", Hostname: "builder", Arch: "amd64", CPUs: 2, MemKiB: 24 << 20},
		Experiment: &Experiment{
			File:   "experiments/fuse-uring.yaml",
			SHA256: strings.Repeat("23", 32),
			Params: map[string]string{"transport": "io_uring", "jobs": "4"},
		},
		Seed: 42,
		Times: Times{
			Start:         time.Date(2026, 11, 30, 7, 35, 12, 123456789, time.UTC),
			End:           time.Date(2026, 11, 30, 7, 36, 1, 0, time.UTC),
			BootToAgentMs: 3120,
		},
		Outcome: NewOutcome(StatusKernelPanic, "kernel panic: sysrq triggered crash", 0),
	}
}

func TestManifestRoundTrip(t *testing.T) {
	s := Store{Root: t.TempDir()}
	r, err := s.Create("boot")
	if err != nil {
		t.Fatal(err)
	}
	want := testManifest()
	want.RunID = r.ID
	if err := r.WriteManifest(want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("round trip differs\n got %s\nwant %s", g, w)
	}

	// Times are written as RFC 3339 and the JSON names follow the contract.
	raw, err := os.ReadFile(filepath.Join(r.Dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"schema": 1`, `"run_id"`, `"package_version"`, `"accel": "tcg"`,
		`"timeout_factor": 8`, `"boot_to_agent_ms": 3120`, `"start": "2026-11-30T07:35:12.123456789Z"`,
		`"status": "kernel-panic"`, `"class": "kernel"`, `"argv": [`, `"params": {`, `"mem_kib"`} {
		if !strings.Contains(string(raw), key) {
			t.Errorf("manifest.json lacks %s:\n%s", key, raw)
		}
	}
}

// An unfinished run: no end time, no outcome, no experiment.
func TestManifestMinimalRoundTrip(t *testing.T) {
	r, err := Store{Root: t.TempDir()}.Create("x")
	if err != nil {
		t.Fatal(err)
	}
	want := &Manifest{Schema: SchemaVersion, RunID: r.ID, Command: []string{"klab", "boot"},
		Times: Times{Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	if err := r.WriteManifest(want); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(r.Dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{`"end"`, `"experiment"`, `"build"`, `"seed"`} {
		if strings.Contains(string(raw), absent) {
			t.Errorf("manifest.json has %s for an unset field:\n%s", absent, raw)
		}
	}
	got, err := ReadManifest(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
}

func TestWriteManifestFills(t *testing.T) {
	r, err := Store{Root: t.TempDir()}.Create("x")
	if err != nil {
		t.Fatal(err)
	}
	m := testManifest()
	m.Schema, m.RunID, m.Outcome.Class = 0, "", ""
	if err := r.WriteManifest(m); err != nil {
		t.Fatal(err)
	}
	if m.RunID != "" {
		t.Error("WriteManifest changed the caller's manifest")
	}
	got, err := ReadManifest(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Schema != SchemaVersion || got.RunID != r.ID || got.Outcome.Class != ClassKernel {
		t.Errorf("filled: schema %d run_id %q class %q", got.Schema, got.RunID, got.Outcome.Class)
	}

	m = testManifest()
	m.RunID = "20990101-000000-other-ffffff"
	if err := r.WriteManifest(m); err == nil {
		t.Error("WriteManifest accepted another run's id")
	}
}

func TestManifestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Manifest)
		wants []string // substrings of the error; nil for valid
	}{
		{"valid", func(*Manifest) {}, nil},
		{"running", func(m *Manifest) { m.Outcome = Outcome{}; m.Times.End = time.Time{} }, nil},
		{"infra", func(m *Manifest) { m.Outcome = NewOutcome(StatusInfraError, "qemu: no such file", 127) }, nil},
		{"schema", func(m *Manifest) { m.Schema = SchemaVersion + 1 }, []string{"schema: 2 is not supported"}},
		{"run id", func(m *Manifest) { m.RunID = "../x" }, []string{"run_id"}},
		{"accel", func(m *Manifest) { m.Accel = "hvf" }, []string{`accel: "hvf"`}},
		{"status", func(m *Manifest) { m.Outcome.Status = "meh" }, []string{`status "meh"`}},
		{"class", func(m *Manifest) { m.Outcome.Class = ClassInfra }, []string{`class "infra" does not match`}},
		{"ok with class", func(m *Manifest) { m.Outcome = Outcome{Status: StatusOK, Class: ClassKernel} }, []string{"does not match"}},
		{"times", func(m *Manifest) { m.Times.End = m.Times.Start.Add(-time.Second) }, []string{"end"}},
		{"all at once", func(m *Manifest) { m.Accel = "x"; m.TimeoutFactor = -1; m.RunID = "" },
			[]string{"accel", "timeout_factor", "run_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testManifest()
			tc.edit(m)
			err := m.Validate()
			if tc.wants == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: nil, want an error")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestReadManifestErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadManifest(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v, want fs.ErrNotExist", err)
	}
	m := testManifest()
	m.Schema = 99
	data, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("newer schema: %v", err)
	}
}

func TestStatusClass(t *testing.T) {
	for s, want := range map[Status]Class{
		StatusOK: ClassNone, StatusKernelPanic: ClassKernel, StatusKernelHang: ClassKernel,
		StatusBootTimeout: ClassKernel, StatusKernelError: ClassKernel, StatusStepFailed: ClassKernel,
		StatusInfraError: ClassInfra, "bogus": ClassNone,
	} {
		if got := s.Class(); got != want {
			t.Errorf("%q.Class() = %q, want %q", s, got, want)
		}
		if s.Valid() != (s != "bogus") {
			t.Errorf("%q.Valid() = %v", s, s.Valid())
		}
	}
}

func TestParseCPUModel(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"x86", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu vme\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n", "AMD EPYC 7B13"},
		{"power", "processor\t: 0\ncpu\t\t: POWER9 (architected), altivec supported\n", "POWER9 (architected), altivec supported"},
		{"arm64", "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n", "implementer 0x41 part 0xd0c"},
	} {
		got, err := parseCPUModel(strings.NewReader(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := parseCPUModel(strings.NewReader("processor: 0\n")); err == nil {
		t.Error("no model field: no error")
	}
}

func TestParseMemTotal(t *testing.T) {
	got, err := parseMemTotal(strings.NewReader("MemTotal:       24621344 kB\nMemFree:        20000000 kB\n"))
	if err != nil || got != 24621344 {
		t.Errorf("got %d, %v; want 24621344", got, err)
	}
	if _, err := parseMemTotal(strings.NewReader("MemFree: 1 kB\n")); err == nil {
		t.Error("no MemTotal: no error")
	}
	if _, err := parseMemTotal(strings.NewReader("MemTotal: lots kB\n")); err == nil {
		t.Error("bad MemTotal: no error")
	}
}

func TestHostInfo(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		testenv.Missing(t, "no /proc/meminfo: HostInfo reads /proc")
	}
	h, err := HostInfo()
	if err != nil {
		t.Fatal(err)
	}
	if h.KernelRelease == "" || h.CPUs < 1 || h.MemKiB <= 0 || h.Arch == "" {
		t.Errorf("HostInfo = %+v, want every field set", h)
	}
	t.Logf("host: %+v", h)
}
