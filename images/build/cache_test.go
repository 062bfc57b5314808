package build

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
)

func TestCacheKeys(t *testing.T) {
	base := Inputs{Arch: "x86_64", Base: "git:abc", BaseConfig: "tinyconfig",
		Fragments: []string{"f1"}, Patches: []string{"p1", "p2"}, Compiler: "gcc 12.2.0"}
	// The key is a function of the values alone: an Inputs built apart,
	// with slices of its own, has the same key.
	same := Inputs{Arch: "x86_64", Base: "git:" + "abc", BaseConfig: "tiny" + "config",
		Fragments: append([]string{}, "f1"), Patches: strings.Fields("p1 p2"), Compiler: "gcc 12.2.0"}
	if same.InputKey() != base.InputKey() {
		t.Errorf("equal inputs give keys %q and %q", same.InputKey(), base.InputKey())
	}
	// The keys, computed here apart from cache.go (keyOf), so that a
	// change of the encoding or of the fields it covers, which would
	// orphan every cached build, fails.
	if want := keyOf([]string{recipe, "input", "x86_64", "git:abc", "tinyconfig"}, []string{"f1"}, []string{"p1", "p2"}, []string{"gcc 12.2.0"}); base.InputKey() != want {
		t.Errorf("InputKey = %q, want %q", base.InputKey(), want)
	}
	if want := keyOf([]string{recipe, "slot", "x86_64", "git:abc", "tinyconfig"}, []string{"f1"}, []string{"gcc 12.2.0"}); base.SlotKey() != want {
		t.Errorf("SlotKey = %q, want %q", base.SlotKey(), want)
	}
	variants := map[string]func(*Inputs){
		"base tree":       func(in *Inputs) { in.Base = "git:abd" },
		"a patch":         func(in *Inputs) { in.Patches = []string{"p1", "p3"} },
		"patch order":     func(in *Inputs) { in.Patches = []string{"p2", "p1"} },
		"no patches":      func(in *Inputs) { in.Patches = nil },
		"a fragment":      func(in *Inputs) { in.Fragments = []string{"f2"} },
		"base config":     func(in *Inputs) { in.BaseConfig = "defconfig" },
		"compiler":        func(in *Inputs) { in.Compiler = "gcc 13.1.0" },
		"field splitting": func(in *Inputs) { in.Patches = []string{"p1,p2"} },
	}
	seen := map[string]string{base.InputKey(): "base"}
	for name, change := range variants {
		in := base
		change(&in)
		k := in.InputKey()
		if other, dup := seen[k]; dup {
			t.Errorf("changing %s gives the same input key as %s", name, other)
		}
		seen[k] = name
		// The work tree is shared by every patch series.
		patchesOnly := name == "a patch" || name == "patch order" || name == "no patches" || name == "field splitting"
		if sameSlot := in.SlotKey() == base.SlotKey(); sameSlot != patchesOnly {
			t.Errorf("changing %s: same work tree = %v, want %v", name, sameSlot, patchesOnly)
		}
	}
	// The result key is the tree, the patches, the merged config and the
	// compiler; fragments only count through the config they make.
	r := ResultKey("x86_64", "git:abc", []string{"p1"}, "cfg1", "gcc")
	for name, k := range map[string]string{
		"config":   ResultKey("x86_64", "git:abc", []string{"p1"}, "cfg2", "gcc"),
		"tree":     ResultKey("x86_64", "sha256:x", []string{"p1"}, "cfg1", "gcc"),
		"patch":    ResultKey("x86_64", "git:abc", []string{"p2"}, "cfg1", "gcc"),
		"compiler": ResultKey("x86_64", "git:abc", []string{"p1"}, "cfg1", "clang"),
	} {
		if k == r {
			t.Errorf("result key ignores the %s", name)
		}
	}
}

// keyOf is the cache key encoding, written out: the first 20 hex digits
// of SHA-256 over each list's count and then its fields, each count and
// field preceded by its length as 8 big-endian bytes.
func keyOf(lists ...[]string) string {
	var b []byte
	for _, l := range lists {
		for _, f := range append([]string{strconv.Itoa(len(l))}, l...) {
			b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
			b = append(b, f...)
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:20]
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"20G": 20 << 30, "500M": 500 << 20, "1.5T": 3 << 39, "1024": 1024, "0": 0, "64KiB": 64 << 10, "2gb": 2 << 30,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "-1G", "ten"} {
		if _, err := ParseSize(bad); err == nil || !strings.Contains(err.Error(), "e.g. 20G") {
			t.Errorf("ParseSize(%q): err = %v", bad, err)
		}
	}
}
