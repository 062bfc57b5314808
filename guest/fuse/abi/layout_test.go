package abi

import (
	"testing"
	"unsafe"
)

// TestLayout pins struct sizes and a few offsets to those of the kernel's
// fuse.h (checked against include/uapi/linux/fuse.h, protocol 7.45).
func TestLayout(t *testing.T) {
	sizes := []struct {
		name      string
		got, want uintptr
	}{
		{"fuse_in_header", unsafe.Sizeof(InHeader{}), 40},
		{"fuse_out_header", unsafe.Sizeof(OutHeader{}), 16},
		{"fuse_attr", unsafe.Sizeof(Attr{}), 88},
		{"fuse_entry_out", unsafe.Sizeof(EntryOut{}), 128},
		{"fuse_attr_out", unsafe.Sizeof(AttrOut{}), 104},
		{"fuse_init_in", unsafe.Sizeof(InitIn{}), 64},
		{"fuse_init_out", unsafe.Sizeof(InitOut{}), 64},
		{"fuse_getattr_in", unsafe.Sizeof(GetattrIn{}), 16},
		{"fuse_setattr_in", unsafe.Sizeof(SetattrIn{}), 88},
		{"fuse_open_in", unsafe.Sizeof(OpenIn{}), 8},
		{"fuse_create_in", unsafe.Sizeof(CreateIn{}), 16},
		{"fuse_open_out", unsafe.Sizeof(OpenOut{}), 16},
		{"fuse_release_in", unsafe.Sizeof(ReleaseIn{}), 24},
		{"fuse_flush_in", unsafe.Sizeof(FlushIn{}), 24},
		{"fuse_read_in", unsafe.Sizeof(ReadIn{}), 40},
		{"fuse_write_in", unsafe.Sizeof(WriteIn{}), 40},
		{"fuse_write_out", unsafe.Sizeof(WriteOut{}), 8},
		{"fuse_kstatfs", unsafe.Sizeof(Kstatfs{}), 80},
		{"fuse_fsync_in", unsafe.Sizeof(FsyncIn{}), 16},
		{"fuse_mknod_in", unsafe.Sizeof(MknodIn{}), 16},
		{"fuse_mkdir_in", unsafe.Sizeof(MkdirIn{}), 8},
		{"fuse_rename2_in", unsafe.Sizeof(Rename2In{}), 16},
		{"fuse_interrupt_in", unsafe.Sizeof(InterruptIn{}), 8},
		{"fuse_forget_one", unsafe.Sizeof(ForgetOne{}), 16},
		{"fuse_batch_forget_in", unsafe.Sizeof(BatchForgetIn{}), 8},
		{"fuse_fallocate_in", unsafe.Sizeof(FallocateIn{}), 32},
		{"fuse_lseek_in", unsafe.Sizeof(LseekIn{}), 24},
		{"fuse_copy_file_range_in", unsafe.Sizeof(CopyFileRangeIn{}), 56},
		{"fuse_dirent (fixed part)", unsafe.Sizeof(Dirent{}), 24},
		{"fuse_backing_map", unsafe.Sizeof(BackingMap{}), 16},
	}
	for _, s := range sizes {
		if s.got != s.want {
			t.Errorf("sizeof(%s) = %d, want %d", s.name, s.got, s.want)
		}
	}
	var o InitOut
	offs := []struct {
		name      string
		got, want uintptr
	}{
		{"init_out.max_write", unsafe.Offsetof(o.MaxWrite), 20},
		{"init_out.max_pages", unsafe.Offsetof(o.MaxPages), 28},
		{"init_out.flags2", unsafe.Offsetof(o.Flags2), 32},
		{"init_out.max_stack_depth", unsafe.Offsetof(o.MaxStackDepth), 36},
		{"init_out.request_timeout", unsafe.Offsetof(o.RequestTimeout), 40},
		{"in_header.total_extlen", unsafe.Offsetof(InHeader{}.TotalExtlen), 36},
		{"open_out.backing_id", unsafe.Offsetof(OpenOut{}.BackingID), 12},
	}
	for _, s := range offs {
		if s.got != s.want {
			t.Errorf("offsetof(%s) = %d, want %d", s.name, s.got, s.want)
		}
	}
}

func TestInitFlags(t *testing.T) {
	if InitRequestTimeout != 1<<42 || InitOverIOUring != 1<<41 || InitPassthrough != 1<<37 {
		t.Fatal("flags2 bits moved")
	}
	var o InitOut
	o.SetFlags64(InitExt | InitRequestTimeout | InitMaxPages)
	if o.Flags2 != 1<<10 || o.Flags != uint32(InitExt|InitMaxPages) || o.Flags64() != InitExt|InitRequestTimeout|InitMaxPages {
		t.Fatalf("SetFlags64: flags %#x flags2 %#x", o.Flags, o.Flags2)
	}
	in := InitIn{Flags: uint32(InitAsyncRead), Flags2: 1 << 10}
	if in.Flags64() != InitAsyncRead {
		t.Errorf("flags2 counted without INIT_EXT")
	}
	in.Flags |= uint32(InitExt)
	if in.Flags64()&InitRequestTimeout == 0 {
		t.Errorf("flags2 ignored with INIT_EXT")
	}
	if got := (InitAsyncRead | InitRequestTimeout).String(); got != "ASYNC_READ|REQUEST_TIMEOUT" {
		t.Errorf("String = %q", got)
	}
}

func TestParseOpcode(t *testing.T) {
	for in, want := range map[string]Opcode{"lookup": OpLookup, "FUSE_READ": OpRead, "Getattr": OpGetattr, "16": OpWrite, "copy_file_range": OpCopyFileRange} {
		got, err := ParseOpcode(in)
		if err != nil || got != want {
			t.Errorf("ParseOpcode(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lookups", "0", "x1"} {
		if _, err := ParseOpcode(bad); err == nil {
			t.Errorf("ParseOpcode(%q) succeeded", bad)
		}
	}
	if OpLookup.String() != "LOOKUP" || Opcode(999).String() != "OPCODE_999" {
		t.Errorf("String: %s %s", OpLookup, Opcode(999))
	}
}

func TestViewAndCString(t *testing.T) {
	b := make([]byte, 48)
	b[0] = 48
	b[4] = byte(OpInit)
	h := View[InHeader](b)
	if h == nil || h.Len != 48 || h.Opcode != OpInit {
		t.Fatalf("View: %+v", h)
	}
	if View[InHeader](b[:39]) != nil {
		t.Errorf("View of a short buffer is not nil")
	}
	s, rest := CString([]byte("abc\x00def\x00"))
	if string(s) != "abc" || string(rest) != "def\x00" {
		t.Errorf("CString: %q %q", s, rest)
	}
	if s, rest := CString([]byte("xyz")); string(s) != "xyz" || rest != nil {
		t.Errorf("CString without NUL: %q %q", s, rest)
	}
}
