package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"klab/experiments"
	"klab/guest/fuse"
	"klab/images/buildstore"
	"klab/images/debian"
	"klab/matrix"
	"klab/results"
	"klab/results/report"
	"klab/results/splat"
	"klab/results/xreport"
)

// Shell completion (klab completion bash|zsh|fish|powershell) knows
// klab's values: kernel references (debian:<series>, the cached Debian
// kernels, build:<name>, bzImage files), enumerated flags, runs and
// experiments. Flags get their completions by name, wherever they are
// defined, so that a new command's --kernel or --accel completes too.

// setupCompletion gives every flag of root's tree that completionFor
// knows its completion, every --flavour flag the real list of flavours in
// its help, and the positional arguments of the commands in
// argCompletions theirs.
func setupCompletion(root *cobra.Command, g *globalOptions) {
	args := argCompletions(g)
	seen := map[*pflag.Flag]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		visit := func(f *pflag.Flag) {
			if seen[f] {
				return
			}
			seen[f] = true
			if f.Name == "flavour" {
				f.Usage = flavourUsage()
			}
			if fn := completionFor(c, f.Name, g); fn != nil {
				// The flag is c's and registered once: this cannot fail.
				_ = c.RegisterFlagCompletionFunc(f.Name, fn)
			}
		}
		c.PersistentFlags().VisitAll(visit)
		c.Flags().VisitAll(visit)
		if fn, ok := args[c.CommandPath()]; ok && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = fn
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completionFor returns the completion of c's flag name, or nil.
func completionFor(c *cobra.Command, name string, g *globalOptions) cobra.CompletionFunc {
	switch name {
	case "kernel":
		return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeKernel(g.cacheDir, toComplete)
		}
	case "source":
		return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeOrFiles(debianRefs(), toComplete)
		}
	case "config":
		fragments := []string{"lab", "debug"} // shipped in images/configs
		if c.CommandPath() == "klab boot" {
			fragments = append(fragments, "tree") // the tree's own .config
		}
		return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeFragments(fragments, toComplete)
		}
	case "cache-dir", "runs-dir", "out", "resume", "tree", "backing", "dir":
		return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return nil, cobra.ShellCompDirectiveFilterDirs
		}
	case "format":
		if p := c.CommandPath(); strings.HasPrefix(p, "klab matrix") || strings.HasPrefix(p, "klab results") {
			return fixed(xreport.Formats...)
		}
		return fixed(report.Formats...)
	}
	if values, ok := flagEnums()[name]; ok {
		return fixed(values...)
	}
	return nil
}

// flagEnums are the values of flags that take one of a few words.
func flagEnums() map[string][]string {
	return map[string][]string{
		"accel":            accels(),
		"flavour":          debianFlavours(),
		"base-config":      {"tinyconfig", "defconfig", "allnoconfig"},
		"order":            {"abba", "random"},
		"rounds":           {"auto"},
		"engine":           matrix.Engines,
		"transport":        {fuse.TransportDev, fuse.TransportURing},
		"server":           {fuse.ServerPassthrough, fuse.ServerStuck, fuse.ServerInterrupt, fuse.ServerLibfusePassthroughLL, fuse.ServerLibfusePassthroughHP},
		"interrupt-policy": {"cancel", "ignore", "enosys", "eagain", "eagain:2"},
		"policy":           {"all", "cancel", "ignore", "enosys", "eagain", "eagain:2"},
		"via":              {"all", "init", "default", "max"},
		"splat-family":     splatTypes(),
	}
}

// argCompletions are the completions of commands' positional arguments,
// by command path (TestArgCompletionsNameCommands checks the paths).
func argCompletions(g *globalOptions) map[string]cobra.CompletionFunc {
	kernel := func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return completeKernel(g.cacheDir, toComplete)
	}
	debian := func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return filterPrefix(debianRefs(), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	built := func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ks, _ := buildstore.New(g.cacheDir).List()
		return filterPrefix(kernelNames(ks, "built"), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	run := func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if c := filterPrefix(runIDs(g.runsDir), toComplete); len(c) > 0 {
			return c, cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveFilterDirs // a run directory
	}
	experiment := func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if c := filterPrefix(experiments.Shipped(), toComplete); len(c) > 0 {
			return c, cobra.ShellCompDirectiveNoFileComp
		}
		return []cobra.Completion{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
	}
	yaml := func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return []cobra.Completion{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
	}
	dir := func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	}
	return map[string]cobra.CompletionFunc{
		"klab results pack":         dir,
		"klab results merge":        dir,
		"klab kernels fetch":        debian,
		"klab kernels show":         kernel,
		"klab kernels rm":           built,
		"klab runs show":            run,
		"klab runs rm":              run,
		"klab report":               run,
		"klab compare":              run,
		"klab rerun":                run,
		"klab run":                  experiment,
		"klab bisect":               experiment,
		"klab experiments show":     experiment,
		"klab experiments validate": yaml,
		"klab matrix run":           yaml,
		"klab matrix plan":          yaml,
		"klab matrix emit":          yaml,
		"klab matrix cache-key":     yaml,
	}
}

// completeKernel completes a kernel reference: debian:<series>, the
// cached Debian kernels, build:<name>, tree:<dir>; a path, or a word that
// is none of these, completes as a file (a bzImage) or a directory (a
// kernel tree).
func completeKernel(cacheDir, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if dir, ok := strings.CutPrefix(toComplete, "tree:"); ok {
		return completeTree(dir)
	}
	if strings.ContainsAny(toComplete, "/~") || strings.HasPrefix(toComplete, ".") {
		return nil, cobra.ShellCompDirectiveDefault
	}
	refs := debianRefs()
	ks, _ := debian.CachedKernels(cacheDir)
	refs = append(refs, kernelNames(ks, "cached")...)
	built, _ := buildstore.New(cacheDir).List()
	refs = append(refs, kernelNames(built, "built")...)
	return completeOrFiles(refs, toComplete)
}

// completeTree completes tree:<dir> with the directories that start
// with prefix.
func completeTree(prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
	parent, base := filepath.Split(prefix)
	dir := parent
	if dir == "" {
		dir = "."
	}
	ents, _ := os.ReadDir(dir)
	var out []cobra.Completion
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), base) && (strings.HasPrefix(base, ".") || !strings.HasPrefix(e.Name(), ".")) {
			out = append(out, "tree:"+parent+e.Name()+"/")
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// debianRefs are debian:<series> for every series.
func debianRefs() []cobra.Completion {
	var out []cobra.Completion
	for _, s := range debianSeries() {
		out = append(out, cobra.CompletionWithDesc("debian:"+s, "the newest Debian "+s+" kernel"))
	}
	return out
}

// kernelNames are the names of ks, described as what and their version.
// Names that would not survive a shell's completion protocol (spaces,
// control characters) are left out.
func kernelNames(ks []*results.Kernel, what string) []cobra.Completion {
	var out []cobra.Completion
	for _, k := range ks {
		if k.Name == "" || shown(k.Name) != k.Name || strings.ContainsRune(k.Name, ' ') {
			continue
		}
		out = append(out, cobra.CompletionWithDesc(k.Name, strings.TrimSpace(what+" "+shown(k.Version))))
	}
	return out
}

// runIDs are the saved runs, newest first, and "last".
func runIDs(runsDir string) []cobra.Completion {
	out := []cobra.Completion{cobra.CompletionWithDesc("last", "the newest run")}
	runs, _ := listRuns(runsDir)
	sort.Slice(runs, func(i, j int) bool { return runs[i].ID > runs[j].ID })
	for _, r := range runs {
		if results.ValidName(r.ID) {
			out = append(out, cobra.CompletionWithDesc(r.ID, r.Kind+", "+shown(r.Status)))
		}
	}
	return out
}

// completeFragments completes --config's comma-separated fragments: one
// of fragments, or a fragment file.
func completeFragments(fragments []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	done, last := "", toComplete
	if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
		done, last = toComplete[:i+1], toComplete[i+1:]
	}
	if strings.ContainsAny(last, "/~.") {
		return nil, cobra.ShellCompDirectiveDefault
	}
	var out []cobra.Completion
	for _, f := range fragments {
		if strings.HasPrefix(f, last) {
			out = append(out, done+f)
		}
	}
	if len(out) == 0 {
		return nil, cobra.ShellCompDirectiveDefault
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// completeOrFiles returns the choices that start with toComplete; when
// none does, the shell completes a file name instead.
func completeOrFiles(choices []cobra.Completion, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if out := filterPrefix(choices, toComplete); len(out) > 0 {
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	return nil, cobra.ShellCompDirectiveDefault
}

// filterPrefix returns the choices (with or without a description) whose
// value starts with prefix.
func filterPrefix(choices []cobra.Completion, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, c := range choices {
		v, _, _ := strings.Cut(c, "\t")
		if strings.HasPrefix(v, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// fixed completes one of values and never a file.
func fixed(values ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return filterPrefix(values, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// splatTypes are the values of --splat-family.
func splatTypes() []string {
	var out []string
	for _, t := range splat.Types() {
		out = append(out, string(t))
	}
	return out
}
