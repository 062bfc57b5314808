package fs

import (
	"syscall"
	"testing"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
)

type rec struct {
	hdr  abi.OutHeader
	body []byte
}

func (r *rec) WriteReply(hdr abi.OutHeader, out, data []byte) error {
	r.hdr, r.body = hdr, append(append([]byte(nil), out...), data...)
	return nil
}

func serve(t *testing.T, h *Handler, op abi.Opcode, node uint64, arg []byte) *rec {
	t.Helper()
	hdr := abi.InHeader{Len: uint32(abi.InHeaderSize + len(arg)), Opcode: op, Unique: 2, NodeID: node}
	m := append(append([]byte(nil), abi.Bytes(&hdr)...), arg...)
	rep := &rec{}
	r := new(dispatch.Request)
	if err := r.Reset(m, rep, nil); err != nil {
		t.Fatal(err)
	}
	h.Handle(r)
	if !r.Done() {
		t.Fatalf("%s not replied", op)
	}
	return rep
}

// lookupOnly implements Lookuper and Writer.
type lookupOnly struct {
	parent uint64
	name   string
	data   []byte
}

func (l *lookupOnly) Lookup(r *Request, parent uint64, name string, out *abi.EntryOut) syscall.Errno {
	l.parent, l.name = parent, name
	if name == "missing" {
		return syscall.ENOENT
	}
	out.NodeID = 42
	return 0
}

func (l *lookupOnly) Write(r *Request, in *abi.WriteIn, data []byte) (uint32, syscall.Errno) {
	l.data = append([]byte(nil), data...)
	return uint32(len(data)), 0
}

func TestAdapter(t *testing.T) {
	fsys := &lookupOnly{}
	h := New(fsys)
	r := serve(t, h, abi.OpLookup, 1, []byte("file\x00"))
	if fsys.parent != 1 || fsys.name != "file" || r.hdr.Error != 0 || len(r.body) != abi.EntryOutSize || abi.View[abi.EntryOut](r.body).NodeID != 42 {
		t.Errorf("LOOKUP: %+v %d bytes; fs saw %d %q", r.hdr, len(r.body), fsys.parent, fsys.name)
	}
	if r := serve(t, h, abi.OpLookup, 1, []byte("missing\x00")); r.hdr.Error != -int32(syscall.ENOENT) || len(r.body) != 0 {
		t.Errorf("LOOKUP missing: %+v", r.hdr)
	}
	in := abi.WriteIn{Size: 5}
	arg := append(append([]byte(nil), abi.Bytes(&in)...), "hello"...)
	r = serve(t, h, abi.OpWrite, 3, arg)
	if string(fsys.data) != "hello" || abi.View[abi.WriteOut](r.body).Size != 5 {
		t.Errorf("WRITE: fs got %q, reply %+v", fsys.data, r.body)
	}
	// A WRITE whose size exceeds the data is refused.
	in.Size = 100
	arg = append(append([]byte(nil), abi.Bytes(&in)...), "hello"...)
	if r := serve(t, h, abi.OpWrite, 3, arg); r.hdr.Error != -int32(syscall.EINVAL) {
		t.Errorf("short WRITE: %+v", r.hdr)
	}
	// What the file system does not implement is ENOSYS; RELEASE and
	// OPENDIR have harmless defaults.
	if r := serve(t, h, abi.OpGetattr, 1, make([]byte, 16)); r.hdr.Error != -int32(syscall.ENOSYS) {
		t.Errorf("GETATTR: %+v", r.hdr)
	}
	if r := serve(t, h, abi.OpRelease, 1, make([]byte, 24)); r.hdr.Error != 0 {
		t.Errorf("RELEASE: %+v", r.hdr)
	}
	if r := serve(t, h, abi.OpOpendir, 1, make([]byte, 8)); r.hdr.Error != 0 || len(r.body) != 16 {
		t.Errorf("OPENDIR: %+v", r.hdr)
	}
	if r := serve(t, h, abi.Opcode(999), 1, nil); r.hdr.Error != -int32(syscall.ENOSYS) {
		t.Errorf("unknown opcode: %+v", r.hdr)
	}
}

func TestDirList(t *testing.T) {
	l := DirList{buf: make([]byte, 0, 100), max: 100}
	if !l.Add(5, 1, 8, "abc") || l.Len() != 32 {
		t.Fatalf("Add: len %d", l.Len())
	}
	d := abi.View[abi.Dirent](l.buf)
	if d.Ino != 5 || d.Off != 1 || d.Namelen != 3 || d.Type != 8 || string(l.buf[24:27]) != "abc" || l.buf[27] != 0 {
		t.Errorf("dirent %+v %q", *d, l.buf[24:32])
	}
	if !l.Add(6, 2, 4, "0123456789012345678901234567890123456789") {
		t.Fatal("second entry did not fit")
	}
	if l.Add(7, 3, 8, "x") || l.Len() != 32+64 {
		t.Errorf("overflow accepted: len %d", l.Len())
	}
	p := DirList{buf: make([]byte, 0, 200), max: 200}
	e := abi.EntryOut{NodeID: 9, Attr: abi.Attr{Ino: 77}}
	if !p.Fits("n", true) || !p.AddPlus(&e, 1, 8, "n") || p.Len() != abi.EntryOutSize+32 {
		t.Fatalf("AddPlus: len %d", p.Len())
	}
	if got := abi.View[abi.Dirent](p.buf[abi.EntryOutSize:]); got.Ino != 77 || got.Namelen != 1 {
		t.Errorf("direntplus dirent %+v", *got)
	}
	if p.Fits("n", true) {
		t.Error("a second 160-byte entry fits in 200 bytes")
	}
}
