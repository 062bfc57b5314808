package passthrough

import (
	"slices"
	"testing"
)

func TestNodeTable(t *testing.T) {
	tb := newNodeTable(1)
	a := &node{key: devIno{1, 10}}
	b := &node{key: devIno{2, 10}} // same inode number, another device
	c := &node{key: devIno{1, 11}}
	for _, n := range []*node{a, b, c} {
		if !tb.add(n) {
			t.Fatal("add failed")
		}
	}
	if a.id != 1 || b.id != 2 || c.id != 3 || tb.count != 3 {
		t.Fatalf("ids %d %d %d, count %d", a.id, b.id, c.id, tb.count)
	}
	for _, n := range []*node{a, b, c} {
		if tb.get(n.id) != n || tb.byKey(n.key) != n {
			t.Errorf("node %+v not found by ID or key", n.key)
		}
	}
	if tb.get(0) != nil || tb.get(4) != nil || tb.get(1<<40) != nil || tb.byKey(devIno{3, 10}) != nil {
		t.Error("found a node that is not there")
	}
	tb.remove(a)
	if tb.get(1) != nil || tb.byKey(a.key) != nil || tb.byKey(b.key) != b || tb.count != 2 {
		t.Error("remove left the node, or lost its neighbour")
	}
	tb.remove(a) // twice: nothing
	d := &node{key: devIno{1, 12}}
	tb.add(d)
	if d.id != 1 {
		t.Errorf("a freed ID is reused: got %d, want 1", d.id)
	}
	// IDs beyond the first chunk.
	var ids []uint64
	for i := 0; i < 3*chunkSize; i++ {
		n := &node{key: devIno{1, uint64(100 + i)}}
		tb.add(n)
		ids = append(ids, n.id)
	}
	if tb.get(ids[len(ids)-1]) == nil || tb.count != 3+3*chunkSize {
		t.Errorf("count %d", tb.count)
	}
	var all []uint64
	tb.all(func(n *node) { all = append(all, n.id) })
	if len(all) != tb.count || !slices.IsSorted(all) {
		t.Errorf("all visited %d nodes, want %d in ID order", len(all), tb.count)
	}
}

func TestFdSet(t *testing.T) {
	var s fdSet
	for _, fd := range []int{3, 64, 65, 1000} {
		s.add(fd)
	}
	if s.remove(4) || s.remove(-1) || s.remove(5000) {
		t.Error("removed a descriptor that was not in")
	}
	if !s.remove(64) || s.remove(64) {
		t.Error("64: remove should succeed once")
	}
	var got []int
	s.each(func(fd int) { got = append(got, fd) })
	if !slices.Equal(got, []int{3, 65, 1000}) {
		t.Errorf("each = %v", got)
	}
}
