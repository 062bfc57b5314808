package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"klab/images/cache"
	"klab/internal/units"
)

func newCacheCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cache",
		Short: "See and bound what klab keeps in its cache",
		Long: `klab's cache (--cache-dir or $KLAB_CACHE_DIR, else $XDG_CACHE_HOME/klab, else
~/.cache/klab) holds Debian kernels and kernel sources, kernels built from
source and their work trees, kernels placed from run bundles (klab runs
unpack), the private apt directories, initramfs parts (u-root bases,
agents, assembled images), libfuse builds, guest userspace images, fstests
builds and crash logs. klab cache list shows all of it with
sizes; klab cache gc removes what is stale and, with --max-size, the least
recently used entries until the cache fits, listing each entry with its
size and why it goes. klab kernels gc is klab cache gc for kernel builds
only (--builds).`,
		Example: `  klab cache list
  klab cache list --json | jq '.kinds'
  klab cache gc --dry-run
  klab cache gc --max-size 20G
  klab cache gc --builds --max-size 5G --dry-run`,
	}
	cmd.AddCommand(newCacheListCommand(g), newCacheGCCommand(g))
	return cmd
}

func newCacheListCommand(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List everything in the cache, with sizes by kind and by entry",
		Long: `List the cache: the space each kind of entry takes, then every entry with
its size, when it was last used, and the names that refer to it (a Debian
kernel's debian:<series> and debian:<release>, a built kernel's build:<name>).
A kernel that a name refers to is pinned: klab cache gc --max-size keeps it
unless given --all. Sizes are disk usage in binary units (KiB, MiB, GiB).`,
		Example: "  klab cache list\n  klab cache list --json\n  klab cache list --cache-dir /tmp/kb-cache",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := cache.List(g.cacheDir)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), l)
			}
			return printCacheListing(cmd.OutOrStdout(), l)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// cacheGCOptions are the flags of klab cache gc (and of klab kernels gc,
// which sets builds and all).
type cacheGCOptions struct {
	maxSize string
	maxAge  time.Duration
	all     bool
	builds  bool
	dryRun  bool
	asJSON  bool
}

// buildKinds are the kinds --builds limits gc to: what building kernels
// from source keeps.
var buildKinds = []cache.Kind{cache.WorkTree, cache.Source, cache.BuiltKernel, cache.Ccache}

func newCacheGCCommand(g *globalOptions) *cobra.Command {
	o := &cacheGCOptions{}
	cmd := &cobra.Command{
		Use:   "gc [--max-size SIZE] [--builds] [--dry-run]",
		Short: "Remove stale cache entries, and bound the cache's size",
		Long: `Remove what is stale: temporary leftovers of interrupted fetches and builds,
crash logs, u-root bases and agents other than the most recently used ones,
initramfs images that hold an older base or agent, and initramfs parts not
used for --max-age. With --max-size, then remove the least recently used
entries of any kind (kernels, bundles' kernels, sources, work trees, apt lists,
initramfs parts, libfuse builds) until the cache fits; kernels that a name refers to (see
klab cache list) stay unless --all is given. Entries that another klab holds
locked (a fetch or a build in progress) are never removed, and symbolic links
are never followed out of the cache.

--builds limits gc to what kernel builds keep (work trees, Debian kernel
sources, built kernels), the cheapest to make again first: work trees and
sources, then kernels no name refers to, then named ones (with --all).
klab kernels gc is the same as klab cache gc --builds --all --max-size 20G.

gc prints a line per entry: "removed" (or, with --dry-run, "would remove")
or "kept", its kind, size, path in the cache with the names that refer to
it, and why (stale: left over, superseded, unused for so long; or least
recently used under --max-size; kept: locked, or named); then the total.`,
		Example: `  klab cache gc --dry-run
  klab cache gc
  klab cache gc --max-size 20G
  klab cache gc --builds --max-size 5G
  klab cache gc --max-size 0 --all --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCacheGC(cmd.OutOrStdout(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.maxSize, "max-size", "", "the most space the cache may use (K, M, G, T are powers of 1024: 20G); none by default")
	f.DurationVar(&o.maxAge, "max-age", cache.DefaultMaxAge, "remove initramfs parts not used for this long")
	f.BoolVar(&o.all, "all", false, "with --max-size, remove kernels that a name refers to as well")
	f.BoolVar(&o.builds, "builds", false, "only what kernel builds keep: work trees, kernel sources, built kernels (cheapest to make again first)")
	f.BoolVar(&o.dryRun, "dry-run", false, "only list what would be removed")
	f.BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	return cmd
}

func runCacheGC(w io.Writer, g *globalOptions, o *cacheGCOptions) error {
	max := int64(-1)
	if o.maxSize != "" {
		n, err := units.ParseSize(o.maxSize)
		if err != nil {
			return badInput(fmt.Errorf("--max-size: %w", err))
		}
		max = n
	}
	if o.all && max < 0 {
		return badInput(fmt.Errorf("--all goes with --max-size: without it, gc removes only stale entries, never a kernel"))
	}
	gco := cache.GCOptions{Dir: g.cacheDir, MaxSize: max, All: o.all, MaxAge: o.maxAge, DryRun: o.dryRun}
	if o.builds {
		gco.Kinds, gco.CheapFirst = buildKinds, true
	}
	res, err := cache.GC(gco)
	if res == nil {
		return err
	}
	if o.asJSON {
		if jerr := writeJSON(w, res); jerr != nil {
			return jerr
		}
		return err
	}
	if perr := printGC(w, g.cacheDir, o, max, res); perr != nil {
		return perr
	}
	return err
}

// printGC prints what gc removed (or would remove) and kept, a line per
// entry with its kind, size, path, names and why, then the total.
func printGC(w io.Writer, dir string, o *cacheGCOptions, max int64, res *cache.GCResult) error {
	verb := "removed"
	if o.dryRun {
		verb = "would remove"
	}
	where, verbs := fmt.Sprintf("the cache at %s", shown(dir)), [3]string{"takes", "would go", "went"}
	if o.builds {
		where, verbs = fmt.Sprintf("the kernel builds in the cache at %s", shown(dir)), [3]string{"take", "would go", "went"}
	}
	limit := "no limit"
	if max >= 0 {
		limit = "limit " + units.Bytes(max)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var freed int64
	for _, r := range res.Removed {
		freed += r.Size
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", verb, r.Kind, units.Bytes(r.Size), shown(gcEntryPath(dir, r.Entry)), shown(r.Reason))
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(tw, "kept\t%s\t%s\t%s\t%s\n", s.Kind, units.Bytes(s.Size), shown(gcEntryPath(dir, s.Entry)), shown(s.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	n := len(res.Removed)
	switch {
	case n == 0:
		fmt.Fprintf(w, "nothing to remove: %s %s %s (%s)\n", where, verbs[0], units.Bytes(res.Before), limit)
	case o.dryRun:
		fmt.Fprintf(w, "would remove %d %s, %s: %s %s from %s to %s (%s)\n",
			n, entries(n), units.Bytes(freed), where, verbs[1], units.Bytes(res.Before), units.Bytes(res.After), limit)
	default:
		fmt.Fprintf(w, "removed %d %s, %s: %s %s from %s to %s (%s)\n",
			n, entries(n), units.Bytes(freed), where, verbs[2], units.Bytes(res.Before), units.Bytes(res.After), limit)
	}
	return nil
}

// entries is "entry" or "entries", for n of them.
func entries(n int) string {
	if n == 1 {
		return "entry"
	}
	return "entries"
}

// gcEntryPath is an entry's path in the cache directory, followed by the
// names that refer to it: "kernels/build/results/1a2b (build:fix)".
func gcEntryPath(dir string, e cache.Entry) string {
	p := relPath(dir, e.Path)
	if len(e.Names) > 0 {
		p += " (" + strings.Join(e.Names, ", ") + ")"
	}
	return p
}

// printCacheListing prints the cache by kind, then every entry.
func printCacheListing(w io.Writer, l *cache.Listing) error {
	fmt.Fprintf(w, "cache %s: %s in %d entries\n\n", shown(l.Dir), units.Bytes(l.Size), len(l.Entries))
	if len(l.Entries) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tENTRIES\tSIZE")
	for _, k := range l.Kinds {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", k.Kind, k.Entries, units.Bytes(k.Size))
	}
	fmt.Fprintf(tw, "total\t%d\t%s\n", len(l.Entries), units.Bytes(l.Size))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tSIZE\tLAST USED\tPATH\tNAMES")
	for _, e := range l.Entries {
		names := strings.Join(e.Names, ", ")
		if e.Pinned {
			names += " (pinned)"
		}
		if e.Also != "" {
			names = strings.TrimSpace(names + " with " + e.Also)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Kind, units.Bytes(e.Size), e.LastUsed.Local().Format("2006-01-02 15:04"),
			shown(relPath(l.Dir, e.Path)), shown(names))
	}
	return tw.Flush()
}

// relPath is p relative to the cache directory, when it is inside it.
func relPath(dir, p string) string {
	if rel, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}
