package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"klab/internal/flock"
)

// DefaultMaxAge is how long initramfs parts may go unused before GC
// removes them.
const DefaultMaxAge = 7 * 24 * time.Hour

// tempGrace is how old a temporary entry that no lock guards must be
// before GC takes it for a leftover: younger ones may belong to work that
// is still running.
const tempGrace = time.Hour

// GCOptions tunes GC.
type GCOptions struct {
	// Dir is the cache directory.
	Dir string
	// MaxSize, when not negative, bounds the cache: after the stale
	// parts, the least recently used entries go until the cache fits.
	// Negative means no bound: only stale parts go.
	MaxSize int64
	// All lets MaxSize take kernels that a name refers to (Pinned).
	All bool
	// Kinds, when not empty, limits GC to entries of these kinds: only
	// they count towards the sizes, and only they go.
	Kinds []Kind
	// CheapFirst orders what MaxSize takes by what it costs to make
	// again: entries that are not kernels first, then kernels that no
	// name refers to (bundle kernels among them), then named kernels
	// (with All); the least recently used first within each. Without it, the least recently used entry
	// goes first, whatever its kind.
	CheapFirst bool
	// MaxAge is how long an initramfs part (u-root base, agent,
	// assembled initramfs) may go unused; zero means DefaultMaxAge.
	MaxAge time.Duration
	// DryRun only reports what would go.
	DryRun bool
	// Now is the time GC takes for now; zero means time.Now().
	Now time.Time
}

// Removal is an entry GC removed (or, with DryRun, would remove).
type Removal struct {
	Entry
	// Reason says why.
	Reason string `json:"reason"`
}

// Skip is an entry GC left although it was stale or the cache was over
// its bound.
type Skip struct {
	Entry
	// Reason says why it stayed: another klab holds its lock, a name
	// pins it.
	Reason string `json:"reason"`
}

// GCResult says what GC did.
type GCResult struct {
	// Before and After are the cache's sizes.
	Before int64 `json:"before"`
	After  int64 `json:"after"`
	// Removed are the entries removed, stale ones first, then the least
	// recently used.
	Removed []Removal `json:"removed"`
	// Skipped are the entries left.
	Skipped []Skip `json:"skipped"`
}

// GC removes what is stale from the cache at o.Dir and, with o.MaxSize,
// the least recently used entries until the cache fits. Stale are:
//
//   - temporary leftovers of interrupted work: under a keyed cache's lock
//     (kernels/debian, sources/debian, libfuse, libfuse-hp, userspace, fstests) as
//     soon as no klab holds it, elsewhere an hour after their last change;
//   - crash logs;
//   - u-root bases and agents other than the most recently used of each,
//     and any not used for o.MaxAge;
//   - assembled initramfs images last used before the kept base and agent
//     were made (they hold older ones), and any not used for o.MaxAge.
//
// Kernels are never stale, bundle kernels (bundles/<kernel id>/) included.
//
// The size bound takes entries of every kind but the indexes (alias
// indexes, build names, locks) and what klab does not know, oldest use
// first; kernels that a name refers to (Pinned) stay unless o.All. An
// entry whose lock another klab holds is never removed: GC takes each
// lock (without waiting) and holds it until it returns. GC never follows a
// symbolic link.
func GC(o GCOptions) (*GCResult, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	l, err := List(o.Dir)
	if err != nil {
		return nil, err
	}
	if len(o.Kinds) > 0 {
		l = l.only(o.Kinds)
	}
	locks := &lockSet{held: map[string]func(){}}
	defer locks.release()
	res := &GCResult{Before: l.Size, Removed: []Removal{}, Skipped: []Skip{}}
	total := l.Size
	var errs []error
	gone := map[string]bool{}
	take := func(e Entry, reason string) {
		if busy := locks.busy(e); busy != "" {
			res.Skipped = append(res.Skipped, Skip{e, busy})
			return
		}
		if !o.DryRun {
			if err := e.remove(); err != nil {
				errs = append(errs, fmt.Errorf("gc %s: %w", e.Path, err))
				return
			}
		}
		gone[e.Path] = true
		total -= e.Size
		res.Removed = append(res.Removed, Removal{e, reason})
	}

	for _, e := range l.Entries {
		if reason := stale(e, l, o); reason != "" {
			take(e, reason)
		}
	}
	if o.MaxSize >= 0 && total > o.MaxSize {
		var lru []Entry
		for _, e := range l.Entries {
			// Young temporary entries may belong to running work.
			if !gone[e.Path] && e.remove != nil && e.Kind != Temporary && !skipped(res, e.Path) {
				lru = append(lru, e)
			}
		}
		sort.SliceStable(lru, func(i, j int) bool {
			if ti, tj := o.tier(lru[i]), o.tier(lru[j]); ti != tj {
				return ti < tj
			}
			return lru[i].LastUsed.Before(lru[j].LastUsed)
		})
		var pinned []Entry
		for _, e := range lru {
			if total <= o.MaxSize {
				break
			}
			if e.Pinned && !o.All {
				pinned = append(pinned, e)
				continue
			}
			take(e, fmt.Sprintf("least recently used (last used %s)", e.LastUsed.Format("2006-01-02 15:04")))
		}
		if total > o.MaxSize {
			for _, e := range pinned {
				res.Skipped = append(res.Skipped, Skip{e, "named " + strings.Join(e.Names, ", ") + " (--all removes it too)"})
			}
		}
	}
	res.After = total
	return res, errors.Join(errs...)
}

// tier is the rank of e in what MaxSize takes (see CheapFirst): lower
// goes first.
func (o GCOptions) tier(e Entry) int {
	switch {
	case !o.CheapFirst || (e.Kind != DebianKernel && e.Kind != BuiltKernel && e.Kind != BundleKernel):
		return 0
	case !e.Pinned:
		return 1
	}
	return 2
}

// only is the part of l of the given kinds.
func (l *Listing) only(kinds []Kind) *Listing {
	part := &Listing{Dir: l.Dir, Entries: []Entry{}, Kinds: []KindSize{}}
	for _, e := range l.Entries {
		if slices.Contains(kinds, e.Kind) {
			part.Entries = append(part.Entries, e)
			part.Size += e.Size
		}
	}
	for _, ks := range l.Kinds {
		if slices.Contains(kinds, ks.Kind) {
			part.Kinds = append(part.Kinds, ks)
		}
	}
	return part
}

func skipped(res *GCResult, path string) bool {
	for _, s := range res.Skipped {
		if s.Path == path {
			return true
		}
	}
	return false
}

// stale says why e is stale, or "".
func stale(e Entry, l *Listing, o GCOptions) string {
	unused := o.Now.Sub(e.LastUsed)
	switch e.Kind {
	case Temporary:
		if e.guarded {
			return "left over by an interrupted fetch or build"
		}
		if unused > tempGrace {
			return "left over by interrupted work"
		}
	case CrashLog:
		return "crash log"
	case InitramfsBase, Agent:
		if n := newest(l, e.Kind); n != nil && n.Path != e.Path {
			return "superseded by " + filepath.Base(n.Path)
		}
		if unused > o.MaxAge {
			return "unused for " + days(unused)
		}
	case Initramfs:
		var made time.Time
		for _, k := range []Kind{InitramfsBase, Agent} {
			if n := newest(l, k); n != nil && n.born.After(made) {
				made = n.born
			}
		}
		if !made.IsZero() && e.LastUsed.Before(made) {
			return "holds an older u-root base or agent"
		}
		if unused > o.MaxAge {
			return "unused for " + days(unused)
		}
	}
	return ""
}

// newest is the most recently used entry of kind k.
func newest(l *Listing, k Kind) *Entry {
	var n *Entry
	for i := range l.Entries {
		e := &l.Entries[i]
		if e.Kind == k && (n == nil || e.LastUsed.After(n.LastUsed)) {
			n = e
		}
	}
	return n
}

func days(d time.Duration) string {
	if n := int(d / (24 * time.Hour)); n != 1 {
		return fmt.Sprintf("%d days", n)
	}
	return "1 day"
}

// lockSet holds the locks GC took, until release.
type lockSet struct {
	held map[string]func()
}

// busy takes e's locks and returns "" when it got them all, else why not.
func (s *lockSet) busy(e Entry) string {
	for _, p := range e.locks {
		if _, ok := s.held[p]; ok {
			continue
		}
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no lock: nobody uses it that way
		}
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Sprintf("its lock %s is not a plain file", p)
		}
		unlock, ok := flock.TryLock(p)
		if !ok {
			return "in use: another klab holds " + p
		}
		s.held[p] = unlock
	}
	return ""
}

func (s *lockSet) release() {
	for _, unlock := range s.held {
		unlock()
	}
}
