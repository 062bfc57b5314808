// Package cache lists and collects everything klab keeps in its cache
// directory: Debian kernels and kernel sources, kernels built from source
// and their work trees, kernels placed from run bundles, the private apt
// directories, initramfs parts (u-root
// bases, agents, assembled images), libfuse builds, guest userspace
// images, crash logs and the temporary leftovers of interrupted work. It
// knows the cache's layout and its locks; what each entry holds is up to
// package images and its subpackages.
package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"klab/images/apt"
	"klab/images/buildstore"
	"klab/images/debian"
	"klab/images/keyed"
)

// Kind is a kind of cached thing.
type Kind string

// The kinds, in the order List reports them.
const (
	// DebianKernel is a kernel fetched from Debian: kernels/debian/<package>_<version>/.
	DebianKernel Kind = "debian-kernel"
	// BuiltKernel is a kernel built from source: kernels/build/results/<key>/.
	BuiltKernel Kind = "built-kernel"
	// BundleKernel is a kernel that `klab runs unpack` placed from a run
	// bundle: bundles/<kernel id>/. No name refers to it.
	BundleKernel Kind = "bundle-kernel"
	// BundleInitramfs is an initramfs image that a run bundle carried:
	// bundles/initramfs/<sha256>.cpio.
	BundleInitramfs Kind = "bundle-initramfs"
	// WorkTree is a build's work tree: kernels/build/work/<slot>/.
	WorkTree Kind = "work-tree"
	// Source is a Debian kernel source: sources/debian/<package>_<version>/.
	Source Kind = "kernel-source"
	// Apt is a private apt directory (apt/, apt-src/): package lists and
	// apt's caches, and, as root, its staging directory outside the cache.
	Apt Kind = "apt"
	// InitramfsBase is a u-root base: initramfs/base-<key>.cpio.
	InitramfsBase Kind = "initramfs-base"
	// Agent is a built guest agent: agent/klab-agent-<key>.
	Agent Kind = "agent"
	// Initramfs is an assembled initramfs: initramfs/klab-<key>.cpio.
	Initramfs Kind = "initramfs"
	// Libfuse is a passthrough_ll build: libfuse/<key>/.
	Libfuse Kind = "libfuse"
	// LibfuseHP is a passthrough_hp build: libfuse-hp/fuse3_<version>/.
	LibfuseHP Kind = "libfuse-hp"
	// Userspace is a guest userspace image: userspace/<suite>-<hash>/.
	Userspace Kind = "userspace"
	// Fstests is an fstests build: fstests/<key>/ (its failed builds'
	// logs, fstests/logs/, are diagnostics, as crash logs are).
	Fstests Kind = "fstests"
	// Ccache is ccache's objects from klab's kernel builds: ccache/ (when
	// CCACHE_DIR is not set). ccache bounds it itself (5 GB by default).
	Ccache Kind = "ccache"
	// CrashLog is the stack of a klab that failed: crash-*.log.
	CrashLog Kind = "crash-log"
	// Temporary is a leftover of interrupted work: .tmp-*, .base-*,
	// .klab-*.cpio, .<file>.tmp-*.
	Temporary Kind = "temporary"
	// Index is bookkeeping: alias indexes, build names, locks, the
	// accelerator verdict. Never collected.
	Index Kind = "index"
	// Other is anything klab does not know. Never collected.
	Other Kind = "other"
)

// kinds are all kinds, in report order.
var kinds = []Kind{DebianKernel, BuiltKernel, BundleKernel, BundleInitramfs, WorkTree, Source, Apt, InitramfsBase, Agent, Initramfs, Libfuse, LibfuseHP, Userspace, Fstests, Ccache, CrashLog, Temporary, Index, Other}

// Entry is one thing in the cache.
type Entry struct {
	// Kind is what it is.
	Kind Kind `json:"kind"`
	// Path is its file or directory.
	Path string `json:"path"`
	// Size is the disk space it uses, in bytes (like du).
	Size int64 `json:"size"`
	// LastUsed is its modification time, which klab sets when it uses a
	// cached entry (keyed.Touch).
	LastUsed time.Time `json:"last_used"`
	// Names are the references that name it: a Debian kernel's aliases
	// (debian:7.3, debian:<release>), a built kernel's build:<name>.
	Names []string `json:"names,omitempty"`
	// Pinned is set for a kernel that a name refers to: `klab cache gc
	// --max-size` keeps it unless told --all.
	Pinned bool `json:"pinned,omitempty"`
	// Also is a directory outside the cache that belongs to the entry
	// and goes with it: apt's staging directory (see apt.New). Size
	// counts it.
	Also string `json:"also,omitempty"`

	// born is the entry's creation time, when the file system keeps it.
	born time.Time
	// locks are the lock files that guard it; a klab holding any of them
	// is using it.
	locks []string
	// guarded is set for a temporary entry that a lock (locks) tells in
	// use from left over; other temporary entries are left over once an
	// hour old.
	guarded bool
	// remove removes it; nil for kinds that are never removed.
	remove func() error
}

// KindSize is the entries and space of one kind.
type KindSize struct {
	Kind    Kind  `json:"kind"`
	Entries int   `json:"entries"`
	Size    int64 `json:"size"`
}

// Listing is what List finds.
type Listing struct {
	// Dir is the cache directory.
	Dir string `json:"dir"`
	// Size is the space used by all entries.
	Size int64 `json:"size"`
	// Kinds sums the entries by kind, for the kinds there are.
	Kinds []KindSize `json:"kinds"`
	// Entries are all entries, by kind, most recently used first.
	Entries []Entry `json:"entries"`
}

// List walks the cache directory dir and returns every entry in it, with
// sizes. It never follows a symbolic link: a link is an entry of its own
// (of kind Index in the build cache's names/ and inputs/, else Other). A
// missing directory is an empty cache.
func List(dir string) (*Listing, error) {
	if dir == "" {
		return nil, errors.New("cache list: no cache directory")
	}
	l := &Listing{Dir: dir, Entries: []Entry{}}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		l.Kinds = []KindSize{}
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache list: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("cache list: %s is not a directory", dir)
	}
	s := &scanner{root: dir}
	s.scanRoot()
	if s.err != nil {
		return nil, fmt.Errorf("cache list: %w", s.err)
	}
	l.Entries = s.entries
	rank := map[Kind]int{}
	for i, k := range kinds {
		rank[k] = i
	}
	sort.SliceStable(l.Entries, func(i, j int) bool {
		a, b := l.Entries[i], l.Entries[j]
		if a.Kind != b.Kind {
			return rank[a.Kind] < rank[b.Kind]
		}
		if !a.LastUsed.Equal(b.LastUsed) {
			return a.LastUsed.After(b.LastUsed)
		}
		return a.Path < b.Path
	})
	sums := map[Kind]*KindSize{}
	for _, e := range l.Entries {
		l.Size += e.Size
		if sums[e.Kind] == nil {
			sums[e.Kind] = &KindSize{Kind: e.Kind}
		}
		sums[e.Kind].Entries++
		sums[e.Kind].Size += e.Size
	}
	l.Kinds = []KindSize{}
	for _, k := range kinds {
		if s := sums[k]; s != nil {
			l.Kinds = append(l.Kinds, *s)
		}
	}
	return l, nil
}

// scanner collects the entries of one cache directory.
type scanner struct {
	root    string
	entries []Entry
	err     error
}

// add records the entry at p (already Lstat'ed as fi).
func (s *scanner) add(kind Kind, p string, fi fs.FileInfo, e Entry) {
	e.Kind, e.Path = kind, p
	e.Size = diskUsage(p, fi)
	if e.Also != "" {
		if afi, err := os.Lstat(e.Also); err == nil {
			e.Size += diskUsage(e.Also, afi)
		}
	}
	e.LastUsed = fi.ModTime()
	e.born = birthTime(p)
	if e.remove == nil && removable(kind) {
		dir, name := filepath.Split(p)
		e.remove = func() error { return keyed.Discard(filepath.Clean(dir), name) }
	}
	s.entries = append(s.entries, e)
}

// readDir lists dir (see keyed.ReadDir), keeping the error for the
// listing.
func (s *scanner) readDir(dir string) []fs.FileInfo {
	fis, err := keyed.ReadDir(dir)
	s.err = errors.Join(s.err, err)
	return fis
}

// isDir reports whether fi is a real directory (a link to one is not).
func isDir(fi fs.FileInfo) bool { return fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 }

// temporary reports whether name is a leftover of interrupted work:
// .tmp-* (fetches, builds, removals), .base-* (a u-root base being
// built), .klab-*.cpio (an initramfs being assembled), .<file>.tmp-* (an
// atomic write, an agent being built).
func temporary(name string) bool {
	return keyed.IsTemp(name) || strings.HasPrefix(name, ".base-") ||
		(strings.HasPrefix(name, ".klab-") && strings.HasSuffix(name, ".cpio"))
}

func (s *scanner) scanRoot() {
	for _, fi := range s.readDir(s.root) {
		name, p := fi.Name(), filepath.Join(s.root, fi.Name())
		switch {
		case name == "kernels" && isDir(fi):
			for _, sub := range s.readDir(p) {
				sp := filepath.Join(p, sub.Name())
				switch {
				case sub.Name() == "debian" && isDir(sub):
					s.scanKeyed(sp, DebianKernel)
				case sub.Name() == "build" && isDir(sub):
					s.scanBuild()
				default:
					s.add(Other, sp, sub, Entry{})
				}
			}
		case name == "bundles" && isDir(fi):
			s.scanBundles(p)
		case name == "sources" && isDir(fi):
			for _, sub := range s.readDir(p) {
				if sp := filepath.Join(p, sub.Name()); sub.Name() == "debian" && isDir(sub) {
					s.scanKeyed(sp, Source)
				} else {
					s.add(Other, sp, sub, Entry{})
				}
			}
		case (name == "apt" || name == "apt-src") && isDir(fi):
			stage := apt.StagingDir(p)
			s.add(Apt, p, fi, Entry{Also: stage, locks: []string{filepath.Join(p, ".lock")}, remove: func() error {
				if stage != "" {
					if err := os.RemoveAll(stage); err != nil {
						return err
					}
				}
				return keyed.Discard(s.root, name)
			}})
		case name == "initramfs" && isDir(fi):
			s.scanFiles(p, func(n string) Kind {
				switch {
				case strings.HasPrefix(n, "base-") && strings.HasSuffix(n, ".cpio"):
					return InitramfsBase
				case strings.HasPrefix(n, "klab-") && strings.HasSuffix(n, ".cpio"):
					return Initramfs
				}
				return ""
			})
		case name == "agent" && isDir(fi):
			s.scanFiles(p, func(n string) Kind {
				if strings.HasPrefix(n, "klab-agent-") {
					return Agent
				}
				return ""
			})
		case name == "libfuse" && isDir(fi):
			s.scanKeyed(p, Libfuse)
		case name == "libfuse-hp" && isDir(fi):
			s.scanKeyed(p, LibfuseHP)
		case name == "userspace" && isDir(fi):
			s.scanKeyed(p, Userspace)
		case name == "fstests" && isDir(fi):
			s.scanKeyed(p, Fstests)
		case name == "ccache" && isDir(fi):
			s.add(Ccache, p, fi, Entry{})
		case strings.HasPrefix(name, "crash-") && strings.HasSuffix(name, ".log") && fi.Mode().IsRegular():
			s.add(CrashLog, p, fi, Entry{})
		case name == "accel-verdict.json" || name == ".lock":
			s.add(Index, p, fi, Entry{})
		case temporary(name):
			s.add(Temporary, p, fi, Entry{})
		default:
			s.add(Other, p, fi, Entry{})
		}
	}
}

// scanFiles adds the files of a directory without a lock (initramfs/,
// agent/): kindOf names a known file's kind, "" for others. A per-file
// lock (<file>.lock) or a directory lock (.lock), should klab take one,
// guards them.
func (s *scanner) scanFiles(dir string, kindOf func(name string) Kind) {
	for _, fi := range s.readDir(dir) {
		name, p := fi.Name(), filepath.Join(dir, fi.Name())
		locks := []string{filepath.Join(dir, ".lock"), p + ".lock"}
		switch k := kindOf(name); {
		case k != "" && fi.Mode().IsRegular():
			s.add(k, p, fi, Entry{locks: locks})
		case name == ".lock" || strings.HasSuffix(name, ".lock"):
			s.add(Index, p, fi, Entry{})
		case temporary(name):
			s.add(Temporary, p, fi, Entry{locks: locks})
		default:
			s.add(Other, p, fi, Entry{})
		}
	}
}

// scanKeyed adds the entries of a keyed cache directory (see
// keyed.RemoveEntry): one subdirectory per entry, named through
// aliases.json; dir/.lock guards them all.
func (s *scanner) scanKeyed(dir string, kind Kind) {
	names := map[string][]string{}
	if data, err := os.ReadFile(filepath.Join(dir, "aliases.json")); err == nil {
		var m map[string]string
		_ = json.Unmarshal(data, &m) // a damaged index pins nothing
		for k, v := range m {
			names[v] = append(names[v], aliasName(kind, k))
		}
	}
	lock := filepath.Join(dir, ".lock")
	for _, fi := range s.readDir(dir) {
		name, p := fi.Name(), filepath.Join(dir, fi.Name())
		switch {
		case kind == Fstests && name == "logs" && isDir(fi):
			s.add(CrashLog, p, fi, Entry{})
		case isDir(fi) && !strings.HasPrefix(name, "."):
			e := Entry{locks: []string{lock}, Names: names[name], remove: func() error { return keyed.RemoveEntry(dir, name) }}
			sort.Strings(e.Names)
			e.Pinned = kind == DebianKernel && len(e.Names) > 0
			s.add(kind, p, fi, e)
		case name == "aliases.json" || name == ".lock":
			s.add(Index, p, fi, Entry{})
		case temporary(name):
			s.add(Temporary, p, fi, Entry{locks: []string{lock}, guarded: true})
		default:
			s.add(Other, p, fi, Entry{})
		}
	}
}

// scanBundles adds the kernels that klab runs unpack placed, one
// directory per kernel id (see package results/bundle), and the
// leftovers of unpacks that died (.<id>.tmp-*). No lock guards them.
func (s *scanner) scanBundles(dir string) {
	for _, fi := range s.readDir(dir) {
		name, p := fi.Name(), filepath.Join(dir, fi.Name())
		switch {
		case name == "initramfs" && isDir(fi):
			s.scanFiles(p, func(n string) Kind {
				if strings.HasSuffix(n, ".cpio") && !strings.HasPrefix(n, ".") {
					return BundleInitramfs
				}
				return ""
			})
		case isDir(fi) && !strings.HasPrefix(name, "."):
			s.add(BundleKernel, p, fi, Entry{})
		case temporary(name):
			s.add(Temporary, p, fi, Entry{})
		default:
			s.add(Other, p, fi, Entry{})
		}
	}
}

// aliasName is how a user writes an alias key of a keyed cache.
func aliasName(kind Kind, key string) string {
	switch kind {
	case DebianKernel:
		if series, flavour, ok := strings.Cut(key, "/"); ok {
			if flavour == debian.DefaultFlavour {
				return "debian:" + series
			}
			return "debian:" + series + " (" + flavour + ")"
		}
		return "debian:" + key
	case Source:
		return "debian:" + key
	}
	return key
}

// scanBuild adds the store of kernels built from source, as package
// images/buildstore lists it: kernels (pinned by their names), work trees
// (each with its lock), leftovers, indexes.
func (s *scanner) scanBuild() {
	es, err := buildstore.New(s.root).Entries()
	s.err = errors.Join(s.err, err)
	for _, be := range es {
		kind := map[buildstore.EntryKind]Kind{buildstore.Result: BuiltKernel, buildstore.WorkTree: WorkTree,
			buildstore.Temporary: Temporary, buildstore.Index: Index}[be.Kind]
		if kind == "" {
			kind = Other
		}
		e := Entry{Names: be.Names, Pinned: be.Kind == buildstore.Result && len(be.Names) > 0, remove: be.Remove}
		if be.Lock != "" {
			e.locks = []string{be.Lock}
		}
		s.add(kind, be.Path, be.Info, e)
	}
}

// removable reports whether gc may remove entries of kind.
func removable(k Kind) bool { return k != Index && k != Other }

// diskUsage is the space used by the tree at p (like du), never
// following links.
func diskUsage(p string, fi fs.FileInfo) int64 {
	if !isDir(fi) {
		return blocks(fi)
	}
	var n int64
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			n += blocks(fi)
		}
		return nil
	})
	return n
}

func blocks(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
