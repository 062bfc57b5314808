package passthrough

import (
	"sync/atomic"
)

// The node table. Every request on an inode starts by finding its node
// from the node ID, so that lookup takes no lock: IDs index a two-level
// array of atomic pointers, and the IDs of forgotten nodes are reused
// (as libfuse's servers reuse the addresses they hand out as IDs), which
// keeps them small. Adding and removing nodes, and finding them by
// (st_dev, st_ino), happen under FS.mu.
const (
	chunkBits = 10
	chunkSize = 1 << chunkBits
	maxChunks = 4096 // 4 Mi node IDs, more than descriptors a process may hold
)

type chunk [chunkSize]atomic.Pointer[node]

type nodeTable struct {
	chunks [maxChunks]atomic.Pointer[chunk]

	// The rest is guarded by FS.mu.
	free  []uint64 // IDs to reuse
	next  uint64   // the next new ID
	count int
	// byIno finds nodes by inode number; other holds those whose number
	// is taken by a node of another device (a file system mounted below
	// the backing directory), which is rare.
	byIno map[uint64]*node
	other map[devIno]*node
}

func newNodeTable(first uint64) *nodeTable {
	return &nodeTable{next: first, byIno: make(map[uint64]*node)}
}

// get returns the node with ID id, or nil. It takes no lock.
func (t *nodeTable) get(id uint64) *node {
	ci := id >> chunkBits
	if ci >= maxChunks {
		return nil
	}
	c := t.chunks[ci].Load()
	if c == nil {
		return nil
	}
	return c[id&(chunkSize-1)].Load()
}

// byKey returns the node of key, or nil.
func (t *nodeTable) byKey(key devIno) *node {
	if n := t.byIno[key.ino]; n != nil && n.key == key {
		return n
	}
	if len(t.other) == 0 {
		return nil
	}
	return t.other[key]
}

// add gives n an ID and enters it, or returns false when no ID is left.
func (t *nodeTable) add(n *node) bool {
	var id uint64
	if k := len(t.free); k > 0 {
		id = t.free[k-1]
		t.free = t.free[:k-1]
	} else {
		if t.next >= maxChunks*chunkSize {
			return false
		}
		id = t.next
		t.next++
	}
	t.put(id, n)
	return true
}

// put enters n under id.
func (t *nodeTable) put(id uint64, n *node) {
	n.id = id
	c := t.chunks[id>>chunkBits].Load()
	if c == nil {
		c = new(chunk)
		t.chunks[id>>chunkBits].Store(c)
	}
	c[id&(chunkSize-1)].Store(n)
	if m := t.byIno[n.key.ino]; m == nil {
		t.byIno[n.key.ino] = n
	} else {
		if t.other == nil {
			t.other = make(map[devIno]*node)
		}
		t.other[n.key] = n
	}
	t.count++
}

// remove takes n out and frees its ID.
func (t *nodeTable) remove(n *node) {
	c := t.chunks[n.id>>chunkBits].Load()
	if c == nil || c[n.id&(chunkSize-1)].Load() != n {
		return
	}
	c[n.id&(chunkSize-1)].Store(nil)
	if t.byIno[n.key.ino] == n {
		delete(t.byIno, n.key.ino)
	} else if t.other[n.key] == n {
		delete(t.other, n.key)
	}
	t.free = append(t.free, n.id)
	t.count--
}

// all calls fn for every node.
func (t *nodeTable) all(fn func(*node)) {
	for i := range t.chunks {
		c := t.chunks[i].Load()
		if c == nil {
			continue
		}
		for j := range c {
			if n := c[j].Load(); n != nil {
				fn(n)
			}
		}
	}
}

// fdSet is a set of descriptors (the open files a server must close when
// the connection ends): a bitmap, cheaper than a map for small ints.
type fdSet struct {
	bits []uint64
}

func (s *fdSet) add(fd int) {
	w := fd / 64
	if w >= len(s.bits) {
		s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
	}
	s.bits[w] |= 1 << (fd % 64)
}

// remove takes fd out and reports whether it was in.
func (s *fdSet) remove(fd int) bool {
	w := fd / 64
	if fd < 0 || w >= len(s.bits) || s.bits[w]&(1<<(fd%64)) == 0 {
		return false
	}
	s.bits[w] &^= 1 << (fd % 64)
	return true
}

// each calls fn for every descriptor.
func (s *fdSet) each(fn func(int)) {
	for w, b := range s.bits {
		for i := 0; b != 0; i++ {
			if b&1 != 0 {
				fn(w*64 + i)
			}
			b >>= 1
		}
	}
}
