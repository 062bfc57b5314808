package passthrough

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
)

// newBenchFS returns a file system over a fresh directory, on tmpfs
// (/dev/shm) when there is one, as in the guest.
func newBenchFS(b *testing.B) *FS {
	b.Helper()
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "klab-passthrough-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	f, err := New(Options{Root: dir, AttrTimeout: DefaultTimeout, EntryTimeout: DefaultTimeout})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}

// benchRequest returns a request from root for node.
func benchRequest(b *testing.B, op abi.Opcode, node uint64) *dispatch.Request {
	h := abi.InHeader{Len: uint32(abi.InHeaderSize), Opcode: op, Unique: 2, NodeID: node}
	r := new(dispatch.Request)
	if err := r.Reset(abi.Bytes(&h), nil, nil); err != nil {
		b.Fatal(err)
	}
	return r
}

// makeFiles creates n empty files f0..f<n-1> and looks them up once.
func makeFiles(b *testing.B, f *FS, n int) []uint64 {
	ids := make([]uint64, n)
	r := benchRequest(b, abi.OpLookup, abi.RootID)
	for i := range ids {
		name := "f" + strconv.Itoa(i)
		if err := os.WriteFile(filepath.Join(f.opts.Root, name), nil, 0o644); err != nil {
			b.Fatal(err)
		}
		var out abi.EntryOut
		if e := f.Lookup(r, abi.RootID, name, &out); e != 0 {
			b.Fatal(e)
		}
		ids[i] = out.NodeID
	}
	return ids
}

// BenchmarkNodeParallel is the node table's lookup by ID, which every
// request on an inode does first, from GOMAXPROCS goroutines.
func BenchmarkNodeParallel(b *testing.B) {
	f := newBenchFS(b)
	ids := makeFiles(b, f, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if f.node(ids[i%len(ids)]) == nil {
				b.Fatal("node missing")
			}
			i++
		}
	})
}

// BenchmarkLookupExisting is LOOKUP of a known file and the FORGET that
// balances it: the open(O_PATH), fstat and table work of every LOOKUP.
func BenchmarkLookupExisting(b *testing.B) {
	f := newBenchFS(b)
	makeFiles(b, f, 100)
	r := benchRequest(b, abi.OpLookup, abi.RootID)
	names := make([]string, 100)
	for i := range names {
		names[i] = "f" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var out abi.EntryOut
		if e := f.Lookup(r, abi.RootID, names[i%len(names)], &out); e != 0 {
			b.Fatal(e)
		}
		f.Forget(out.NodeID, 1)
	}
}

// BenchmarkCreateCycle is what creating an empty file costs the server,
// as fio's filecreate drives it: LOOKUP (not found), CREATE, FLUSH,
// RELEASE, and, to keep the directory small, UNLINK and FORGET.
func BenchmarkCreateCycle(b *testing.B) {
	f := newBenchFS(b)
	r := benchRequest(b, abi.OpCreate, abi.RootID)
	in := abi.CreateIn{Flags: uint32(os.O_WRONLY | os.O_CREATE | os.O_EXCL), Mode: syscall.S_IFREG | 0o644}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := "c" + strconv.Itoa(i&1023)
		var entry abi.EntryOut
		var open abi.OpenOut
		if e := f.Lookup(r, abi.RootID, name, &entry); e != syscall.ENOENT {
			b.Fatalf("lookup of a new name: %v", e)
		}
		if e := f.Create(r, abi.RootID, &in, name, &entry, &open); e != 0 {
			b.Fatal(e)
		}
		if e := f.Flush(r, &abi.FlushIn{Fh: open.Fh}); e != 0 {
			b.Fatal(e)
		}
		if e := f.Release(r, &abi.ReleaseIn{Fh: open.Fh}); e != 0 {
			b.Fatal(e)
		}
		if e := f.Unlink(r, abi.RootID, name); e != 0 {
			b.Fatal(e)
		}
		f.Forget(entry.NodeID, 1)
	}
}
