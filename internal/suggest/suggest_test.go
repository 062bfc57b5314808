package suggest

import (
	"slices"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"round", "rounds", 1},
		{"jbos", "jobs", 1},
		{"kernl", "kernel", 1},
		{"colour", "color", 1},
		{"abc", "cba", 2},
		{"kitten", "sitting", 3},
		{"µs", "us", 1},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestNearest(t *testing.T) {
	fields := []string{"name", "rounds", "order", "seed", "reuse", "compare", "params", "workloads", "checks", "make_dirs", "max-size", "cpus"}
	for _, tc := range []struct {
		word string
		want []string
	}{
		{"round", []string{"rounds"}},
		{"Rounds", []string{"rounds"}},
		{"make-dirs", []string{"make_dirs"}},
		{"max_size", []string{"max-size"}},
		{"workload", []string{"workloads"}},
		{"wrokloads", []string{"workloads"}},
		{"cpu", []string{"cpus"}},
		{"comp", []string{"compare"}},
		{"colour", nil},
		{"rounds", nil},
		{"", nil},
		{"zz", nil},
		{"seeds", []string{"seed"}},
	} {
		if got := Nearest(tc.word, fields); !slices.Equal(got, tc.want) {
			t.Errorf("Nearest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
	if got := Nearest("jbos", []string{"jobs", "bs", "transport"}); !slices.Equal(got, []string{"jobs"}) {
		t.Errorf("Nearest(jbos) = %q", got)
	}
	// Ties are all given, in the order known lists them, at most three.
	if got := Nearest("abc", []string{"xbc", "ayc", "ab", "bc", "abcd"}); !slices.Equal(got, []string{"xbc", "ayc", "ab"}) {
		t.Errorf("Nearest(abc) = %q", got)
	}
	// One or two letters are too short to tell a typo from another name.
	if got := Nearest("x", []string{"a", "b", "X"}); !slices.Equal(got, []string{"X"}) {
		t.Errorf("Nearest(x) = %q", got)
	}
}
