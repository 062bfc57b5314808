package splat

import (
	"strings"
	"testing"
)

func TestNewPolicyErrors(t *testing.T) {
	_, err := NewPolicy(PolicyConfig{
		Fail:  []Type{TypeKASAN, "oopsie", "bogus"},
		Allow: []string{"WARNING in fuse_", "", "/(/"},
	})
	if err == nil {
		t.Fatal("no error")
	}
	// Every problem is reported, each saying what is allowed.
	for _, want := range []string{
		`fail[1]: unknown splat type "oopsie", want one of panic, oops`,
		`fail[2]: unknown splat type "bogus"`,
		"allow[1]: empty, want a title substring or /regexp/",
		`allow[2]: "/(/" is not a valid regexp`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	warn := Report{Type: TypeWarning, Title: "WARNING in fuse_uring_cmd", Line: 10}
	warnOther := Report{Type: TypeWarning, Title: "WARNING in ext4_writepages", Line: 20}
	fatalWarn := Report{Type: TypeWarning, Title: "WARNING in fuse_uring_cmd", Line: 30, Fatal: true}
	bug := Report{Type: TypeBug, Title: "BUG: sleeping function called from invalid context in fuse_uring_create_queue", Line: 40}
	kasan := Report{Type: TypeKASAN, Title: "KASAN: use-after-free Read in fuse_request_end", Line: 50}
	lockdep := Report{Type: TypeLockdep, Title: "possible deadlock in fuse_dev_do_read", Line: 60}
	panic := Report{Type: TypePanic, Title: "kernel panic: sysrq triggered crash", Line: 70, Fatal: true}
	hang := Report{Type: TypeHungTask, Title: "INFO: task hung in fuse_flush", Line: 80}

	type outcome struct{ failures, allowed, ignored []int } // report lines
	for _, tc := range []struct {
		name    string
		config  PolicyConfig
		reports []Report
		failed  bool
		want    outcome
	}{
		{"no reports", PolicyConfig{}, nil, false, outcome{}},
		{"default: every type fails", PolicyConfig{}, []Report{warn, bug, kasan, lockdep, panic, hang}, true,
			outcome{failures: []int{10, 40, 50, 60, 70, 80}}},
		{"allowed warning by substring", PolicyConfig{Allow: []string{"fuse_uring"}}, []Report{warn, warnOther}, true,
			outcome{failures: []int{20}, allowed: []int{10}}},
		{"allowed warnings by regexp", PolicyConfig{Allow: []string{"/^WARNING in (fuse|ext4)_/"}}, []Report{warn, warnOther}, false,
			outcome{allowed: []int{10, 20}}},
		{"a fatal warning is never allowed", PolicyConfig{Allow: []string{"fuse_uring"}}, []Report{fatalWarn}, true,
			outcome{failures: []int{30}}},
		{"allow rules excuse only warnings", PolicyConfig{Allow: []string{"fuse"}}, []Report{bug, kasan, lockdep}, true,
			outcome{failures: []int{40, 50, 60}}},
		{"types left out of Fail are ignored", PolicyConfig{Fail: []Type{TypeKASAN, TypePanic}}, []Report{warn, kasan, hang}, true,
			outcome{failures: []int{50}, ignored: []int{10, 80}}},
		{"a panic fails even when its type is left out", PolicyConfig{Fail: []Type{TypeKASAN}}, []Report{panic}, true,
			outcome{failures: []int{70}}},
	} {
		p, err := NewPolicy(tc.config)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		v := p.Evaluate(tc.reports)
		lines := func(fs []Finding) []int {
			var out []int
			for _, f := range fs {
				out = append(out, f.Line)
				if f.Reason == "" {
					t.Errorf("%s: finding at line %d has no reason", tc.name, f.Line)
				}
			}
			return out
		}
		got := outcome{lines(v.Failures), lines(v.Allowed), lines(v.Ignored)}
		if v.Failed != tc.failed || !equalInts(got.failures, tc.want.failures) ||
			!equalInts(got.allowed, tc.want.allowed) || !equalInts(got.ignored, tc.want.ignored) {
			t.Errorf("%s: failed %v %+v, want %v %+v", tc.name, v.Failed, got, tc.failed, tc.want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The default policy needs no configuration and is valid.
func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	if v := p.Evaluate([]Report{{Type: TypeWarning, Title: "WARNING in f"}}); !v.Failed {
		t.Error("the default policy lets a WARNING pass")
	}
	if len(DefaultFail()) != len(Types()) {
		t.Error("DefaultFail is not every type")
	}
}
