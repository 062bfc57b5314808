package experiments

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"klab/guest/proto"
	"klab/results/profile"
)

// TestSaveProfile: a guest's profile is kept bounded and clean, and reads
// back as written.
func TestSaveProfile(t *testing.T) {
	dir := t.TempDir()
	p := &proto.Profile{Samples: 10, Stacks: []proto.ProfileStack{
		{Stack: "sh;main;do_work", Count: 5},
		{Stack: "evil\x1b[31m name;a b;;c\nd", Count: 3},
		{Stack: "negative", Count: -4},
		{Stack: strings.Repeat("x", maxStackLen+1), Count: 2},
	}}
	rel, problem := saveProfile(dir, "w-a-round1.folded", p)
	if problem != "" || rel != filepath.Join("profiles", "w-a-round1.folded") {
		t.Fatalf("saveProfile = %q, %q", rel, problem)
	}
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(data), "evil_[31m_name;a_b;c_d 3\nsh;main;do_work 5\n"; got != want {
		t.Errorf("folded file:\n%q\nwant\n%q", got, want)
	}
	prof, err := loadProfile(dir, rel)
	if err != nil || prof.Total() != 8 {
		t.Errorf("loadProfile: %v, total %d, want 8", err, prof.Total())
	}
	for _, bad := range []string{"../x", "/etc/passwd", ""} {
		if _, err := loadProfile(dir, bad); err == nil {
			t.Errorf("loadProfile(%q): no error", bad)
		}
	}
	for _, tc := range []struct {
		p    *proto.Profile
		want string
	}{
		{nil, "the guest sent no profile"},
		{&proto.Profile{Error: "perf is not in the guest\x07"}, "perf is not in the guest"},
		{&proto.Profile{Stacks: []proto.ProfileStack{{Stack: "x", Count: 0}}}, "the profile has no samples"},
	} {
		if rel, problem := saveProfile(dir, "n.folded", tc.p); rel != "" || problem != tc.want {
			t.Errorf("saveProfile(%+v) = %q, %q, want %q", tc.p, rel, problem, tc.want)
		}
	}
}

func TestAlias(t *testing.T) {
	p := loadFolded(t, "k;alloc_pages_mpol_noprof;clear_page 3\nk;alloc_pages_mpol;clear_page 2\n")
	got := alias(p)
	if len(got.Stacks) != 1 || got.Stacks["k;alloc_pages_mpol;clear_page"] != 5 {
		t.Errorf("alias: %v", got.Stacks)
	}
}

func loadFolded(t *testing.T, s string) *profile.Profile {
	t.Helper()
	p, err := profile.ReadFolded(strings.NewReader(s), 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReportProfileBusy: the report's profile shares are of busy
// samples. Side B idles more on its boot CPU but does the same work: the
// idle shares differ, the functions' shares do not, and the boot CPU's
// idle loop (rest_init, start_kernel) is not among the changed.
func TestReportProfileBusy(t *testing.T) {
	spec := strings.Replace(runSpec, "    prepare: rm -rf /tmp/backing/c\n", "    prepare: rm -rf /tmp/backing/c\n    profile: perf\n", 1)
	f := loadRunSpec(t, spec)
	const bootIdle = "swapper;common_startup_64;x86_64_start_kernel;start_kernel;rest_init;cpu_startup_entry;do_idle;default_idle;pv_native_safe_halt"
	fake := &fakeOpener{t: t}
	fake.step = func(g *fakeGuest, st proto.Step, d *proto.Done) error {
		w, transport := innerWorkload(st)
		if w == nil || w.Name != "create" {
			return nil
		}
		idle := int64(100)
		if transport == "uring" {
			idle = 300
		}
		d.Profile = &proto.Profile{Event: proto.PerfCPUClock, Stacks: []proto.ProfileStack{
			{Stack: bootIdle, Count: idle},
			{Stack: "create;do_syscall_64;fuse_create_open", Count: 60},
			{Stack: "passthrough;do_syscall_64;fuse_dev_do_write", Count: 40},
		}}
		return nil
	}
	res, err := Run(context.Background(), f, runOptions(t, fake))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := Open(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	r := saved.Report()
	if len(r.Profiles) != 1 {
		t.Fatalf("%d profiles, want 1; warnings %q", len(r.Profiles), r.Warnings)
	}
	p := r.Profiles[0]
	if p.SamplesA != 4*200 || p.SamplesB != 4*400 || p.IdleA != 0.5 || p.IdleB != 0.75 {
		t.Errorf("samples A %d, B %d, idle A %g, B %g; want 800, 1600, 0.5, 0.75", p.SamplesA, p.SamplesB, p.IdleA, p.IdleB)
	}
	if len(p.Changed) == 0 {
		t.Errorf("no functions in the profile")
	}
	for _, c := range p.Changed {
		if c.A != c.B || c.Func == "rest_init" || c.Func == "start_kernel" {
			t.Errorf("changed: %+v", c)
		}
		if c.Func == "fuse_create_open" && c.A != 0.6 {
			t.Errorf("fuse_create_open's share %g, want 0.6 of the busy samples", c.A)
		}
	}
	if !strings.Contains(p.IcicleA, "busy samples") || strings.Contains(p.IcicleA, "rest_init") {
		t.Errorf("icicle A is not of the busy samples")
	}
}
