package experiments

import (
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
