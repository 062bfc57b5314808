package passthrough

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
)

// TestODirectOpenIsDirectIO: an O_DIRECT open (or create) is answered as
// a direct_io file with parallel direct writes, as passthrough_hp does; any
// other open is not.
func TestODirectOpenIsDirectIO(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := New(Options{Root: dir, AttrTimeout: DefaultTimeout, EntryTimeout: DefaultTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	req := func(op abi.Opcode, node uint64) *dispatch.Request {
		h := abi.InHeader{Len: uint32(abi.InHeaderSize), Opcode: op, Unique: 2, NodeID: node}
		r := new(dispatch.Request)
		if err := r.Reset(abi.Bytes(&h), nil, nil); err != nil {
			t.Fatal(err)
		}
		return r
	}
	var ent abi.EntryOut
	if e := f.Lookup(req(abi.OpLookup, abi.RootID), abi.RootID, "f", &ent); e != 0 {
		t.Fatal(e)
	}
	const want = abi.FopenDirectIO | abi.FopenParallelDirectWrites
	for _, c := range []struct {
		flags  uint32
		direct bool
	}{
		{unix.O_RDONLY, false},
		{unix.O_RDWR, false},
		{unix.O_RDONLY | unix.O_DIRECT, true},
		{unix.O_WRONLY | unix.O_DIRECT, true},
	} {
		var out abi.OpenOut
		if e := f.Open(req(abi.OpOpen, ent.NodeID), &abi.OpenIn{Flags: c.flags}, &out); e != 0 {
			t.Fatalf("open %#o: %v", c.flags, e)
		}
		if got := out.OpenFlags&want == want; got != c.direct {
			t.Errorf("open %#o: open flags %#x, direct_io %v, want %v", c.flags, out.OpenFlags, got, c.direct)
		}
		unix.Close(int(out.Fh))
	}
	var cent abi.EntryOut
	var cout abi.OpenOut
	if e := f.Create(req(abi.OpCreate, abi.RootID), abi.RootID, &abi.CreateIn{Flags: unix.O_RDWR | unix.O_DIRECT, Mode: 0o644}, "g", &cent, &cout); e != 0 {
		t.Fatal(e)
	}
	if cout.OpenFlags&want != want {
		t.Errorf("create with O_DIRECT: open flags %#x, want direct_io and parallel direct writes", cout.OpenFlags)
	}
	unix.Close(int(cout.Fh))
}
