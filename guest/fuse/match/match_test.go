package match

import (
	"testing"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
)

type namer map[uint64]string

func (n namer) NodeName(id uint64) string { return n[id] }

func req(t *testing.T, op abi.Opcode, node uint64, arg []byte) *dispatch.Request {
	t.Helper()
	h := abi.InHeader{Len: uint32(abi.InHeaderSize + len(arg)), Opcode: op, Unique: 2, NodeID: node}
	r := new(dispatch.Request)
	if err := r.Reset(append(append([]byte(nil), abi.Bytes(&h)...), arg...), nil, nil); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMatch(t *testing.T) {
	nm := namer{7: "held1"}
	mk := make([]byte, 8) // fuse_mkdir_in
	cases := []struct {
		sel  string
		r    *dispatch.Request
		want bool
	}{
		{"lookup:held*", req(t, abi.OpLookup, 1, []byte("held2\x00")), true},
		{"lookup:held*", req(t, abi.OpLookup, 1, []byte("other\x00")), false},
		{"lookup", req(t, abi.OpLookup, 1, []byte("any\x00")), true},
		{"getattr:held1", req(t, abi.OpGetattr, 7, make([]byte, 16)), true},
		{"getattr:held1", req(t, abi.OpGetattr, 8, make([]byte, 16)), false},
		{"*:d", req(t, abi.OpMkdir, 1, append(mk, "d\x00"...)), true},
		{"*", req(t, abi.OpStatfs, 1, nil), true},
		{"read", req(t, abi.OpWrite, 7, make([]byte, 40)), false},
	}
	for _, c := range cases {
		s, err := ParseSelector(c.sel)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Match(c.r, nm); got != c.want {
			t.Errorf("%s matches %s %q: %v, want %v", c.sel, c.r.Header.Opcode, Name(c.r, nm), got, c.want)
		}
	}
	if _, err := ParseSelector("lookup:[x"); err == nil {
		t.Error("bad pattern accepted")
	}
}
