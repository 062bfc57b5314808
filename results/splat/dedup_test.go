package splat

import (
	"encoding/json"
	"reflect"
	"testing"
)

func rep(title string, typ Type, fatal, corrupted bool) Report {
	return Report{Title: title, Type: typ, Fatal: fatal, Corrupted: corrupted, Frames: []string{}}
}

func TestDedup(t *testing.T) {
	w1 := rep("WARNING in fuse_uring_cmd", TypeWarning, false, true)
	w2 := rep("WARNING in fuse_uring_cmd", TypeWarning, false, false)
	w2.Line = 7
	k := rep("KASAN: use-after-free Read in fuse_request_end", TypeKASAN, true, false)
	for _, tc := range []struct {
		name string
		in   []Report
		want []Group
	}{
		{"none", nil, nil},
		{"counts in order of first appearance", []Report{w1, k, w2, w1}, []Group{
			{Title: w1.Title, Type: TypeWarning, Count: 3, Corrupted: false, First: w2},
			{Title: k.Title, Type: TypeKASAN, Count: 1, Fatal: true, First: k},
		}},
		{"all corrupted", []Report{w1, w1}, []Group{
			{Title: w1.Title, Type: TypeWarning, Count: 2, Corrupted: true, First: w1},
		}},
	} {
		if got := Dedup(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Dedup = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestCompare(t *testing.T) {
	warn := rep("WARNING in fuse_uring_cmd", TypeWarning, false, false)
	hang := rep("INFO: task hung in fuse_flush", TypeHungTask, false, false)
	kasan := rep("KASAN: use-after-free Read in fuse_request_end", TypeKASAN, true, false)
	lock := rep("possible deadlock in fuse_dev_do_read", TypeLockdep, false, true)
	for _, tc := range []struct {
		name string
		a, b []Report
		want Diff
	}{
		{"both empty", nil, nil, Diff{New: []DiffEntry{}, Gone: []DiffEntry{}, Both: []DiffEntry{}}},
		{"the patch adds a KASAN report and fixes a hang", []Report{warn, hang, hang}, []Report{kasan, warn, warn}, Diff{
			New:  []DiffEntry{{Title: kasan.Title, Type: TypeKASAN, CountB: 1, Fatal: true}},
			Gone: []DiffEntry{{Title: hang.Title, Type: TypeHungTask, CountA: 2}},
			Both: []DiffEntry{{Title: warn.Title, Type: TypeWarning, CountA: 1, CountB: 2}},
		}},
		{"corrupted only when both sides are", []Report{lock}, []Report{lock, rep(lock.Title, TypeLockdep, false, false)}, Diff{
			New:  []DiffEntry{},
			Gone: []DiffEntry{},
			Both: []DiffEntry{{Title: lock.Title, Type: TypeLockdep, CountA: 1, CountB: 2}},
		}},
	} {
		got := Compare(tc.a, tc.b)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Compare =\n %+v\nwant\n %+v", tc.name, got, tc.want)
		}
	}
}

// A Diff is JSON-friendly: empty lists are [], not null.
func TestDiffJSON(t *testing.T) {
	b, err := json.Marshal(Compare(nil, []Report{rep("WARNING in f", TypeWarning, false, false)}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"new":[{"title":"WARNING in f","type":"warning","count_a":0,"count_b":1}],"gone":[],"both":[]}`
	if string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
}
